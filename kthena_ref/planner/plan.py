"""The reconcile planner: a ModelServing and what is observed in, the actions to take out (pure).

Everything the controller decides is decided here, from plain data, so it is unit tested in
milliseconds; the executor (:mod:`kthena_ref.executor`) only applies a :class:`Plan`. The state
of a ModelServing is entirely derived from the objects it owns (Pods carry their group, role,
instance and revision in labels), so a restarted controller picks up exactly where it stopped.

One reconcile, in order:

1. revisions: the update revision is the hash of the current roles; older ones come from
   ControllerRevisions, so groups (or Role instances) at an old revision can still be rebuilt
   from it;
2. recovery: an error Pod (Failed, or restarted and not Ready) past ``restartGracePeriodSeconds``,
   or a Pod deleted behind our back, rebuilds its ServingGroup (``ServingGroupRecreate``), its Role
   instance (``RoleRecreate``) or only itself (``None``); a Pod updated in place is followed by
   :func:`_in_place_progress` instead (its restarts are the update) until it arrives or its
   ``progressDeadlineSeconds`` pass;
3. scale and rollout: under ``ServingGroupRollingUpdate`` one :func:`.rollout.step` over the
   ServingGroups decides which outdated groups are recreated or patched in place (within
   maxUnavailable), which new ones are created (within maxSurge) and which the partition protects;
   without outdated groups, plain scaling keeps ``spec.replicas`` groups (add the lowest missing
   ordinals, remove not-ready first, then the lowest summed pod-deletion-cost, then the highest
   ordinal). Under ``RoleRollingUpdate`` groups only scale and every group rolls each Role's
   instances with the Role's own budget (:func:`_role_rollout`), filtered by roleCoordination
   (:mod:`.coordination`). The :class:`Layout` records which Role instances each group should
   have and the revision each is built from;
4. create every missing Pod of every kept group whose members are not still terminating;
5. ControllerRevisions (history limit counts only non-live revisions), PodGroups, status.

In-place updates (``updateMethod: InPlace``) are decided per unit by :mod:`.eligibility`: an
image-only change is an image patch (:mod:`.inplace`), anything else falls back to recreate with
an ``InPlaceUpdateFallback`` Event that lists why.

Deletion identity. Every deletion is an intent on a Role instance that remembers the UIDs it
meant to delete and the UIDs the instance had when it decided (:class:`PendingDeletion`); retries
only ever delete those UIDs. A Pod that appears in the instance while the intent is pending with
a UID the intent never saw has reused the instance's identity: it is reported
(``DeletionIdentityChanged``), kept with the instance's Services, never adopted (not counted, not
deleted, not a member of any group) and the deletion stays pending until it is gone. A controller
that starts fresh seeds intents from the Pods it finds terminating.
"""

from __future__ import annotations

import datetime as dt
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from .. import faults
from ..api.types import (
    ModelServing,
    PluginTarget,
    RecoveryPolicy,
    Role,
    RoleCoordination,
    RolloutStrategyType,
    UpdateMethod,
)
from ..plugins import build_chain
from ..plugins.base import BoundPlugin, HookRequest, PluginError
from ..plugins.builtin import LABEL_SERVICE_KIND
from . import coordination, eligibility, inplace, intstr, quantity, rollout
from .names import (
    ANNOTATION_DELETION_COST,
    ANNOTATION_QUEUE,
    LABEL_ENTRY,
    LABEL_GROUP,
    LABEL_NAME,
    LABEL_REVISION,
    LABEL_ROLE_ID,
    LABEL_ROLE_TEMPLATE_HASH,
    PodId,
    group_name,
    parse_pod_labels,
    pod_name,
)
from .pods import build_pod, controller_revision, owner_reference, revision_of, role_template_hash

EVENT_SOURCE = "modelserving-controller"


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
    restart_count: int
    not_ready_since: dt.datetime | None
    deletion_cost: int
    role_hash: str = ""  # the role-template-hash label: which template of its Role it was built from
    in_place_since: dt.datetime | None = None  # an in-place update started and has not finished
    images_current: bool = True  # container statuses report the spec's images (checked while in place)
    resource_version: str = ""

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
    restarts = sum(int(c.get("restartCount") or 0) for c in status.get("containerStatuses") or [])
    restarts += sum(int(c.get("restartCount") or 0) for c in status.get("initContainerStatuses") or [])
    try:
        cost = int((meta.get("annotations") or {}).get(ANNOTATION_DELETION_COST, "0"))
    except ValueError:
        cost = 0
    since = inplace.started(pod)
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
        resource_version=meta.get("resourceVersion", ""),
    )


@dataclass
class Group:
    """One ServingGroup as observed: its Pods by position."""

    ordinal: int
    pods: dict[PodId, ObservedPod] = field(default_factory=dict)

    @property
    def revision(self) -> str:
        return Counter(p.revision for p in self.pods.values()).most_common(1)[0][0]

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


Instance = tuple[Role, int, str]  # (the Role as built, instance index, revision it is built from)


class Layout:
    """The Role instances each ServingGroup should have, and the revision each is built from.

    Under ServingGroupRollingUpdate a group is one revision: its instances are that revision's
    Roles. Under RoleRollingUpdate every instance has its own (its Pods' revision label), and the
    Role rollout decides which instances stay, go or come (:meth:`set`)."""

    def __init__(self, roles_for: Callable[[str], list[Role]], target_revision: Callable[[int], str]) -> None:
        self.roles_for = roles_for
        self.target_revision = target_revision
        self._set: dict[int, list[Instance]] = {}

    def set(self, ordinal: int, instances: list[Instance]) -> None:
        self._set[ordinal] = instances

    def instances(self, ordinal: int) -> list[Instance]:
        if ordinal in self._set:
            return self._set[ordinal]
        rev = self.target_revision(ordinal)
        return [(r, i, rev) for r in self.roles_for(rev) for i in range(r.replicas)]

    def expected(self, ordinal: int) -> list[PodId]:
        return [
            PodId(ordinal, r.name, i, k) for r, i, _ in self.instances(ordinal) for k in range(r.worker_replicas + 1)
        ]

    def role_of(self, ordinal: int, role: str, index: int) -> Role | None:
        return next((r for r, i, _ in self.instances(ordinal) if r.name == role and i == index), None)


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
    """A deletion in progress on one Role instance (see the module docstring)."""

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


