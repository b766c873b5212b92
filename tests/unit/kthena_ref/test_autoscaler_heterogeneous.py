"""kthena_ref.autoscaler.heterogeneous: the split of a heterogeneous target, table-driven.

Each row: the total the decision gave, the groups (name, cost, minReplicas, maxReplicas) and
costExpansionRatePercent, and the replicas of each group in their order.
"""

from __future__ import annotations

import time
from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kthena_ref.api.autoscaling import HeterogeneousTargetParam
from kthena_ref.autoscaler.decision import Policy
from kthena_ref.autoscaler.heterogeneous import Aggregate, Param, aggregate, blocks, distribute

# The spec's example: H100 (cost 100, 0..4) and A100 (cost 60, 1..8), rate 200.
H100 = Param("llama-h100", 100, 0, 4)
A100 = Param("llama-a100", 60, 1, 8)
SPEC = (H100, A100)

# Rate 200 cuts H100's range 4 into blocks 1@100, 2@200, 1@100 (the cut last one) and A100's range
# 7 into 1@60, 2@120, 4@240. Filled by cost (ties to the group listed first), starting at (0, 1):
# A100 +1 @60, H100 +1 @100, H100 +1 @100, A100 +2 @120, H100 +2 @200, A100 +4 @240.
SPEC_SPLITS = {
    1: (0, 1),  # the minimums
    2: (0, 2),  # A100 1@60
    3: (1, 2),  # H100 1@100: A100's next block (2@120) costs more
    4: (2, 2),  # H100's cut last block 1@100
    5: (2, 3),  # A100 2@120
    6: (2, 4),
    7: (3, 4),  # H100 2@200, cheaper than A100's 4@240
    8: (4, 4),
    9: (4, 5),  # A100 4@240
    10: (4, 6),
    11: (4, 7),
    12: (4, 8),  # the sum of the maximums
}


def row(total: int, params: tuple[Param, ...], rate: int, expected: tuple[int, ...]) -> tuple[object, ...]:
    return (total, params, rate, expected)


def p(name: str, cost: int, low: int, high: int) -> Param:
    return Param(name, cost, low, high)


