"""What the planner reads (:class:`Observed`) and what it decides (:class:`Plan`), as plain data.

Why this module exists: the planner's contract with the rest of the controller. The runtime
builds an :class:`Observed` from its informers, :func:`.plan.plan` turns it into a :class:`Plan`,
and the executor (:mod:`kthena_ref.executor`) applies the Plan; none of them needs to know how
the planner is split into steps. The Plan also carries what the next reconcile must remember
(pending deletions, Role instances seen running, Pods whose OnPodReady hooks ran), because the
planner itself keeps no state between reconciles.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any

from ..api.types import ModelServing

EVENT_SOURCE = "modelserving-controller"


@dataclass(frozen=True)
class Event:
    type: str  # Normal | Warning
    reason: str
    message: str


@dataclass(frozen=True)
class PodPatch:
    """A strategic-merge patch of one Pod (the body carries its UID as a precondition)."""

    name: str
    uid: str
    resource_version: str  # as observed: the patch is seen once the informer shows another one
    body: dict[str, Any]
    reason: str


@dataclass(frozen=True)
class PodDeletion:
    name: str
    uid: str  # a precondition: never delete a replacement that reused the name
    reason: str


InstanceKey = tuple[int, str, int]  # (group ordinal, role name, role instance index)


@dataclass(frozen=True)
class PendingDeletion:
    """A deletion in progress on one Role instance (deletion identity: see :mod:`.deletions`)."""

    targets: frozenset[str]  # UIDs the controller decided to delete
    known: frozenset[str]  # UIDs the instance had when it decided: anything else is a replacement

    def extend(self, targets: frozenset[str], known: frozenset[str]) -> PendingDeletion:
        return PendingDeletion(self.targets | targets, self.known | known)


@dataclass
class Plan:
    """What one reconcile should do."""

    create_pods: list[dict[str, Any]] = field(default_factory=list)
    delete_pods: list[PodDeletion] = field(default_factory=list)
    patch_pods: list[PodPatch] = field(default_factory=list)
    create_revisions: list[dict[str, Any]] = field(default_factory=list)
    delete_revisions: list[str] = field(default_factory=list)
    apply_podgroups: list[dict[str, Any]] = field(default_factory=list)
    delete_podgroups: list[str] = field(default_factory=list)
    status: dict[str, Any] = field(default_factory=dict)
    running_instances: frozenset[str] = frozenset()  # for the next reconcile's previously_running
    ready_pods: frozenset[str] = frozenset()  # UIDs whose OnPodReady ran, for previously_ready
    create_services: list[dict[str, Any]] = field(default_factory=list)
    delete_services: list[tuple[str, str]] = field(default_factory=list)  # (name, uid precondition)
    plugin_errors: list[str] = field(default_factory=list)  # the reconcile is retried with backoff
    reports: list[tuple[str, str]] = field(default_factory=list)  # plugin reports (reason, message)
    events: list[Event] = field(default_factory=list)
    requeue_after: float | None = None
    # Deletions still pending after this plan, for the next reconcile's Observed.
    pending: dict[InstanceKey, PendingDeletion] = field(default_factory=dict)
    pending_services: dict[str, str] = field(default_factory=dict)  # Service name -> UID we delete

    def requeue(self, seconds: float) -> None:
        self.requeue_after = seconds if self.requeue_after is None else min(self.requeue_after, seconds)


@dataclass(frozen=True)
class Observed:
    """Everything the planner reads, as plain API dicts."""

    ms: ModelServing
    pods: list[dict[str, Any]]
    revisions: list[dict[str, Any]] = field(default_factory=list)
    podgroups: list[dict[str, Any]] | None = None  # None: the PodGroup CRD is not served
    lost: frozenset[str] = frozenset()  # Pods deleted behind our back (from the informer)
    # Role instances ("<group>/<role-id>") the previous reconcile saw Running and Ready; None when
    # there was no previous reconcile (a fresh controller): then no RoleRunning is emitted.
    previously_running: frozenset[str] | None = None
    # UIDs of Pods whose OnPodReady hooks already ran; None: a fresh controller, which runs them
    # for every Ready Pod again (hooks are delivered at least once and must be idempotent).
    previously_ready: frozenset[str] | None = None
    # Auxiliary Services the plugins manage (labelled with the ModelServing); None: not observed,
    # so no Service is planned (unit tests of other behaviour).
    services: list[dict[str, Any]] | None = None
    # Deletions decided by earlier reconciles (Plan.pending); None: a fresh controller, which
    # seeds them from the Pods it finds terminating.
    pending: dict[InstanceKey, PendingDeletion] | None = None
    pending_services: dict[str, str] = field(default_factory=dict)
    now: dt.datetime = field(default_factory=lambda: dt.datetime.now(dt.UTC))
