"""One AutoscalingPolicy's reconcile, pure: what to fetch, then what to write.

The shell (:mod:`.loop`) asks :func:`units` which scalable units the policy has and which metrics
each needs from which source, fetches them, and hands the values to :func:`reconcile`, which runs
the decision (:mod:`.decision`) per unit, the ratio constraint (:mod:`.ratio`) for a disaggregated
target and the cost-ordered split (:mod:`.heterogeneous`) for a heterogeneous one, and returns the
replicas to write per ModelServing, the policy's status and the memory to keep for the next loop.
Nothing here talks to the API server or to a metrics backend.

Readings (docs/autoscaling-readings.md):

- A metric listed in the policy but with no ``metricSources`` entry for the unit is missing every
  loop (the spec: "Missing keys are treated as missing metrics for that reconcile loop").
- A fixed Role (``minReplicas == maxReplicas``) needs no metrics: it is kept at that size and
  nothing is fetched for it (the spec's RoleScalingParam.metrics).
- A heterogeneous target is one unit for the decision: its current replicas are the sum over the
  params, its bounds the sums of theirs, a metric's value the sum of the params' values (missing
  when any param's value is missing); the decided total is split by cost.
- ``desiredReplicas`` is what the metrics ask for within the unit's bounds, before the behaviour's
  step limits and before the ratio (the spec: "computed from metrics, before ratio enforcement");
  for a heterogeneous param it is that param's share of the split.
- A target ModelServing (or Role) that does not exist is a problem reported to the user; the other
  units of the policy are still reconciled, and nothing is written for the missing one.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from .. import faults
from ..api.autoscaling import (
    TARGET_KIND,
    AutoscalingPolicySpec,
    Metric,
    MetricSource,
    PanicPolicy,
    PodMetricSource,
    StablePolicy,
    quantity,
    supported_target_kind,
)
from ..planner.names import LABEL_ENTRY, LABEL_ROLE
from . import heterogeneous, ratio
from .decision import Decision, Memory, Mode, Policy, decide
from .metrics import selector_matches


@dataclass(frozen=True)
class Fetch:
    """One metric of one unit and where to read it."""

    metric: str
    source: MetricSource
    target: str  # the ModelServing whose Pods a pod source scrapes
    role: str | None  # only that Role's Pods (disaggregated)


@dataclass(frozen=True)
class Unit:
    """A scalable unit: a whole ModelServing, one Role of it, or one param of a heterogeneous target."""

    key: str  # "" (homogeneous), the Role's name, or the param's ModelServing name
    target: str  # ModelServing name
    role: str | None
    min_replicas: int
    max_replicas: int
    targets: Mapping[str, Decimal]  # metric name -> targetValue
    fetches: tuple[Fetch, ...]
    cost: int = 0  # heterogeneous params only

    @property
    def fixed(self) -> bool:
        return self.min_replicas == self.max_replicas


@dataclass(frozen=True)
class Observed:
    """The target ModelServings as read: ``spec.replicas`` and each Role's ``replicas`` by name."""

    replicas: Mapping[str, int]  # ModelServing name -> spec.replicas (absent: not found)
    roles: Mapping[str, Mapping[str, int]] = field(default_factory=dict)  # ModelServing -> Role -> replicas


@dataclass(frozen=True)
class Write:
    """Replicas to write to one ModelServing: the whole (``role`` None) or one Role."""

    target: str
    role: str | None
    replicas: int


@dataclass(frozen=True)
class Outcome:
    writes: tuple[Write, ...]
    status: dict[str, Any]  # the policy's status, in API field names
    memory: dict[str, Memory]  # unit key -> memory
    problems: tuple[str, ...]  # what the user should be told (target or Role not found)


def _metrics(items: list[Metric] | None) -> dict[str, Decimal]:
    return {m.name: quantity(m.target_value) for m in items or []}


def _fetches(
    names: Mapping[str, Decimal], sources: Mapping[str, MetricSource] | None, target: str, role: str | None
) -> tuple[Fetch, ...]:
    return tuple(Fetch(n, sources[n], target, role) for n in names if sources and n in sources)


