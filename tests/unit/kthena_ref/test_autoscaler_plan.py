"""kthena_ref.autoscaler.plan: a policy's units, the Pods a pod source reads, and one loop's writes
and status for each kind of target, table-driven.

Each row is a policy (as the user writes it), what the loop observed, the metric values fetched,
and the writes and status fields the plan must give. The decision's own rules are tested in
test_autoscaler_decision.py; these rows check how the plan wires units, bounds, the ratio and the
status together.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

import pytest

from kthena_ref.api.autoscaling import AutoscalingPolicySpec, PodMetricSource
from kthena_ref.autoscaler.decision import Memory
from kthena_ref.autoscaler.plan import Observed, Write, pods_to_scrape, reconcile, units

D = Decimal
PROM = {"prometheus": {"serverURL": "http://prometheus:9090", "query": "sum(load)"}}


def homogeneous(low: int = 1, high: int = 6, sources: dict[str, Any] | None = None, **spec: Any) -> dict[str, Any]:
    return {
        "metrics": [{"name": "load", "targetValue": 10}],
        "homogeneousTarget": {
            "minReplicas": low,
            "maxReplicas": high,
            "target": {"targetRef": {"kind": "ModelServing", "name": "ms"}, "metricSources": sources or {"load": PROM}},
        },
        **spec,
    }


def disaggregated(roles: dict[str, Any], ratio: dict[str, Any] | None = None) -> dict[str, Any]:
    target: dict[str, Any] = {"targetRef": {"name": "pd"}, "roles": roles}
    if ratio is not None:
        target["ratioConstraint"] = ratio
    return {"metrics": [{"name": "load", "targetValue": 10}], "disaggregatedTarget": target}


def role(low: int, high: int, **extra: Any) -> dict[str, Any]:
    return {"minReplicas": low, "maxReplicas": high, "metricSources": {"load": PROM}, **extra}


@dataclass(frozen=True)
class Row:
    spec: dict[str, Any]
    observed: Observed
    values: dict[str, dict[str, Decimal]]
    writes: tuple[Write, ...]
    status: dict[str, Any]  # expected subset of the status
    problems: tuple[str, ...] = ()
    memory: dict[str, Memory] = field(default_factory=dict)


def heterogeneous(rate: int = 200) -> dict[str, Any]:
    def param(name: str, cost: int, low: int, high: int) -> dict[str, Any]:
        target = {"targetRef": {"kind": "ModelServing", "name": name}, "metricSources": {"load": PROM}}
        return {"cost": cost, "minReplicas": low, "maxReplicas": high, "target": target}

    params = [param("llama-h100", 100, 0, 4), param("llama-a100", 60, 1, 8)]
    return {"metrics": [{"name": "load", "targetValue": 10}],
            "heterogeneousTarget": {"costExpansionRatePercent": rate, "params": params}}  # fmt: skip


MS2 = Observed({"ms": 2})
SPEC_EXAMPLE = Observed({"llama-h100": 0, "llama-a100": 1})
PD = Observed({"pd": 1}, {"pd": {"prefill": 2, "decode": 2}})
RATIO = {"numeratorRole": "prefill", "denominatorRole": "decode", "minRatio": "1", "maxRatio": "2"}

ROWS = {
    "homogeneous-scales-up": Row(
        homogeneous(),
        MS2,
        {"": {"load": D(40)}},
        (Write("ms", None, 4),),
        {
            "observedGeneration": 7,
            "homogeneousStatus": {"name": "ms", "currentReplicas": 2, "desiredReplicas": 4, "mode": "Stable"},
        },
    ),
    "homogeneous-within-tolerance-writes-nothing": Row(
        homogeneous(),
        MS2,
        {"": {"load": D(20)}},
        (),
        {"homogeneousStatus": {"name": "ms", "currentReplicas": 2, "desiredReplicas": 2, "mode": "Stable"}},
    ),
    "homogeneous-max-bounds-desired": Row(
        homogeneous(high=3),
        MS2,
        {"": {"load": D(1000)}},
        (Write("ms", None, 3),),
        {"homogeneousStatus": {"name": "ms", "currentReplicas": 2, "desiredReplicas": 3, "mode": "Panic"}},
    ),
    "homogeneous-missing-metric-writes-nothing": Row(
        homogeneous(),
        MS2,
        {},
        (),
        {"homogeneousStatus": {"name": "ms", "currentReplicas": 2, "desiredReplicas": 2, "mode": "Stable"}},
    ),
    "homogeneous-metric-without-source-is-missing": Row(
        homogeneous(sources={"other": PROM}),
        MS2,
        {},
        (),
        {"homogeneousStatus": {"name": "ms", "currentReplicas": 2, "desiredReplicas": 2, "mode": "Stable"}},
    ),
    "homogeneous-below-min-without-metrics-goes-to-min": Row(
        homogeneous(low=3),
        MS2,
        {},
        (Write("ms", None, 3),),
        {"homogeneousStatus": {"name": "ms", "currentReplicas": 2, "desiredReplicas": 3, "mode": "Stable"}},
    ),
    "homogeneous-target-missing-is-a-problem": Row(
        homogeneous(),
        Observed({}),
        {"": {"load": D(40)}},
        (),
        {"observedGeneration": 7},
        ("target ModelServing 'ms' not found",),
    ),
    # the spec's example: at a total of 4 (rate 200), A100's next block (2 at 120) costs more than H100's 1 at 100
    "heterogeneous-splits-the-total-by-cost": Row(
        heterogeneous(),
        SPEC_EXAMPLE,
        {"llama-h100": {"load": D(20)}, "llama-a100": {"load": D(20)}},
        (Write("llama-a100", None, 2), Write("llama-h100", None, 2)),
        {
            "heterogeneousStatus": [
                {"name": "llama-h100", "currentReplicas": 0, "desiredReplicas": 2, "mode": "Panic"},
                {"name": "llama-a100", "currentReplicas": 1, "desiredReplicas": 2, "mode": "Panic"},
            ]
        },
    ),
    "heterogeneous-rate-100-fills-the-cheapest-first": Row(
        heterogeneous(100),
        SPEC_EXAMPLE,
        {"llama-h100": {"load": D(20)}, "llama-a100": {"load": D(20)}},
        (Write("llama-a100", None, 4),),
        {},
    ),
    "heterogeneous-one-param-missing-is-missing": Row(
        heterogeneous(),
        SPEC_EXAMPLE,
        {"llama-a100": {"load": D(40)}},
        (),
        {},
    ),
    "heterogeneous-target-missing-is-a-problem": Row(
        heterogeneous(),
        Observed({"llama-a100": 1}),
        {},
        (),
        {},
        ("target ModelServing 'llama-h100' not found",),
    ),
    "disaggregated-each-role-on-its-own": Row(
        disaggregated({"prefill": role(1, 8), "decode": role(1, 8)}),
        PD,
        {"decode": {"load": D(40)}, "prefill": {"load": D(20)}},
        (Write("pd", "decode", 4),),
        {
            "disaggregatedStatus": {
                "ratioAdjusted": False,
                "roles": [
                    {"name": "decode", "currentReplicas": 2, "desiredReplicas": 4, "mode": "Stable"},
                    {"name": "prefill", "currentReplicas": 2, "desiredReplicas": 2, "mode": "Stable"},
                ],
            }
        },
    ),
    "disaggregated-ratio-raises-the-numerator": Row(
        disaggregated({"prefill": role(1, 8), "decode": role(1, 8)}, RATIO),
        PD,
        {"decode": {"load": D(40)}, "prefill": {"load": D(20)}},
        (Write("pd", "decode", 4), Write("pd", "prefill", 4)),
        {
            "disaggregatedStatus": {
                "ratioAdjusted": True,
                "ratioStatus": {"numeratorRole": "prefill", "denominatorRole": "decode", "currentRatio": "1"},
            }
        },
    ),
    "disaggregated-ratio-kept-is-not-adjusted": Row(
        disaggregated({"prefill": role(1, 8), "decode": role(1, 8)}, RATIO),
        PD,
        {"decode": {"load": D(20)}, "prefill": {"load": D(30)}},
        (Write("pd", "prefill", 3),),
        {
            "disaggregatedStatus": {
                "ratioAdjusted": False,
                "ratioStatus": {"numeratorRole": "prefill", "denominatorRole": "decode", "currentRatio": "1.5"},
            }
        },
    ),
    "disaggregated-fixed-role-held-at-its-size": Row(
        disaggregated({"prefill": {"minReplicas": 3, "maxReplicas": 3}, "decode": role(1, 8)}),
        PD,
        {},
        (Write("pd", "prefill", 3),),
        {
            "disaggregatedStatus": {
                "roles": [
                    {"name": "decode", "currentReplicas": 2, "desiredReplicas": 2, "mode": "Stable"},
                    {"name": "prefill", "currentReplicas": 2, "desiredReplicas": 3, "mode": "Stable"},
                ]
            }
        },
    ),
    "disaggregated-role-metrics-override": Row(
        disaggregated({"prefill": role(1, 8, metrics=[{"name": "load", "targetValue": 5}]), "decode": role(1, 8)}),
        PD,
        {"prefill": {"load": D(20)}, "decode": {"load": D(20)}},
        (Write("pd", "prefill", 4),),
        {
            "disaggregatedStatus": {
                "roles": [
                    {"name": "decode", "currentReplicas": 2, "desiredReplicas": 2, "mode": "Stable"},
                    {"name": "prefill", "currentReplicas": 2, "desiredReplicas": 4, "mode": "Stable"},
                ]
            }
        },
    ),
    "disaggregated-unknown-role-is-a-problem": Row(
        disaggregated({"prefil": role(1, 8)}),
        PD,
        {"prefil": {"load": D(40)}},
        (),
        {"disaggregatedStatus": {"roles": [], "ratioAdjusted": False}},
        ("Role 'prefil' not found in ModelServing 'pd'",),
    ),
}


@pytest.mark.parametrize("row", ROWS.values(), ids=ROWS.keys())
def test_reconcile(row: Row) -> None:
    spec = AutoscalingPolicySpec.model_validate(row.spec)
    outcome = reconcile(spec, 7, row.observed, row.values, 1000.0, row.memory)
    assert tuple(sorted(outcome.writes, key=lambda w: (w.target, w.role or ""))) == row.writes
    for key, want in row.status.items():
        got = outcome.status.get(key)
        if isinstance(want, dict) and isinstance(got, dict):
            assert {k: got.get(k) for k in want} == want, f"status.{key}: {got}"
        else:
            assert got == want, f"status.{key}: {got}"
    assert outcome.problems == row.problems


def test_units_fetch_only_metrics_with_sources_and_nothing_for_fixed_roles() -> None:
    spec = AutoscalingPolicySpec.model_validate(
        disaggregated({"prefill": {"minReplicas": 2, "maxReplicas": 2}, "decode": role(1, 4)})
    )
    got = {u.key: [(f.metric, f.role) for f in u.fetches] for u in units(spec)}
    assert got == {"decode": [("load", "decode")], "prefill": []}


def pod(name: str, role: str = "r", entry: bool = True, ready: bool = True, ip: str = "10.0.0.1",
        phase: str = "Running", deleting: bool = False, **labels: str) -> dict[str, Any]:  # fmt: skip
    meta: dict[str, Any] = {
        "name": name,
        "labels": {
            "modelserving.volcano.sh/role": role,
            **({"modelserving.volcano.sh/entry": "true"} if entry else {}),
            **labels,
        },
    }
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return {
        "metadata": meta,
        "status": {"phase": phase, "podIP": ip, "conditions": [{"type": "Ready", "status": str(ready)}]},
    }


SCRAPE_ROWS = {
    "entry-pods-by-default": ([pod("a"), pod("b", entry=False)], None, {}, [("a", "10.0.0.1")]),
    "selector-picks-workers-too": (
        [pod("a", tier="x"), pod("b", entry=False, tier="x"), pod("c", tier="y")],
        None,
        {"labelSelector": {"matchLabels": {"tier": "x"}}},
        [("a", "10.0.0.1"), ("b", "10.0.0.1")],
    ),
    "role-filter": ([pod("a", role="p"), pod("b", role="d")], "d", {}, [("b", "10.0.0.1")]),
    "not-ready-skipped": ([pod("a", ready=False)], None, {}, []),
    "pending-skipped": ([pod("a", phase="Pending")], None, {}, []),
    "no-ip-skipped": ([pod("a", ip="")], None, {}, []),
    "terminating-skipped": ([pod("a", deleting=True)], None, {}, []),
}


@pytest.mark.parametrize("pods,role,source,want", SCRAPE_ROWS.values(), ids=SCRAPE_ROWS.keys())
def test_pods_to_scrape(pods: list[dict[str, Any]], role: str | None, source: dict[str, Any],
                        want: list[tuple[str, str]]) -> None:  # fmt: skip
    assert pods_to_scrape(pods, role, PodMetricSource.model_validate(source)) == want