def _roles_by_revision(ms: ModelServing, revisions: list[dict[str, Any]]) -> dict[str, list[Role]]:
    known: dict[str, list[Role]] = {}
    for cr in revisions:
        rev = ((cr.get("metadata") or {}).get("labels") or {}).get(LABEL_REVISION)
        roles = (cr.get("data") or {}).get("roles")
        if rev and isinstance(roles, list):
            try:
                known[rev] = [Role.model_validate(r) for r in roles]
            except ValueError:
                continue  # a damaged revision cannot rebuild anything; the update revision still can
    known[revision_of(ms.spec.template.roles)] = ms.spec.template.roles
    # Role replicas only scale, they are not part of a revision: every revision takes them from
    # the current spec, so scaling a Role reaches groups still running an older template too.
    replicas = {r.name: r.replicas for r in ms.spec.template.roles}
    return {
        rev: [r.model_copy(update={"replicas": replicas[r.name]}) if r.name in replicas else r for r in roles]
        for rev, roles in known.items()
    }


def _scale_down_order(group: Group, expected: list[PodId]) -> tuple[int, int, int]:
    """Sort key: not-ready first, then the lowest summed deletion cost, then the highest ordinal."""
    if faults.active("scale-down-lowest-ordinal"):
        return (0, 0, group.ordinal)
    return (1 if group.ready(expected) else 0, group.deletion_cost(), -group.ordinal)


