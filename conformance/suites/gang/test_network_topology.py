"""NetworkTopology: template.networkTopology is carried into every ServingGroup's PodGroup.

groupPolicy ("all the instances within the ServingGroup") is the PodGroup's own networkTopology.
rolePolicy ("instances of a role") must reach each Role instance's gang unit: Volcano expresses that
as a ``subGroupPolicy`` entry whose subgroup is the Role instance's Pods, with the rolePolicy as its
networkTopology (:func:`conformance.framework.gang.role_topology_problems` accepts every way of
cutting the Pods into those subgroups). The suite tells a Pod's Role instance by the label key the
implementation declares (``podLabels.roleInstance``).
"""

from __future__ import annotations

from typing import Any

from conformance.framework.catalog import behaviour
from conformance.framework.features import Feature
from conformance.framework.gang import role_topology_problems
from conformance.framework.modelserving import ModelServings

from . import API, each_podgroup, gang_pods, start, wait_gang

GROUP_POLICY = {"mode": "hard", "highestTierAllowed": 2}
ROLE_POLICY = {"mode": "soft", "highestTierAllowed": 1}


@behaviour(
    "gang/podgroup/network-topology",
    "A ServingGroup template's networkTopology.groupPolicy MUST be carried into every ServingGroup's PodGroup as "
    "its networkTopology (mode and highestTierAllowed).",
    f"{API}#NetworkTopology",
    Feature.NETWORK_TOPOLOGY,
)
def test_group_policy_is_carried_into_the_podgroup(ms: ModelServings, manifest: Any) -> None:
    body: dict[str, Any] = manifest("gang-roles")
    body["spec"]["template"]["networkTopology"] = {"groupPolicy": dict(GROUP_POLICY), "rolePolicy": dict(ROLE_POLICY)}
    start(ms, body)

    def check(pg: str, spec: dict[str, Any], pods: list[Any]) -> list[str]:
        seen = spec.get("networkTopology")
        if not isinstance(seen, dict) or {k: seen.get(k) for k in GROUP_POLICY} != GROUP_POLICY:
            return [f"networkTopology is {seen!r}, expected the groupPolicy {GROUP_POLICY}"]
        return []

    wait_gang(ms, body, lambda view: each_podgroup(view, check), what=f"groupPolicy {GROUP_POLICY}")


@behaviour(
    "gang/podgroup/network-topology-role-policy",
    "A ServingGroup template's networkTopology.rolePolicy MUST reach every Role instance in its ServingGroup's "
    "PodGroup: a subGroupPolicy entry whose subgroup is exactly that Role instance's Pods MUST carry the "
    "rolePolicy's mode and highestTierAllowed as its networkTopology.",
    f"{API}#NetworkTopology",
    Feature.NETWORK_TOPOLOGY,
)
def test_role_policy_reaches_every_role_instance(ms: ModelServings, manifest: Any) -> None:
    body: dict[str, Any] = manifest("gang-roles")
    body["spec"]["template"]["networkTopology"] = {"groupPolicy": dict(GROUP_POLICY), "rolePolicy": dict(ROLE_POLICY)}
    instance_key = ms.pod_labels.role_instance
    start(ms, body)

    def check(pg: str, spec: dict[str, Any], pods: list[Any]) -> list[str]:
        policies = spec.get("subGroupPolicy")
        if not isinstance(policies, list) or not policies:
            return [f"subGroupPolicy is {policies!r}: nothing gives a Role instance the rolePolicy {ROLE_POLICY}"]
        return role_topology_problems(policies, gang_pods(pods), instance_key, ROLE_POLICY)

    wait_gang(
        ms, body, lambda view: each_podgroup(view, check),
        what=f"rolePolicy {ROLE_POLICY} for each of 4 Role instances (2 prefill of 2 Pods, 2 decode of 1)",
    )  # fmt: skip
