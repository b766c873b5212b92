"""kthena_ref.autoscaler.decision: every documented default, bound and mode transition, table-driven.

Each row: the replicas now, the policy, this loop's metric values, the memory of earlier loops, and
the replicas and mode the decision must give. The time is always ``NOW``; memory entries are
placed relative to it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal

import pytest

from kthena_ref.api.autoscaling import PanicPolicy, SelectPolicy, StablePolicy
from kthena_ref.autoscaler.decision import (
    PANIC_HOLD_SECONDS,
    PERIOD_SECONDS,
    STABLE_WINDOW_SECONDS,
    Memory,
    Mode,
    Policy,
    decide,
)

NOW = 1000.0
D = Decimal


def policy(low: int = 0, high: int = 100, **changes: object) -> Policy:
    base: dict[str, object] = {"min_replicas": low, "max_replicas": high, "targets": {"rps": D(10)}}
    base.update(changes)
    return Policy(**base)  # type: ignore[arg-type]


NO_PANIC = {"panic": None}


@dataclass(frozen=True)
class Row:
    current: int
    policy: Policy
    values: dict[str, Decimal]
    replicas: int
    mode: Mode = Mode.STABLE
    memory: Memory = field(default_factory=Memory)


ROWS = {
    # missing metrics
    "no-metric-changes-nothing": Row(3, policy(), {}, 3),
    "no-metric-below-min-goes-to-min": Row(1, policy(2, 5), {}, 2),
    "no-metric-above-max-goes-to-max": Row(9, policy(2, 5), {}, 5),
    "no-metric-keeps-panic": Row(3, policy(), {}, 3, Mode.PANIC, Memory(panic_until=NOW + 1)),
    "unknown-metric-is-no-metric": Row(3, policy(), {"other": D(500)}, 3),
    # the tolerance, exactly as the spec writes it (default 10%)
    "tolerance-just-inside": Row(10, policy(**NO_PANIC), {"rps": D("109.9")}, 10),
    "tolerance-edge-scales": Row(10, policy(**NO_PANIC), {"rps": D(110)}, 11),
    "tolerance-down-edge-scales": Row(10, policy(**NO_PANIC), {"rps": D(90)}, 9),
    "tolerance-zero-scales-on-any-change": Row(10, policy(tolerance_percent=0, **NO_PANIC), {"rps": D(101)}, 11),
    "tolerance-hundred-never-scales-down": Row(10, policy(tolerance_percent=100, **NO_PANIC), {"rps": D(1)}, 10),
    # several metrics: the largest need wins; ceil
    "largest-need-wins": Row(3, policy(targets={"a": D(10), "b": D(5)}), {"a": D(30), "b": D(20)}, 4),
    "ceil-of-a-fraction": Row(3, policy(**NO_PANIC), {"rps": D(41)}, 5),
    # bounds
    "capped-at-max": Row(4, policy(1, 5, **NO_PANIC), {"rps": D(70)}, 5),
    "floored-at-min": Row(4, policy(3, 10), {"rps": D(0)}, 3),
    "scale-to-zero-when-min-zero": Row(2, policy(0, 10), {"rps": D(0)}, 0),
    # stable policy: Or takes the larger step, And the smaller (defaults: 1 instance, 100%, Or)
    "default-up-doubles": Row(4, policy(**NO_PANIC), {"rps": D(200)}, 8),
    "up-and-takes-the-smaller": Row(
        4,
        policy(scale_up=StablePolicy(instances=1, percent=100, selectPolicy=SelectPolicy.AND), **NO_PANIC),
        {"rps": D(200)},
        5,
    ),
    "up-or-instances-larger": Row(
        4, policy(scale_up=StablePolicy(instances=6, percent=50), **NO_PANIC), {"rps": D(200)}, 10
    ),
    "down-or-takes-the-larger-step": Row(
        10, policy(scale_down=StablePolicy(instances=1, percent=50)), {"rps": D(20)}, 5
    ),
    "down-and-takes-the-smaller-step": Row(
        10, policy(scale_down=StablePolicy(instances=1, percent=50, selectPolicy=SelectPolicy.AND)), {"rps": D(20)}, 9
    ),
    "down-zero-instances-and-blocks": Row(
        10, policy(scale_down=StablePolicy(instances=0, percent=50, selectPolicy=SelectPolicy.AND)), {"rps": D(20)}, 10
    ),
    "up-from-zero-one-instance": Row(0, policy(**NO_PANIC), {"rps": D(50)}, 1),
    "period-base-is-the-smallest-recent": Row(
        8,
        policy(scale_up=StablePolicy(instances=1, percent=0), **NO_PANIC),
        {"rps": D(200)},
        8,
        memory=Memory(replicas=((NOW - PERIOD_SECONDS / 2, 6),)),
    ),
    "period-forgets-old-replicas": Row(
        8,
        policy(scale_up=StablePolicy(instances=1, percent=0), **NO_PANIC),
        {"rps": D(200)},
        9,
        memory=Memory(replicas=((NOW - PERIOD_SECONDS - 1, 6),)),
    ),
    # stable mode averages over the window; panic does not
    "stable-averages-the-window": Row(
        3,
        policy(**NO_PANIC),
        {"rps": D(10)},
        6,
        memory=Memory(samples=((NOW - STABLE_WINDOW_SECONDS / 2, (("rps", D(100)),)),)),
    ),
    "window-forgets-old-samples": Row(
        3,
        policy(**NO_PANIC),
        {"rps": D(10)},
        1,
        memory=Memory(samples=((NOW - STABLE_WINDOW_SECONDS - 1, (("rps", D(100)),)),)),
    ),
    # panic (defaults: threshold 200%, percent 1000)
    "panic-above-threshold": Row(2, policy(), {"rps": D(41)}, 5, Mode.PANIC),
    "no-panic-at-the-threshold": Row(2, policy(scale_up=StablePolicy(instances=1, percent=0)), {"rps": D(40)}, 3),
    "panic-step-limited-by-percent": Row(
        2, policy(panic=PanicPolicy(percent=100, panicThresholdPercent=200)), {"rps": D(200)}, 4, Mode.PANIC
    ),
    "panic-from-zero-goes-to-desired": Row(0, policy(), {"rps": D(25)}, 3, Mode.PANIC),
    "panic-never-scales-down": Row(4, policy(), {"rps": D(10)}, 4, Mode.PANIC, Memory(panic_until=NOW + 1)),
    "panic-ends-after-the-hold": Row(
        4,
        policy(scale_down=StablePolicy(instances=4, percent=100)),
        {"rps": D(10)},
        1,
        Mode.STABLE,
        Memory(panic_until=NOW - 1),
    ),
    "panic-respects-max": Row(2, policy(1, 4), {"rps": D(300)}, 4, Mode.PANIC),
}


@pytest.mark.parametrize("row", ROWS.values(), ids=ROWS.keys())
def test_decision(row: Row) -> None:
    decision = decide(row.current, row.policy, row.values, NOW, row.memory)
    assert (decision.replicas, decision.mode) == (row.replicas, row.mode), decision.reason


def test_panic_lasts_the_hold_after_the_last_trigger() -> None:
    first = decide(2, policy(), {"rps": D(100)}, NOW, Memory())
    assert first.mode is Mode.PANIC and first.memory.panic_until == NOW + PANIC_HOLD_SECONDS
    calm = decide(first.replicas, policy(), {"rps": D(10)}, NOW + PANIC_HOLD_SECONDS - 1, first.memory)
    assert calm.mode is Mode.PANIC and calm.replicas == first.replicas
    later = decide(calm.replicas, policy(), {"rps": D(10)}, NOW + PANIC_HOLD_SECONDS, calm.memory)
    assert later.mode is Mode.STABLE


def test_a_missing_metric_keeps_the_memory() -> None:
    memory = Memory(samples=((NOW - 1, (("rps", D(5)),)),), replicas=((NOW - 1, 3),), panic_until=NOW + 5)
    assert decide(3, policy(), {}, NOW, memory).memory == memory


def test_memory_is_bounded_by_the_windows() -> None:
    memory = Memory()
    for step in range(200):
        memory = decide(3, policy(), {"rps": D(30)}, NOW + step, memory).memory
    assert len(memory.samples) <= STABLE_WINDOW_SECONDS + 1 and len(memory.replicas) <= PERIOD_SECONDS + 1
