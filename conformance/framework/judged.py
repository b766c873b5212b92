"""A narrowed run is judged on what it selected.

Why this module exists: a profile's verdict counts a behaviour the user left out (``--id``,
``--feature``, ``--skip-slow``, another shard's) as a reason the profile is only ``partial``: the
profile was not fully run, and the report must say so. But the question a narrowed run asks is
"did what I selected pass?", and its exit code must answer that one: every selected behaviour
passed is exit 0. So the report keeps its profile verdicts and adds ``judged``: the verdict of
the run's rules (:func:`.outcomes.profile_verdict`, :func:`.outcomes.overall_verdict`) applied to
the behaviours that were not skipped by the user, the profiles fully run and the narrowed ones
with how many of their behaviours ran. The exit code follows ``judged``. Pure.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from .features import Profile
from .outcomes import Outcome, TestResult, Verdict
from .shard import own_verdict
from .support import Support


def judge(
    profiles: Sequence[Profile],
    tests: Iterable[TestResult],
    support: Support,
    *,
    preflight_ok: bool,
    interrupted: bool,
    error: bool = False,
) -> dict[str, Any]:
    """``{verdict, fullyRun, narrowed: [{profile, selected, of}]}`` of a run's ``tests`` (see the
    module docstring; a run that stopped on an ``error`` is ``error``, as its overall verdict). A
    profile none of whose behaviours was selected is in neither list."""
    tests = list(tests)
    skipped = {t.id for t in tests if t.outcome is Outcome.SKIPPED_BY_USER}
    verdict = own_verdict(profiles, tests, skipped, support, preflight_ok=preflight_ok, interrupted=interrupted)
    if error:
        verdict = Verdict.ERROR
    fully: list[str] = []
    narrowed: list[dict[str, Any]] = []
    for p in profiles:
        mine = [t for t in tests if t.feature in p.features]
        chosen = [t for t in mine if t.id not in skipped]
        if not chosen:
            continue
        if len(chosen) == len(mine):
            fully.append(p.name)
        else:
            narrowed.append({"profile": p.name, "selected": len(chosen), "of": len(mine)})
    return {"verdict": verdict.value, "fullyRun": fully, "narrowed": narrowed}


def judged_text(judged: dict[str, Any], *, said: bool = False) -> str:
    """``success on the selection; fully run: Plugins; narrowed: Core (12 of 47)`` (``said``: the
    caller has said it is the selection's verdict). Pure."""
    narrowed = judged.get("narrowed") and not said
    parts = [f"{judged['verdict']} on the selection" if narrowed else str(judged["verdict"])]
    if judged.get("fullyRun"):
        parts.append(f"fully run: {', '.join(judged['fullyRun'])}")
    if judged.get("narrowed"):
        parts.append(
            "narrowed: " + ", ".join(f"{n['profile']} ({n['selected']} of {n['of']})" for n in judged["narrowed"])
        )
    return "; ".join(parts)


def exit_verdict(judged: dict[str, Any]) -> Verdict:
    return Verdict(judged["verdict"])