ROWS = {
    **{f"spec-rate200-total{t}": row(t, SPEC, 200, split) for t, split in SPEC_SPLITS.items()},
    # Rate 100: the cost does not expand; A100 fills to 8 before H100 takes any.
    **{f"spec-rate100-total{t}": row(t, SPEC, 100, (max(0, t - 8), min(max(t, 1), 8))) for t in range(1, 13)},
    # Rate 0 (and anything up to 100): the same as 100.
    "spec-rate0-total5": row(5, SPEC, 0, (0, 5)),
    "spec-rate0-total10": row(10, SPEC, 0, (2, 8)),
    "spec-rate50-total10": row(10, SPEC, 50, (2, 8)),
    # Rate 150: sizes floor(1.5^k) = 1, 1, 2, 3: H100 1@100, 1@100, 2@200; A100 1@60, 1@60, 2@120, 3@180.
    "spec-rate150-total3": row(3, SPEC, 150, (0, 3)),
    "spec-rate150-total5": row(5, SPEC, 150, (2, 3)),
    "spec-rate150-total10": row(10, SPEC, 150, (2, 8)),
    "spec-rate150-total11": row(11, SPEC, 150, (3, 8)),
    # Rate 300: blocks 1, 3, 9: H100 1@100, 3@300; A100 1@60, 3@180, 3@180 (cut).
    "spec-rate300-total3": row(3, SPEC, 300, (1, 2)),
    "spec-rate300-total9": row(9, SPEC, 300, (1, 8)),
    "spec-rate300-total10": row(10, SPEC, 300, (2, 8)),
    # Equal costs: blocks 1@50, 2@100, 4@200 each; ties to the group listed first.
    "equal-costs-total1": row(1, (p("a", 50, 0, 7), p("b", 50, 0, 7)), 200, (1, 0)),
    "equal-costs-total2": row(2, (p("a", 50, 0, 7), p("b", 50, 0, 7)), 200, (1, 1)),
    "equal-costs-total4": row(4, (p("a", 50, 0, 7), p("b", 50, 0, 7)), 200, (3, 1)),
    "equal-costs-total6": row(6, (p("a", 50, 0, 7), p("b", 50, 0, 7)), 200, (3, 3)),
    "equal-costs-total9": row(9, (p("a", 50, 0, 7), p("b", 50, 0, 7)), 200, (6, 3)),
    "equal-costs-rate100-first-fills": row(9, (p("a", 50, 0, 7), p("b", 50, 0, 7)), 100, (7, 2)),
    "zero-cost-fills-first": row(9, (p("paid", 10, 0, 8), p("free", 0, 0, 8)), 200, (1, 8)),
    # One group: the total within its bounds.
    "single-below-min": row(0, (p("a", 10, 2, 6),), 200, (2,)),
    "single-within": row(5, (p("a", 10, 2, 6),), 200, (5,)),
    "single-above-max": row(9, (p("a", 10, 2, 6),), 200, (6,)),
    # minReplicas == maxReplicas: no block, the group keeps its count.
    "fixed-group-kept-low": row(0, (p("fixed", 1, 3, 3), p("b", 10, 0, 5)), 200, (3, 0)),
    "fixed-group-kept-mid": row(5, (p("fixed", 1, 3, 3), p("b", 10, 0, 5)), 200, (3, 2)),
    "fixed-group-kept-high": row(20, (p("fixed", 1, 3, 3), p("b", 10, 0, 5)), 200, (3, 5)),
    "all-fixed": row(7, (p("a", 1, 2, 2), p("b", 2, 4, 4)), 200, (2, 4)),
    # minReplicas above maxReplicas (the schema allows it): the floor wins.
    "min-above-max-floor-wins": row(9, (p("a", 1, 5, 3), p("b", 2, 0, 10)), 200, (5, 4)),
    # Clamping to [sum of minReplicas, sum of maxReplicas].
    "clamp-negative": row(-3, SPEC, 200, (0, 1)),
    "clamp-zero": row(0, SPEC, 200, (0, 1)),
    "clamp-above": row(100, SPEC, 200, (4, 8)),
    "clamp-mins-both": row(1, (p("a", 1, 2, 4), p("b", 2, 3, 6)), 200, (2, 3)),
    # Large ranges. Rate 200: a's blocks 2^j cost 2^j (j <= 18, then a cut block of 475713);
    # b's cost twice as much. Through cost 2^18: a 2^19-1, b 2^18-1 (786430 in all); a's cut
    # block (cost 475713) goes before b's 2^18 (cost 524288) and takes the 213570 left.
    "large-rate200": row(
        1_000_000, (p("a", 1, 0, 1_000_000), p("b", 2, 0, 1_000_000)), 200, (524_287 + 213_570, 262_143)
    ),
    "large-rate100": row(
        1_500_000, (p("a", 1, 0, 1_000_000), p("b", 2, 0, 1_000_000)), 100, (1_000_000, 500_000)
    ),
    "large-max": row(
        5_000_000, (p("a", 1, 0, 1_000_000), p("b", 2, 0, 1_000_000)), 101, (1_000_000, 1_000_000)
    ),
}  # fmt: skip


@pytest.mark.parametrize(("total", "params", "rate", "expected"), ROWS.values(), ids=ROWS.keys())
def test_distribute(total: int, params: tuple[Param, ...], rate: int, expected: tuple[int, ...]) -> None:
    assert distribute(total, params, rate) == expected


# (param, rate) -> the (cost, size) blocks, in the order they are cut
BLOCKS = {
    "spec-h100": ((H100, 200), [(100, 1), (200, 2), (100, 1)]),
    "spec-a100": ((A100, 200), [(60, 1), (120, 2), (240, 4)]),
    "rate100-one-block": ((A100, 100), [(60, 7)]),
    "rate0-one-block": ((A100, 0), [(60, 7)]),
    "rate150-slow-growth": ((Param("x", 10, 0, 10), 150), [(10, 1), (10, 1), (20, 2), (30, 3), (30, 3)]),
    "fixed-none": ((Param("x", 10, 3, 3), 200), []),
    "min-above-max-none": ((Param("x", 10, 5, 3), 200), []),
}  # fmt: skip


@pytest.mark.parametrize(("args", "expected"), BLOCKS.values(), ids=BLOCKS.keys())
def test_blocks(args: tuple[Param, int], expected: list[tuple[int, int]]) -> None:
    assert list(blocks(*args)) == expected


