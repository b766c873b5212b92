"""What a run prints on the terminal while it works: the profiles it runs, one line per finished
behaviour, and what a slow behaviour is waiting for, read from the suite's progress file while a
pass runs.

The suite's passes are pytest subprocesses whose output goes to a log file, so without this the
terminal is silent for minutes. The suite's plugin appends one JSON object a line to a progress
file (``--progress-file``), each with an ``event``:

- ``collected`` ``{cases: {behaviour id: number of its test cases}}``: what one process collected
  (a parametrized behaviour has several cases; its line is printed once all of them finished);
- ``started`` ``{id, nodeid, at}``: a test case began (``at``: wall-clock seconds);
- ``waiting`` ``{id, nodeid, what, seconds, at}``: the case began a documented wait
  (:func:`conformance.framework.waits.observe`); ``waited`` ``{id, nodeid, at}``: it ended;
- ``finished`` (or no ``event``, older suites) ``{id, nodeid, pass, outcome, duration, message,
  evidence}``: a case is over.

:class:`ProgressTail` reads what was appended since the last poll (complete lines only);
:class:`RunProgress` turns the events into lines: ``[37/91] dns/services/recreated passed 3.1s``
when a behaviour's last case finished (the counter counts behaviours, as it names them, against
the behaviours the run selected), and, whenever nothing was printed for :data:`QUIET_SECONDS`, a
``running`` line per behaviour running naming what it waits for and for how long. No
estimate of the time left: slow behaviours run first and waits end early or at their deadline,
so any average would mislead. The formatting and the reading are pure or file-only, so they are
unit-tested without a cluster.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# Outcomes that need no explanation on the terminal; any other prints its message's first line.
QUIET_OUTCOMES = frozenset({"passed"})
MESSAGE_WIDTH = 200
QUIET_SECONDS = 15.0  # the longest the terminal stays silent while a pass runs
RUNNING_SHOWN = 4  # running lines at most per report; the rest are counted
# Worst first: one behaviour's outcome over its cases (as conformance.framework.outcomes.combine).
_RANK = ["non-conformant", "error", "warning", "not-supported", "skipped-by-user", "passed"]


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


def behaviour_line(event: Mapping[str, Any], done: int, total: int) -> str:
    """``[37/91] dns/services/recreated passed 3.1s``, plus the message's first line when the
    outcome is not a pass. ``done`` counts behaviours over the whole run, ``total`` is how many
    it selected."""
    width = len(str(total))
    outcome = str(event.get("outcome", "?"))
    try:
        duration = f"{float(event.get('duration', 0.0)):.1f}s"
    except (TypeError, ValueError):
        duration = "?s"
    line = f"[{done:>{width}}/{total}] {event.get('id', '?')} {outcome} {duration}"
    message = str(event.get("message") or "").strip()
    if outcome not in QUIET_OUTCOMES and message:
        first = message.splitlines()[0]
        line += f": {first[:MESSAGE_WIDTH]}{'...' if len(first) > MESSAGE_WIDTH else ''}"
    return line


def clock_text(seconds: float) -> str:
    """``42s``, ``3m05s``, ``1h02m``: a duration as a person reads it. Pure."""
    s = max(0, int(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{s % 3600 // 60:02d}m"


def running_line(bid: str, running_for: float, what: str | None, waited: float, limit: float | None) -> str:
    """``running: core/x for 1m05s, waiting 42s (of 120s) for the Pods to be Ready``. Pure."""
    line = f"running: {bid} for {clock_text(running_for)}"
    if what:
        of = f" (of {clock_text(limit)})" if limit else ""
        line += f", waiting {clock_text(waited)}{of} for {what}"
    return line[: MESSAGE_WIDTH + 60]


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


@dataclass
class _Running:
    bid: str
    since: float
    what: str | None = None
    waiting_since: float = 0.0
    limit: float | None = None


@dataclass
class RunProgress:
    """The run's progress over both passes: behaviour lines, running lines, and every finished
    case kept (``finished``, by node id) so a pass whose results file never came (killed) still
    has its results.

    ``total`` is the number of behaviours the run selected; ``clock`` gives wall-clock seconds
    (the events' ``at`` are the suite's ``time.time()``)."""

    total: int
    clock: Callable[[], float] = time.time
    done: int = 0
    cases: dict[str, int] = field(default_factory=dict)
    finished: dict[str, dict[str, Any]] = field(default_factory=dict)
    _by_behaviour: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    _printed: set[str] = field(default_factory=set)
    _running: dict[str, _Running] = field(default_factory=dict)
    _last_line: float = 0.0

    def __post_init__(self) -> None:
        self._last_line = self.clock()

    def lines(self, events: Sequence[Mapping[str, Any]]) -> list[str]:
        """The lines ``events`` give: one per behaviour whose last case finished."""
        out: list[str] = []
        for event in events:
            kind = event.get("event", "finished")
            nodeid = str(event.get("nodeid") or event.get("id") or "?")
            if kind == "collected":
                for bid, n in dict(event.get("cases") or {}).items():
                    self.cases[str(bid)] = max(1, int(n))
            elif kind == "started":
                self._running[nodeid] = _Running(str(event.get("id") or nodeid), _at(event, self.clock()))
            elif kind == "waiting" and nodeid in self._running:
                run = self._running[nodeid]
                run.what, run.waiting_since = str(event.get("what") or "") or None, _at(event, self.clock())
                limit = event.get("seconds")
                run.limit = float(limit) if isinstance(limit, int | float) else None
            elif kind == "waited" and nodeid in self._running:
                self._running[nodeid].what = None
            elif kind == "finished":
                out += self._finished(nodeid, dict(event))
        if out:
            self._last_line = self.clock()
        return out

    def _finished(self, nodeid: str, event: dict[str, Any]) -> list[str]:
        self._running.pop(nodeid, None)
        self.finished[nodeid] = event
        bid = str(event.get("id", "?"))
        done = self._by_behaviour.setdefault(bid, [])
        done.append(event)
        if len(done) < self.cases.get(bid, 1) or bid in self._printed:
            return []
        return [self._line(bid)]

    def _line(self, bid: str) -> str:
        self._printed.add(bid)
        self.done += 1
        return behaviour_line(combined(self._by_behaviour[bid]), self.done, max(self.total, self.done))

    def flush(self) -> list[str]:
        """The lines of behaviours some of whose cases never reported (at the end of a pass)."""
        return [self._line(bid) for bid in list(self._by_behaviour) if bid not in self._printed]

    def started(self) -> None:
        """A pass starts: the silence is counted from now."""
        self._last_line = self.clock()
        self._running.clear()

    def quiet_lines(self) -> list[str]:
        """Nothing printed for :data:`QUIET_SECONDS`: a line per behaviour running, longest first (at
        most :data:`RUNNING_SHOWN`, then how many more), or one saying the pass is still going."""
        now = self.clock()
        if now - self._last_line < QUIET_SECONDS:
            return []
        self._last_line = now
        slow = sorted(self._running.values(), key=lambda r: r.since)
        out = [running_line(r.bid, now - r.since, r.what, now - r.waiting_since, r.limit) for r in slow[:RUNNING_SHOWN]]
        if len(slow) > RUNNING_SHOWN:
            out.append(f"running: {len(slow) - RUNNING_SHOWN} more behaviours")
        if not out and self.total and self.done >= self.total:
            out.append(f"running: all {self.total} behaviours done; the pass is finishing (cleanup, results)")
        elif not out:
            out.append(f"running: {self.done} of {self.total} behaviours done; no test has started since")
        return out


def combined(events: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """One behaviour's event from its cases': the worst outcome, the durations added, the
    messages of those that have one. Pure."""
    first = dict(events[0])
    if len(events) == 1:
        return first
    outcomes = [str(e.get("outcome", "error")) for e in events]
    first["outcome"] = min(outcomes, key=lambda o: _RANK.index(o) if o in _RANK else 0)
    total = 0.0
    for e in events:
        with contextlib.suppress(TypeError, ValueError):
            total += float(e.get("duration", 0.0))
    first["duration"] = round(total, 3)
    first["message"] = "; ".join(str(e["message"]) for e in events if e.get("message"))
    return first


def _at(event: Mapping[str, Any], default: float) -> float:
    at = event.get("at")
    return float(at) if isinstance(at, int | float) else default


BehaviourCounter = RunProgress  # the name the run's passes used before (kept until they use RunProgress)
