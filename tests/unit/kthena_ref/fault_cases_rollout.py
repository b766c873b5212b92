"""Probes of the rollout, in-place, recovery and eviction faults added for issue 13 by helper H8.

Why this module exists: ``test_faults.py`` holds one probe per fault; these are the ones for the
budget rules of rolling updates (an already unready unit, defaults, settings that must not take
effect), the update methods, in-place eligibility, recovery of restarted containers and the
eviction settings of the other protection level, kept apart so the table there stays readable.
Each row is ``(fault, probe, off, on, overlaps)`` as in :mod:`.fault_cases_plugins`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kthena_ref.admission.rules import validate
from kthena_ref.planner.eviction import decide

from .builders import MS, deleted, edit_spec, fresh_pods, ready, running_not_ready, set_image, world


def _first_step(ms: Any, unready: tuple[str, ...] = ()) -> Callable[[], list[str]]:
    """``ms`` settled, the Pods in ``unready`` not Ready, a new image: what the first step deletes."""

    def probe() -> list[str]:
        w = world(ms)
        for name in unready:
            w.pods[name] = running_not_ready(w.pods[name])
        w.ms = edit_spec(w.ms, set_image("engine:v2"))
        return deleted(w.plan())

    return probe


def _three_groups(**role: Any) -> Any:
    return MS().replicas(3).role("r", 1, 0, **role)


def _eviction_allowed(ms: Any, target: str, **strategy: Any) -> Callable[[], bool]:
    """Every Pod of ``ms`` Running and Ready, ``strategy`` as its evictionStrategy: may ``target`` go?"""

    def probe() -> bool:
        edited = edit_spec(ms, lambda spec: spec.update(rolloutStrategy={"evictionStrategy": strategy}))
        pods = {p["metadata"]["name"]: ready(p) for p in fresh_pods(edited)}
        return decide(edited, list(pods.values()), pods[target]).allowed

    return probe


def _role_min_available_key_errors() -> list[str]:
    """Admission's answer to a roleMinAvailable key that names no Role."""
    pod = {"spec": {"containers": [{"name": "c", "image": "engine:v1"}]}}
    obj = {
        "apiVersion": "workload.serving.volcano.sh/v1alpha1",
        "kind": "ModelServing",
        "metadata": {"name": "ms"},
        "spec": {
            "replicas": 1,
            "rolloutStrategy": {"evictionStrategy": {"protectionLevel": "Role", "roleMinAvailable": {"x": 1}}},
            "template": {"roles": [{"name": "r", "workerReplicas": 0, "entryTemplate": pod}]},
        },
    }
    return [e.field for e in validate(obj)]


CASES: list[tuple[str, Callable[[], Any], Any, Any, tuple[str, ...]]] = [
    # Rollout: a group unready before the update uses up maxUnavailable 1; the fault also takes down another
    (
        "unready-not-counted",
        _first_step(_three_groups().rollout(max_unavailable=1).build(), unready=("ms-0-r-0-0",)),
        ["ms-0-r-0-0"],
        ["ms-0-r-0-0", "ms-2-r-0-0"],
        (),
    ),
    # rollingUpdateConfiguration omitted: one group at a time
    (
        "default-max-unavailable-all",
        _first_step(_three_groups().rollout(type="ServingGroupRollingUpdate").build()),
        ["ms-2-r-0-0"],
        ["ms-0-r-0-0", "ms-1-r-0-0", "ms-2-r-0-0"],
        (),
    ),
    # ServingGroupRollingUpdate ignores the Role's own maxUnavailable
    (
        "group-rollout-uses-role-settings",
        _first_step(_three_groups(maxUnavailable="100%").rollout(max_unavailable=1).build()),
        ["ms-2-r-0-0"],
        ["ms-0-r-0-0", "ms-1-r-0-0", "ms-2-r-0-0"],
        (),
    ),
    # updateMethod Recreate (given, or by default with no rolloutStrategy) deletes the outdated Pod
    (
        "recreate-updates-in-place",
        _first_step(MS().role("r", 1, 0).rollout(type="ServingGroupRollingUpdate").build()),
        ["ms-0-r-0-0"],
        [],
        (),
    ),
    ("update-method-default-in-place", _first_step(MS().role("r", 1, 0).build()), ["ms-0-r-0-0"], [], ()),
    # EvictionBudget: Role b is not in roleMinAvailable; minAvailable 1 of 1 group is not in force
    (
        "min-available-applied-under-role",
        _eviction_allowed(
            MS().role("a", 2, 0).role("b", 2, 0).build(),
            "ms-0-b-0-0",
            protectionLevel="Role",
            minAvailable=1,
            roleMinAvailable={"a": 1},
        ),
        True,
        False,
        (),
    ),
    # 1 of 2 groups left satisfies minAvailable 1; roleMinAvailable {r: 2} (every instance) is not in force
    (
        "role-min-available-applied-under-servinggroup",
        _eviction_allowed(
            MS().replicas(2).role("r", 1, 0).build(),
            "ms-0-r-0-0",
            protectionLevel="ServingGroup",
            minAvailable=1,
            roleMinAvailable={"r": 2},
        ),
        True,
        False,
        (),
    ),
    (
        "role-min-available-keys-unchecked",
        _role_min_available_key_errors,
        ["spec.rolloutStrategy.evictionStrategy.roleMinAvailable[x]"],
        [],
        (),
    ),
]