def units(spec: AutoscalingPolicySpec) -> tuple[Unit, ...]:
    """The policy's scalable units, in a stable order (Roles by name, params as listed)."""
    metrics = _metrics(spec.metrics)
    if spec.homogeneous_target is not None:
        h = spec.homogeneous_target
        name = h.target.target_ref.name or ""
        return (Unit("", name, None, h.min_replicas, h.max_replicas, metrics,
                     _fetches(metrics, h.target.metric_sources, name, None)),)  # fmt: skip
    if spec.heterogeneous_target is not None:
        out = []
        for p in spec.heterogeneous_target.params:
            name = p.target.target_ref.name or ""
            fetches = _fetches(metrics, p.target.metric_sources, name, None)
            out.append(Unit(name, name, None, p.min_replicas, p.max_replicas, metrics, fetches, p.cost))
        return tuple(out)
    if spec.disaggregated_target is not None:
        d = spec.disaggregated_target
        name = d.target_ref.name or ""
        out = []
        for role, param in sorted(d.roles.items()):
            overrides = bool(param.metrics) and not faults.active("autoscaler-role-metrics-ignored")
            own = _metrics(param.metrics) if overrides else metrics
            if param.min_replicas == param.max_replicas:
                own = {}
            fetches = _fetches(own, param.metric_sources, name, role)
            out.append(Unit(role, name, role, param.min_replicas, param.max_replicas, own, fetches))
        return tuple(out)
    return ()


def _policy(spec: AutoscalingPolicySpec, unit: Unit, low: int, high: int) -> Policy:
    behavior = spec.behavior
    up = behavior.scale_up if behavior else None
    return Policy(
        min_replicas=low,
        max_replicas=high,
        targets=unit.targets,
        tolerance_percent=spec.tolerance_percent,
        scale_up=(up.stable_policy if up and up.stable_policy else StablePolicy()),
        scale_down=(behavior.scale_down if behavior and behavior.scale_down else StablePolicy()),
        panic=(up.panic_policy if up and up.panic_policy else PanicPolicy()),
    )


def _status(name: str, current: int, decision: Decision) -> dict[str, Any]:
    return {"name": name, "currentReplicas": current, "desiredReplicas": decision.desired, "mode": str(decision.mode)}


def reconcile(
    spec: AutoscalingPolicySpec,
    generation: int,
    observed: Observed,
    values: Mapping[str, Mapping[str, Decimal]],
    now: float,
    memory: Mapping[str, Memory],
) -> Outcome:
    """This loop's writes and status. ``values``: unit key -> metric -> value fetched this loop."""
    all_units = units(spec)
    status: dict[str, Any] = {"observedGeneration": generation}
    unsupported = [] if faults.active("autoscaling-ignores-target-kind") else _unsupported_kinds(spec)
    if unsupported:  # spec, Target.targetRef: "Currently supported kinds: ModelServing"
        return Outcome((), status, dict(memory), tuple(unsupported))
    if spec.homogeneous_target is not None:
        return _homogeneous(spec, all_units[0], observed, values, now, memory, status)
    if spec.heterogeneous_target is not None:
        return _heterogeneous(spec, all_units, observed, values, now, memory, status)
    if spec.disaggregated_target is not None:
        return _disaggregated(spec, all_units, observed, values, now, memory, status)
    return Outcome((), status, {}, ("the policy has no target",))


def _unsupported_kinds(spec: AutoscalingPolicySpec) -> list[str]:
    """A problem per targetRef naming a kind other than ModelServing (empty: the default, ModelServing)."""
    refs = []
    if spec.homogeneous_target is not None:
        refs.append(spec.homogeneous_target.target.target_ref)
    if spec.heterogeneous_target is not None:
        refs += [p.target.target_ref for p in spec.heterogeneous_target.params]
    if spec.disaggregated_target is not None:
        refs.append(spec.disaggregated_target.target_ref)
    return [
        f"targetRef {ref.name!r} is a {ref.kind}, which is not supported: only {TARGET_KIND} targets are scaled"
        for ref in refs
        if not supported_target_kind(ref.kind)
    ]


