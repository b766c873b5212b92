"""The eviction budget (``rolloutStrategy.evictionStrategy``) as one pure decision.

The validating webhook on ``pods/eviction`` (:mod:`kthena_ref.eviction`) reads the ModelServing,
its Pods and ControllerRevisions and the ledger of evictions it already approved, and asks
:func:`decide` whether one more Eviction fits. The rules (docs/reference-controller.md, "Eviction budget"):

- A Pod that is already terminating, that no ModelServing with an evictionStrategy owns, or whose
  eviction was already approved (a retry) may be evicted: that costs the budget nothing more.
- ``protectionLevel: ServingGroup``: after the eviction, the ready ServingGroups must still number
  at least ``minAvailable`` (a percentage of ``spec.replicas``, rounded up; unset means 1). A ready
  group has every expected Pod Running and Ready and none terminating (the planner's notion). The
  unit of disruption is the whole group: the target's group, and every group with a terminating
  Pod or an approved eviction, is not counted. Evicting a Pod of a group that is not ready does not
  lower the count, so it fits exactly when the budget is currently met (a PodDisruptionBudget's
  ``IfHealthyBudget``).
- ``protectionLevel: Role``: the same per Role named in ``roleMinAvailable`` (a percentage of
  ``role.replicas * spec.replicas`` Role instances, rounded up), counting ready Role instances
  across all groups; Roles absent from the map are unprotected. The unit of disruption is the
  target's Role instance, or its whole group when ``recoveryPolicy`` is ServingGroupRecreate
  (the controller then rebuilds every instance of the group, so every protected Role is checked).

:func:`prune` keeps the ledger honest: an approval is dropped once its Pod is seen terminating or
gone (the Pods themselves then carry the disruption), or when it expires (an approved eviction
the API server did not carry out, e.g. refused by a PodDisruptionBudget after us).

Why this module is in the planner: the budget must judge readiness exactly as the reconcile does,
so it reads Pods with :func:`.observe.observe_pod` and lays groups out with :class:`.layout.Layout`
(and, under RoleRollingUpdate, :func:`.role_rollout.role_instances`).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

from .. import faults, variations
from ..api.types import EvictionStrategySpec, ModelServing, ProtectionLevel, RecoveryPolicy, RolloutStrategyType
from . import intstr
from .layout import Layout
from .names import LABEL_NAME, group_name
from .observe import Group, ObservedPod, observe_pod
from .pods import revision_of
from .revisions import roles_by_revision
from .role_rollout import role_instances

Unit = tuple[int, str, int]  # a Role instance: (group ordinal, role, index)


@dataclass(frozen=True)
class Decision:
    allowed: bool
    message: str
    record: bool = False  # the caller adds the target to its ledger (a disruption that counts)


def owner_of(pod: Mapping[str, Any]) -> str | None:
    """The name of the ModelServing that controls ``pod`` (its controller reference), if any."""
    meta = pod.get("metadata") or {}
    for ref in meta.get("ownerReferences") or []:
        if (
            ref.get("kind") == "ModelServing"
            and str(ref.get("apiVersion", "")).startswith("workload.serving.volcano.sh/")
            and ref.get("controller")
        ):
            name = ref.get("name")
            return str(name) if name else None
    if variations.active("intermediate-owner"):  # owned through a Lease: the Pod's name label says which
        name = (meta.get("labels") or {}).get(LABEL_NAME)
        return str(name) if name else None
    return None


def prune(ledger: Mapping[str, float], pods: list[dict[str, Any]], now: float) -> dict[str, float]:
    """The approvals (Pod UID -> expiry, epoch seconds) still in flight: Pod present, not terminating."""
    live = {
        (p.get("metadata") or {}).get("uid") for p in pods if not (p.get("metadata") or {}).get("deletionTimestamp")
    }
    return {uid: expiry for uid, expiry in ledger.items() if uid in live and expiry > now}


def decide(
    ms: ModelServing | None,
    pods: list[dict[str, Any]],
    target: dict[str, Any],
    ledger: Collection[str] = (),
    revisions: list[dict[str, Any]] | None = None,
) -> Decision:
    """May ``target`` be evicted? ``pods`` are the ModelServing's Pods (as the API returns them),
    ``ledger`` the UIDs of its Pods whose eviction was approved and is not yet visible."""
    meta = target.get("metadata") or {}
    name = str(meta.get("name", ""))
    if meta.get("deletionTimestamp"):
        return Decision(True, f"pod {name} is already terminating")
    strategy = ms.spec.rollout_strategy.eviction_strategy if ms and ms.spec.rollout_strategy else None
    if ms is None or strategy is None:
        return Decision(True, f"pod {name} is not protected by an evictionStrategy")
    where = f"ModelServing {ms.metadata.namespace}/{ms.metadata.name}"
    me = observe_pod(target, ms.metadata.name)
    if me is None or (meta.get("labels") or {}).get(LABEL_NAME) != ms.metadata.name:
        return Decision(True, f"pod {name} is not a ServingGroup member of {where}")
    uid = me.uid
    if uid in ledger:
        return Decision(True, f"the eviction of pod {name} was already approved")

    try:
        return _decide(ms, strategy, me, name, where, pods, target, ledger, revisions or [])
    except intstr.IntOrStringError as exc:  # rejected at admission; the webhook may have been down
        return Decision(False, f"the evictionStrategy of {where} is invalid ({exc}): evictions are refused")


def _decide(
    ms: ModelServing,
    strategy: EvictionStrategySpec,
    me: ObservedPod,
    name: str,
    where: str,
    pods: list[dict[str, Any]],
    target: dict[str, Any],
    ledger: Collection[str],
    revisions: list[dict[str, Any]],
) -> Decision:
    groups, layout = _observe(ms, pods, target, revisions)
    disrupted = {p.uid for g in groups.values() for p in g.pods.values() if p.deleting or p.uid in ledger}

    group_level = strategy.protection_level is ProtectionLevel.SERVING_GROUP
    if faults.active("min-available-applied-under-role") and strategy.min_available is not None:
        group_level = True  # minAvailable judged at protectionLevel Role too (instead of roleMinAvailable)
    if group_level:
        replicas = ms.spec.replicas
        threshold = intstr.resolve(
            strategy.min_available,
            replicas,
            round_up=not faults.active("eviction-percent-rounds-down"),
            field="minAvailable",
            default=1,
        )
        ready = {
            o
            for o, g in groups.items()
            if g.ready(layout.expected(o)) and not any(p.uid in disrupted for p in g.pods.values())
        }
        after = len(ready - {me.pid.ordinal})
        need = threshold - 1 if faults.active("eviction-budget-off-by-one") else threshold
        if faults.active("eviction-budget-too-strict"):
            need = threshold + 1  # refuses the last Eviction the budget allows
        group = group_name(ms.metadata.name, me.pid.ordinal)
        if after < need:
            state = "" if me.pid.ordinal in ready else f"; ServingGroup {group} is not ready already"
            return Decision(
                False,
                f"evicting pod {name} would leave {after} ready ServingGroups of {where}, below "
                f"minAvailable {threshold} (evictionStrategy.minAvailable {_shown(strategy.min_available, 1)} "
                f"of {replicas} replicas){state}; the whole ServingGroup {group} counts as disrupted",
            )
        if not (faults.active("role-min-available-applied-under-servinggroup") and strategy.role_min_available):
            return Decision(True, f"evicting pod {name} leaves {after} ready ServingGroups of {where}", record=True)

    # protectionLevel Role
    if faults.active("role-eviction-budget-ignored"):
        return Decision(True, f"pod {name}: role budgets are not checked", record=True)
    whole_group = ms.spec.recovery_policy is RecoveryPolicy.SERVING_GROUP_RECREATE

    def units(pod: ObservedPod) -> set[Unit]:
        if whole_group:
            return {(pod.pid.ordinal, r.name, i) for r, i, _ in layout.instances(pod.pid.ordinal)}
        return {(pod.pid.ordinal, pod.pid.role, pod.pid.index)}

    gone: set[Unit] = set()
    for g in groups.values():
        for p in g.pods.values():
            if p.uid in disrupted:
                gone |= units(p)
    ready_units: set[Unit] = set()
    for o, g in groups.items():
        expected = layout.expected(o)
        for r, i, _ in layout.instances(o):
            pids = [pid for pid in expected if pid.role == r.name and pid.index == i]
            if all(pid in g.pods and g.pods[pid].running_ready for pid in pids) and (o, r.name, i) not in gone:
                ready_units.add((o, r.name, i))
    mine = units(me)
    budgets = strategy.role_min_available or {}
    roles = {r.name: r for r in ms.spec.template.roles}
    checked = sorted({role for _, role, _ in mine} & budgets.keys() & roles.keys())
    for role in checked:
        total = roles[role].replicas * ms.spec.replicas
        threshold = intstr.resolve(
            budgets[role],
            total,
            round_up=not faults.active("eviction-percent-rounds-down"),
            field=f"roleMinAvailable[{role}]",
        )
        after = sum(1 for u in ready_units - mine if u[1] == role)
        need = threshold - 1 if faults.active("eviction-budget-off-by-one") else threshold
        if after < need:
            return Decision(
                False,
                f"evicting pod {name} would leave {after} ready instances of role {role} of {where}, below "
                f"roleMinAvailable[{role}] {threshold} ({_shown(budgets[role], None)} of {total} role instances; "
                f"evictionStrategy protectionLevel Role)",
            )
    if not checked:
        return Decision(True, f"pod {name}: role {me.pid.role} of {where} is not protected by roleMinAvailable")
    return Decision(True, f"evicting pod {name} keeps roleMinAvailable of {', '.join(checked)} in {where}", record=True)


def _shown(value: int | str | None, default: int | None) -> str:
    return f"unset, meaning {default}" if value is None else str(value)


def _observe(
    ms: ModelServing, pods: list[dict[str, Any]], target: dict[str, Any], revisions: list[dict[str, Any]]
) -> tuple[dict[int, Group], Layout]:
    """The groups as the planner sees them, and the Pods each should have (its revision's layout)."""
    roles_at = roles_by_revision(ms, revisions)
    update_rev = revision_of(ms.spec.template.roles)

    def roles_for(rev: str) -> list[Any]:
        return roles_at.get(rev, ms.spec.template.roles)

    groups: dict[int, Group] = {}
    uids: set[str] = set()
    for raw in [*pods, target]:
        pod = observe_pod(raw, ms.metadata.name)
        if pod is None or pod.uid in uids:
            continue
        uids.add(pod.uid)
        group = groups.setdefault(pod.pid.ordinal, Group(pod.pid.ordinal))
        if pod.pid not in group.pods or group.pods[pod.pid].deleting:  # a replacement beside a terminating Pod
            group.pods[pod.pid] = pod

    def target_revision(ordinal: int) -> str:
        group = groups.get(ordinal)
        if group is not None and group.pods and group.revision in roles_at:
            return group.revision
        return update_rev

    layout = Layout(roles_for, target_revision, groups)
    strategy = ms.spec.rollout_strategy
    if strategy is not None and strategy.type is RolloutStrategyType.ROLE_ROLLING_UPDATE:
        for group in groups.values():
            layout.set(group.ordinal, role_instances(group, ms.spec.template.roles, roles_for, update_rev))
    return groups, layout
