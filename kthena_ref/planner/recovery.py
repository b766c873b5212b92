"""Recovery: failed or lost Pods rebuild their ServingGroup, their Role instance, or themselves.

Why this module exists: it is the one step of a reconcile that reacts to Pods going wrong. An
error Pod (Failed, or restarted and not Ready) past ``restartGracePeriodSeconds``, or a Pod deleted
behind our back, rebuilds its ServingGroup (``ServingGroupRecreate``), its Role instance
(``RoleRecreate``) or only itself (``None``, which behaves as a Deployment's Pod: a Failed or lost
Pod is replaced, a restarted container is left to the kubelet). A Pod updated in place is followed by
:func:`in_place_progress` instead (its restarts are the update) until it arrives or its
``progressDeadlineSeconds`` pass. The step returns what is being rebuilt, so Pod creation waits
for the whole scope to go before building it again.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from typing import Any

from .. import faults
from ..api.types import ModelServing, RecoveryPolicy, RolloutStrategyType, UpdateMethod
from . import inplace
from .deletions import Deleter
from .layout import Layout
from .model import Event, InstanceKey, Observed, Plan, PodPatch
from .names import LABEL_GROUP, LABEL_ROLE_ID, PodId, group_name, pod_name
from .observe import Group, Observation, ObservedPod

ROLE_ROLLING = RolloutStrategyType.ROLE_ROLLING_UPDATE
Rebuilding = set[int | InstanceKey]  # group ordinals and Role instances being rebuilt
INIT_RESTARTS_IGNORED = {  # faults: a restart of init containers only is not an error under this policy
    RecoveryPolicy.SERVING_GROUP_RECREATE: "servinggroup-recreate-ignores-init-restarts",
    RecoveryPolicy.ROLE_RECREATE: "role-recreate-ignores-init-restarts",
}


def recovery_policy(ms: ModelServing) -> RecoveryPolicy:
    """``spec.recoveryPolicy`` (``None`` under the no-recovery fault)."""
    if faults.active("no-recovery"):
        return RecoveryPolicy.NONE
    return ms.spec.recovery_policy


def recover(
    out: Plan, observed: Observed, seen: Observation, layout: Layout, policy: RecoveryPolicy, delete: Deleter
) -> Rebuilding:
    """Rebuild the scope of every error Pod past its grace period and every lost Pod; follow the
    Pods updated in place. Returns the groups and Role instances being rebuilt."""
    name = observed.ms.metadata.name
    rebuilding: Rebuilding = set()
    grace = dt.timedelta(seconds=observed.ms.spec.template.restart_grace_period_seconds)
    if faults.active("restart-grace-ignored"):
        grace = dt.timedelta(0)
    for group in seen.groups.values():
        for pod in [_deadline_view(observed.ms, p) for p in group.pods.values()]:
            if pod.in_place_since is not None and not pod.deleting:
                in_place_progress(out, observed, group, pod, policy, delete, rebuilding, seen.raw_by_name)
                continue  # its restarts are the update, not a failure
            if not pod.in_error:
                continue
            restarted = pod.phase != "Failed"  # in error by a restarted container
            if policy is RecoveryPolicy.NONE and restarted and not faults.active("none-recreates-restarted-pod"):
                continue  # None: a restarted container is the kubelet's business, as for a Deployment's Pod
            ignored = INIT_RESTARTS_IGNORED.get(policy, "")  # the fault of this policy, one per recreate policy
            if ignored and restarted and pod.restart_count == pod.init_restart_count and faults.active(ignored):
                continue  # the fault: a Pod only its init containers restarted in is not taken for an error
            since = pod.not_ready_since or observed.now  # observe_pod falls back to start/creation
            wait = (since + grace - observed.now).total_seconds()
            if wait > 0:
                out.requeue(wait)
                continue
            how = policy
            narrowed = (
                "servinggroup-recreate-ignores-restarts" if restarted else "servinggroup-recreate-ignores-failures"
            )
            if policy is RecoveryPolicy.SERVING_GROUP_RECREATE and faults.active(narrowed):
                how = RecoveryPolicy.ROLE_RECREATE  # the fault: only the Role instance is rebuilt
            rebuild(out, delete, group, pod.pid, how, f"pod {pod.name} failed", name, rebuilding)
        lost_policy = policy
        if policy is RecoveryPolicy.NONE and faults.active("none-rebuilds-deleted-pod-instance"):
            lost_policy = RecoveryPolicy.ROLE_RECREATE  # the fault: a lost Pod's Role instance is rebuilt
        for pid in layout.expected(group.ordinal):
            lost_name = pod_name(name, pid.ordinal, pid.role, pid.index, pid.k)
            if pid in group.pods or lost_name not in observed.lost or lost_policy is RecoveryPolicy.NONE:
                continue
            scope = (
                group.live_pods()
                if lost_policy is RecoveryPolicy.SERVING_GROUP_RECREATE
                else [p for p in group.live_pods() if (p.pid.role, p.pid.index) == (pid.role, pid.index)]
            )
            if scope:  # survivors to rebuild; an emptied instance is simply created again later
                rebuild(out, delete, group, pid, lost_policy, f"pod {lost_name} was deleted", name, rebuilding)
        if faults.active("terminating-service-rebuilds-instance"):
            _rebuild_behind_terminating_services(out, observed, group, delete, rebuilding)
    if faults.active("emptied-group-wedged") and policy is RecoveryPolicy.SERVING_GROUP_RECREATE:
        emptied = [p for o in range(observed.ms.spec.replicas) if o not in seen.groups for p in layout.expected(o)]
        rebuilding |= {p.ordinal for p in emptied if pod_name(name, p.ordinal, p.role, p.index, p.k) in observed.lost}
    return rebuilding


def _rebuild_behind_terminating_services(
    out: Plan, observed: Observed, group: Group, delete: Deleter, rebuilding: Rebuilding
) -> None:
    """Fault terminating-service-rebuilds-instance: rebuild (as RoleRecreate) every Role instance of
    ``group`` one of whose plugin-managed Services is terminating."""
    name = observed.ms.metadata.name
    for svc in observed.services or []:
        meta = svc["metadata"]
        labels = meta.get("labels") or {}
        if not meta.get("deletionTimestamp") or labels.get(LABEL_GROUP) != group_name(name, group.ordinal):
            continue
        hit = [p for p in group.live_pods() if p.pid.role_id == labels.get(LABEL_ROLE_ID)]
        if hit:
            why = f"service {meta.get('name')} is terminating"
            rebuild(out, delete, group, hit[0].pid, RecoveryPolicy.ROLE_RECREATE, why, name, rebuilding)


def rebuild(
    out: Plan,
    delete: Deleter,
    group: Group,
    pid: PodId,
    policy: RecoveryPolicy,
    why: str,
    ms: str,
    rebuilding: Rebuilding,
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
    if faults.active("role-recreate-rebuilds-group") and policy is RecoveryPolicy.ROLE_RECREATE:
        whole_group = True  # RoleRecreate rebuilds the whole ServingGroup, as ServingGroupRecreate
    scope = [p for p in group.pods.values() if whole_group or (p.pid.role, p.pid.index) == (pid.role, pid.index)]
    others = [p for p in scope if p.pid != pid]
    delete([p for p in others if not p.deleting], f"recovery: {why}")
    if not others:
        delete([p for p in scope if p.pid == pid], f"recovery: {why}")
    rebuilding.add(group.ordinal if whole_group else (group.ordinal, pid.role, pid.index))
    if any(not p.deleting for p in scope):
        what = f"ServingGroup {where}" if whole_group else f"role {pid.role_id} of ServingGroup {where}"
        out.events.append(Event("Normal", "RoleDeleting", f"recreating {what}: {why}"))


def in_place_progress(
    out: Plan,
    observed: Observed,
    group: Group,
    pod: ObservedPod,
    policy: RecoveryPolicy,
    delete: Deleter,
    rebuilding: Rebuilding,
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
    strategy = observed.ms.spec.rollout_strategy
    if faults.active("role-progress-deadline-ignored") and strategy and strategy.type is ROLE_ROLLING:
        return  # the fault: a Role instance updated in place has no deadline
    deadline = inplace.progress_deadline(observed.ms)
    due = pod.in_place_since + deadline
    if observed.now < due or faults.active("no-progress-deadline"):
        if not faults.active("no-progress-deadline"):
            out.requeue((due - observed.now).total_seconds())
        return
    seconds = int(deadline.total_seconds())
    message = f"pod {pod.name} is not ready on revision {pod.revision} {seconds}s after its in-place update started"
    out.reports.append(("ProgressDeadlineExceeded", message))
    how = _deadline_scope(policy)
    if how is not None:
        rebuild(out, delete, group, pod.pid, how, "in-place update passed its progress deadline",
                observed.ms.metadata.name, rebuilding)  # fmt: skip


def _deadline_scope(policy: RecoveryPolicy) -> RecoveryPolicy | None:
    """How a Pod past its progress deadline is rebuilt: by the RecoveryPolicy (None: not at all, only
    the report, as a Deployment past its deadline)."""
    if policy is RecoveryPolicy.SERVING_GROUP_RECREATE and faults.active("deadline-servinggroup-recreate-narrowed"):
        return RecoveryPolicy.ROLE_RECREATE  # the fault: only the Role instance
    if policy is RecoveryPolicy.ROLE_RECREATE and faults.active("deadline-role-recreate-pod-only"):
        return RecoveryPolicy.NONE  # the fault: rebuild's None scope, the unready Pod alone
    if policy is RecoveryPolicy.NONE:
        return RecoveryPolicy.ROLE_RECREATE if faults.active("deadline-none-recreates-role") else None
    return policy


def _deadline_view(ms: ModelServing, pod: ObservedPod) -> ObservedPod:
    """``pod``; under the fault progress-deadline-applies-to-recreate, a Pod not Running and Ready
    under updateMethod Recreate with progressDeadlineSeconds set is followed as if updated in place
    since it went not ready."""
    strategy = ms.spec.rollout_strategy
    if (
        faults.active("progress-deadline-applies-to-recreate")
        and strategy is not None
        and strategy.update_method is UpdateMethod.RECREATE
        and strategy.progress_deadline_seconds is not None
        and not pod.running_ready
        and not pod.deleting
        and pod.in_place_since is None
    ):
        return dataclasses.replace(pod, in_place_since=pod.not_ready_since)
    return pod
