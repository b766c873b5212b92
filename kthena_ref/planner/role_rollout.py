"""RoleRollingUpdate: inside every kept ServingGroup, each Role rolls its own instances.

Why this module exists: under ``RoleRollingUpdate`` groups only scale (:mod:`.scale`), and every
group rolls each Role's instances with the Role's own budget (``maxUnavailable``, ``maxSurge``,
``partition`` resolved against the Role's replicas), filtered by roleCoordination
(:mod:`.coordination`). Outdated instances are recreated or patched in place (:mod:`.fallback`);
unchanged Roles keep their Pods and only their revision label moves. The result is written into
the :class:`~.layout.Layout`: which instances each group has, each at its own revision.
Without a rollout step a Role keeps the instances it has, and a Role scaled down loses its
instances in :mod:`.scaledown`'s order (as ServingGroups do): updated ones outside its partition first.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable

from .. import faults
from ..api.types import ModelServing, RecoveryPolicy, Role, RoleCoordination, RolloutStrategyType
from . import coordination, inplace, intstr, rollout, scaledown
from .deletions import Deleter
from .fallback import InPlaceFindings, fallback_event
from .layout import Instance, Layout, defined
from .model import Event, InstanceKey, Plan, PodPatch
from .names import LABEL_REVISION, PodId, group_name
from .observe import Group, Observation, majority_revision
from .pods import role_template_hash
from .revisions import Revisions


def enabled(ms: ModelServing) -> bool:
    """RoleRollingUpdate is the strategy."""
    strategy = ms.spec.rollout_strategy
    if faults.active("coordination-applied-under-servinggroup-rolling") and strategy and strategy.role_coordination:
        return True  # roleCoordination's presence switches the rollout to Roles (and coordinates them)
    return strategy is not None and strategy.type is RolloutStrategyType.ROLE_ROLLING_UPDATE


def seed(layout: Layout, ms: ModelServing, groups: dict[int, Group], revs: Revisions) -> None:
    """Lay out every observed group as it stands, before any rollout step (nothing under
    another strategy)."""
    if not enabled(ms):
        return
    for group in groups.values():
        layout.set(group.ordinal, role_instances(group, ms.spec.template.roles, revs.roles_for, revs.update))


def role_instances(
    group: Group, roles: list[Role], roles_for: Callable[[str], list[Role]], update_rev: str
) -> list[Instance]:
    """RoleRollingUpdate without a rollout step: ``role.replicas`` instances of each Role, the ones
    the group has first (:func:`.scaledown.instance_ids`: updated ones outside the Role's partition
    go first), each at the revision its Pods have (a missing one at the update revision)."""
    by_instance = group.by_instance()
    out: list[Instance] = []
    for role in roles:
        candidates = [
            scaledown.instance(index, pods, defined(roles_for, majority_revision(pods), role).worker_replicas + 1)
            for (name, index), pods in by_instance.items()
            if name == role.name
        ]
        for index in scaledown.instance_ids(candidates, role.replicas, role_pace(role).partition):
            pods = by_instance.get((role.name, index))
            rev = majority_revision(pods) if pods else update_rev
            out.append((defined(roles_for, rev, role), index, rev))
    return out


def protected_instances(ms: ModelServing, groups: dict[int, Group], kept: set[int]) -> set[InstanceKey]:
    """The Role instances the Roles' partitions protect in the kept groups that exist (nothing
    under another strategy): the first ``partition`` of each Role's instances in ascending index
    order, a missing one counted at the lowest free index (where it comes back)."""
    out: set[InstanceKey] = set()
    if not enabled(ms):
        return out
    for ordinal in sorted(kept & set(groups)):
        indices = groups[ordinal].by_instance()
        for role in ms.spec.template.roles:
            present = {index for name, index in indices if name == role.name}
            ids = rollout.protected_ids(rollout.slots(present, role.replicas), role_pace(role).partition)
            out |= {(ordinal, role.name, index) for index in ids}
    return out


def role_pace(role: Role, servinggroups: int = 0) -> rollout.Pace:
    """RoleRollingUpdate's budget of one Role, resolved against the Role's replicas (``servinggroups``,
    spec.replicas, matters only to the role-percent-of-servinggroups fault)."""
    at = f"spec.template.roles[{role.name}]"
    unavailable, surge = role.max_unavailable, role.max_surge
    if faults.active("role-percent-of-servinggroups") and isinstance(unavailable, str) and servinggroups:
        unavailable = intstr.resolve(unavailable, servinggroups, round_up=False, field=f"{at}.maxUnavailable")
    if faults.active("role-unavailable-rounds-up") and isinstance(unavailable, str):
        unavailable = intstr.resolve(unavailable, role.replicas, round_up=True, field=f"{at}.maxUnavailable")
    if faults.active("role-surge-rounds-down") and isinstance(surge, str):
        surge = intstr.resolve(surge, role.replicas, round_up=False, field=f"{at}.maxSurge")
    if faults.active("role-default-max-surge-one") and surge is None:
        surge = 1
    try:
        budget, surge = intstr.update_budget(unavailable, surge, role.replicas, at)
        if faults.active("role-surge-ignored") and isinstance(role.max_surge, int):
            surge = 0
        if faults.active("role-unavailable-off-by-one") and isinstance(unavailable, int) and unavailable > 1:
            budget += 1  # (from 2 up: the default 1 stays right)
        part = intstr.partition(role.partition, role.replicas, f"{at}.partition")
        if faults.active("role-partition-percent-rounds-down") and isinstance(role.partition, str):
            part = intstr.resolve(role.partition, role.replicas, round_up=False, field=f"{at}.partition")
        if faults.active("role-partition-absolute-ignored") and isinstance(role.partition, int):
            part = 0  # only percentages protect instances
    except intstr.IntOrStringError:  # rejected at admission; never stall on it
        return rollout.Pace(role.replicas, 1)
    return rollout.Pace(role.replicas, budget, surge, part)


def roll(
    out: Plan,
    ms: ModelServing,
    seen: Observation,
    kept: set[int],
    layout: Layout,
    revs: Revisions,
    findings: InPlaceFindings,
    delete: Deleter,
    now: dt.datetime,
) -> set[InstanceKey]:
    """Roll the Roles of every kept group that exists; returns the instances patched in place
    (nothing under another strategy)."""
    patched: set[InstanceKey] = set()
    if not enabled(ms):
        return patched
    busy = False  # under the role-groups-one-at-a-time fault: a group before this one is still updating
    for ordinal in sorted(kept & set(seen.groups)):
        if busy and faults.active("role-groups-one-at-a-time"):
            continue
        group = seen.groups[ordinal]
        patched |= roll_group(out, ms, seen, group, layout, revs, findings, delete, now)
        busy = any(p.revision != revs.update or not p.running_ready for p in group.pods.values())
    return patched


def roll_group(
    out: Plan,
    ms: ModelServing,
    seen: Observation,
    group: Group,
    layout: Layout,
    revs: Revisions,
    findings: InPlaceFindings,
    delete: Deleter,
    now: dt.datetime,
) -> set[InstanceKey]:
    """RoleRollingUpdate in one ServingGroup: each Role rolls its instances within its own budget
    (and roleCoordination); unchanged Roles keep their Pods (only their revision label moves).
    Sets the group's layout; returns the instances patched in place."""
    where = f"ServingGroup {group_name(ms.metadata.name, group.ordinal)}"
    update_rev = revs.update
    by_instance = group.by_instance()
    roles = ms.spec.template.roles
    steps: dict[str, rollout.Step | None] = {}
    paces: dict[str, rollout.Pace] = {}
    units: dict[str, dict[int, rollout.Unit]] = {}
    instance_revs: dict[tuple[str, int], str] = {}
    for role in roles:
        want = role_template_hash(role)
        units[role.name] = {}
        for (role_name, index), pods in by_instance.items():
            if role_name != role.name:
                continue
            live = [p for p in pods if not delete.going(p)]
            rev = instance_revs[(role_name, index)] = majority_revision(pods)
            built = defined(revs.roles_for, rev, role)
            expected = [PodId(group.ordinal, role.name, index, k) for k in range(built.worker_replicas + 1)]
            if faults.active("role-unchanged-recreated"):
                outdated = any(p.revision != update_rev for p in pods)
            else:
                outdated = any(p.role_hash != want for p in pods)
            units[role.name][index] = rollout.Unit(
                id=index,
                outdated=outdated,
                ready=bool(live) and len(live) == len(pods) and group.ready(expected),
                terminating=not live,
                in_place=findings.in_place(rev, role.name, pods),
            )
        paces[role.name] = role_pace(role, ms.spec.replicas)
        steps[role.name] = rollout.step(list(units[role.name].values()), paces[role.name])
    strategy = ms.spec.rollout_strategy
    coordinated = strategy.role_coordination if strategy else None
    if faults.active("coordination-only-first-group") and group.ordinal > 0:
        coordinated = None  # roleCoordination holds back starts in ServingGroup 0 only
    if coordinated is not None and not faults.active("coordination-ignored"):
        coordinate(coordinated, roles, units, steps, paces)

    recreating = [f"{name}-{i}" for name, step in steps.items() for i in (step.recreate if step else [])]
    whole_group = ms.spec.recovery_policy is RecoveryPolicy.SERVING_GROUP_RECREATE
    if recreating and whole_group and not faults.active("role-rolling-ignores-servinggroup-recreate"):
        # RolloutStrategyType: under ServingGroupRecreate, deleting an outdated Role recreates its entire
        # ServingGroup; it is built again at the update revision once every Pod is gone.
        delete(group.live_pods(), "rolling update")
        why = f"outdated role instances {', '.join(recreating)} (recoveryPolicy ServingGroupRecreate)"
        out.events.append(Event("Normal", "RoleDeleting", f"recreating {where} at revision {update_rev}: {why}"))
        return set()

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
                found = findings.group(instance_revs[(role.name, index)], role.name, by_instance[(role.name, index)])
                out.events.append(fallback_event(what, found))
        for index in step.patch if step else []:
            patched.add((group.ordinal, role.name, index))
            for pod in by_instance[(role.name, index)]:
                if not pod.deleting:
                    body = inplace.pod_patch(seen.raw_by_name[pod.name], role, pod.pid, update_rev, now)
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
        if step is None:  # a terminating instance is not ready: the first to go, so no other goes with it
            cost = {i: sum(p.deletion_cost for p in by_instance[(role.name, i)]) for i in present}
            candidates = [
                scaledown.Candidate(i, u.ready, cost[i], scaledown.template_of(by_instance[(role.name, i)]))
                for i, u in present.items()
            ]
            ids = set(scaledown.instance_ids(candidates, role.replicas, paces[role.name].partition))
        else:
            ids = (set(present) - set(step.remove)) | set(step.create)
        for index in sorted(ids):
            if index in present:
                rev = instance_revs[(role.name, index)]
            elif revs.holds_back((group.ordinal, role.name, index)):
                rev = revs.current  # a protected instance comes back as it was
                if faults.active("role-partition-refilled-at-update"):
                    rev = update_rev
            else:
                rev = update_rev
            instances.append((defined(revs.roles_for, rev, role), index, rev))
    layout.set(group.ordinal, instances)
    return patched


def coordinate(
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
        formal, chosen = role.replicas, steps[role.name]  # the formal replica count: protected capacity included
        if faults.active("skew-ratio-excludes-partition") and chosen is not None:
            formal -= len(chosen.protected)
        progress[role.name] = coordination.RoleProgress(
            replicas=formal,
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