def plan(observed: Observed) -> Plan:
    ms = observed.ms
    spec = ms.spec
    name = ms.metadata.name
    out = Plan()
    gang = observed.podgroups is not None and spec.scheduler_name == "volcano"
    chain = build_chain(ms)  # validated at admission (and by the controller before planning)

    # 1. revisions
    update_rev = revision_of(spec.template.roles)
    roles_at = _roles_by_revision(ms, observed.revisions)

    def roles_for(rev: str) -> list[Role]:
        return roles_at.get(rev, spec.template.roles)

    groups: dict[int, Group] = {}
    raw_by_instance: dict[InstanceKey, list[dict[str, Any]]] = {}
    raw_by_name: dict[str, dict[str, Any]] = {}
    seen: list[tuple[ObservedPod, dict[str, Any]]] = []
    for raw in observed.pods:
        pod = observe_pod(raw, name)
        if pod is not None:
            seen.append((pod, raw))
            raw_by_name[pod.name] = raw
    pending, conflicts = _pending_deletions(observed.pending, [p for p, _ in seen])
    out.pending = pending
    for pod, raw in seen:
        key = (pod.pid.ordinal, pod.pid.role, pod.pid.index)
        if any(p.uid == pod.uid for p in conflicts.get(key, [])):
            continue  # a replacement that reused the identity of an instance being deleted: never adopted
        groups.setdefault(pod.pid.ordinal, Group(pod.pid.ordinal)).pods[pod.pid] = pod
        raw_by_instance.setdefault(key, []).append(raw)
    for key, replacements in sorted(conflicts.items()):
        where = f"role {key[1]}-{key[2]} of ServingGroup {group_name(name, key[0])}"
        for pod in replacements:
            out.reports.append(
                (
                    "DeletionIdentityChanged",
                    f"pod {pod.name} (uid {pod.uid}) reused the identity of {where} while its deletion is pending; "
                    "the pod and the instance's Services are kept and not adopted, and the deletion stays pending "
                    "until the conflicting workload is resolved",
                )
            )
    strategy = spec.rollout_strategy
    group_rolling = strategy is None or strategy.type is RolloutStrategyType.SERVING_GROUP_ROLLING_UPDATE
    kept: set[int] = set()
    victims: list[Group] = []
    protected: set[int] = set()
    current_rev = update_rev  # both settled once the groups to keep are known (after recovery)

    def target_revision(ordinal: int) -> str:
        """The revision a group's missing Pods are built at (and labelled with)."""
        group = groups.get(ordinal)
        if group is not None and group.pods:
            return group.revision if group.revision in roles_at else update_rev
        return current_rev if ordinal in protected else update_rev

    layout = Layout(roles_for, target_revision)
    role_rolling = strategy is not None and strategy.type is RolloutStrategyType.ROLE_ROLLING_UPDATE
    if role_rolling:
        for observed_group in groups.values():
            layout.set(
                observed_group.ordinal, _role_instances(observed_group, spec.template.roles, roles_for, update_rev)
            )
    deleting: set[str] = set()
    services_by_name = {svc["metadata"]["name"]: svc for svc in observed.services or []}

    def delete(pods: list[ObservedPod], reason: str) -> None:
        for pod in pods:
            if not pod.deleting and pod.name not in deleting:
                deleting.add(pod.name)
                out.delete_pods.append(PodDeletion(pod.name, pod.uid, reason))
                key = (pod.pid.ordinal, pod.pid.role, pod.pid.index)
                group = groups.get(pod.pid.ordinal)
                members = frozenset(
                    p.uid for p in (group.pods.values() if group else []) if (p.pid.role, p.pid.index) == key[1:]
                )
                intent = out.pending.get(key, PendingDeletion(frozenset(), frozenset()))
                out.pending[key] = intent.extend(frozenset({pod.uid}), members | {pod.uid})

    # 0. deletions decided earlier and not finished: retried with the UIDs they were decided for
    for key, intent in sorted(out.pending.items()):
        group = groups.get(key[0])
        delete(
            [
                p
                for p in (group.pods.values() if group else [])
                if p.uid in intent.targets and (p.pid.role, p.pid.index) == key[1:]
            ],
            "deletion retry",
        )

    # 2. recovery
    rebuilding: set[Any] = set()  # group ordinals and (ordinal, role, index) being rebuilt
    grace = dt.timedelta(seconds=spec.template.restart_grace_period_seconds)
    policy = spec.recovery_policy
    if faults.active("no-recovery"):
        policy = RecoveryPolicy.NONE
    for group in groups.values():
        for pod in list(group.pods.values()):
            if pod.in_place_since is not None and not pod.deleting:
                _in_place_progress(out, observed, group, pod, policy, delete, rebuilding, raw_by_name)
                continue  # its restarts are the update, not a failure
            if not pod.in_error:
                continue
            since = pod.not_ready_since or observed.now  # observe_pod falls back to start/creation
            wait = (since + grace - observed.now).total_seconds()
            if wait > 0:
                out.requeue(wait)
                continue
            _recover(out, delete, group, pod.pid, policy, f"pod {pod.name} failed", name, rebuilding)
        for pid in layout.expected(group.ordinal):
            lost_name = pod_name(name, pid.ordinal, pid.role, pid.index, pid.k)
            if pid in group.pods or lost_name not in observed.lost or policy is RecoveryPolicy.NONE:
                continue
            scope = (
                group.live_pods()
                if policy is RecoveryPolicy.SERVING_GROUP_RECREATE
                else [p for p in group.live_pods() if (p.pid.role, p.pid.index) == (pid.role, pid.index)]
            )
            if scope:  # survivors to rebuild; an emptied instance is simply created again below
                _recover(out, delete, group, pid, policy, f"pod {lost_name} was deleted", name, rebuilding)

    # 3. scale and rollout (ServingGroupRollingUpdate): which groups stay, go, or are created
    pace = _group_pace(ms) if group_rolling else None
    rollout_step = None
    findings = _InPlaceFindings(ms, roles_at)
    if pace is not None:
        units = [
            _group_unit(g, update_rev, layout, deleting, in_place=findings.enabled and not findings.group(g.revision))
            for g in groups.values()
            if g.pods
        ]
        rollout_step = rollout.step(units, pace)
    if rollout_step is None:
        kept, victims = _choose_groups(groups, spec.replicas, layout)
        # Partition protects the first N kept replicas in ascending ordinal order (not ordinals < N).
        protected = set(rollout.protected_ids(kept, pace.partition if pace else 0))
    else:
        victims = [groups[o] for o in rollout_step.remove]
        kept = (set(groups) - set(rollout_step.remove)) | set(rollout_step.create)
        protected = set(rollout_step.protected)
    current_rev = _current_revision(ms, groups, update_rev, roles_at, protected)
    for group in victims:
        delete(group.live_pods(), "scale-down")
        if group.live_pods():
            out.events.append(
                Event("Normal", "RoleDeleting", f"deleting ServingGroup {group_name(name, group.ordinal)} (scale down)")
            )
    role_patched: set[InstanceKey] = set()
    if role_rolling:
        for ordinal in sorted(kept & set(groups)):
            role_patched |= _role_rollout(
                out, ms, groups[ordinal], layout, roles_for, update_rev, findings, deleting, delete, raw_by_name,
                observed.now,
            )  # fmt: skip
    for ordinal in sorted(kept):
        if ordinal not in groups:
            continue
        kept_group = groups[ordinal]
        wanted = set(layout.expected(ordinal))
        surplus = [p for p in kept_group.live_pods() if p.pid not in wanted]
        delete(surplus, "role scale-down")
        for rid in sorted({p.pid.role_id for p in surplus}):
            out.events.append(
                Event("Normal", "RoleDeleting", f"deleting role {rid} of ServingGroup {group_name(name, ordinal)}")
            )

    # 4. rollout: outdated groups are recreated, or updated in place, within the budget
    patched: set[int] = set()
    for ordinal in rollout_step.recreate if rollout_step else []:
        group = groups[ordinal]
        delete(group.live_pods(), "rolling update")
        where = f"ServingGroup {group_name(name, ordinal)}"
        out.events.append(Event("Normal", "RoleDeleting", f"recreating {where} at revision {update_rev}"))
        if findings.enabled and not faults.active("no-fallback-event"):
            out.events.append(_fallback_event(where, findings.group(group.revision)))
    for ordinal in rollout_step.patch if rollout_step else []:
        patched.add(ordinal)
        group = groups[ordinal]
        for pod in group.live_pods():
            role = next(r for r in spec.template.roles if r.name == pod.pid.role)
            body = inplace.pod_patch(raw_by_name[pod.name], role, pod.pid, update_rev, observed.now)
            out.patch_pods.append(PodPatch(pod.name, pod.uid, pod.resource_version, body, "in-place update"))
        out.events.append(
            Event(
                "Normal",
                "InPlaceUpdating",
                f"updating ServingGroup {group_name(name, ordinal)} in place to revision {update_rev}",
            )
        )

    # 5. create what is missing
    for ordinal in sorted(kept):
        existing = groups.get(ordinal)
        present: dict[PodId, ObservedPod] = existing.pods if existing else {}
        busy_instances = {(p.pid.role, p.pid.index) for p in present.values() if p.deleting or p.name in deleting}
        busy_instances |= {(key[1], key[2]) for key in rebuilding if isinstance(key, tuple) and key[0] == ordinal}
        busy_instances |= {(key[1], key[2]) for key in out.pending if key[0] == ordinal}
        busy_instances |= {(key[1], key[2]) for key in role_patched if key[0] == ordinal}
        group_busy = bool(present) and all(p.deleting or p.name in deleting for p in present.values())
        if ordinal in patched:
            continue  # its Pods move to the update revision first; anything missing comes after
        if ordinal in rebuilding or (group_busy and policy is RecoveryPolicy.SERVING_GROUP_RECREATE):
            continue  # the whole group is being rebuilt: wait for every Pod to go
        if policy is RecoveryPolicy.SERVING_GROUP_RECREATE and any(key[0] == ordinal for key in conflicts):
            continue  # a replacement holds part of the group's identity: nothing is built around it
        created_instances: set[str] = set()
        for pid, roles, rev in _missing(layout, roles_for, ordinal):
            if pid in present or (pid.role, pid.index) in busy_instances:
                continue
            new_pod = build_pod(ms, roles, rev, pid, gang=gang)
            try:
                _run_pod_create(
                    chain,
                    ms,
                    roles,
                    pid,
                    new_pod,
                    raw_by_instance.get((ordinal, pid.role, pid.index)),
                    services_by_name,
                )
            except PluginError as exc:
                message = f"pod {new_pod['metadata']['name']} not created: {exc}"
                out.plugin_errors.append(message)
                out.events.append(Event("Warning", "PluginError", message))
                continue
            out.create_pods.append(new_pod)
            created_instances.add(pid.role_id)
        for rid in sorted(created_instances):
            out.events.append(
                Event("Normal", "RoleCreating", f"creating role {rid} of ServingGroup {group_name(name, ordinal)}")
            )

    # 6. plugin-managed Services, revisions, PodGroups, status
    if observed.services is not None and chain:
        held = {(group_name(name, key[0]), f"{key[1]}-{key[2]}") for key in conflicts}
        _services(
            out, ms, chain, kept, layout, observed.services, raw_by_instance, held, observed.pending_services,
        )  # fmt: skip
    _revisions(out, ms, observed, update_rev, current_rev, {g.revision for g in groups.values()})
    if gang:
        _podgroups(out, ms, observed.podgroups or [], kept, set(groups), roles_for, target_revision)
    out.status = _status(ms, groups, kept, update_rev, current_rev, layout, observed.now)
    for reason in sorted({r for r, _ in out.reports}):  # e.g. MigrationRequired: Event and condition
        messages = [m for r, m in out.reports if r == reason]
        already = ms.status is not None and any(
            c.type == reason and c.status == "True" for c in ms.status.conditions or []
        )
        if not already:  # one Event when the situation appears, not one per reconcile
            out.events.extend(Event("Warning", reason, m) for m in messages)
        out.status["conditions"].append(_condition(ms, reason, True, reason, "; ".join(messages[:3]), observed.now))
    if chain:  # plugin failures are visible in status too, not only as Events (spec reading 2)
        failed = bool(out.plugin_errors)
        out.status["conditions"].append(
            _condition(
                ms,
                "PluginsSucceeded",
                not failed,
                "PluginError" if failed else "PluginsSucceeded",
                "; ".join(out.plugin_errors[:3]) if failed else f"{len(chain)} plugin(s) applied",
                observed.now,
            )
        )
    out.running_instances = _running_instances(name, groups, layout)
    out.ready_pods = _pods_ready(out, ms, chain, groups, layout, raw_by_instance, observed.previously_ready)
    if observed.previously_running is not None:
        for instance in sorted(out.running_instances - observed.previously_running):
            group_label, rid = instance.split("/")
            out.events.append(Event("Normal", "RoleRunning", f"role {rid} of ServingGroup {group_label} is running"))
    return out


