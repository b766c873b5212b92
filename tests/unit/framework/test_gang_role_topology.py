"""role_topology_problems: every fair subGroupPolicy form giving each Role instance the rolePolicy
passes, and each way of missing it is named."""

from __future__ import annotations

from typing import Any

import pytest

from conformance.framework.gang import GangPod, role_topology_problems

NAME, ROLE, RID = "modelserving.volcano.sh/name", "modelserving.volcano.sh/role", "modelserving.volcano.sh/role-id"
WANT = {"mode": "soft", "highestTierAllowed": 1}
OTHER = {"mode": "hard", "highestTierAllowed": 2}


def pod(name: str, role: str, index: int, member: str) -> GangPod:
    return GangPod(name, {NAME: "ms", ROLE: role, RID: f"{role}-{index}"}, role, member)


# One ServingGroup: p has 2 instances of an entry and a worker, d 2 single-Pod instances.
PODS = [
    pod("p0e", "p", 0, "entry"), pod("p0w", "p", 0, "worker"),
    pod("p1e", "p", 1, "entry"), pod("p1w", "p", 1, "worker"),
    pod("d0e", "d", 0, "entry"), pod("d1e", "d", 1, "entry"),
]  # fmt: skip


def per_role(role: str, topology: dict[str, Any] | None = None, keys: list[str] | None = None) -> dict[str, Any]:
    """Upstream Kthena's form: a Role's Pods selected by name and role, cut by role-id."""
    entry: dict[str, Any] = {
        "name": role,
        "labelSelector": {"matchLabels": {NAME: "ms", ROLE: role}},
        "matchLabelKeys": [RID] if keys is None else keys,
        "subGroupSize": 2 if role == "p" else 1,
        "minSubGroups": 1,
    }
    if topology is not None:
        entry["networkTopology"] = dict(topology)
    return entry


def problems(policies: list[Any]) -> list[str]:
    return role_topology_problems(policies, PODS, RID, WANT)


@pytest.mark.parametrize(
    "policies",
    [
        [per_role("p", WANT), per_role("d", WANT)],
        # one entry for every Pod, cut by Role and instance (an earlier upstream form)
        [{"name": "pg", "networkTopology": dict(WANT), "matchLabelKeys": [ROLE, RID]}],
        # the same with Volcano's earlier matchPolicy spelling
        [{"name": "pg", "networkTopology": dict(WANT), "matchPolicy": [{"labelKey": ROLE}, {"labelKey": RID}]}],
        # gang-only entries beside topology-only ones are not looked at
        [per_role("p"), per_role("d"), {"name": "t", "networkTopology": dict(WANT), "matchLabelKeys": [ROLE, RID]}],
        # the role-id value names the Role too, so cutting by it alone is right
        [{"name": "pg", "networkTopology": dict(WANT), "matchLabelKeys": [RID]}],
    ],
)
def test_fair_forms_pass(policies: list[Any]) -> None:
    assert problems(policies) == []


@pytest.mark.parametrize(
    ("policies", "fragment"),
    [
        ([per_role("p", WANT)], "instance d-0"),  # d's instances get nothing
        ([per_role("p"), per_role("d")], "no subGroupPolicy entry with a networkTopology selects"),
        ([per_role("p", OTHER), per_role("d", OTHER)], "expected"),  # the groupPolicy, not the rolePolicy
        ([per_role("p", WANT, keys=[]), per_role("d", WANT)], "not one subgroup"),  # the whole Role, not instances
        ([{"name": "pg", "networkTopology": dict(WANT)}], "not one subgroup"),  # the whole ServingGroup
        ([{"name": "pg", "networkTopology": dict(WANT), "matchLabelKeys": [ROLE]}], "not one subgroup"),
        ([per_role("p", {"mode": "soft"}), per_role("d", WANT)], "expected"),  # highestTierAllowed lost
    ],
)
def test_missing_the_role_policy_is_named(policies: list[Any], fragment: str) -> None:
    found = problems(policies)
    assert any(fragment in p for p in found), found


def test_a_pod_without_the_instance_label_is_named() -> None:
    bare = [*PODS, GangPod("x", {NAME: "ms", ROLE: "d"}, "d", "entry")]
    found = role_topology_problems([per_role("p", WANT), per_role("d", WANT)], bare, RID, WANT)
    assert any("lacks the Role-instance label" in p for p in found), found
