"""What ``run`` prints when it ends: the cause once, last before the verdict; pure, from the report.

Why this module exists: a run that stopped on one cause printed one "not run" line per behaviour
(47 for Core, 267 for a full run) before the error that explained them, and never the error's
hint. Now the end of a run reads: the preflight checks that failed (all of them were printed as
they were known), the verdict of each profile the run selected something of, one line per shared
cause (:mod:`conformance.framework.causes`), the failures of their own, the notes, then, last
before the verdict and so the first thing read, what stopped the run (``error: ...`` and
``  -> hint``, with how many behaviours it left undecided: one line, not one per behaviour) and the
interruption, and the verdict with what the run was judged on (:mod:`conformance.framework.judged`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

FAILED = ("non-conformant", "warning", "error")
FAILURE_WIDTH = 300
NOTE_WIDTH = 500
_COUNT = re.compile(r" \((\d+) behaviours? not decided\)$")


@dataclass(frozen=True)
class Line:
    text: str
    error: bool = False  # printed in red


def _stopping_cause(error: Mapping[str, Any] | None, causes: Sequence[Mapping[str, Any]]) -> int | None:
    """The index of the cause the run's ``error`` already says (its reason starts the error's message)."""
    if not error:
        return None
    message = str(error.get("message", ""))
    for i, cause in enumerate(causes):
        reason = _COUNT.sub("", str(cause.get("cause", "")))
        if reason and message.startswith(reason):
            return i
    return None


def summary(report: Mapping[str, Any], paths: Sequence[str], unwritten: str | None = None) -> list[Line]:
    """The lines ``run`` prints at its end (see the module docstring); ``unwritten`` says why no
    report could be written (None: it was, at ``paths``). Pure."""
    out: list[Line] = []
    error = report.get("error")
    causes = list(report.get("causes") or [])
    folded = _stopping_cause(error, causes)
    for check in report.get("preflight") or []:
        if check.get("result") == "missing":
            out.append(Line(f"  preflight {check['name']:28} {check['result']:8} {check.get('message', '')}"))
    for profile in report.get("profiles") or []:
        if not any(v for k, v in profile["counts"].items() if k != "skipped-by-user"):
            continue  # nothing of it was selected (--id, --feature): no verdict to read
        counts = ", ".join(f"{v} {k}" for k, v in profile["counts"].items() if v)
        out.append(Line(f"  profile {profile['profile']:20} {profile['verdict']:9} {counts}"))
    explained: set[str] = set()
    for i, cause in enumerate(causes):  # one line per shared cause, then the failures of their own
        explained.update(cause["behaviours"])
        if i == folded:
            continue
        n = len(cause["behaviours"])
        out.append(Line(f"  cause ({n} {'behaviour' if n == 1 else 'behaviours'}): {cause['cause']}"))
    for test in report.get("tests") or []:
        if test["outcome"] in FAILED and test["id"] not in explained:
            out.append(Line(f"  {test['outcome']:15} {test['id']}: {str(test.get('message', ''))[:FAILURE_WIDTH]}"))
    for note in report.get("notes") or []:
        out.append(Line(f"  note: {str(note)[:NOTE_WIDTH]}"))
    if error:  # last but the verdict: what stopped the run, once, with how many behaviours it cost
        count = ""
        if folded is not None:
            n = len(causes[folded].get("behaviours") or [])
            count = f" ({n} {'behaviour' if n == 1 else 'behaviours'} not decided)"
        out.append(Line(f"error: {error['message']}{count}", error=True))
        if error.get("hint"):
            out.append(Line(f"  -> {error['hint']}"))
    run = report.get("run") or {}
    if run.get("interrupted"):
        out.append(Line(str(run.get("interruption") or "interrupted")))
    if unwritten is not None:
        if "no report could be written" not in str((error or {}).get("message")):
            out.append(Line(f"error: {unwritten}", error=True))
        out.append(Line(f"verdict: {verdict_text(report)} (exit code {report.get('exitCode')}); no report was written"))
    else:
        out.append(Line(f"verdict: {verdict_text(report)}; report: {', '.join(paths)}"))
    return out


def verdict_text(report: Mapping[str, Any]) -> str:
    """``partial`` or, when the run was narrowed, ``partial (judged on the selection: success;
    fully run: Plugins; narrowed: Core (12 of 47))``: the exit code follows the second. Pure."""
    from ..framework.judged import judged_text

    verdict = str(report.get("verdict", "?"))
    judged = report.get("judged")
    if not isinstance(judged, Mapping) or (judged.get("verdict") == verdict and not judged.get("narrowed")):
        return verdict
    return f"{verdict} (judged on the selection: {judged_text(dict(judged), said=True)})"