def _request(
    ms: ModelServing,
    role: Role,
    ordinal: int,
    index: int,
    target: PluginTarget,
    pod: Any = None,
    instance_pods: list[dict[str, Any]] | None = None,
    services: dict[str, dict[str, Any]] | None = None,
) -> HookRequest:
    return HookRequest(
        ms=ms,
        group=group_name(ms.metadata.name, ordinal),
        ordinal=ordinal,
        role=role,
        role_index=index,
        instance_pods=instance_pods or [],
        services=services or {},
        target=target,
        pod=pod,
    )


def _run_pod_create(
    chain: list[BoundPlugin],
    ms: ModelServing,
    roles: list[Role],
    pid: PodId,
    pod: dict[str, Any],
    instance_pods: list[dict[str, Any]] | None = None,
    services: dict[str, dict[str, Any]] | None = None,
) -> None:
    """OnPodCreate of every in-scope plugin, in list order, each seeing the previous mutations."""
    role = next(r for r in roles if r.name == pid.role)
    target = PluginTarget.ENTRY if pid.is_entry else PluginTarget.WORKER
    for bound in chain:
        if bound.in_scope(role.name, target):
            req = _request(ms, role, pid.ordinal, pid.index, target, pod, instance_pods, services)
            bound.plugin.on_pod_create(req)


def _services(
    out: Plan,
    ms: ModelServing,
    chain: list[BoundPlugin],
    kept: set[int],
    layout: Layout,
    observed: list[dict[str, Any]],
    instance_pods: dict[InstanceKey, list[dict[str, Any]]],
    held: set[tuple[str, str]],
    pending: dict[str, str],
) -> None:
    """Create the Services the plugins want for every kept Role instance (again after an
    accidental deletion); delete ours that no instance wants any more. Their presence never
    decides whether a Role or ServingGroup exists: groups are derived from Pods only.

    ``held``: (group, role-id) of instances a replacement Pod holds: their Services stay.
    ``pending``: Services being deleted, by name, with the UID the deletion was decided for: one
    found under that name with another UID is a replacement, reported and kept."""
    desired: dict[str, dict[str, Any]] = {}
    settled: set[str] = set()  # Services of instances that already have Pods (services-not-recreated)
    for ordinal in sorted(kept):
        for role, index, _ in layout.instances(ordinal):
            req = _request(
                ms, role, ordinal, index, PluginTarget.ALL, None, instance_pods.get((ordinal, role.name, index)),
                {svc["metadata"]["name"]: svc for svc in observed},
            )  # fmt: skip
            for bound in chain:
                if bound.in_scope(role.name, PluginTarget.ALL):
                    for obj in bound.plugin.on_role_sync(req):
                        desired[obj["metadata"]["name"]] = obj
                        if faults.active("services-not-recreated") and req.instance_pods:
                            settled.add(obj["metadata"]["name"])
            for reason, message in req.reports:
                out.reports.append((reason, message))
    have = {svc["metadata"]["name"]: svc for svc in observed}
    for name in sorted(desired.keys() - have.keys()):
        if name in settled:  # services-not-recreated: its instance has Pods, so it existed and was deleted
            continue
        out.create_services.append(desired[name])
    for name in sorted(have.keys() - desired.keys()):
        meta = have[name]["metadata"]
        labels = meta.get("labels") or {}
        uid = meta.get("uid", "")
        ours = any(
            ref.get("uid") == ms.metadata.uid and ref.get("controller") for ref in meta.get("ownerReferences") or []
        )
        if not ours or LABEL_SERVICE_KIND not in labels:
            continue
        if (labels.get(LABEL_GROUP), labels.get(LABEL_ROLE_ID)) in held:
            continue  # a replacement Pod still resolves through it: its networking is preserved
        intended = pending.get(name)
        if intended is not None and intended != uid:
            out.pending_services[name] = intended
            out.reports.append(
                (
                    "DeletionIdentityChanged",
                    f"service {name} was recreated (uid {uid}) while its deletion (uid {intended}) was pending; "
                    "it is kept and not adopted until the conflicting workload is resolved",
                )
            )
            continue
        out.pending_services[name] = uid
        if not meta.get("deletionTimestamp"):
            out.delete_services.append((name, uid))  # with its UID: never a replacement


def _pending_deletions(
    previous: dict[InstanceKey, PendingDeletion] | None, pods: list[ObservedPod]
) -> tuple[dict[InstanceKey, PendingDeletion], dict[InstanceKey, list[ObservedPod]]]:
    """(deletions still pending, replacement Pods per instance) from what is observed now.

    An intent ends when none of its target UIDs is left and no replacement holds its instance.
    Instances with terminating Pods and no intent (a fresh controller, or a deletion by someone
    else) get one whose known UIDs are the instance's current Pods.
    """
    by_instance: dict[InstanceKey, list[ObservedPod]] = {}
    for pod in pods:
        by_instance.setdefault((pod.pid.ordinal, pod.pid.role, pod.pid.index), []).append(pod)
    pending: dict[InstanceKey, PendingDeletion] = {}
    conflicts: dict[InstanceKey, list[ObservedPod]] = {}
    for key, intent in (previous or {}).items():
        members = by_instance.get(key, [])
        replacements = [p for p in members if p.uid not in intent.known]
        if faults.active("deletion-identity-ignored"):
            replacements = []  # a replacement counts as an original: adopted, deleted, never reported
        if replacements:
            conflicts[key] = replacements
        if replacements or any(p.uid in intent.targets for p in members):
            pending[key] = intent
    for key, members in by_instance.items():
        if key not in pending and any(p.deleting for p in members):
            pending[key] = PendingDeletion(
                frozenset(p.uid for p in members if p.deleting), frozenset(p.uid for p in members)
            )
    return pending, conflicts


