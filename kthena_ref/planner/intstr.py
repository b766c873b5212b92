"""IntOrString arithmetic: absolute numbers and percentages, rounded as the spec says (pure).

maxUnavailable rounds down, maxSurge and partition round up (spec: RollingUpdateConfiguration,
Role). A percentage must be written ``N%``; anything else is an error naming the field.
Admission validates these values and the planner resolves them with the same functions, so the
two can never disagree.
"""

from __future__ import annotations

import math
import re

from .. import faults

PERCENT = re.compile(r"^(0|[1-9][0-9]*)%$", re.ASCII)


class IntOrStringError(ValueError):
    """A value that is neither a non-negative integer nor ``N%``."""


def resolve(value: int | str | None, total: int, *, round_up: bool, field: str, default: int = 0) -> int:
    """The absolute value of ``value`` against ``total`` (``default`` when unset)."""
    if value is None:
        return default
    if isinstance(value, bool):
        raise IntOrStringError(f"{field}: {value!r} is neither an integer nor a percentage")
    if isinstance(value, int):
        if value < 0:
            raise IntOrStringError(f"{field}: {value} must not be negative")
        return value
    match = PERCENT.match(value)  # ASCII digits only; a bare "3" string is rejected, as upstream's intstr does
    if not match:
        raise IntOrStringError(f"{field}: {value!r} must be an integer or a percentage such as '25%'")
    scaled = int(match.group(1)) * total / 100
    return math.ceil(scaled) if round_up else math.floor(scaled)


def max_unavailable(value: int | str | None, total: int, field: str = "maxUnavailable") -> int:
    default = total if faults.active("default-max-unavailable-all") else 1
    return resolve(value, total, round_up=False, field=field, default=default)


def max_surge(value: int | str | None, total: int, field: str = "maxSurge") -> int:
    return resolve(value, total, round_up=True, field=field, default=0)


def partition(value: int | str | None, total: int, field: str = "partition") -> int:
    return resolve(value, total, round_up=True, field=field, default=0)


def update_budget(unavailable: int | str | None, surge: int | str | None, total: int, field: str) -> tuple[int, int]:
    """(maxUnavailable, maxSurge) resolved together.

    maxUnavailable may resolve to 0 only when maxSurge resolves above 0; percentages that both
    round to 0 act as maxUnavailable 1 (spec reading 16), so a rollout always progresses.
    """
    u = max_unavailable(unavailable, total, f"{field}.maxUnavailable")
    s = max_surge(surge, total, f"{field}.maxSurge")
    if u == 0 and s == 0:
        zero_accepted = faults.active("max-unavailable-zero-accepted") and "rollingUpdateConfiguration" in field
        if unavailable in (0, "0") and not zero_accepted:  # (the fault: ServingGroupRollingUpdate's 0 acts as 1)
            raise IntOrStringError(f"{field}.maxUnavailable: may be 0 only when maxSurge resolves above 0")
        if not faults.active("zero-percentages-deadlock"):
            u = 1
    return u, s
