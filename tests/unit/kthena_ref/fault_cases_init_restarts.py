"""Probes of the faults added for issue 13's second wave by helper init: restarted init containers.

Why this module exists: ``test_faults.py`` holds one probe per fault; these are the ones for a Pod
whose sidecar (an init container) restarted, under ServingGroupRecreate and RoleRecreate, kept
apart so the table there stays readable. Each row is ``(fault, probe, off, on, overlaps)`` as in
:mod:`.fault_cases_plugins`.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import Any

from kthena_ref.api.types import ModelServing

from .builders import MS, T0, deleted, running_not_ready, world


def sidecar_restarted(pod: dict[str, Any], restarts: int = 1) -> dict[str, Any]:
    """``pod`` Running and NotReady since T0, its init container (a sidecar) restarted ``restarts``
    times and its regular containers never."""
    out = running_not_ready(pod)
    out["status"]["initContainerStatuses"] = [{"name": "proxy", "restartCount": restarts, "ready": False}]
    return out


def _sidecar_step(ms: ModelServing, victim: str) -> Callable[[], list[str]]:
    """``ms`` settled; ``victim``'s sidecar restarted (and the Pod not Ready) at T0: what a plan 1 s later deletes."""

    def probe() -> list[str]:
        w = world(ms)
        w.pods[victim] = sidecar_restarted(w.pods[victim])
        w.now = T0 + dt.timedelta(seconds=1)
        return deleted(w.plan())

    return probe


CASES: list[tuple[str, Callable[[], Any], Any, Any, tuple[str, ...]]] = [
    (  # the group's other Pods go first, the restarted one last
        "servinggroup-recreate-ignores-init-restarts",
        _sidecar_step(MS().role("a", 1, 0).role("b", 1, 0).recovery("ServingGroupRecreate").build(), "ms-0-a-0-0"),
        ["ms-0-b-0-0"],
        [],
        ("no-recovery", "servinggroup-recreate-ignores-restarts"),  # that one narrows every restart's rebuild
    ),
    (  # the instance's entry goes first, the restarted worker last; Role b is untouched
        "role-recreate-ignores-init-restarts",
        _sidecar_step(MS().role("a", 1, 1).role("b", 1, 0).recovery("RoleRecreate").build(), "ms-0-a-0-1"),
        ["ms-0-a-0-0"],
        [],
        ("no-recovery", "role-recreate-rebuilds-group"),  # that one widens every RoleRecreate rebuild
    ),
]
