"""One line per cause: failures that share a cause are reported once, with the behaviours it explains.

Why this module exists: an implementation that lacks a feature, or whose CRD lacks a documented
field, fails a dozen behaviours for one reason. Listed one by one, the reason drowns; an
implementer wants "the CRD lacks X" and "feature Y does not work at all" as two lines, then the
failures that are each their own story. Two kinds of shared cause are recognised, both from what
the run already knows (nothing here guesses from message wording beyond the prefix the run itself
writes):

- a documented field the installed CRD lacks (preflight ``crd-documented-fields``): every failed
  behaviour the run blamed on it (:func:`..documented_fields.blame` wrote its message's prefix);
- a feature none of whose behaviours passed, when at least :data:`MIN_FOR_FEATURE` of them ran:
  the feature is missing or broken as a whole; the line quotes the first failure's message;
- what stopped the run (the controller under test or the API server gone, an interruption, a
  failed deployment): every behaviour it left ``not run: <reason>`` or ``undecided: <reason> --
  <what the test saw>`` (both written by the run, :func:`not_run` and :func:`undecided`) is under
  one cause, first, so one root cause is one line with the number of behaviours it cost.

Pure: report ``tests`` entries in, report ``causes`` entries out.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from .messages import short

FAILED = ("non-conformant", "error", "warning")
RAN = (*FAILED, "passed")
MIN_FOR_FEATURE = 2
CRD_PREFIX = "the installed CRD lacks "
NOT_RUN = "not run: "
UNDECIDED = "undecided: "
UNDECIDED_SEP = " -- "
QUOTED = 600


def not_run(reason: str) -> str:
    """The message of a behaviour ``reason`` kept from running."""
    return f"{NOT_RUN}{reason}"


def undecided(reason: str, message: str) -> str:
    """The message of a behaviour that ended after ``reason`` made its outcome meaningless."""
    return f"{UNDECIDED}{reason}{UNDECIDED_SEP}{message}"


def stopped_by(message: str) -> str | None:
    """The reason in a :func:`not_run` or :func:`undecided` message, else None. Pure."""
    if message.startswith(NOT_RUN):
        return message[len(NOT_RUN) :]
    if message.startswith(UNDECIDED):
        return message[len(UNDECIDED) :].split(UNDECIDED_SEP, 1)[0]
    return None


def causes(tests: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The shared causes of the failures among ``tests`` (report entries): what stopped the run
    first, then CRD fields, then features."""
    found: list[dict[str, Any]] = []
    explained: set[str] = set()
    tests = list(tests)
    by_reason: dict[str, list[str]] = {}
    for t in tests:
        reason = stopped_by(str(t.get("message", ""))) if t["outcome"] in FAILED else None
        if reason is not None:
            by_reason.setdefault(reason, []).append(t["id"])
    for reason, ids in by_reason.items():
        noun = "behaviour" if len(ids) == 1 else "behaviours"
        found.append({"cause": f"{short(reason, QUOTED)} ({len(ids)} {noun} not decided)", "behaviours": ids})
        explained.update(ids)
    by_field: dict[str, list[str]] = {}
    for t in tests:
        message = str(t.get("message", ""))
        if t["outcome"] in FAILED and message.startswith(CRD_PREFIX) and t["id"] not in explained:
            fields = message[len(CRD_PREFIX) :].split(" (preflight", 1)[0]
            by_field.setdefault(fields, []).append(t["id"])
    for fields, ids in by_field.items():
        found.append(
            {"cause": f"the installed CRD lacks {fields} (preflight crd-documented-fields)", "behaviours": ids}
        )
        explained.update(ids)
    by_feature: dict[str, list[Mapping[str, Any]]] = {}
    for t in tests:
        if t["outcome"] in RAN and not str(t.get("message", "")).startswith(NOT_RUN):  # an interrupted run's
            by_feature.setdefault(str(t["feature"]), []).append(t)
    for feature, ran in by_feature.items():
        failed = [t for t in ran if t["outcome"] in FAILED and t["id"] not in explained]
        if len(ran) < MIN_FOR_FEATURE or len(failed) != len(ran):
            continue
        first = failed[0]
        found.append(
            {
                "cause": (
                    f"feature {feature}: none of its {len(ran)} behaviours passed; the first, {first['id']}: "
                    f"{_short(str(first.get('message', '')))}"
                ),
                "behaviours": [t["id"] for t in failed],
            }
        )
    return found


def _short(text: str) -> str:
    return short(text, QUOTED)
