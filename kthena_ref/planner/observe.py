"""Observation: our Pods as the planner sees them, grouped into ServingGroups and Role instances.

Why this module exists: the state of a ModelServing is derived entirely from the Pods it owns
(each carries its group, role, instance and revision in labels), so every later step of a
reconcile starts from the same reading of them: :class:`ObservedPod` (one Pod, with the few facts
the planner decides on), :class:`Group` (one ServingGroup by its Pods) and :class:`Observation`
(all of them, with the raw API objects the plugins and in-place patches still need).
"""

from __future__ import annotations

import datetime as dt
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from .. import faults
from . import inplace
from .model import InstanceKey, Observed
from .names import ANNOTATION_DELETION_COST, LABEL_REVISION, LABEL_ROLE_TEMPLATE_HASH, PodId, parse_pod_labels


@dataclass(frozen=True)
class ObservedPod:
    """What the planner needs to know about one of our Pods."""

    pid: PodId
    name: str
    uid: str
    revision: str
    phase: str
    ready: bool
    deleting: bool
    restart_count: int  # regular and init containers together
    not_ready_since: dt.datetime | None
    deletion_cost: int
    role_hash: str = ""  # the role-template-hash label: which template of its Role it was built from
    in_place_since: dt.datetime | None = None  # an in-place update started and has not finished
    images_current: bool = True  # container statuses report the spec's images (checked while in place)
    scheduler_name: str = ""  # spec.schedulerName: not part of a revision, so only the Pod tells it
    resource_version: str = ""
    init_restart_count: int = 0  # the init containers' share of restart_count

    @property
    def running_ready(self) -> bool:
        """Running and Ready; a Pod updated in place only once it runs its new images."""
        return self.phase == "Running" and self.ready and not self.deleting and self.images_current

    @property
    def in_error(self) -> bool:
        """Upstream's error Pod: Failed, or restarted while not Running and Ready."""
        return not self.deleting and (self.phase == "Failed" or (self.restart_count > 0 and not self.running_ready))


def _time(value: object) -> dt.datetime | None:
    if isinstance(value, dt.datetime):
        return value if value.tzinfo else value.replace(tzinfo=dt.UTC)
    if isinstance(value, str) and value:
        return dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
    return None


def observe_pod(pod: dict[str, Any], ms: str) -> ObservedPod | None:
    """Our view of a Pod (as the API returns it); None for Pods this ModelServing did not make."""
    meta = pod.get("metadata") or {}
    labels = meta.get("labels") or {}
    pid = parse_pod_labels(labels, ms, meta.get("name", ""))
    if pid is None:
        return None
    status = pod.get("status") or {}
    ready_condition: dict[str, Any] = next((c for c in status.get("conditions") or [] if c.get("type") == "Ready"), {})
    ready = ready_condition.get("status") == "True"
    if faults.active("ready-ignores-readiness-gates") and (pod.get("spec") or {}).get("readinessGates"):
        ready = all(bool(c.get("ready")) for c in status.get("containerStatuses") or [{}])
    init_restarts = sum(int(c.get("restartCount") or 0) for c in status.get("initContainerStatuses") or [])
    restarts = init_restarts + sum(int(c.get("restartCount") or 0) for c in status.get("containerStatuses") or [])
    try:
        cost = int((meta.get("annotations") or {}).get(ANNOTATION_DELETION_COST, "0"))
    except ValueError:
        cost = 0
    since = inplace.started(pod)
    if faults.active("in-place-ready-on-patch") and since is not None and status.get("phase") == "Running":
        ready, since = True, None  # the patch itself taken for a finished update
    return ObservedPod(
        pid=pid,
        name=meta["name"],
        uid=meta.get("uid", ""),
        revision=labels.get(LABEL_REVISION, ""),
        phase=status.get("phase") or "Pending",
        ready=ready,
        deleting=bool(meta.get("deletionTimestamp")),
        restart_count=restarts,
        not_ready_since=None
        if ready
        else _time(ready_condition.get("lastTransitionTime"))
        or _time(status.get("startTime"))
        or _time(meta.get("creationTimestamp")),
        deletion_cost=cost,
        role_hash=labels.get(LABEL_ROLE_TEMPLATE_HASH, ""),
        in_place_since=since,
        images_current=since is None or inplace.images_current(pod),
        scheduler_name=str((pod.get("spec") or {}).get("schedulerName") or ""),
        resource_version=meta.get("resourceVersion", ""),
        init_restart_count=init_restarts,
    )