def _pods_ready(
    out: Plan,
    ms: ModelServing,
    chain: list[BoundPlugin],
    groups: dict[int, Group],
    layout: Layout,
    instance_pods: dict[InstanceKey, list[dict[str, Any]]],
    previously: frozenset[str] | None,
) -> frozenset[str]:
    """Run OnPodReady of every in-scope plugin, in list order, for Pods that became Running and
    Ready; returns the UIDs handled. A failing hook leaves its Pod out, so it is retried."""
    done: set[str] = set()
    for group in groups.values():
        for pod in group.pods.values():
            if not pod.running_ready:
                continue
            role = layout.role_of(group.ordinal, pod.pid.role, pod.pid.index)
            if (previously is not None and pod.uid in previously) or not chain or role is None:
                done.add(pod.uid)
                continue
            key = (pod.pid.ordinal, pod.pid.role, pod.pid.index)
            raw = next((p for p in instance_pods.get(key, []) if p["metadata"].get("uid") == pod.uid), None)
            target = PluginTarget.ENTRY if pod.pid.is_entry else PluginTarget.WORKER
            try:
                for bound in chain:
                    if bound.in_scope(pod.pid.role, target):
                        bound.plugin.on_pod_ready(
                            _request(ms, role, pod.pid.ordinal, pod.pid.index, target, raw,
                                     instance_pods.get(key))
                        )  # fmt: skip
            except PluginError as exc:
                message = f"OnPodReady for pod {pod.name} failed: {exc}"
                out.plugin_errors.append(message)
                out.events.append(Event("Warning", "PluginError", message))
                continue
            done.add(pod.uid)
    return frozenset(done)


def _running_instances(ms: str, groups: dict[int, Group], layout: Layout) -> frozenset[str]:
    """Role instances whose every expected Pod is Running and Ready, as ``<group>/<role-id>``."""
    out = set()
    for group in groups.values():
        expected: dict[tuple[str, int], list[PodId]] = {}
        for pid in layout.expected(group.ordinal):
            expected.setdefault((pid.role, pid.index), []).append(pid)
        for (role, index), pids in expected.items():
            if all(pid in group.pods and group.pods[pid].running_ready for pid in pids):
                out.add(f"{group_name(ms, group.ordinal)}/{role}-{index}")
    return frozenset(out)


def _recover(
    out: Plan, delete: Any, group: Group, pid: PodId, policy: RecoveryPolicy, why: str, ms: str, rebuilding: set[Any]
) -> None:
    """Rebuild the scope of ``pid`` (its group or Role instance) as one unit.

    The failed Pod is deleted last, once every other Pod of the scope is gone: until then it
    stays in the cluster as the record of the rebuild, so a controller that crashes half way
    through finds it again and finishes the job (the intent is never only in memory), and no
    member of the scope is recreated before the whole scope is down.
    """
    where = group_name(ms, group.ordinal)
    if policy is RecoveryPolicy.NONE:
        pod = group.pods.get(pid)
        if pod is not None:
            delete([pod], f"recovery: {why}")
        return
    whole_group = policy is RecoveryPolicy.SERVING_GROUP_RECREATE
    scope = [p for p in group.pods.values() if whole_group or (p.pid.role, p.pid.index) == (pid.role, pid.index)]
    others = [p for p in scope if p.pid != pid]
    delete([p for p in others if not p.deleting], f"recovery: {why}")
    if not others:
        delete([p for p in scope if p.pid == pid], f"recovery: {why}")
    rebuilding.add(group.ordinal if whole_group else (group.ordinal, pid.role, pid.index))
    if any(not p.deleting for p in scope):
        what = f"ServingGroup {where}" if whole_group else f"role {pid.role_id} of ServingGroup {where}"
        out.events.append(Event("Normal", "RoleDeleting", f"recreating {what}: {why}"))


def _current_revision(
    ms: ModelServing, groups: dict[int, Group], update_rev: str, known: dict[str, list[Role]], protected: set[int]
) -> str:
    """The revision of the groups not (yet) updated.

    It stays what status recorded while an older revision is still running or still protected by
    the partition (so a protected group rebuilt by recovery comes back at it), and becomes the
    update revision once no group runs anything else.
    """
    previous = ms.status.current_revision if ms.status else None
    older = Counter(g.revision for g in groups.values() if g.pods and g.revision != update_rev)
    if previous and previous != update_rev and previous in known and (older or protected):
        return previous
    if older:
        return older.most_common(1)[0][0]
    return update_rev


def _group_pace(ms: ModelServing) -> rollout.Pace:
    """ServingGroupRollingUpdate's budget, resolved against spec.replicas."""
    spec = ms.spec
    rolling = spec.rollout_strategy.rolling_update_configuration if spec.rollout_strategy else None
    at = "rolloutStrategy.rollingUpdateConfiguration"
    unavailable = rolling.max_unavailable if rolling else 1
    if faults.active("unavailable-rounds-up") and isinstance(unavailable, str):
        unavailable = intstr.resolve(unavailable, spec.replicas, round_up=True, field=f"{at}.maxUnavailable")
    budget, surge = intstr.update_budget(unavailable, rolling.max_surge if rolling else None, spec.replicas, at)
    part = intstr.partition(rolling.partition if rolling else None, spec.replicas, f"{at}.partition")
    if faults.active("surge-ignored"):
        surge = 0
    if faults.active("partition-ignored"):
        part = 0
    return rollout.Pace(spec.replicas, budget, surge, part)


def _group_unit(
    group: Group, update_rev: str, layout: Layout, deleting: set[str], *, in_place: bool = False
) -> rollout.Unit:
    live = [p for p in group.pods.values() if not p.deleting and p.name not in deleting]
    return rollout.Unit(
        id=group.ordinal,
        outdated=group.revision != update_rev,
        ready=bool(live) and len(live) == len(group.pods) and group.ready(layout.expected(group.ordinal)),
        terminating=not live,
        in_place=in_place,
    )


