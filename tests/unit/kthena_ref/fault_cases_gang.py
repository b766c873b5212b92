"""Probes of the faults helper "gang" added (issue 13, second wave): gangPolicy and networkTopology
changes under updateMethod InPlace, the rolePolicy in the PodGroup, different minRoleReplicas per
Role.

Why this module exists: ``test_faults.py`` holds one probe per fault; these four are kept apart so
the table there stays readable. Each row is ``(fault, probe, off, on, overlaps)`` as in
:mod:`.fault_cases_plugins`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kthena_ref.planner.podgroups import podgroup

from .builders import MS, deleted, edit_spec, set_image, world

TOPOLOGY = {
    "groupPolicy": {"mode": "hard", "highestTierAllowed": 2},
    "rolePolicy": {"mode": "soft", "highestTierAllowed": 1},
}


def _template_and_image_change(field: str, value: Any) -> Callable[[], list[str]]:
    """InPlace: ``template.<field>`` and the image change together: what the first step deletes
    (not patches)."""

    def probe() -> list[str]:
        ms = MS().role("r", 1, 0).rollout(type="ServingGroupRollingUpdate").build()
        w = world(edit_spec(ms, lambda spec: spec["rolloutStrategy"].update(updateMethod="InPlace")))
        w.ms = edit_spec(w.ms, lambda spec: spec["template"].update({field: value}))
        w.ms = edit_spec(w.ms, set_image("engine:v2"))
        return deleted(w.plan())

    return probe


def _role_topologies() -> list[Any]:
    """The networkTopology of each subGroupPolicy entry of a PodGroup under a rolePolicy."""
    ms = edit_spec(
        MS().role("a", 2, 1).role("b", 1, 0).build(), lambda spec: spec["template"].update(networkTopology=TOPOLOGY)
    )
    spec = podgroup(ms, 0, ms.spec.template.roles, None, None)["spec"]
    return [entry.get("networkTopology") for entry in spec.get("subGroupPolicy") or []]


def _min_member_of_two_minimums() -> int:
    """minRoleReplicas {a: 2, b: 1}, each Role 2 single-Pod instances: minMember."""
    ms = MS().role("a", 2, 0).role("b", 2, 0).gang({"a": 2, "b": 1}).build()
    return int(podgroup(ms, 0, ms.spec.template.roles, {"a": 2, "b": 1}, None)["spec"]["minMember"])


CASES: list[tuple[Any, ...]] = [
    (
        "eligibility-ignores-gang-policy",
        _template_and_image_change("gangPolicy", {"minRoleReplicas": {"r": 1}}),
        ["ms-0-r-0-0"],
        [],
        ("in-place-ineligible-patched",),  # it skips every finding about what the unit's revision was made from
    ),
    (
        "eligibility-ignores-network-topology",
        _template_and_image_change("networkTopology", TOPOLOGY),
        ["ms-0-r-0-0"],
        [],
        ("in-place-ineligible-patched",),  # it skips every finding about what the unit's revision was made from
    ),
    ("role-policy-not-in-podgroup", _role_topologies, [TOPOLOGY["rolePolicy"]] * 2, [], ()),
    (
        "min-role-replicas-first-value",
        _min_member_of_two_minimums,
        3,
        4,
        ("min-member-ignores-min-role-replicas",),  # minMember counting every replica also gives 2 + 2
    ),
]
