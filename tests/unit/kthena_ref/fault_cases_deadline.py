"""Probes of the progress-deadline faults added for issue 13 by helper pd (one per fault).

Why this module exists: ``test_faults.py`` holds one probe per fault; these follow an in-place
update that never arrives to its progressDeadlineSeconds under each RecoveryPolicy, under
RoleRollingUpdate, with the deadline omitted, and under updateMethod Recreate. The ServingGroup
has Role ``a`` (an entry and a worker) and Role ``b`` (one Pod); only a's entry image changes, so
a's entry Pod is the one that never gets ready, while a's worker and b's Pod are ready on the
target revision. Each row is ``(fault, probe, off, on, overlaps)`` as in :mod:`.fault_cases_plugins`.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import Any

from kthena_ref.planner.model import Plan

from .builders import MS, deleted, edit_spec, pending, ready, world

ENTRY, WORKER, OTHER = "ms-0-a-0-0", "ms-0-a-0-1", "ms-0-b-0-0"
PAST = dt.timedelta(seconds=61)


def _a_entry_image(image: str) -> Callable[[dict[str, Any]], None]:
    def change(spec: dict[str, Any]) -> None:
        spec["template"]["roles"][0]["entryTemplate"]["spec"]["containers"][0]["image"] = image

    return change


def _stuck_in_place(policy: str = "RoleRecreate", *, deadline: int | None = 60, role_rolling: bool = False) -> Plan:
    """a's entry patched in place to an image it never runs; the plan 61 s later."""
    builder = MS().role("a", 1, 1).role("b", 1, 0).recovery(policy)
    ms = builder.rollout(type="RoleRollingUpdate" if role_rolling else None).build()
    w = world(ms)
    strategy: dict[str, Any] = {"updateMethod": "InPlace"}
    if deadline is not None:
        strategy["progressDeadlineSeconds"] = deadline
    w.ms = edit_spec(w.ms, lambda spec: spec["rolloutStrategy"].update(strategy))
    w.ms = edit_spec(w.ms, _a_entry_image("engine:v2"))
    w.patched_pods_arrive = False
    w.step()
    for name in (WORKER, OTHER):  # ready on the update revision (their templates did not change)
        w.pods[name] = ready(w.pods[name], since=w.now)
    w.now = w.now + PAST
    return w.plan()


def _reasons(p: Plan) -> list[str]:
    return sorted({reason for reason, _ in p.reports})


def probe_deadline_deletions(policy: str) -> Callable[[], list[str]]:
    """What the first plan past the deadline deletes (the unready Pod goes last in a rebuild)."""
    return lambda: deleted(_stuck_in_place(policy))


def probe_role_instance_deadline() -> list[str]:
    """RoleRollingUpdate: a's instance patched in place, 61 s later (deadline 60)."""
    return _reasons(_stuck_in_place(role_rolling=True))


def probe_default_deadline() -> list[str]:
    """progressDeadlineSeconds omitted: 61 s after the in-place update started."""
    return _reasons(_stuck_in_place(deadline=None))


def probe_recreate_deadline() -> list[str]:
    """updateMethod Recreate with progressDeadlineSeconds 60: a new Pod not ready for 61 s."""
    ms = MS().role("r", 1, 0).build()
    w = world(edit_spec(ms, lambda spec: spec.update(rolloutStrategy={"progressDeadlineSeconds": 60})))
    name = next(iter(w.pods))
    w.pods[name] = pending(w.pods[name], since=w.now)
    w.now = w.now + PAST
    return _reasons(w.plan())


NOT_IN_PLACE = ("in-place-recreates",)  # no update in place at all: no in-place deadline either
STUCK = ("no-progress-deadline", "in-place-ready-on-patch", *NOT_IN_PLACE)  # no deadline to pass: nothing happens

CASES: list[tuple[str, Callable[[], Any], Any, Any, tuple[str, ...]]] = [
    ("role-progress-deadline-ignored", probe_role_instance_deadline, ["ProgressDeadlineExceeded"], [], STUCK),
    (
        "deadline-servinggroup-recreate-narrowed",
        probe_deadline_deletions("ServingGroupRecreate"),
        sorted([WORKER, OTHER]),
        [WORKER],
        # no-recovery: the policy taken for None; worker-template-ignored: a's worker runs a's entryTemplate, so
        # it is patched to the image it never runs too
        (*STUCK, "no-recovery", "worker-template-ignored"),
    ),
    (
        "deadline-role-recreate-pod-only",
        probe_deadline_deletions("RoleRecreate"),
        [WORKER],
        [ENTRY],
        # None's scope, or the whole group's; worker-template-ignored: a's worker is stuck on a's entry image too
        (*STUCK, "no-recovery", "role-recreate-rebuilds-group", "worker-template-ignored"),
    ),
    ("deadline-none-recreates-role", probe_deadline_deletions("None"), [], [WORKER], NOT_IN_PLACE),
    ("progress-deadline-applies-to-recreate", probe_recreate_deadline, [], ["ProgressDeadlineExceeded"], ()),
    ("progress-deadline-default-minimum", probe_default_deadline, [], ["ProgressDeadlineExceeded"], NOT_IN_PLACE),
]