class _InPlaceFindings:
    """Why a unit at some revision cannot be updated in place (empty: it can), per revision."""

    def __init__(self, ms: ModelServing, roles_at: dict[str, list[Role]]) -> None:
        strategy = ms.spec.rollout_strategy
        self.enabled = strategy is not None and strategy.update_method is UpdateMethod.IN_PLACE
        self._ms = ms
        self._roles_at = roles_at
        self._blockers = eligibility.plugin_blockers(ms) if self.enabled else []
        self._cache: dict[tuple[str, str | None], list[eligibility.Finding]] = {}

    def group(self, revision: str, role: str | None = None) -> list[eligibility.Finding]:
        key = (revision, role)
        if key not in self._cache:
            old = self._roles_at.get(revision)
            if old is None:
                found = [eligibility.Finding("spec.template.roles", f"revision {revision} is not recorded")]
            elif faults.active("in-place-ineligible-patched"):
                found = list(self._blockers)  # Pod template changes are not looked at
            else:
                found = self._blockers + eligibility.check_roles(old, self._ms.spec.template.roles, role=role)
            self._cache[key] = found
        return self._cache[key]


def _fallback_event(where: str, findings: list[eligibility.Finding]) -> Event:
    shown = "; ".join(f"{f.field}: {f.reason}" for f in findings[:3])
    more = f" (and {len(findings) - 3} more)" if len(findings) > 3 else ""
    return Event(
        "Normal",
        "InPlaceUpdateFallback",
        f"{where} is recreated instead of updated in place: {shown}{more}",
    )


def _in_place_progress(
    out: Plan,
    observed: Observed,
    group: Group,
    pod: ObservedPod,
    policy: RecoveryPolicy,
    delete: Any,
    rebuilding: set[Any],
    raw_by_name: dict[str, dict[str, Any]],
) -> None:
    """Follow a Pod updated in place (it gets no other error recovery meanwhile).

    Arrived (Running, Ready, on its new images): the annotation goes. Still on its way before the
    progress deadline: it is left alone (its restarts are the update, not a failure). Past the
    deadline: ProgressDeadlineExceeded is reported and the RecoveryPolicy rebuilds its scope
    (None: only the report, as a Deployment past its deadline)."""
    if pod.running_ready:
        out.patch_pods.append(
            PodPatch(pod.name, pod.uid, pod.resource_version, inplace.finished_patch(raw_by_name[pod.name]), "arrived")
        )
        return
    assert pod.in_place_since is not None
    deadline = inplace.progress_deadline(observed.ms)
    due = pod.in_place_since + deadline
    if observed.now < due or faults.active("no-progress-deadline"):
        if not faults.active("no-progress-deadline"):
            out.requeue((due - observed.now).total_seconds())
        return
    seconds = int(deadline.total_seconds())
    message = f"pod {pod.name} is not ready on revision {pod.revision} {seconds}s after its in-place update started"
    out.reports.append(("ProgressDeadlineExceeded", message))
    if policy is not RecoveryPolicy.NONE:
        _recover(out, delete, group, pod.pid, policy, "in-place update passed its progress deadline",
                 observed.ms.metadata.name, rebuilding)  # fmt: skip


def _missing(
    layout: Layout, roles_for: Callable[[str], list[Role]], ordinal: int
) -> list[tuple[PodId, list[Role], str]]:
    """Every Pod the group should have, with the Roles and revision it is built from."""
    return [
        (PodId(ordinal, role.name, index, k), roles_for(rev), rev)
        for role, index, rev in layout.instances(ordinal)
        for k in range(role.worker_replicas + 1)
    ]


def _by_instance(group: Group) -> dict[tuple[str, int], list[ObservedPod]]:
    out: dict[tuple[str, int], list[ObservedPod]] = {}
    for pod in group.pods.values():
        out.setdefault((pod.pid.role, pod.pid.index), []).append(pod)
    return out


def _revision_of(pods: list[ObservedPod]) -> str:
    return Counter(p.revision for p in pods).most_common(1)[0][0]


def _defined(roles_for: Callable[[str], list[Role]], rev: str, role: Role) -> Role:
    """``role`` as revision ``rev`` defines it (itself when that revision does not have it)."""
    return next((r for r in roles_for(rev) if r.name == role.name), role)


def _role_instances(
    group: Group, roles: list[Role], roles_for: Callable[[str], list[Role]], update_rev: str
) -> list[Instance]:
    """RoleRollingUpdate without a rollout step: indices below each Role's replicas, each at the
    revision its Pods have (a missing one at the update revision)."""
    by_instance = _by_instance(group)
    out: list[Instance] = []
    for role in roles:
        present = {
            index: all(p.running_ready for p in pods)
            for (name, index), pods in by_instance.items()
            if name == role.name
        }
        for index in _steady_ids(present, role.replicas):
            pods = by_instance.get((role.name, index))
            rev = _revision_of(pods) if pods else update_rev
            out.append((_defined(roles_for, rev, role), index, rev))
    return out


def _steady_ids(present: dict[int, bool], replicas: int) -> list[int]:
    """The instance indices a Role keeps without a rollout: the ones it has (a surge instance that
    outlived the rollout included), the not-ready then highest beyond ``replicas`` dropped, the
    lowest free ones added up to ``replicas``. (``present``: index -> ready.)"""
    keep = sorted(present, key=lambda i: (not present[i], i))[: max(0, replicas)]
    return sorted(rollout.slots(set(keep), replicas))


def _role_pace(role: Role) -> rollout.Pace:
    """RoleRollingUpdate's budget of one Role, resolved against the Role's replicas."""
    at = f"spec.template.roles[{role.name}]"
    try:
        budget, surge = intstr.update_budget(role.max_unavailable, role.max_surge, role.replicas, at)
        part = intstr.partition(role.partition, role.replicas, f"{at}.partition")
    except intstr.IntOrStringError:  # rejected at admission; never stall on it
        return rollout.Pace(role.replicas, 1)
    return rollout.Pace(role.replicas, budget, surge, part)


