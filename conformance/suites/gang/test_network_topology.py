"""NetworkTopology: template.networkTopology.groupPolicy is carried into every ServingGroup's PodGroup."""

from __future__ import annotations

from typing import Any

from conformance.framework.catalog import behaviour
from conformance.framework.features import Feature
from conformance.framework.modelserving import ModelServings

from . import API, each_podgroup, start, wait_gang

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
