"""InPlaceUpdate: gangPolicy and networkTopology changes are reported, never patched in place.

Why this module exists: the design review (PR 1882) lists "Changes to schedulerName, plugins,
gangPolicy, networkTopology ... are reported": an image change made together with one of them
cannot be applied by patching images, so the ServingGroup is recreated and an
``InPlaceUpdateFallback`` Event says why. :mod:`.test_eligibility_rules` covers schedulerName (and
the Pod template rules); this module covers the two ServingGroup template fields.

gangPolicy: the API reference states no immutability, but upstream Kthena's webhook makes
``minRoleReplicas`` immutable and gangPolicy unremovable (the optional GangPolicyImmutability
feature). So adding a gangPolicy to a ModelServing without one (which those rules allow) must be accepted
and fall back; changing ``minRoleReplicas`` must fall back too, or, for an implementation that
declares GangPolicyImmutability, may instead be refused at admission with the stored spec
unchanged (nothing changed, nothing to report). Any other refusal is a refused valid change,
non-conformant. networkTopology has no such rule: adding it must be accepted and fall back.

The ModelServing (``inplace-eligibility``, scheduler default-scheduler) runs no gang scheduler: the
change to observe is the Pods' (recreated or patched), not what the scheduler does with the gang.
"""

from __future__ import annotations

from typing import Any

from conformance.framework.catalog import behaviour
from conformance.framework.features import Feature
from conformance.framework.modelserving import ModelServings, expected_pod_count
from conformance.framework.plugin import SuiteState
from conformance.framework.rollout_watch import Layout, RolloutWatch
from conformance.suites.rollout import roles_of, uids_of

from . import ELIGIBILITY
from .test_eligibility_rules import ENGINE_V2, FALLBACK, _engine_image, _on_template

# The spec documents groupPolicy and rolePolicy, not what a NetworkTopologySpec holds (that is the
# scheduler's: Volcano's mode and highestTierAllowed), so the test adds both policies empty (issue 31).
TOPOLOGY: dict[str, dict[str, object]] = {"groupPolicy": {}, "rolePolicy": {}}


def _falls_back(ms: ModelServings, body: dict[str, Any], field: str, what: str, *, refusable: bool) -> None:
    """Change ``spec.template.<field>`` to what ``body`` says, together with the engine image, and
    require the fallback: every Pod replaced, Running and Ready on the new template, and an
    InPlaceUpdateFallback Event with a message. When ``refusable``, a refusal that leaves the stored
    spec unchanged is accepted instead."""
    name = body["metadata"]["name"]
    ms.wait_pods(name, expected_pod_count(body))
    ms.wait_settled(name)
    _engine_image(ENGINE_V2)(body)
    patch = {"spec": {"template": {field: body["spec"]["template"][field], "roles": roles_of(body)}}}
    what = f"updateMethod InPlace, {what} together with engine image v1 -> v2"
    with RolloutWatch(ms, name, Layout.of(body)) as watch:
        before = uids_of(list(watch.latest().pods))
        if refusable:
            stored = ms.get(name).get("spec")
            rejection = ms.try_patch(name, patch)
            if rejection is not None:
                after = ms.get(name).get("spec")
                assert after == stored, (
                    f"{what}: refused (HTTP {rejection.status}: {rejection.message}), which gangPolicy immutability "
                    f"allows, but the stored spec changed: before {stored}, after {after}"
                )
                return
        else:
            ms.patch(name, patch)  # a refusal is a refused valid change
        # A recreated Pod is the only way to the new images: an old Pod running them was patched.
        done = watch.wait_for(
            "rollout",
            f"{what}: every Pod Running and Ready on the new template",
            lambda s: _on_template(s, body),
        )
    patched = sorted(n for n, uid in done.uids().items() if uid in set(before.values()))
    assert not patched, (
        f"{what}: every Pod must be recreated (an image patch cannot apply the {field} change), but {patched} kept "
        f"their UIDs and run the new images: they were patched in place"
    )
    event = ms.wait_event(name, FALLBACK)
    assert (event.message or "").strip(), f"{what}: the {FALLBACK} Event must report why; its message is empty"


@behaviour(
    "inplace/eligibility/gang-policy",
    "With updateMethod InPlace, an image change made together with adding gangPolicy, or with changing its "
    "minRoleReplicas, MUST NOT be applied in place: every Pod of the ServingGroup MUST be recreated and an "
    "InPlaceUpdateFallback Event with a message MUST be reported (an implementation declaring "
    "GangPolicyImmutability may refuse the minRoleReplicas change instead, leaving the stored spec unchanged).",
    ELIGIBILITY,
    Feature.IN_PLACE_FALLBACK,
)
def test_a_gang_policy_change_falls_back(ms: ModelServings, manifest: Any, suite: SuiteState) -> None:
    added: dict[str, Any] = manifest("inplace-eligibility")
    added["metadata"]["name"] = "gang-added"
    changed: dict[str, Any] = manifest("inplace-eligibility")
    changed["metadata"]["name"] = "gang-changed"
    changed["spec"]["template"]["gangPolicy"] = {"minRoleReplicas": {"server": 1}}
    ms.create(added)
    ms.create(changed)
    # Adding a gangPolicy to a ModelServing without one: even upstream's immutability allows it.
    added["spec"]["template"]["gangPolicy"] = {"minRoleReplicas": {"server": 1}}
    _falls_back(ms, added, "gangPolicy", "gangPolicy {minRoleReplicas: {server: 1}} added", refusable=False)
    changed["spec"]["template"]["gangPolicy"] = {"minRoleReplicas": {"server": 0}}
    refusable = suite.support.supports(Feature.GANG_POLICY_IMMUTABILITY)
    _falls_back(
        ms, changed, "gangPolicy", "gangPolicy minRoleReplicas[server] changed from 1 to 0", refusable=refusable
    )


@behaviour(
    "inplace/eligibility/network-topology",
    "With updateMethod InPlace, an image change made together with adding template.networkTopology MUST NOT be "
    "applied in place: every Pod of the ServingGroup MUST be recreated and an InPlaceUpdateFallback Event with a "
    "message MUST be reported.",
    ELIGIBILITY,
    Feature.IN_PLACE_FALLBACK,
)
def test_a_network_topology_change_falls_back(ms: ModelServings, manifest: Any) -> None:
    body: dict[str, Any] = manifest("inplace-eligibility")
    body["metadata"]["name"] = "topology-added"
    ms.create(body)
    body["spec"]["template"]["networkTopology"] = {k: dict(v) for k, v in TOPOLOGY.items()}
    _falls_back(ms, body, "networkTopology", f"networkTopology {TOPOLOGY} added", refusable=False)
