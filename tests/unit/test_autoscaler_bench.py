"""The autoscaler bench's pure helpers: percentiles, spread, and the bodies it creates."""

from __future__ import annotations

import pytest

from bench.autoscaler_bench import (
    CHANGED,
    HIGH,
    LOOP_SECONDS,
    LOW,
    TARGET,
    Summary,
    modelserving,
    percentile,
    phase,
    policy,
    query,
    spread,
    summarize,
)


def test_percentile_is_nearest_rank() -> None:
    values = [float(v) for v in range(1, 101)]
    assert percentile(values, 50) == 50.0
    assert percentile(values, 95) == 95.0
    assert percentile(values, 100) == 100.0
    assert percentile([3.0], 95) == 3.0
    assert percentile([2.0, 1.0], 50) == 1.0


@pytest.mark.parametrize("values,q", [([], 50), ([1.0], 0), ([1.0], 101)])
def test_percentile_rejects_nonsense(values: list[float], q: float) -> None:
    with pytest.raises(ValueError):
        percentile(values, q)


def test_summarize_and_spread() -> None:
    assert summarize([4.0, 1.0, 2.0, 3.0]) == Summary(count=4, p50=2.0, p95=4.0, max=4.0)
    assert spread([5.0, 2.5, 3.0]) == 2.5
    assert spread([1.0]) == 0.0
    assert spread([]) == 0.0


def test_policy_queries_its_own_series_and_cannot_panic_on_the_change() -> None:
    body = policy("ms-17", "http://127.0.0.1:9090")
    assert query("ms-17") == 'sum(bench_load{ms="ms-17"})'
    target = body["spec"]["homogeneousTarget"]
    assert target["target"]["targetRef"] == {"kind": "ModelServing", "name": "ms-17"}
    assert target["target"]["metricSources"]["load"]["prometheus"]["query"] == query("ms-17")
    assert (target["minReplicas"], target["maxReplicas"]) == (LOW, HIGH) == (1, 3)
    threshold = body["spec"]["behavior"]["scaleUp"]["panicPolicy"]["panicThresholdPercent"]
    assert threshold >= CHANGED / TARGET * 100, "the change must not panic at 1 replica"
    assert modelserving("ms-17")["spec"]["replicas"] == 1


def test_phases_spread_over_one_period_starting_right_after_a_loop() -> None:
    assert [phase(i, 3) for i in range(3)] == pytest.approx([0.0, LOOP_SECONDS / 3, 2 * LOOP_SECONDS / 3])
    assert phase(0, 1) == 0.0
