"""kthena_ref.autoscaler.ratio: the ratio constraint, table-driven (readings A12-A14)."""

from __future__ import annotations

from decimal import Decimal

import pytest

from kthena_ref.autoscaler.ratio import Bounds, RatioResult, enforce

WIDE = Bounds(0, 100)
D = Decimal

# (numerator, denominator, minRatio, maxRatio, numerator bounds, denominator bounds) -> result
ROWS = {
    "within-unchanged": ((2, 4, D("0.25"), D(1), WIDE, WIDE), RatioResult(2, 4, False, True, "0.5")),
    "at-min-edge-unchanged": ((2, 8, D("0.25"), D(1), WIDE, WIDE), RatioResult(2, 8, False, True, "0.25")),
    "below-min-raises-numerator": ((1, 8, D("0.25"), D(1), WIDE, WIDE), RatioResult(2, 8, True, True, "0.25")),
    "above-max-raises-denominator": ((6, 2, D("0.25"), D(1), WIDE, WIDE), RatioResult(6, 6, True, True, "1")),
    "zero-denominator-not-constrained": ((4, 0, D("0.25"), D(1), WIDE, WIDE), RatioResult(4, 0, False, True, "")),
    "zero-numerator-raised": ((0, 4, D("0.25"), D(1), WIDE, WIDE), RatioResult(1, 4, True, True, "0.25")),
    "numerator-capped-lowers-denominator": (
        (2, 20, D("0.25"), D(1), Bounds(0, 3), WIDE), RatioResult(3, 12, True, True, "0.25")
    ),
    "denominator-capped-lowers-numerator": (
        (10, 2, D("0.5"), D(1), WIDE, Bounds(1, 4)), RatioResult(4, 4, True, True, "1")
    ),
    "infeasible-reported": (
        (1, 10, D(1), D(2), Bounds(1, 1), Bounds(5, 10)), RatioResult(1, 5, True, False, "0.2")
    ),
    "repeating-decimal": ((1, 3, D("0.25"), D(1), WIDE, WIDE), RatioResult(1, 3, False, True, "0.3333333333333333")),
    "exact-fraction-min": ((1, 3, D("0.5"), D(1), WIDE, WIDE), RatioResult(2, 3, True, True, "0.6666666666666666")),
}  # fmt: skip


@pytest.mark.parametrize(("args", "expected"), ROWS.values(), ids=ROWS.keys())
def test_enforce(args: tuple[int, int, Decimal, Decimal, Bounds, Bounds], expected: RatioResult) -> None:
    assert enforce(*args) == expected
