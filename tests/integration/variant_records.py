"""A broken variant's verdict and its record (``reports/self-validation/<fault>.json``).

Three kinds of variants prove that behaviours can fail (reference faults on a kept cluster,
Accelerators runs with a driver or reference fault, real-node runs); they judge a run the same way
and write the same record, which ``tests/conftest.py`` sums up: one function, so they cannot drift.
A target is a behaviour id or an fnmatch pattern; a SHOULD (or MAY) target that does not hold
comes out ``warning``, which counts as caught (``caughtAs`` says which).
"""

from __future__ import annotations

import fnmatch
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

VARIANTS_DIR = Path(__file__).resolve().parents[2] / "reports" / "self-validation"


@dataclass(frozen=True)
class Verdict:
    outcomes: dict[str, str]  # behaviour id -> outcome, of the tests the run selected
    caught: list[str]  # the broken behaviours a target names
    missed: list[str]  # targets no broken behaviour matches
    messages: dict[str, str]  # behaviour id -> the start of its message, for assertion texts


def judge_variant(
    fault: str, description: str, data: dict[str, Any], targets: list[str], *, write: bool = True, **extra: Any
) -> Verdict:
    """The verdict of the run report ``data`` against ``targets``; its record written unless ``write``
    is false (``extra`` keys go into the record)."""
    outcomes = {t["id"]: t["outcome"] for t in data["tests"] if t["outcome"] != "skipped-by-user"}
    broken = sorted(i for i, o in outcomes.items() if o in ("non-conformant", "warning"))
    caught = [i for i in broken if any(fnmatch.fnmatchcase(i, p) for p in targets)]
    missed = [p for p in targets if not any(fnmatch.fnmatchcase(i, p) for i in caught)]
    if write:
        VARIANTS_DIR.mkdir(parents=True, exist_ok=True)
        record = {
            "fault": fault,
            "description": description,
            "caught": bool(caught),
            "by": caught,
            "caughtAs": {i: outcomes[i] for i in caught},  # non-conformant, or warning for a SHOULD/MAY target
            "alsoBroken": sorted(set(broken) - set(caught)),
            "outcomes": outcomes,
            "seconds": data["run"]["durationSeconds"],
            **extra,
        }
        (VARIANTS_DIR / f"{fault}.json").write_text(json.dumps(record, indent=2) + "\n")
    messages = {t["id"]: t["message"][:600] for t in data["tests"] if t["outcome"] != "skipped-by-user"}
    return Verdict(outcomes, caught, missed, messages)
