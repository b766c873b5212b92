"""Scale: which ServingGroups should exist, and which Pods go because their group or Role shrank.

Why this module exists: it settles the set of groups a reconcile keeps. Under
ServingGroupRollingUpdate with outdated groups, one rollout step decides (:mod:`.group_rollout`:
recreate within maxUnavailable, create within maxSurge, the partition protects). Otherwise plain
scaling keeps ``spec.replicas`` groups: add the lowest missing ordinals, remove in
:mod:`.scaledown`'s order (updated groups outside the partition first; then not-ready first, then the
lowest summed pod-deletion-cost, then the highest ordinal, as for the instances of a Role). Inside every kept group, the
Pods the :class:`~.layout.Layout` no longer wants (a Role scaled down) are removed too.
"""

from __future__ import annotations

from dataclasses import dataclass

from .. import faults
from ..api.types import ModelServing
from . import group_rollout, rollout, scaledown
from .deletions import Deleter
from .fallback import InPlaceFindings
from .layout import Layout
from .model import Event, Plan
from .names import group_name
from .observe import Group


@dataclass(frozen=True)
class Scale:
    """The ServingGroups of this reconcile."""

    kept: set[int]  # ordinals to keep or create
    victims: list[Group]  # groups to remove
    protected: set[int]  # ordinals the partition protects
    step: rollout.Step | None  # the ServingGroupRollingUpdate step, when there is one


def _lowest_ordinal_first(unit: scaledown.Candidate) -> tuple[int, ...]:
    return (unit.id,)


def choose_groups(
    groups: dict[int, Group], replicas: int, layout: Layout, partition: int = 0
) -> tuple[set[int], list[Group]]:
    """(ordinals to keep or create, groups to remove), in :mod:`.scaledown`'s order: the groups
    outside the ``partition`` on a revision no protected group runs first."""
    candidates = [
        scaledown.Candidate(g.ordinal, g.ready(layout.expected(g.ordinal)), g.deletion_cost(), g.revision)
        for g in groups.values()
    ]
    key = _lowest_ordinal_first if faults.active("scale-down-lowest-ordinal") else scaledown.order
    if faults.active("scale-down-ignores-partition"):
        partition = 0  # the fault: the lowest-cost groups go even when the partition protects them
    kept, victims = scaledown.choose(candidates, replicas, key, partition)
    return set(kept), [groups[o] for o in victims]


def decide(
    ms: ModelServing,
    groups: dict[int, Group],
    layout: Layout,
    update_rev: str,
    findings: InPlaceFindings,
    delete: Deleter,
) -> Scale:
    """The groups to keep, remove and protect: by the rollout step when there is one, else by plain
    scaling."""
    budget = group_rollout.pace(ms) if group_rollout.enabled(ms) else None
    chosen = None
    if budget is not None:
        current = ms.status.current_revision if ms.status else None
        chosen = group_rollout.step(budget, groups, layout, update_rev, findings, delete, current)
    if chosen is None:
        kept, victims = choose_groups(groups, ms.spec.replicas, layout, budget.partition if budget else 0)
        if faults.active("scale-down-keeps-worker-pods"):  # the fault: only a removed group's entry Pods go
            victims = [Group(g.ordinal, {pid: p for pid, p in g.pods.items() if pid.is_entry}) for g in victims]
        # Partition protects the first N kept replicas in ascending ordinal order (not ordinals < N).
        protected = set(rollout.protected_ids(kept, budget.partition if budget else 0))
    else:
        victims = [groups[o] for o in chosen.remove]
        kept = (set(groups) - set(chosen.remove)) | set(chosen.create)
        protected = set(chosen.protected)
    return Scale(kept, victims, protected, chosen)


def remove_groups(out: Plan, ms: str, victims: list[Group], delete: Deleter) -> None:
    """Delete every live Pod of the groups scale-down removes."""
    for group in victims:
        delete(group.live_pods(), "scale-down")
        if group.live_pods():
            out.events.append(
                Event("Normal", "RoleDeleting", f"deleting ServingGroup {group_name(ms, group.ordinal)} (scale down)")
            )


def remove_surplus(
    out: Plan, ms: str, groups: dict[int, Group], kept: set[int], layout: Layout, delete: Deleter
) -> None:
    """Delete the Pods of kept groups that their layout no longer has (a Role scaled down)."""
    if faults.active("role-scale-down-ignored"):
        return  # the fault: a Role scaled down keeps its surplus instances
    for ordinal in sorted(kept):
        if ordinal not in groups:
            continue
        wanted = set(layout.expected(ordinal))
        surplus = [p for p in groups[ordinal].live_pods() if p.pid not in wanted]
        delete(surplus, "role scale-down")
        for rid in sorted({p.pid.role_id for p in surplus}):
            out.events.append(
                Event("Normal", "RoleDeleting", f"deleting role {rid} of ServingGroup {group_name(ms, ordinal)}")
            )
