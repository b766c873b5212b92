"""Probes of the readiness faults added for issue 13 by helper H5 (one per fault).

Why this module exists: ``test_faults.py`` holds one probe per fault; these two read a Pod the way
the kubelet reports it where readiness needs more than running containers (a readiness gate not
True; a Pod patched in place whose new image cannot be pulled). Each row is
``(fault, probe, off, on, overlaps)`` as in :mod:`.fault_cases_plugins`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kthena_ref.planner.inplace import ANNOTATION_IN_PLACE_SINCE
from kthena_ref.planner.observe import observe_pod

from .builders import MS, T0, fresh_pods, ready, ts


def _pod() -> dict[str, Any]:
    return ready(fresh_pods(MS().build())[0])


def _ready(pod: dict[str, Any]) -> bool | None:
    seen = observe_pod(pod, "ms")
    return None if seen is None else seen.running_ready


def probe_readiness_gate() -> bool | None:
    """A Pod whose containers are ready but whose readiness gate is not True (Ready False)."""
    pod = _pod()
    pod["spec"]["readinessGates"] = [{"conditionType": "example.com/gate"}]
    for condition in pod["status"]["conditions"]:
        if condition["type"] == "Ready":
            condition.update(status="False", reason="ReadinessGatesNotReady")
    return _ready(pod)


def probe_in_place_pull_failure() -> bool | None:
    """A Pod patched in place to an image that cannot be pulled: Running, the container waiting."""
    pod = _pod()
    pod["metadata"].setdefault("annotations", {})[ANNOTATION_IN_PLACE_SINCE] = ts(T0)
    old = pod["spec"]["containers"][0]["image"]
    pod["spec"]["containers"][0]["image"] = "pull-fails.conformance.invalid/engine:v2"
    pod["status"]["containerStatuses"][0].update(image=old, ready=False, state={"waiting": {"reason": "ErrImagePull"}})
    for condition in pod["status"]["conditions"]:
        if condition["type"] == "Ready":
            condition.update(status="False", reason="ContainersNotReady")
    return _ready(pod)


CASES: list[tuple[str, Callable[[], Any], Any, Any, tuple[str, ...]]] = [
    ("ready-ignores-readiness-gates", probe_readiness_gate, False, True, ()),
    ("in-place-ready-on-patch", probe_in_place_pull_failure, False, True, ()),
]
