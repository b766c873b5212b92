"""ServingGroupRollingUpdate: the rollout's budget over ServingGroups, and acting on one step.

Why this module exists: it wires the generic rollout arithmetic (:func:`.rollout.step`) to
ServingGroups. :func:`pace` resolves ``rollingUpdateConfiguration`` against ``spec.replicas``,
:func:`step` sees every observed group as a :class:`.rollout.Unit` (which groups to keep, remove
and create is then settled by :mod:`.scale`), and :func:`apply` recreates the outdated groups the
step chose, or patches them in place when they are eligible (:mod:`.fallback`).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from typing import Any

from .. import faults
from ..api.types import ModelServing
from . import inplace, intstr, role_rollout, rollout
from .deletions import Deleter
from .fallback import InPlaceFindings, fallback_event
from .layout import Layout
from .model import Event, Plan, PodPatch
from .names import group_name
from .observe import Group


def enabled(ms: ModelServing) -> bool:
    """ServingGroupRollingUpdate is the strategy (it is the default): whenever RoleRollingUpdate is not."""
    return not role_rollout.enabled(ms)


def pace(ms: ModelServing) -> rollout.Pace:
    """ServingGroupRollingUpdate's budget, resolved against spec.replicas."""
    spec = ms.spec
    rolling = spec.rollout_strategy.rolling_update_configuration if spec.rollout_strategy else None
    at = "rolloutStrategy.rollingUpdateConfiguration"
    unavailable = rolling.max_unavailable if rolling else None  # unset: intstr's default (1)
    if faults.active("group-rollout-uses-role-settings") and spec.template.roles[0].max_unavailable != 1:
        unavailable = spec.template.roles[0].max_unavailable  # a Role's own setting (not its default 1)
    if faults.active("unavailable-rounds-up") and isinstance(unavailable, str):
        unavailable = intstr.resolve(unavailable, spec.replicas, round_up=True, field=f"{at}.maxUnavailable")
    budget, surge = intstr.update_budget(unavailable, rolling.max_surge if rolling else None, spec.replicas, at)
    if faults.active("max-unavailable-off-by-one") and isinstance(unavailable, int) and unavailable > 1:
        budget += 1  # (from 2 up: the default 1 stays right)
    part = intstr.partition(rolling.partition if rolling else None, spec.replicas, f"{at}.partition")
    if faults.active("role-partition-honoured-under-servinggroup") and not (rolling and rolling.partition):
        part = intstr.partition(spec.template.roles[0].partition, spec.replicas, f"{at}.partition")
    if faults.active("surge-ignored"):
        surge = 0
    if faults.active("partition-ignored"):
        part = 0
    return rollout.Pace(spec.replicas, budget, surge, part)


def unit(group: Group, update_rev: str, layout: Layout, delete: Deleter, *, in_place: bool = False) -> rollout.Unit:
    """One ServingGroup as a rollout unit (Pods this plan deletes count as gone)."""
    live = [p for p in group.pods.values() if not delete.going(p)]
    return rollout.Unit(
        id=group.ordinal,
        outdated=group.revision != update_rev,
        ready=bool(live) and len(live) == len(group.pods) and group.ready(layout.expected(group.ordinal)),
        terminating=not live,
        in_place=in_place,
    )


def step(
    budget: rollout.Pace,
    groups: dict[int, Group],
    layout: Layout,
    update_rev: str,
    findings: InPlaceFindings,
    delete: Deleter,
    current: str | None = None,
) -> rollout.Step | None:
    """This reconcile's rollout step over the observed groups (None: nothing is outdated);
    ``current`` (status.currentRevision) matters only to the retarget-ignored fault."""
    if faults.active("plugin-fallback-ignores-budget") and findings.blocked_by_plugins:
        budget = rollout.Pace(budget.replicas, budget.replicas, budget.max_surge, budget.partition)  # all at once
    units = [
        unit(g, update_rev, layout, delete, in_place=findings.in_place(g.revision, pods=g.pods.values()))
        for g in groups.values()
        if g.pods
    ]
    if faults.active("retarget-ignored") and current:  # a group already moved off currentRevision counts as done
        units = [dataclasses.replace(u, outdated=False) if groups[u.id].revision != current else u for u in units]
    return rollout.step(units, budget)


def apply(
    out: Plan,
    ms: ModelServing,
    chosen: rollout.Step | None,
    groups: dict[int, Group],
    update_rev: str,
    findings: InPlaceFindings,
    delete: Deleter,
    raw_by_name: dict[str, dict[str, Any]],
    now: dt.datetime,
) -> set[int]:
    """Recreate the outdated groups ``chosen`` picked, and patch in place the ones it may; returns
    the ordinals patched (their missing Pods wait until they have moved)."""
    name = ms.metadata.name
    patched: set[int] = set()
    for ordinal in chosen.recreate if chosen else []:
        group = groups[ordinal]
        delete(group.live_pods(), "rolling update")
        where = f"ServingGroup {group_name(name, ordinal)}"
        out.events.append(Event("Normal", "RoleDeleting", f"recreating {where} at revision {update_rev}"))
        if findings.enabled and not faults.active("no-fallback-event"):
            out.events.append(fallback_event(where, findings.group(group.revision, pods=group.pods.values())))
    for ordinal in chosen.patch if chosen else []:
        patched.add(ordinal)
        group = groups[ordinal]
        for pod in group.live_pods():
            role = next(r for r in ms.spec.template.roles if r.name == pod.pid.role)
            body = inplace.pod_patch(raw_by_name[pod.name], role, pod.pid, update_rev, now)
            out.patch_pods.append(PodPatch(pod.name, pod.uid, pod.resource_version, body, "in-place update"))
        out.events.append(
            Event(
                "Normal",
                "InPlaceUpdating",
                f"updating ServingGroup {group_name(name, ordinal)} in place to revision {update_rev}",
            )
        )
    return patched
