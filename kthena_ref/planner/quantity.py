"""Kubernetes resource quantities: parse and add them exactly (pure).

Decimal SI suffixes (n u m "" k M G T P E), binary suffixes (Ki Mi Gi Ti Pi Ei) and decimal
exponents (1e3, 2E-3), as ``resource.Quantity`` accepts them, with Decimal arithmetic so sums are
exact. Used for a PodGroup's ``minResources``.
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation

_SUFFIX = {
    "n": Decimal("1e-9"), "u": Decimal("1e-6"), "m": Decimal("1e-3"), "": Decimal(1),
    "k": Decimal("1e3"), "M": Decimal("1e6"), "G": Decimal("1e9"), "T": Decimal("1e12"),
    "P": Decimal("1e15"), "E": Decimal("1e18"),
    "Ki": Decimal(2**10), "Mi": Decimal(2**20), "Gi": Decimal(2**30), "Ti": Decimal(2**40),
    "Pi": Decimal(2**50), "Ei": Decimal(2**60),
}  # fmt: skip
_QUANTITY = re.compile(
    r"^(?P<number>[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))"
    r"(?:(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE])|[eE](?P<exponent>[+-]?[0-9]+))?$",
    re.ASCII,
)


class QuantityError(ValueError):
    """Not a Kubernetes quantity."""


def parse(value: str | int | float) -> Decimal:
    """The exact value of a quantity (``"1500m"`` is 1.5, ``"1Gi"`` is 1073741824)."""
    if isinstance(value, bool):
        raise QuantityError(f"{value!r} is not a quantity")
    if isinstance(value, (int, float)):
        return Decimal(str(value))
    match = _QUANTITY.match(value.strip())
    if not match:
        raise QuantityError(f"{value!r} is not a quantity")
    try:
        number = Decimal(match.group("number"))
    except InvalidOperation as exc:  # pragma: no cover - the pattern admits only decimals
        raise QuantityError(f"{value!r} is not a quantity") from exc
    if match.group("exponent") is not None:
        return number.scaleb(int(match.group("exponent")))
    return number * _SUFFIX[match.group("suffix") or ""]


def format_quantity(value: Decimal) -> str:
    """A canonical-enough rendering: an integer when whole, else millis (rounded up, as k8s does)."""
    if value == value.to_integral_value():
        return str(int(value))
    millis = (value * 1000).to_integral_value(rounding="ROUND_CEILING")
    return f"{int(millis)}m"


def total(quantities: list[str | int | float]) -> Decimal:
    return sum((parse(q) for q in quantities), Decimal(0))
