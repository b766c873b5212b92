"""Polling with a deadline: the only way tests wait.

Nothing in the suite or the project's tests sleeps to synchronise. A wait names what it waits
for, polls a condition until it holds or the deadline passes, and on timeout says what it last
saw, so a failure reads as "waited 30s for pod x to be Ready; last seen: phase=Pending".

A wait also says that it is waiting: :func:`observe` registers a callback told when a wait starts
(what it waits for and its deadline) and ends. The suite's plugin uses it to tell the run what a
slow behaviour is waiting for, so the terminal never sits silent (:mod:`conformance.run.progress`).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from typing import TypeVar

T = TypeVar("T")

# Told ``(what, seconds)`` when a wait starts and ``(None, None)`` when it ends; never raises into a wait.
WaitObserver = Callable[[str | None, float | None], None]
_observers: list[WaitObserver] = []


def observe(observer: WaitObserver | None) -> None:
    """Make ``observer`` the one told about waits (``None``: nobody)."""
    _observers[:] = [observer] if observer is not None else []


def _tell(what: str | None, seconds: float | None) -> None:
    for observer in _observers:
        with contextlib.suppress(Exception):  # an observer is a convenience: it never breaks a wait
            observer(what, seconds)


@contextlib.contextmanager
def _told(what: str, seconds: float) -> Iterator[None]:
    _tell(what, seconds)
    try:
        yield
    finally:
        _tell(None, None)


class WaitTimeout(AssertionError):
    """A condition did not hold before its deadline (an assertion failure, not an error)."""


class WaitDecided(WaitTimeout):
    """A wait given up before its deadline because its outcome was already decided (``give_up``)."""


def wait_for(
    what: str,
    probe: Callable[[], T],
    *,
    until: Callable[[T], bool] = bool,
    timeout: float = 30.0,
    interval: float = 0.1,
    describe: Callable[[T], str] | None = None,
    give_up: Callable[[T, float], str | None] | None = None,
) -> T:
    """Call ``probe`` until ``until(result)`` holds; return that result.

    Exceptions from ``probe`` count as "not yet" (the object may not exist yet); the last one is
    reported if the deadline passes, the last result in words when ``describe`` says how.
    ``give_up(result, seconds waited)`` may end the wait before its deadline by saying why its
    outcome is already decided (:mod:`.early_stop`); the failure then quotes that reason.
    """
    with _told(what, timeout):
        return _wait(what, probe, until, timeout, interval, describe, give_up)


def _wait(
    what: str,
    probe: Callable[[], T],
    until: Callable[[T], bool],
    timeout: float,
    interval: float,
    describe: Callable[[T], str] | None,
    give_up: Callable[[T, float], str | None] | None,
) -> T:
    started = time.monotonic()
    deadline = started + timeout
    last: object = "<never observed>"
    while True:
        try:
            value = probe()
        except Exception as exc:
            last = f"{type(exc).__name__}: {exc}"
        else:
            if until(value):
                return value
            last = describe(value) if describe is not None else value
            reason = give_up(value, time.monotonic() - started) if give_up is not None else None
            if reason is not None:
                raise WaitDecided(f"gave up on {what} before the {timeout:g}s deadline: {reason}")
        if time.monotonic() >= deadline:
            raise WaitTimeout(f"waited {timeout:g}s for {what}; last seen: {_short(last)}")
        time.sleep(interval)


def _short(value: object, limit: int = 600) -> str:
    text = repr(value) if not isinstance(value, str) else value
    return text if len(text) <= limit else text[:limit] + "..."


def holds_for(
    what: str,
    probe: Callable[[], T],
    check: Callable[[T], bool],
    *,
    seconds: float,
    interval: float = 0.2,
    settled: Callable[[], bool] | None = None,
) -> T:
    """Observe ``probe`` for ``seconds``; every observation must satisfy ``check``.

    The counterpart of :func:`wait_for` for "must not happen" assertions (a Pod is not deleted,
    a UID does not change). Fails at the first observation that breaks it, with what was seen.
    Errors from ``probe`` propagate: an observation that cannot be made is not a pass.

    ``settled`` ends the observation before ``seconds`` once it returns true: an event the
    implementation shows when nothing more will change (an autoscaler's status reporting that it
    wants the replicas it has). It is asked only after an observation that satisfied ``check``, so
    the first observation is always checked; an exception from it counts as "not yet". Without the
    event the observation lasts the whole ``seconds``.
    """
    with _told(f"{what} to keep holding", seconds):
        deadline = time.monotonic() + seconds
        while True:
            value = probe()
            if not check(value):
                raise WaitTimeout(f"{what} stopped holding; seen: {_short(value)}")
            if time.monotonic() >= deadline or (settled is not None and _true(settled)):
                return value
            time.sleep(interval)


def _true(event: Callable[[], bool]) -> bool:
    try:
        return bool(event())
    except Exception:
        return False