@pytest.mark.parametrize(("rate", "most"), [(101, 1_000), (110, 150), (200, 21), (1000, 8), (10**9, 2)], ids=str)
def test_blocks_are_logarithmic(rate: int, most: int) -> None:
    """A range of 1e6 is cut into O(log(range) / log(r)) blocks, never one per replica."""
    cut = list(blocks(Param("x", 1, 0, 1_000_000), rate))
    assert sum(size for _, size in cut) == 1_000_000
    assert len(cut) <= most


def test_large_ranges_are_fast() -> None:
    params = [Param(f"g{i}", 10 + i, 0, 1_000_000) for i in range(8)]
    start = time.perf_counter()
    for rate in (101, 200, 100, 0):
        assert sum(distribute(4_000_000, params, rate)) == 4_000_000
    assert time.perf_counter() - start < 2.0


PARAMS = st.lists(
    st.builds(
        Param,
        name=st.just("g"),
        cost=st.integers(0, 1000),
        min_replicas=st.integers(0, 50),
        max_replicas=st.integers(1, 1_000_000),
    ),
    min_size=1,
    max_size=5,
)
RATES = st.one_of(st.integers(0, 400), st.integers(0, 10**6))


@given(total=st.integers(-10, 6_000_000), params=PARAMS, rate=RATES)
def test_distribute_sums_to_clamped_total_within_bounds(total: int, params: list[Param], rate: int) -> None:
    split = distribute(total, params, rate)
    low = sum(x.min_replicas for x in params)
    high = sum(max(x.min_replicas, x.max_replicas) for x in params)
    assert len(split) == len(params)
    assert sum(split) == min(max(total, low), high)
    for value, param in zip(split, params, strict=True):
        assert param.min_replicas <= value <= max(param.min_replicas, param.max_replicas)


@given(total=st.integers(0, 300), params=PARAMS, rate=RATES)
def test_one_more_replica_never_takes_one_away(total: int, params: list[Param], rate: int) -> None:
    """The total is poured into a fixed order of blocks: a larger total only adds."""
    before, after = distribute(total, params, rate), distribute(total + 1, params, rate)
    assert all(b <= a for b, a in zip(before, after, strict=True))


@given(total=st.integers(0, 300), params=PARAMS, rate=st.integers(0, 100))
def test_rates_up_to_100_fill_cheapest_first(total: int, params: list[Param], rate: int) -> None:
    """Without expansion a group takes replicas above its minimum only once every cheaper one is full."""
    split = distribute(total, params, rate)
    for i, (value, param) in enumerate(zip(split, params, strict=True)):
        if value > param.min_replicas:
            for j, other in enumerate(params):
                if (other.cost, j) < (param.cost, i):
                    assert split[j] == max(other.min_replicas, other.max_replicas)


def test_param_of_api_type() -> None:
    api = HeterogeneousTargetParam.model_validate(
        {
            "cost": 100,
            "minReplicas": 0,
            "maxReplicas": 4,
            "target": {"targetRef": {"kind": "ModelServing", "name": "llama-h100"}},
        }
    )
    assert Param.of(api) == H100


AGGREGATES = {
    "spec": ((SPEC, (2, 3)), Aggregate(current=5, min_replicas=1, max_replicas=12)),
    "single": (((Param("a", 1, 2, 6),), (4,)), Aggregate(4, 2, 6)),
    "outside-bounds-kept": ((SPEC, (9, 0)), Aggregate(9, 1, 12)),
    "min-above-max": (((Param("a", 1, 5, 3), Param("b", 1, 0, 2)), (5, 1)), Aggregate(6, 5, 7)),
}  # fmt: skip


@pytest.mark.parametrize(("args", "expected"), AGGREGATES.values(), ids=AGGREGATES.keys())
def test_aggregate(args: tuple[tuple[Param, ...], tuple[int, ...]], expected: Aggregate) -> None:
    assert aggregate(*args) == expected


def test_aggregate_needs_one_count_per_param() -> None:
    with pytest.raises(ValueError, match="1 current replica counts for 2 params"):
        aggregate(SPEC, (1,))


def test_aggregate_bounds_a_policy() -> None:
    policy = Policy(min_replicas=0, max_replicas=1, targets={"rps": Decimal(10)}, tolerance_percent=5)
    bounded = aggregate(SPEC, (0, 1)).bound(policy)
    assert (bounded.min_replicas, bounded.max_replicas) == (1, 12)
    assert bounded.targets == policy.targets and bounded.tolerance_percent == 5
