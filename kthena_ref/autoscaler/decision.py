"""The autoscaler's decision for one scalable unit (a whole ModelServing, or one Role): pure.

Input: the replicas observed now, the policy's bounds, targets, tolerance and behaviour, the metric
values fetched this loop (a metric absent from ``values`` is missing this loop), the time, and the
:class:`Memory` the previous decision returned. Output: a :class:`Decision` with the replicas to
write, the mode and the new memory. The shell that fetches metrics and writes replicas never
decides anything.

Readings where the spec is silent (docs/autoscaling-readings.md says why; the suite accepts other
choices):

- A metric's value is the unit's total (summed over its Pods, or what the Prometheus query
  returns); the replicas it asks for are ``value / targetValue`` (``target_replicas`` of the
  tolerance formula); with several metrics, the largest wins (the busiest signal sizes the unit).
- Stable mode uses each metric averaged over the last :data:`STABLE_WINDOW_SECONDS` ("average metric
  values over time windows"); panic uses this loop's value ("sudden traffic spikes").
- Panic starts when a metric's value this loop exceeds ``panicThresholdPercent`` of what the current
  replicas are sized for (``value / targetValue > current * threshold / 100``), lasts
  :data:`PANIC_HOLD_SECONDS` after the last such loop, only scales up, at most ``percent`` of the
  current instances more than the current count.
- A stable policy limits each step relative to the replicas at the start of the last
  :data:`PERIOD_SECONDS`: ``instances`` absolutely, ``percent`` relatively; ``Or`` takes the larger
  step (either requirement met), ``And`` the smaller (both met).
- Tolerance exactly as the spec writes it: scale only when
  ``|current - target| >= current * tolerancePercent / 100``.
- No metric value this loop: nothing changes (replicas, mode and memory kept), except that replicas
  outside ``[minReplicas, maxReplicas]`` are brought to the nearest bound.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from decimal import Decimal

from .. import faults
from ..api.autoscaling import PanicPolicy, SelectPolicy, StablePolicy

STABLE_WINDOW_SECONDS = 60.0
PERIOD_SECONDS = 15.0
PANIC_HOLD_SECONDS = 60.0


class Mode(enum.StrEnum):
    STABLE = "Stable"
    PANIC = "Panic"


@dataclass(frozen=True)
class Policy:
    """What the decision needs of an AutoscalingPolicy for one unit (defaults are the API's; the
    behaviour's parts are the API types themselves)."""

    min_replicas: int
    max_replicas: int
    targets: Mapping[str, Decimal]  # metric name -> targetValue
    tolerance_percent: int = 10
    scale_up: StablePolicy = field(default_factory=StablePolicy)
    scale_down: StablePolicy = field(default_factory=StablePolicy)
    panic: PanicPolicy | None = field(default_factory=PanicPolicy)


@dataclass(frozen=True)
class Memory:
    """What a decision keeps for the next: metric samples of the stable window, the replicas of the
    last period, the end of panic."""

    samples: tuple[tuple[float, tuple[tuple[str, Decimal], ...]], ...] = ()
    replicas: tuple[tuple[float, int], ...] = ()
    panic_until: float | None = None


@dataclass(frozen=True)
class Decision:
    replicas: int  # what to write
    desired: int  # what the metrics ask for, within bounds, before the behaviour's limits
    mode: Mode
    reason: str
    memory: Memory


def decide(current: int, policy: Policy, values: Mapping[str, Decimal], now: float, memory: Memory) -> Decision:
    """The replicas for one unit this loop (see the module docstring for the rules)."""
    low, high = policy.min_replicas, policy.max_replicas
    known = {name: value for name, value in values.items() if name in policy.targets}
    if faults.active("autoscaler-missing-metric-as-zero"):
        known = {name: known.get(name, Decimal(0)) for name in policy.targets}
    if not known:
        bounded = min(max(current, low), high)
        mode = _mode(memory, now)
        why = "no metric value this loop" + ("" if bounded == current else f": replicas brought into [{low}, {high}]")
        return Decision(bounded, bounded, mode, why, memory)
    samples = (*((t, s) for t, s in memory.samples if t > now - STABLE_WINDOW_SECONDS), (now, tuple(known.items())))
    stable_need = max(_average(samples, name) / policy.targets[name] for name in known)
    instant_need = max(known[name] / policy.targets[name] for name in known)
    panic_until = memory.panic_until
    if policy.panic is not None and _panics(current, instant_need, policy.panic):
        panic_until = now + PANIC_HOLD_SECONDS
    mode = Mode.PANIC if panic_until is not None and now < panic_until else Mode.STABLE
    need = instant_need if mode is Mode.PANIC else stable_need
    if faults.active("autoscaler-undersizes"):
        need -= 1  # one replica fewer than value / targetValue rounded up (the bounds below still hold)
    if faults.active("autoscaler-exceeds-max"):
        high = max(high, math.ceil(need))
    if faults.active("autoscaler-ignores-min") and math.ceil(need) < current:
        low = 0
    desired = min(max(math.ceil(need), low), high)
    history = tuple((t, r) for t, r in memory.replicas if t > now - PERIOD_SECONDS)
    if abs(Decimal(current) - need) < Decimal(current) * policy.tolerance_percent / 100 and low <= current <= high:
        replicas, why = current, f"within tolerance ({policy.tolerance_percent}%): {current} replicas for {need:.4g}"
    elif mode is Mode.PANIC:
        replicas, why = _panic_step(current, desired, policy.panic or PanicPolicy()), "panic"
    elif desired > current:
        replicas, why = max(current, min(desired, _up_limit(current, history, policy.scale_up))), "scale up"
    elif desired < current:
        replicas, why = min(current, max(desired, _down_limit(current, history, policy.scale_down))), "scale down"
        if faults.active("autoscaler-never-scales-down"):
            replicas = current
    else:
        replicas, why = current, "at the desired replicas"
    replicas = min(max(replicas, low), high)
    kept = (*history, (now, replicas)) if replicas != current else history
    new = replace(memory, samples=samples, replicas=kept, panic_until=panic_until)
    return Decision(replicas, desired, mode, why, new)


def _mode(memory: Memory, now: float) -> Mode:
    return Mode.PANIC if memory.panic_until is not None and now < memory.panic_until else Mode.STABLE


def _average(samples: tuple[tuple[float, tuple[tuple[str, Decimal], ...]], ...], name: str) -> Decimal:
    seen = [value for _, sample in samples for metric, value in sample if metric == name]
    return sum(seen, Decimal(0)) / len(seen)


def _panics(current: int, need: Decimal, panic: PanicPolicy) -> bool:
    """A metric exceeds ``threshold_percent`` of what ``current`` replicas are sized for."""
    if faults.active("autoscaler-never-panics"):
        return False
    if current == 0:
        return need > 0  # any load exceeds every percentage of nothing
    return need * 100 > Decimal(current) * panic.panic_threshold_percent


def _panic_step(current: int, desired: int, panic: PanicPolicy) -> int:
    """Panic only scales up, by at most ``percent`` of the current instances (from 0: straight to desired)."""
    if current == 0:
        return desired
    return max(current, min(desired, current + current * panic.percent // 100))


def _up_limit(current: int, history: tuple[tuple[float, int], ...], policy: StablePolicy) -> int:
    base = min([current, *(r for _, r in history)])
    steps = (base + policy.instances, base + base * policy.percent // 100)
    return max(steps) if policy.select_policy is SelectPolicy.OR else min(steps)


def _down_limit(current: int, history: tuple[tuple[float, int], ...], policy: StablePolicy) -> int:
    base = max([current, *(r for _, r in history)])
    steps = (base - policy.instances, base - base * policy.percent // 100)
    return min(steps) if policy.select_policy is SelectPolicy.OR else max(steps)
