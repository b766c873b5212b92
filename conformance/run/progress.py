"""What a run prints on the terminal while it works: the profiles it runs, one line per finished
behaviour, read from the suite's progress file while a pass runs.

The suite's passes are pytest subprocesses whose output goes to a log file, so without this the
terminal is silent for minutes. The suite's plugin appends one JSON object per finished behaviour
to a progress file (``--progress-file``); :class:`ProgressTail` reads what was appended since the
last poll (complete lines only) and :func:`behaviour_line` turns each into one terminal line. The
formatting and the reading are pure or file-only, so they are unit-tested without a cluster.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

# Outcomes that need no explanation on the terminal; any other prints its message's first line.
QUIET_OUTCOMES = frozenset({"passed"})
MESSAGE_WIDTH = 200
ETA_AFTER = 5  # behaviours finished before the line estimates the time left


NOT_ASKED = "not selected (--profile)"


def profile_lines(running: Sequence[str], all_profiles: Sequence[str], left_out: Mapping[str, str]) -> list[str]:
    """The profiles a run covers, then every profile it leaves out with the reason: one line per
    reason, naming the profiles it applies to.

    ``running`` the profiles the run covers (empty: all of them); ``left_out`` reasons the harness
    decided (e.g. Accelerators without a capability file); a profile missing from ``running``
    with no such reason was not asked for."""
    chosen = [p for p in all_profiles if not running or p in running]
    lines = [f"profiles: {', '.join(chosen) or 'none'} ({len(chosen)} of {len(all_profiles)})"]
    by_reason: dict[str, list[str]] = {}
    for name in all_profiles:
        if name not in chosen:
            by_reason.setdefault(left_out.get(name, NOT_ASKED), []).append(name)
    for reason, names in by_reason.items():
        lines.append(f"left out: {', '.join(names)}: {reason}")
    return lines


def eta_text(elapsed: float, done: int, total: int) -> str:
    """``, ~4m left`` from the average pace so far (nothing before 5 behaviours, or when none are
    left): a rough guide, since slow behaviours run first. Pure."""
    left = total - done
    if done < ETA_AFTER or left <= 0:
        return ""
    seconds = elapsed / done * left
    return f", ~{int(seconds // 60)}m left" if seconds >= 60 else f", ~{max(1, int(seconds))}s left"


def behaviour_line(event: Mapping[str, Any], done: int, total: int, eta: str = "") -> str:
    """``[37/91] dns/services/recreated passed 3.1s``, plus the message's first line when the
    outcome is not a pass. ``done`` counts over the whole run, ``total`` is what it selected;
    ``eta`` (:func:`eta_text`) goes inside the brackets."""
    width = len(str(total))
    outcome = str(event.get("outcome", "?"))
    try:
        duration = f"{float(event.get('duration', 0.0)):.1f}s"
    except (TypeError, ValueError):
        duration = "?s"
    line = f"[{done:>{width}}/{total}{eta}] {event.get('id', '?')} {outcome} {duration}"
    message = str(event.get("message") or "").strip()
    if outcome not in QUIET_OUTCOMES and message:
        first = message.splitlines()[0]
        line += f": {first[:MESSAGE_WIDTH]}{'...' if len(first) > MESSAGE_WIDTH else ''}"
    return line


def parse_events(chunk: str) -> list[dict[str, Any]]:
    """The events in ``chunk`` (JSON objects, one a line); a line that is not one is skipped."""
    events = []
    for raw in chunk.splitlines():
        try:
            event = json.loads(raw)
        except ValueError:
            continue
        if isinstance(event, dict):
            events.append(event)
    return events


class ProgressTail:
    """Reads the complete lines appended to ``path`` since the last :meth:`poll`.

    A partial last line (the writer is mid-write) stays for the next poll; a missing file is
    simply no news yet."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._offset = 0
        self._partial = b""

    def poll(self) -> list[dict[str, Any]]:
        try:
            with self.path.open("rb") as f:
                f.seek(self._offset)
                data = f.read()
        except FileNotFoundError:
            return []
        self._offset += len(data)
        data = self._partial + data
        complete, _, self._partial = data.rpartition(b"\n")
        return parse_events(complete.decode("utf-8", errors="replace")) if complete else []


class BehaviourCounter:
    """Numbers the finished behaviours over the whole run (both passes) against the selection."""

    def __init__(self, total: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.total = total
        self.done = 0
        self._clock = clock
        self._started = clock()

    def lines(self, events: Sequence[Mapping[str, Any]]) -> list[str]:
        out = []
        for event in events:
            self.done += 1
            total = max(self.total, self.done)
            eta = eta_text(self._clock() - self._started, self.done, total)
            out.append(behaviour_line(event, self.done, total, eta))
        return out
