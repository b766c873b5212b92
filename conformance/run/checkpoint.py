"""The report is written as results arrive, so no way of ending a run loses what it completed.

Why this module exists: a run wrote its report once, at the end. A CI timeout (``timeout 40
kthena-conformance run``: SIGTERM to the whole process group) killed the suite's pytest before it
wrote its results file, and the report said every behaviour was "not run", including those the
terminal had already printed as passed; SIGKILL of the runner left no report at all. Now:

- every finished test case the suite reports on its progress file (:mod:`.progress`) is kept, and
  a pass whose results file never came (killed) is read from there (:func:`results_from_progress`);
- while the passes run, the report (YAML, JSON and ``index.html``) is rewritten, atomically (a
  temporary file renamed over the old one), at most every :data:`EVERY` seconds when something
  new finished: what completed, every other selected behaviour ``not run``, ``run.interrupted``
  true and ``run.progress`` {done, selected, updatedAt} (:func:`provisional`). A run killed at any
  moment leaves that report, valid for ``report verify``; the run's last write replaces it with
  the final one (no ``run.progress``).
"""

from __future__ import annotations

import copy
import datetime as dt
import time
from collections.abc import Callable, Mapping
from typing import Any

EVERY = 5.0  # seconds between two writes of the report while the passes run
UNFINISHED = "the run had not finished when this report was written"


def results_from_progress(
    finished: Mapping[str, Mapping[str, Any]], registry: Mapping[str, Any]
) -> list[dict[str, Any]]:
    """The results of a pass from its ``finished`` progress events (by node id), in the results
    file's form; a case whose behaviour ``registry`` does not know is left out (as the plugin does).
    Pure."""
    from ..framework.outcomes import Outcome, TestResult

    out = []
    for nodeid, event in finished.items():
        b = registry.get(str(event.get("id")))
        if b is None:
            continue
        try:
            outcome = Outcome(str(event.get("outcome")))
            duration = float(event.get("duration", 0.0))
        except (ValueError, TypeError):
            outcome, duration = Outcome.ERROR, 0.0
        out.append(
            TestResult(
                id=b.id,
                nodeid=str(event.get("nodeid") or nodeid),
                feature=b.feature,
                outcome=outcome,
                duration=round(duration, 3),
                message=str(event.get("message") or "")[:4000],
                statement=b.statement,
                spec=b.spec,
                evidence=event.get("evidence") or None,
                level=b.level,
                observed=event.get("observed") or None,
            ).as_dict()
        )
    return out


def partial_pass(pass_name: str, results: list[dict[str, Any]]) -> dict[str, Any]:
    """A pass still running (or killed), as :func:`.finish._assemble` reads a pass. Pure."""
    return {"pass": pass_name, "exitStatus": None, "interrupted": True, "results": results}


def provisional(data: dict[str, Any], done: int, selected: int, now: dt.datetime) -> dict[str, Any]:
    """A copy of the run's report ``data`` marked as written while the run went on. Pure."""
    out = copy.deepcopy(data)
    run = out["run"]
    run["interrupted"] = True
    run.setdefault("interruption", f"{UNFINISHED} ({done} of {selected} behaviours done)")
    run["progress"] = {"done": done, "selected": selected, "updatedAt": now.isoformat()}
    run.pop("finishedAt", None)
    run.pop("durationSeconds", None)
    out["exitCode"] = None
    return out


class Checkpoint:
    """Calls ``write`` (which builds and writes the provisional report) when something new
    finished and :data:`EVERY` seconds have passed since the last write (or ``force``)."""

    def __init__(self, write: Callable[[], None], clock: Callable[[], float] = time.monotonic, every: float = EVERY):
        self._write = write
        self._clock = clock
        self._every = every
        self._last: float | None = None
        self._pending = False
        self.writes = 0
        self.failure: str | None = None

    def changed(self) -> None:
        self._pending = True

    def maybe(self, *, force: bool = False) -> bool:
        now = self._clock()
        if not force and (not self._pending or (self._last is not None and now - self._last < self._every)):
            return False
        self._last, self._pending = now, False
        try:
            self._write()
        except Exception as exc:  # a report that cannot be written now is written at the end, or said there
            self.failure = f"{type(exc).__name__}: {exc}"
            return False
        self.writes += 1
        return True