def _homogeneous(
    spec: AutoscalingPolicySpec,
    unit: Unit,
    observed: Observed,
    values: Mapping[str, Mapping[str, Decimal]],
    now: float,
    memory: Mapping[str, Memory],
    status: dict[str, Any],
) -> Outcome:
    current = observed.replicas.get(unit.target)
    if current is None:
        return Outcome((), status, dict(memory), (f"target ModelServing {unit.target!r} not found",))
    policy = _policy(spec, unit, unit.min_replicas, unit.max_replicas)
    decision = decide(current, policy, values.get(unit.key, {}), now, memory.get(unit.key, Memory()))
    status["homogeneousStatus"] = _status(unit.target, current, decision)
    writes = (Write(unit.target, None, decision.replicas),) if decision.replicas != current else ()
    return Outcome(writes, status, {unit.key: decision.memory}, ())


def _heterogeneous(
    spec: AutoscalingPolicySpec,
    params: tuple[Unit, ...],
    observed: Observed,
    values: Mapping[str, Mapping[str, Decimal]],
    now: float,
    memory: Mapping[str, Memory],
    status: dict[str, Any],
) -> Outcome:
    assert spec.heterogeneous_target is not None
    missing = [u.target for u in params if u.target not in observed.replicas]
    if missing:
        return Outcome((), status, dict(memory), tuple(f"target ModelServing {m!r} not found" for m in missing))
    currents = [observed.replicas[u.target] for u in params]
    shares = [heterogeneous.Param(u.target, u.cost, u.min_replicas, u.max_replicas) for u in params]
    agg = heterogeneous.aggregate(shares, currents)
    totals: dict[str, Decimal] = {}
    for name in params[0].targets:
        seen = [values.get(u.key, {}).get(name) for u in params]
        if all(v is not None for v in seen):
            totals[name] = sum((v for v in seen if v is not None), Decimal(0))
    unit = Unit("*", "", None, agg.min_replicas, agg.max_replicas, params[0].targets, ())
    policy = _policy(spec, unit, agg.min_replicas, agg.max_replicas)
    decision = decide(agg.current, policy, totals, now, memory.get("*", Memory()))
    rate = spec.heterogeneous_target.cost_expansion_rate_percent
    split = heterogeneous.distribute(decision.replicas, shares, rate)
    wanted = heterogeneous.distribute(decision.desired, shares, rate)
    status["heterogeneousStatus"] = [
        {"name": u.target, "currentReplicas": c, "desiredReplicas": w, "mode": str(decision.mode)}
        for u, c, w in zip(params, currents, wanted, strict=True)
    ]
    writes = tuple(Write(u.target, None, r) for u, c, r in zip(params, currents, split, strict=True) if r != c)
    return Outcome(writes, status, {"*": decision.memory}, ())