def _role_rollout(
    out: Plan,
    ms: ModelServing,
    group: Group,
    layout: Layout,
    roles_for: Callable[[str], list[Role]],
    update_rev: str,
    findings: _InPlaceFindings,
    deleting: set[str],
    delete: Callable[[list[ObservedPod], str], None],
    raw_by_name: dict[str, dict[str, Any]],
    now: dt.datetime,
) -> set[InstanceKey]:
    """RoleRollingUpdate in one ServingGroup: each Role rolls its instances within its own budget
    (and roleCoordination); unchanged Roles keep their Pods (only their revision label moves).
    Sets the group's layout; returns the instances patched in place."""
    where = f"ServingGroup {group_name(ms.metadata.name, group.ordinal)}"
    by_instance = _by_instance(group)
    roles = ms.spec.template.roles
    steps: dict[str, rollout.Step | None] = {}
    paces: dict[str, rollout.Pace] = {}
    units: dict[str, dict[int, rollout.Unit]] = {}
    revs: dict[tuple[str, int], str] = {}
    for role in roles:
        want = role_template_hash(role)
        units[role.name] = {}
        for (role_name, index), pods in by_instance.items():
            if role_name != role.name:
                continue
            live = [p for p in pods if not p.deleting and p.name not in deleting]
            rev = revs[(role_name, index)] = _revision_of(pods)
            defined = _defined(roles_for, rev, role)
            expected = [PodId(group.ordinal, role.name, index, k) for k in range(defined.worker_replicas + 1)]
            if faults.active("role-unchanged-recreated"):
                outdated = any(p.revision != update_rev for p in pods)
            else:
                outdated = any(p.role_hash != want for p in pods)
            units[role.name][index] = rollout.Unit(
                id=index,
                outdated=outdated,
                ready=bool(live) and len(live) == len(pods) and group.ready(expected),
                terminating=not live,
                in_place=findings.enabled and not findings.group(rev, role.name),
            )
        paces[role.name] = _role_pace(role)
        steps[role.name] = rollout.step(list(units[role.name].values()), paces[role.name])
    strategy = ms.spec.rollout_strategy
    coordinated = strategy.role_coordination if strategy else None
    if coordinated is not None and not faults.active("coordination-ignored"):
        _coordinate(coordinated, roles, units, steps, paces)

    patched: set[InstanceKey] = set()
    instances: list[Instance] = []
    for role in roles:
        step = steps[role.name]
        present = units[role.name]
        for index in step.remove if step else []:
            delete([p for p in by_instance[(role.name, index)] if not p.deleting], "role scale-down")
        for index in step.recreate if step else []:
            delete([p for p in by_instance[(role.name, index)] if not p.deleting], "rolling update")
            what = f"role {role.name}-{index} of {where}"
            out.events.append(Event("Normal", "RoleDeleting", f"recreating {what} at revision {update_rev}"))
            if findings.enabled and not faults.active("no-fallback-event"):
                out.events.append(_fallback_event(what, findings.group(revs[(role.name, index)], role.name)))
        for index in step.patch if step else []:
            patched.add((group.ordinal, role.name, index))
            for pod in by_instance[(role.name, index)]:
                if not pod.deleting:
                    body = inplace.pod_patch(raw_by_name[pod.name], role, pod.pid, update_rev, now)
                    out.patch_pods.append(PodPatch(pod.name, pod.uid, pod.resource_version, body, "in-place update"))
            out.events.append(
                Event("Normal", "InPlaceUpdating", f"updating role {role.name}-{index} of {where} in place")
            )
        for index, unit in present.items():  # unchanged Roles: the Pods stay, the label moves
            if unit.outdated or unit.terminating or (group.ordinal, role.name, index) in patched:
                continue
            for pod in by_instance[(role.name, index)]:
                if pod.revision != update_rev and not pod.deleting:
                    body = {"metadata": {"uid": pod.uid, "labels": {LABEL_REVISION: update_rev}}}
                    out.patch_pods.append(PodPatch(pod.name, pod.uid, pod.resource_version, body, "same template"))
        if step is None:
            ids = set(_steady_ids({i: u.ready or u.terminating for i, u in present.items()}, role.replicas))
        else:
            ids = (set(present) - set(step.remove)) | set(step.create)
        older = [revs[(role.name, i)] for i, u in present.items() if u.outdated]
        for index in sorted(ids):
            if index in present:
                rev = revs[(role.name, index)]
            elif step is not None and index in step.protected and older:
                rev = Counter(older).most_common(1)[0][0]  # a protected instance comes back as it was
            else:
                rev = update_rev
            instances.append((_defined(roles_for, rev, role), index, rev))
    layout.set(group.ordinal, instances)
    return patched


def _coordinate(
    coordinated: RoleCoordination,
    roles: list[Role],
    units: dict[str, dict[int, rollout.Unit]],
    steps: dict[str, rollout.Step | None],
    paces: dict[str, rollout.Pace],
) -> None:
    """Hold back the starts roleCoordination does not allow yet (edits ``steps``)."""
    progress: dict[str, coordination.RoleProgress] = {}
    starts: dict[str, list[coordination.Start]] = {}
    refills: dict[str, set[int]] = {}  # missing instances: recreated ones whose replacement is due
    for role in roles:
        present = units[role.name].values()
        refills[role.name] = set(range(role.replicas)) - set(units[role.name])
        pace = paces[role.name]
        progress[role.name] = coordination.RoleProgress(
            replicas=role.replicas,
            target_ready=sum(1 for u in present if not u.outdated and u.ready and not u.terminating),
            headed=sum(1 for u in present if not u.outdated or u.terminating) + len(refills[role.name]),
            old_ready=sum(1 for u in present if u.outdated and u.ready and not u.terminating),
            outdated=sum(1 for u in present if u.outdated and not u.terminating),
            spare=pace.replicas + pace.max_surge > 1,
        )
        step = steps[role.name]
        if step is not None:
            by_id = units[role.name]
            starts[role.name] = [
                coordination.Start(i, by_id[i].ready and by_id[i].outdated) for i in step.recreate + step.patch
            ] + [coordination.Start(i, False) for i in step.create if i not in refills[role.name]]
    allowed = coordination.allowed(coordinated, progress, starts)
    for role in roles:
        step = steps[role.name]
        if step is not None:
            ok = set(allowed.get(role.name, []))
            step.recreate = [i for i in step.recreate if i in ok]
            step.patch = [i for i in step.patch if i in ok]
            step.create = [i for i in step.create if i in ok or i in refills[role.name]]


def _choose_groups(groups: dict[int, Group], replicas: int, layout: Layout) -> tuple[set[int], list[Group]]:
    """(ordinals to keep or create, groups to remove)."""
    existing = sorted(groups.values(), key=lambda g: _scale_down_order(g, layout.expected(g.ordinal)))
    victims: list[Group] = []
    while len(existing) - len(victims) > replicas:
        victims.append(existing[len(victims)])
    kept = {g.ordinal for g in existing} - {g.ordinal for g in victims}
    ordinal = 0
    while len(kept) < replicas:
        if ordinal not in groups:
            kept.add(ordinal)
        ordinal += 1
    return kept, victims


def _revisions(
    out: Plan, ms: ModelServing, observed: Observed, update_rev: str, current_rev: str, used: set[str]
) -> None:
    have = {((cr.get("metadata") or {}).get("labels") or {}).get(LABEL_REVISION): cr for cr in observed.revisions}
    numbers = [int(cr.get("revision") or 0) for cr in observed.revisions]
    if update_rev not in have:
        out.create_revisions.append(
            controller_revision(ms, update_rev, ms.spec.template.roles, max(numbers, default=0) + 1)
        )
    live = {update_rev, current_rev} | used
    dead = sorted(
        (cr for rev, cr in have.items() if rev not in live),
        key=lambda cr: int(cr.get("revision") or 0),
    )
    excess = len(dead) - ms.spec.revision_history_limit
    for cr in dead[: max(0, excess)]:
        out.delete_revisions.append(cr["metadata"]["name"])


