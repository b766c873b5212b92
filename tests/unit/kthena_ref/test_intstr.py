"""intstr.py: maxUnavailable rounds down, maxSurge and partition round up, invalid values name the field."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from kthena_ref.planner import intstr
from kthena_ref.planner.intstr import IntOrStringError

Resolver = Callable[..., int]

# (value, total, maxUnavailable (down), maxSurge (up), partition (up))
TABLE = [
    ("0%", 3, 0, 0, 0),
    ("0%", 10, 0, 0, 0),
    ("100%", 3, 3, 3, 3),
    ("100%", 7, 7, 7, 7),
    ("100%", 10, 10, 10, 10),
    ("33%", 3, 0, 1, 1),
    ("33%", 7, 2, 3, 3),
    ("33%", 10, 3, 4, 4),
    ("50%", 3, 1, 2, 2),
    ("50%", 7, 3, 4, 4),
    ("50%", 10, 5, 5, 5),
    ("25%", 10, 2, 3, 3),
    ("10%", 7, 0, 1, 1),
    ("1%", 10, 0, 1, 1),
    ("150%", 10, 15, 15, 15),
    ("50%", 0, 0, 0, 0),
    (0, 10, 0, 0, 0),
    (2, 10, 2, 2, 2),
    (5, 3, 5, 5, 5),
]


@pytest.mark.parametrize(
    ("value", "total", "down", "up", "part"), [pytest.param(*row, id=f"{row[0]!r}-of-{row[1]}") for row in TABLE]
)
def test_rounding(value: int | str, total: int, down: int, up: int, part: int) -> None:
    assert intstr.max_unavailable(value, total) == down
    assert intstr.max_surge(value, total) == up
    assert intstr.partition(value, total) == part
    assert intstr.resolve(value, total, round_up=False, field="f") == down
    assert intstr.resolve(value, total, round_up=True, field="f") == up


@pytest.mark.parametrize(
    ("resolver", "default"),
    [
        pytest.param(intstr.max_unavailable, 1, id="maxUnavailable-1"),
        pytest.param(intstr.max_surge, 0, id="maxSurge-0"),
        pytest.param(intstr.partition, 0, id="partition-0"),
    ],
)
def test_unset_takes_the_spec_default(resolver: Resolver, default: int) -> None:
    assert resolver(None, 10) == default


def test_resolve_default_when_unset() -> None:
    assert intstr.resolve(None, 10, round_up=True, field="f", default=7) == 7


@pytest.mark.parametrize(
    "value",
    [
        pytest.param("abc", id="word"),
        pytest.param("-1%", id="negative-percent"),
        pytest.param(-1, id="negative-int"),
        pytest.param(True, id="bool-true"),
        pytest.param(False, id="bool-false"),
        pytest.param("1.5%", id="fractional-percent"),
        pytest.param("1.5", id="fractional"),
        pytest.param("", id="empty"),
        pytest.param("%", id="bare-percent"),
        pytest.param("10 %", id="space"),
        pytest.param("010%", id="leading-zero-percent"),
        pytest.param("-1", id="negative-string"),
        pytest.param("%10", id="percent-first"),
        pytest.param("3", id="bare-digits-string"),  # upstream's intstr: a string must be a percentage
        pytest.param("0", id="bare-zero-string"),
    ],
)
@pytest.mark.parametrize(
    ("resolver", "field"),
    [
        pytest.param(intstr.max_unavailable, "maxUnavailable", id="maxUnavailable"),
        pytest.param(intstr.max_surge, "maxSurge", id="maxSurge"),
        pytest.param(intstr.partition, "partition", id="partition"),
    ],
)
def test_invalid_values_raise_naming_the_field(resolver: Resolver, field: str, value: object) -> None:
    with pytest.raises(IntOrStringError) as info:
        resolver(value, 10)
    assert str(info.value).startswith(f"{field}: ")
    with pytest.raises(IntOrStringError, match=r"^spec\.roles\[0\]\.partition: "):
        resolver(value, 10, field="spec.roles[0].partition")


def test_superscript_digit_raises_int_or_string_error() -> None:
    with pytest.raises(IntOrStringError, match=r"^maxUnavailable: "):
        intstr.max_unavailable("²", 10)


def test_error_is_a_value_error() -> None:
    assert issubclass(IntOrStringError, ValueError)


@pytest.mark.parametrize(
    ("unavailable", "surge", "total", "want"),
    [
        pytest.param(None, None, 4, (1, 0), id="defaults"),
        pytest.param(2, None, 4, (2, 0), id="int-unavailable"),
        pytest.param("50%", "25%", 4, (2, 1), id="percentages"),
        pytest.param("33%", "33%", 10, (3, 4), id="round-down-and-up"),
        pytest.param(0, 1, 4, (0, 1), id="zero-unavailable-with-surge"),
        pytest.param("0%", "1%", 4, (0, 1), id="zero-percent-with-surge-rounded-up"),
        pytest.param("10%", "0%", 3, (1, 0), id="both-percentages-round-to-0"),
        pytest.param("0%", "0%", 10, (1, 0), id="both-0-percent"),
        pytest.param("0%", 0, 10, (1, 0), id="percent-0-and-literal-surge-0"),
        pytest.param("20%", None, 4, (1, 0), id="percent-rounds-to-0-surge-unset"),
        pytest.param(0, "10%", 3, (0, 1), id="literal-0-with-surge-percent-rounding-up-to-1"),
    ],
)
def test_update_budget(
    unavailable: int | str | None, surge: int | str | None, total: int, want: tuple[int, int]
) -> None:
    assert intstr.update_budget(unavailable, surge, total, "rollout") == want


@pytest.mark.parametrize(
    ("unavailable", "surge"),
    [
        pytest.param(0, 0, id="0-0"),
        pytest.param(0, None, id="0-unset"),
        pytest.param(0, "0%", id="0-and-0-percent"),
    ],
)
def test_update_budget_rejects_literal_zero_without_surge(unavailable: int | str, surge: int | str | None) -> None:
    with pytest.raises(IntOrStringError, match=r"^rollout\.maxUnavailable: may be 0 only when maxSurge"):
        intstr.update_budget(unavailable, surge, 3, "rollout")


@pytest.mark.parametrize(
    ("unavailable", "surge", "field"),
    [
        pytest.param("x", None, "rollout.maxUnavailable", id="bad-unavailable"),
        pytest.param(1, "x", "rollout.maxSurge", id="bad-surge"),
    ],
)
def test_update_budget_errors_name_the_nested_field(
    unavailable: int | str, surge: int | str | None, field: str
) -> None:
    with pytest.raises(IntOrStringError, match=rf"^{field}: "):
        intstr.update_budget(unavailable, surge, 3, "rollout")