def majority_revision(pods: Iterable[ObservedPod]) -> str:
    """The revision most of ``pods`` carry (the first seen on a tie)."""
    return Counter(p.revision for p in pods).most_common(1)[0][0]


@dataclass
class Group:
    """One ServingGroup as observed: its Pods by position."""

    ordinal: int
    pods: dict[PodId, ObservedPod] = field(default_factory=dict)

    @property
    def revision(self) -> str:
        return majority_revision(self.pods.values())

    @property
    def terminating(self) -> bool:
        """Every Pod is being deleted: the group is going away (or being rebuilt)."""
        return all(p.deleting for p in self.pods.values())

    def ready(self, expected: list[PodId]) -> bool:
        return all(pid in self.pods and self.pods[pid].running_ready for pid in expected)

    def deletion_cost(self) -> int:
        return sum(p.deletion_cost for p in self.pods.values())

    def live_pods(self) -> list[ObservedPod]:
        return [p for p in self.pods.values() if not p.deleting]

    def by_instance(self) -> dict[tuple[str, int], list[ObservedPod]]:
        """The group's Pods per Role instance, keyed (role name, instance index)."""
        out: dict[tuple[str, int], list[ObservedPod]] = {}
        for pod in self.pods.values():
            out.setdefault((pod.pid.role, pod.pid.index), []).append(pod)
        return out


def instance_key(pod: ObservedPod) -> InstanceKey:
    """The Role instance ``pod`` belongs to."""
    return (pod.pid.ordinal, pod.pid.role, pod.pid.index)


@dataclass
class Observation:
    """The ServingGroups a reconcile works on, and the raw Pods behind them."""

    groups: dict[int, Group]
    raw_by_instance: dict[InstanceKey, list[dict[str, Any]]]  # adopted Pods only
    raw_by_name: dict[str, dict[str, Any]]  # every Pod of ours, replacements included
    # Replacements that reused the identity of a Role instance being deleted: never adopted.
    conflicts: dict[InstanceKey, list[ObservedPod]]


def observe_pods(observed: Observed) -> list[tuple[ObservedPod, dict[str, Any]]]:
    """Every Pod this ModelServing made, read, with the API object it was read from."""
    name = observed.ms.metadata.name
    seen: list[tuple[ObservedPod, dict[str, Any]]] = []
    for raw in observed.pods:
        pod = observe_pod(raw, name)
        if pod is not None:
            seen.append((pod, raw))
    return seen


def adopt(
    pods: list[tuple[ObservedPod, dict[str, Any]]], conflicts: dict[InstanceKey, list[ObservedPod]]
) -> Observation:
    """Group ``pods`` into ServingGroups, leaving out the replacements in ``conflicts``."""
    seen = Observation(groups={}, raw_by_instance={}, raw_by_name={}, conflicts=conflicts)
    for pod, raw in pods:
        seen.raw_by_name[pod.name] = raw
    for pod, raw in pods:
        key = instance_key(pod)
        if any(p.uid == pod.uid for p in conflicts.get(key, [])):
            continue  # a replacement that reused the identity of an instance being deleted: never adopted
        seen.groups.setdefault(pod.pid.ordinal, Group(pod.pid.ordinal)).pods[pod.pid] = pod
        seen.raw_by_instance.setdefault(key, []).append(raw)
    return seen
