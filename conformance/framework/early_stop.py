"""Stopping a wait early once its outcome is decided, so a missing feature costs seconds, not its timeout.

Why this module exists: a test of a feature the implementation lacks waits for Pods that never
come, to the end of its documented timeout (120 s on the defaults), and a run of an incomplete
implementation then takes the sum of those timeouts. Most of that waiting is for nothing: when an
implementation has created nothing for a ModelServing and keeps reporting an error about it, the
wait's outcome is already known.

The rule (:func:`decided`), deliberately narrow so that it never fails an implementation the full
wait would have passed:

- nothing was created: no Pod of the ModelServing exists (any Pod, even a failed one, means the
  implementation acted, and the wait goes on);
- at least :data:`MIN_ELAPSED` seconds have passed since the wait began (time to reconcile once);
- the implementation reported an error about this ModelServing at least :data:`MIN_REPORTS`
  times: Warning Events about it (their ``count`` included) plus lines of its log that name the
  object and an error. One report could be a transient conflict the next retry heals; a repeated
  one with nothing created is a reconcile that keeps failing the same way.

A log line names the object when it contains ``namespace/name`` or both the namespace and the name
as whole names (structured loggers write ``"namespace":"ns","name":"x"``); it reports an error when it
contains an error word (:data:`ERROR_WORDS`) or starts with a klog error level (``E1203 ...``).
The namespace is the test's own (unique per test), so another test's lines never match. Pure;
:class:`LogTail` is the only part that reads a file.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

MIN_ELAPSED = 5.0
MIN_REPORTS = 2
ERROR_WORDS = re.compile(r"\b(error|errors|failed|failure|fails|invalid|refused|unknown|unregistered)\b", re.I)
KLOG_ERROR = re.compile(r"^E\d{4} ")
SHOWN = 300
# an object name is a whole word of name characters: "llm" is not in "llm-2" nor in "x.llm"
_START, _END = r"(?<![\w.-])", r"(?![\w.-])"  # characters of the quoted report


def names_object(line: str, namespace: str, name: str) -> bool:
    """Whether a log line is about ModelServing ``namespace/name``. Pure."""
    if re.search(rf"{re.escape(namespace)}/{re.escape(name)}{_END}", line):
        return True
    return bool(
        re.search(rf"{_START}{re.escape(namespace)}{_END}", line)
        and re.search(rf"{_START}{re.escape(name)}{_END}", line)
    )


def reports_error(line: str) -> bool:
    """Whether a log line reports an error. Pure."""
    return bool(ERROR_WORDS.search(line) or KLOG_ERROR.match(line))


def error_lines(lines: Iterable[str], namespace: str, name: str) -> list[str]:
    """The lines reporting an error about ModelServing ``namespace/name``. Pure."""
    return [line for line in lines if names_object(line, namespace, name) and reports_error(line)]


@dataclass(frozen=True)
class WarningEvent:
    """A Warning Event about the ModelServing: its reason, message and how often it happened."""

    reason: str
    message: str
    count: int = 1


def decided(
    *, created: int, elapsed: float, warnings: list[WarningEvent], log_errors: list[str], namespace: str, name: str
) -> str | None:
    """Why the wait's outcome is decided (it can only fail), or None when it must go on. Pure."""
    if created or elapsed < MIN_ELAPSED:
        return None
    reports = sum(max(w.count, 1) for w in warnings) + len(log_errors)
    if reports < MIN_REPORTS:
        return None
    if warnings:
        last = warnings[-1]
        quoted = f"Warning Event {last.reason}: {last.message}"
    else:
        quoted = f"its log: {log_errors[-1].strip()}"
    return (
        f"no Pod of ModelServing {namespace}/{name} was created in {elapsed:.0f}s and the implementation reported "
        f"an error about it {reports} times: the suite stopped waiting early (the outcome is decided); the last "
        f"report, {quoted[:SHOWN]}"
    )


@dataclass
class LogTail:
    """The lines an implementation's log gained since this tail was made (read incrementally)."""

    path: Path
    offset: int = 0
    _partial: str = field(default="", repr=False)

    @classmethod
    def from_now(cls, path: Path) -> LogTail:
        try:
            size = path.stat().st_size
        except OSError:
            size = 0
        return cls(path, size)

    def new_lines(self) -> list[str]:
        """Complete lines written since the last call (none when the log cannot be read)."""
        try:
            with self.path.open("rb") as f:
                f.seek(self.offset)
                chunk = f.read()
        except OSError:
            return []
        self.offset += len(chunk)
        text = self._partial + chunk.decode(errors="replace")
        lines = text.split("\n")
        self._partial = lines.pop()
        return lines
