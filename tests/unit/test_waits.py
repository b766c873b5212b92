"""wait_for: first satisfying value, probe exceptions as "not yet", WaitTimeout naming what and the last value."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from conformance.framework.waits import WaitTimeout, holds_for, wait_for


def sequence(*values: Any) -> Callable[[], Any]:
    """A probe returning ``values`` in turn (raising those that are exceptions), then the last forever."""
    items: Iterator[Any] = iter(values)
    last: list[Any] = [None]

    def probe() -> Any:
        value = next(items, last[0])
        last[0] = value
        if isinstance(value, BaseException):
            raise value
        return value

    return probe


@pytest.mark.parametrize(
    ("values", "until", "expected"),
    [
        pytest.param(("ready",), bool, "ready", id="immediately"),
        pytest.param((None, "", 0, "x"), bool, "x", id="falsy-then-truthy"),
        pytest.param((1, 2, 3, 4), lambda v: v >= 3, 3, id="first-satisfying-not-later"),
        pytest.param((KeyError("gone"), ValueError("no"), "ok"), bool, "ok", id="exceptions-are-not-yet"),
        pytest.param(([], [1]), lambda v: v == [], [], id="falsy-value-accepted-by-until"),
        pytest.param((0,), lambda v: v == 0, 0, id="zero-accepted"),
    ],
)
def test_returns_first_satisfying_value(values: tuple[Any, ...], until: Callable[[Any], bool], expected: Any) -> None:
    assert wait_for("thing", sequence(*values), until=until, timeout=1.0, interval=0.001) == expected


def test_stops_polling_once_satisfied() -> None:
    calls: list[int] = []

    def probe() -> int:
        calls.append(1)
        return len(calls)

    assert wait_for("count", probe, until=lambda n: n == 3, timeout=1.0, interval=0.001) == 3
    assert len(calls) == 3


@pytest.mark.parametrize(
    ("values", "last_seen"),
    [
        pytest.param(("Pending",), "last seen: Pending", id="last-string-value"),
        pytest.param(({"phase": "Pending"},), "last seen: {'phase': 'Pending'}", id="last-dict-repr"),
        pytest.param((None,), "last seen: None", id="none"),
        pytest.param((KeyError("pod"),), "last seen: KeyError: 'pod'", id="last-exception"),
        pytest.param((RuntimeError("boom"), "Pending"), "last seen: Pending", id="value-after-exception"),
        pytest.param(("Pending", RuntimeError("api down")), "last seen: RuntimeError: api down", id="exc-after-value"),
    ],
)
def test_timeout_names_what_and_last_seen(values: tuple[Any, ...], last_seen: str) -> None:
    with pytest.raises(WaitTimeout) as info:
        wait_for("pod x to be Ready", sequence(*values), until=lambda _: False, timeout=0.05, interval=0.005)
    message = str(info.value)
    assert message.startswith("waited ")
    assert "for pod x to be Ready;" in message
    assert message.endswith(last_seen)


def test_wait_timeout_is_an_assertion_error() -> None:
    assert issubclass(WaitTimeout, AssertionError)
    with pytest.raises(AssertionError):
        wait_for("never", lambda: False, timeout=0.01, interval=0.001)


def test_timeout_message_names_the_deadline_exactly() -> None:
    with pytest.raises(WaitTimeout, match=r"^waited 0.05s for x;"):
        wait_for("x", lambda: False, timeout=0.05, interval=0.005)


def test_long_last_value_is_truncated() -> None:
    with pytest.raises(WaitTimeout) as info:
        wait_for("x", lambda: "a" * 5000, until=lambda _: False, timeout=0.02, interval=0.005)
    message = str(info.value)
    assert message.endswith("a" * 600 + "...")
    assert len(message) < 700


def test_zero_timeout_still_probes_once() -> None:
    assert wait_for("x", lambda: "done", timeout=0) == "done"
    calls: list[int] = []

    def probe() -> bool:
        calls.append(1)
        return False

    with pytest.raises(WaitTimeout):
        wait_for("x", probe, timeout=0, interval=0.001)
    assert len(calls) == 1


@pytest.mark.parametrize("timeout", [0.05, 0.1, 0.2])
def test_respects_the_deadline(timeout: float) -> None:
    started = time.monotonic()
    with pytest.raises(WaitTimeout):
        wait_for("x", lambda: None, timeout=timeout, interval=0.01)
    elapsed = time.monotonic() - started
    assert timeout <= elapsed < timeout + 0.5


def test_exceptions_from_until_propagate() -> None:
    # Only the probe's exceptions count as "not yet"; a broken predicate is a bug in the test.
    def until(_: object) -> bool:
        raise ZeroDivisionError

    with pytest.raises(ZeroDivisionError):
        wait_for("x", lambda: 1, until=until, timeout=0.05, interval=0.005)


def test_base_exceptions_are_not_swallowed() -> None:
    def probe() -> None:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        wait_for("x", probe, timeout=0.05, interval=0.005)


def test_a_timeout_describes_the_last_value_in_words_when_told_how() -> None:
    with pytest.raises(WaitTimeout) as info:
        wait_for("3 Pods", sequence([]), until=lambda _: False, timeout=0.05, interval=0.005,
                 describe=lambda pods: "no Pod exists" if not pods else f"{len(pods)} Pods")  # fmt: skip
    assert str(info.value).endswith("last seen: no Pod exists")


# -- holds_for: "must not change", ended early by an event ----------------------------------------------


def test_holds_for_lasts_its_window_without_an_event() -> None:
    started = time.monotonic()
    assert holds_for("x", lambda: 1, lambda v: v == 1, seconds=0.05, interval=0.005) == 1
    assert time.monotonic() - started >= 0.05


def test_holds_for_ends_on_the_event_after_a_checked_observation() -> None:
    seen: list[str] = []

    def probe() -> int:
        seen.append("probe")
        return 1

    def settled() -> bool:
        seen.append("settled")
        return len(seen) >= 4

    started = time.monotonic()
    assert holds_for("x", probe, lambda v: v == 1, seconds=30, interval=0.001, settled=settled) == 1
    assert time.monotonic() - started < 5
    assert seen == ["probe", "settled", "probe", "settled"]  # every observation checked before the event is asked


@pytest.mark.parametrize(
    ("values", "event"),
    [
        pytest.param((1, 2), False, id="breaks-before-the-event"),
        pytest.param((2,), True, id="first-observation-checked-although-settled"),
    ],
)
def test_holds_for_fails_on_a_broken_observation_even_with_the_event(values: tuple[int, ...], event: bool) -> None:
    with pytest.raises(WaitTimeout, match="replicas 1 stopped holding; seen: 2"):
        holds_for("replicas 1", sequence(*values), lambda v: v == 1, seconds=30, interval=0.001,
                  settled=lambda: event)  # fmt: skip


def test_holds_for_an_event_that_cannot_be_read_is_not_yet() -> None:
    def settled() -> bool:
        raise RuntimeError("status not readable")

    started = time.monotonic()
    holds_for("x", lambda: 1, lambda v: v == 1, seconds=0.05, interval=0.005, settled=settled)
    assert time.monotonic() - started >= 0.05