def _podgroups(
    out: Plan,
    ms: ModelServing,
    existing: list[dict[str, Any]],
    kept: set[int],
    present: set[int],
    roles_for: Any,
    target_revision: Any,
) -> None:
    name = ms.metadata.name
    by_name = {pg["metadata"]["name"]: pg for pg in existing}
    gang_policy = ms.spec.template.gang_policy
    queue = (ms.metadata.annotations or {}).get(ANNOTATION_QUEUE)
    for ordinal in sorted(kept):
        roles = roles_for(target_revision(ordinal))  # the roles the group's Pods are (or will be) built from
        desired = podgroup(ms, ordinal, roles, gang_policy.min_role_replicas if gang_policy else None, queue)
        current = by_name.get(desired["metadata"]["name"])
        if current is None or current.get("spec") != desired["spec"]:
            out.apply_podgroups.append(desired)
    for pg_name, pg in by_name.items():
        owned = any(ref.get("uid") == ms.metadata.uid for ref in pg["metadata"].get("ownerReferences") or [])
        ordinal_text = pg_name.removeprefix(f"{name}-")
        if owned and ordinal_text.isdigit() and int(ordinal_text) not in kept | present:
            out.delete_podgroups.append(pg_name)


def _sum_requests(pods: list[dict[str, Any]]) -> dict[str, str]:
    """Summed container requests of ``pods``, per resource (unparsable quantities are skipped:
    the API server has already validated every request the Pods will carry)."""
    totals: dict[str, Decimal] = {}
    for pod in pods:
        for container in pod["spec"].get("containers") or []:
            for resource, value in ((container.get("resources") or {}).get("requests") or {}).items():
                try:
                    totals[resource] = totals.get(resource, Decimal(0)) + quantity.parse(value)
                except quantity.QuantityError:
                    continue
    return {k: quantity.format_quantity(v) for k, v in sorted(totals.items())}


def podgroup(
    ms: ModelServing, ordinal: int, roles: list[Role], min_role_replicas: dict[str, int] | None, queue: str | None
) -> dict[str, Any]:
    """The Volcano PodGroup of one ServingGroup (upstream's contract)."""
    members: list[dict[str, Any]] = []
    min_member = 0
    task_members: dict[str, int] = {}
    for role in roles:
        needed = (
            role.replicas
            if not min_role_replicas or role.name not in min_role_replicas
            else min(min_role_replicas[role.name], role.replicas)
        )
        min_member += (1 + role.worker_replicas) * needed
        for index in range(needed):
            task_members[f"{role.name}-{index}"] = 1 + role.worker_replicas
            for k in range(role.worker_replicas + 1):
                members.append(build_pod(ms, roles, "", PodId(ordinal, role.name, index, k), gang=True))
    spec: dict[str, Any] = {
        "minMember": min_member,
        "minTaskMember": task_members,
        "minResources": _sum_requests(members),
    }
    if queue:
        spec["queue"] = queue
    topology = ms.spec.template.network_topology
    if topology and topology.group_policy:
        spec["networkTopology"] = topology.group_policy.model_dump(by_alias=True, exclude_none=True, mode="json")
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {
            "name": group_name(ms.metadata.name, ordinal),
            "namespace": ms.metadata.namespace,
            "labels": {LABEL_NAME: ms.metadata.name},
            "ownerReferences": [owner_reference(ms)],
        },
        "spec": spec,
    }


def label_selector(ms: ModelServing) -> str:
    """Selects one Pod per ServingGroup: the entry Pod of the first role instance (spec reading 22)."""
    first = next((r for r in ms.spec.template.roles if r.replicas > 0), ms.spec.template.roles[0])
    return f"{LABEL_NAME}={ms.metadata.name},{LABEL_ENTRY}=true,{LABEL_ROLE_ID}={first.name}-0"


def _condition(ms: ModelServing, kind: str, ok: bool, reason: str, message: str, now: dt.datetime) -> dict[str, Any]:
    status = "True" if ok else "False"
    old = next((c for c in (ms.status.conditions or []) if c.type == kind), None) if ms.status else None
    since = (
        old.last_transition_time
        if old and old.status == status and old.last_transition_time
        else now.strftime("%Y-%m-%dT%H:%M:%SZ")
    )
    return {
        "type": kind,
        "status": status,
        "reason": reason,
        "message": message,
        "lastTransitionTime": since,
        "observedGeneration": ms.metadata.generation,
    }


def _status(
    ms: ModelServing,
    groups: dict[int, Group],
    kept: set[int],
    update_rev: str,
    current_rev: str,
    layout: Layout,
    now: dt.datetime,
) -> dict[str, Any]:
    present = [g for g in groups.values() if g.pods]
    available = sum(
        1 for g in present if g.ordinal in kept and not g.terminating and g.ready(layout.expected(g.ordinal))
    )
    updated = sum(1 for g in present if not g.terminating and all(p.revision == update_rev for p in g.live_pods()))
    reported_current = current_rev if updated < ms.spec.replicas else update_rev
    current = sum(1 for g in present if g.revision == reported_current and not g.terminating)
    replicas = len(present)
    want = ms.spec.replicas
    all_ready = available >= want and replicas == want
    updating = updated < want
    conditions = [
        _condition(
            ms,
            "Available",
            all_ready,
            "AllGroupsReady" if all_ready else "GroupsNotReady",
            f"{available}/{want} ServingGroups ready",
            now,
        ),
        _condition(
            ms,
            "Progressing",
            not all_ready,
            "GroupProgressing" if not all_ready else "GroupsReady",
            f"{replicas} ServingGroups exist, {available} ready, {want} wanted",
            now,
        ),
        _condition(
            ms,
            "UpdateInProgress",
            updating,
            "GroupsUpdating" if updating else "GroupsUpdated",
            f"{updated}/{want} ServingGroups at revision {update_rev}",
            now,
        ),
    ]
    return {
        "observedGeneration": ms.metadata.generation,
        "replicas": replicas,
        "currentReplicas": current,
        "updatedReplicas": updated,
        "availableReplicas": 0 if faults.active("stale-available-replicas") else available,
        "currentRevision": reported_current,
        "updateRevision": update_rev,
        "labelSelector": label_selector(ms),
        "conditions": conditions,
    }