def _disaggregated(
    spec: AutoscalingPolicySpec,
    roles: tuple[Unit, ...],
    observed: Observed,
    values: Mapping[str, Mapping[str, Decimal]],
    now: float,
    memory: Mapping[str, Memory],
    status: dict[str, Any],
) -> Outcome:
    d = spec.disaggregated_target
    assert d is not None
    target = roles[0].target if roles else ""
    if target not in observed.replicas:
        return Outcome((), status, dict(memory), (f"target ModelServing {target!r} not found",))
    present = observed.roles.get(target, {})
    problems = tuple(f"Role {u.role!r} not found in ModelServing {target!r}" for u in roles if u.key not in present)
    decided: dict[str, tuple[int, Decision]] = {}
    kept: dict[str, Memory] = {}
    for unit in roles:
        if unit.key not in present:
            continue
        if unit.fixed and faults.active("autoscaler-fixed-role-ignored"):
            continue
        current = present[unit.key]
        if unit.fixed:
            decision = Decision(unit.min_replicas, unit.min_replicas, Mode.STABLE, "fixed Role", Memory())
        else:
            policy = _policy(spec, unit, unit.min_replicas, unit.max_replicas)
            decision = decide(current, policy, values.get(unit.key, {}), now, memory.get(unit.key, Memory()))
        decided[unit.key] = (current, decision)
        kept[unit.key] = decision.memory
    final = {key: decision.replicas for key, (_, decision) in decided.items()}
    adjusted = False
    ratio_status: dict[str, Any] | None = None
    c = d.ratio_constraint
    if c is not None and c.numerator_role in final and c.denominator_role in final:
        by_key = {u.key: u for u in roles}
        num, den = by_key[c.numerator_role], by_key[c.denominator_role]
        result = ratio.enforce(
            final[num.key],
            final[den.key],
            quantity(c.min_ratio),
            quantity(c.max_ratio),
            ratio.Bounds(num.min_replicas, num.max_replicas),
            ratio.Bounds(den.min_replicas, den.max_replicas),
        )
        if faults.active("autoscaler-ratio-ignored"):  # a range every pair is in, [0, numerator]: nothing changes
            pinned = ratio.Bounds(final[num.key], final[num.key]), ratio.Bounds(final[den.key], final[den.key])
            result = ratio.enforce(final[num.key], final[den.key], Decimal(0), Decimal(final[num.key]), *pinned)
        final[num.key], final[den.key] = result.numerator, result.denominator
        adjusted = result.adjusted
        if faults.active("autoscaler-ratio-adjusted-unreported"):
            adjusted = False
        ratio_status = {"numeratorRole": num.key, "denominatorRole": den.key, "currentRatio": result.current_ratio}
        if not result.satisfied:
            problems += (
                f"ratio {c.numerator_role}/{c.denominator_role} cannot be kept in [{c.min_ratio}, {c.max_ratio}] "
                "within the Roles' replica bounds",
            )
    roles_status = [_status(key, current, decision) for key, (current, decision) in decided.items()]
    if faults.active("autoscaler-desired-after-ratio"):  # the fault: desiredReplicas after ratio enforcement
        roles_status = [{**entry, "desiredReplicas": final[entry["name"]]} for entry in roles_status]
    disaggregated: dict[str, Any] = {
        "roles": roles_status,
        "ratioAdjusted": adjusted,
    }
    if ratio_status is not None:
        disaggregated["ratioStatus"] = ratio_status
    status["disaggregatedStatus"] = disaggregated
    writes = tuple(Write(target, key, final[key]) for key, (current, _) in decided.items() if final[key] != current)
    if faults.active("autoscaler-roles-scale-whole"):  # the largest Role's decision, as spec.replicas
        whole = max(final.values(), default=observed.replicas[target])
        writes = (Write(target, None, whole),) if whole != observed.replicas[target] else ()
    return Outcome(writes, status, kept, problems)


def pods_to_scrape(pods: list[dict[str, Any]], role: str | None, source: PodMetricSource) -> list[tuple[str, str]]:
    """``(name, podIP)`` of the Pods a pod source reads for one unit, by name.

    Reading (A15): the unit's Pods (the target's; only the Role's for a disaggregated unit) that are
    Running, Ready, not being deleted and have an IP; with a ``labelSelector``, those matching it,
    otherwise the entry Pods only (one per Role instance: the Pod that serves, as upstream).
    """
    chosen = []
    for pod in pods:
        meta, status = pod.get("metadata") or {}, pod.get("status") or {}
        labels = meta.get("labels") or {}
        if role is not None and labels.get(LABEL_ROLE) != role:
            continue
        if source.label_selector is not None:
            if not selector_matches(labels, source.label_selector):
                continue
        elif labels.get(LABEL_ENTRY) != "true":
            continue
        ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or [])
        if meta.get("deletionTimestamp") or status.get("phase") != "Running" or not ready or not status.get("podIP"):
            continue
        chosen.append((str(meta.get("name", "")), str(status["podIP"])))
    return sorted(chosen)
