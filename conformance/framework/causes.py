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
  the feature is missing or broken as a whole; the line quotes the first failure's message.

Pure: report ``tests`` entries in, report ``causes`` entries out.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

FAILED = ("non-conformant", "error", "warning")
RAN = (*FAILED, "passed")
MIN_FOR_FEATURE = 2
CRD_PREFIX = "the installed CRD lacks "
QUOTED = 600


def causes(tests: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The shared causes of the failures among ``tests`` (report entries), CRD fields first."""
    found: list[dict[str, Any]] = []
    explained: set[str] = set()
    by_field: dict[str, list[str]] = {}
    for t in tests:
        message = str(t.get("message", ""))
        if t["outcome"] in FAILED and message.startswith(CRD_PREFIX):
            fields = message[len(CRD_PREFIX) :].split(" (preflight", 1)[0]
            by_field.setdefault(fields, []).append(t["id"])
    for fields, ids in by_field.items():
        found.append(
            {"cause": f"the installed CRD lacks {fields} (preflight crd-documented-fields)", "behaviours": ids}
        )
        explained.update(ids)
    by_feature: dict[str, list[Mapping[str, Any]]] = {}
    for t in tests:
        if t["outcome"] in RAN and not str(t.get("message", "")).startswith("not run:"):  # an interrupted run's
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
    line = " ".join(text.split())
    return line if len(line) <= QUOTED else line[:QUOTED] + "..."
