"""Probes of the rollout faults added in issue 13's second wave by helper roll.

Why this module exists: ``test_faults.py`` holds one probe per fault; these four are about what
does not take effect or where a setting applies: a Role's partition under ServingGroupRollingUpdate,
roleCoordination in every ServingGroup (not only the first) and never under
ServingGroupRollingUpdate, and percentages that both resolve to 0. The probes reuse the scenario
builders of :mod:`.fault_cases_rollout`. Each row is ``(fault, probe, off, on, overlaps)`` as there.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kthena_ref.planner import role_rollout

from .builders import MS, edit_spec
from .fault_cases_rollout import _admission_errors, _first_step, _role_step

INSTANT = ("recreate-updates-in-place",)  # an image-only change patched in place deletes nothing


def _coordinated_two_groups() -> Any:
    """RoleRollingUpdate, 2 groups of Roles a and b (2 single-Pod instances each, both may go at
    once), roleCoordination over both with maxSkew 50%: one instance of each Role per group may start."""
    ms = (
        MS()
        .replicas(2)
        .role("a", 2, 0, maxUnavailable=2, maxSurge=0)
        .role("b", 2, 0, maxUnavailable=2, maxSurge=0)
        .rollout(type="RoleRollingUpdate")
        .build()
    )
    coordination = {"roles": ["a", "b"], "maxSkew": "50%"}
    return edit_spec(ms, lambda spec: spec["rolloutStrategy"].update(roleCoordination=coordination))


def _coordination_under_group_rolling() -> Callable[[], tuple[list[str], bool]]:
    """roleCoordination with ServingGroupRollingUpdate: what admission names, and whether the
    planner rolls Roles."""
    admission = _admission_errors({"type": "ServingGroupRollingUpdate", "roleCoordination": {"maxSkew": "10%"}})

    def probe() -> tuple[list[str], bool]:
        ms = MS().role("r", 1, 0).rollout(type="ServingGroupRollingUpdate").build()
        ms = edit_spec(ms, lambda spec: spec["rolloutStrategy"].update(roleCoordination={"maxSkew": "10%"}))
        return admission(), role_rollout.enabled(ms)

    return probe


CASES: list[tuple[str, Callable[[], Any], Any, Any, tuple[str, ...]]] = [
    (  # maxUnavailable 3 of 3 groups; the Role's partition 1 must not protect ServingGroup 0
        "role-partition-honoured-under-servinggroup",
        _first_step(MS().replicas(3).role("r", 1, 0, partition=1).rollout(max_unavailable=3).build()),
        ["ms-0-r-0-0", "ms-1-r-0-0", "ms-2-r-0-0"],
        ["ms-1-r-0-0", "ms-2-r-0-0"],
        INSTANT,
    ),
    (  # ServingGroup 1 starts one instance of each Role, as ServingGroup 0 does
        "coordination-only-first-group",
        _role_step(_coordinated_two_groups()),
        ["ms-0-a-1-0", "ms-0-b-1-0", "ms-1-a-1-0", "ms-1-b-1-0"],
        ["ms-0-a-1-0", "ms-0-b-1-0", "ms-1-a-0-0", "ms-1-a-1-0", "ms-1-b-0-0", "ms-1-b-1-0"],
        ("coordination-ignored", "role-groups-one-at-a-time"),
    ),
    (  # maxUnavailable 10% and maxSurge 0% of 3 both resolve to 0: one group at a time, not none
        "zero-percentages-deadlock",
        _first_step(MS().replicas(3).role("r", 1, 0).rollout(max_unavailable="10%", max_surge="0%").build()),
        ["ms-2-r-0-0"],
        [],
        INSTANT,
    ),
    (
        "coordination-applied-under-servinggroup-rolling",
        _coordination_under_group_rolling(),
        (["spec.rolloutStrategy.roleCoordination"], False),
        ([], True),
        (),
    ),
]
