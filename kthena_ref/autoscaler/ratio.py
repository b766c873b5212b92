"""A disaggregated target's ratio constraint: pure.

The spec: a RoleRatioConstraint "enforces that replicas[numeratorRole] / replicas[denominatorRole]
stays within [minRatio, maxRatio] when denominator replica is non-zero", and ``ratioAdjusted`` "is
true when the most recent reconcile had to override the metric-derived replica counts to satisfy
the ratio constraint". Readings (docs/autoscaling-readings.md, A12-A14):

- A12: a ratio below ``minRatio`` raises the numerator, one above ``maxRatio`` raises the
  denominator (adding capacity never starves the side the metrics asked for; upstream does the
  same); only when that side is at its ``maxReplicas`` is the other side lowered, never below its
  ``minReplicas``.
- A13: a denominator of 0 is not constrained (the spec's "when denominator replica is non-zero"),
  and ``currentRatio`` is then empty.
- A14: ``currentRatio`` is the final ratio as the shortest decimal that reads back exactly as the
  float (``"0.25"``, ``"1"``, ``"0.3333333333333333"``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction


@dataclass(frozen=True)
class Bounds:
    low: int
    high: int

    def clamp(self, value: int) -> int:
        return min(max(value, self.low), self.high)


@dataclass(frozen=True)
class RatioResult:
    numerator: int
    denominator: int
    adjusted: bool  # the metric-derived counts were overridden
    satisfied: bool  # the final pair is within [min, max] (or the denominator is 0)
    current_ratio: str  # "" when the denominator is 0


def enforce(
    numerator: int, denominator: int, low: Decimal, high: Decimal, num_bounds: Bounds, den_bounds: Bounds
) -> RatioResult:
    """The replicas of the two Roles after the constraint ``low <= numerator / denominator <= high``."""
    lo, hi = Fraction(low), Fraction(high)
    n, d = numerator, denominator
    if d > 0 and Fraction(n, d) < lo:
        n = num_bounds.clamp(max(n, math.ceil(lo * d)))
        if Fraction(n, d) < lo and lo > 0:  # the numerator is at its maximum: fewer denominators
            d = den_bounds.clamp(min(d, math.floor(Fraction(n) / lo)))
    elif d > 0 and Fraction(n, d) > hi:
        d = den_bounds.clamp(max(d, math.ceil(Fraction(n) / hi)))
        if Fraction(n, d) > hi:  # the denominator is at its maximum: fewer numerators
            n = num_bounds.clamp(min(n, math.floor(hi * d)))
    satisfied = d == 0 or lo <= Fraction(n, d) <= hi
    return RatioResult(n, d, (n, d) != (numerator, denominator), satisfied, _ratio_text(n, d))


def _ratio_text(n: int, d: int) -> str:
    if d == 0:
        return ""
    text = repr(n / d)
    return text.removesuffix(".0")
