"""Polling with a deadline: the only way tests wait.

Nothing in the suite or the project's tests sleeps to synchronise. A wait names what it waits
for, polls a condition until it holds or the deadline passes, and on timeout says what it last
saw, so a failure reads as "waited 30s for pod x to be Ready; last seen: phase=Pending".
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


class WaitTimeout(AssertionError):
    """A condition did not hold before its deadline (an assertion failure, not an error)."""


def wait_for(
    what: str,
    probe: Callable[[], T],
    *,
    until: Callable[[T], bool] = bool,
    timeout: float = 30.0,
    interval: float = 0.1,
    describe: Callable[[T], str] | None = None,
) -> T:
    """Call ``probe`` until ``until(result)`` holds; return that result.

    Exceptions from ``probe`` count as "not yet" (the object may not exist yet); the last one is
    reported if the deadline passes, the last result in words when ``describe`` says how.
    """
    deadline = time.monotonic() + timeout
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
        if time.monotonic() >= deadline:
            raise WaitTimeout(f"waited {timeout:g}s for {what}; last seen: {_short(last)}")
        time.sleep(interval)


def _short(value: object, limit: int = 600) -> str:
    text = repr(value) if not isinstance(value, str) else value
    return text if len(text) <= limit else text[:limit] + "..."


def holds_for(
    what: str, probe: Callable[[], T], check: Callable[[T], bool], *, seconds: float, interval: float = 0.2
) -> T:
    """Observe ``probe`` for ``seconds``; every observation must satisfy ``check``.

    The counterpart of :func:`wait_for` for "must not happen" assertions (a Pod is not deleted,
    a UID does not change). Fails at the first observation that breaks it, with what was seen.
    Errors from ``probe`` propagate: an observation that cannot be made is not a pass.
    """
    deadline = time.monotonic() + seconds
    while True:
        value = probe()
        if not check(value):
            raise WaitTimeout(f"{what} stopped holding; seen: {_short(value)}")
        if time.monotonic() >= deadline:
            return value
        time.sleep(interval)
