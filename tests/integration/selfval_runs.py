"""Running a self-validation round (tests/integration/selfval_rounds.py) on a kept cluster: one
``run()`` with the round's faults scoped to their targets, each fault judged on its own targets
(:func:`variant_records.judge_variant`, the record as before), the round's trust checked
(sentinels passed, the controller did not crash), and what cannot be accepted run again, split or
alone, until every fault has a verdict from a run it can be held to alone.

The imperative shell of the planner: the test modules (kwok-only and real-node variants) call
:func:`prove` and assert on what it returns.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from conformance.framework.namespaces import _label_value
from tests.integration.kept_runs import WAIT_OVERRIDES, kept_run
from tests.integration.selfval_rounds import Round, crashed, reruns
from tests.integration.variant_records import Verdict, judge_variant

# Inner pytest workers of a round: its behaviours mostly wait (for a deadline a broken variant never
# meets), so more of them than cores overlap well.
ROUND_WORKERS = 4


# Behaviours that share one namespace (a module fixture runs their scenarios side by side) -> the
# label the suite gives it: by the module that defines them (a unit test checks every
# ``namespaces.create`` call of the suite is the per-behaviour one or listed here).
SHARED_NAMESPACES = {"conformance.suites.inplace.test_progress_deadline.": "inplace/progress-deadline"}


@functools.cache
def _origins() -> dict[str, str]:
    from conformance.framework.catalog import collect

    return {b.id: b.origin for b in collect()}


def label(behaviour_id: str) -> str:
    """The label of the namespace a behaviour runs in (what a scoped fault matches): its own id,
    or the shared namespace's (:data:`SHARED_NAMESPACES`)."""
    origin = _origins().get(behaviour_id, "")
    shared = next((ns for module, ns in SHARED_NAMESPACES.items() if origin.startswith(module)), behaviour_id)
    return _label_value(shared)


@dataclass
class Proof:
    """A fault's final verdict and the run it came from."""

    fault: str
    verdict: Verdict
    run: str  # the round's name (a fault's own name when it ran alone)
    scoped: bool
    error: str  # the run's error, if any


@dataclass
class Outcome:
    proofs: dict[str, Proof]
    runs: list[str]  # every run made, in order, with why: for the assertion text and the log
    seconds: float
    reports: list[dict[str, Any]]  # every run's report data, in order


def _only(data: dict[str, Any], ids: Sequence[str]) -> dict[str, Any]:
    wanted = set(ids)
    return {**data, "tests": [t for t in data["tests"] if t["id"] in wanted]}


def untrusted(data: dict[str, Any], made: Round) -> str:
    """Why a scoped round's verdicts cannot be attributed to its faults alone ('' when they can)."""
    outcomes = {t["id"]: t["outcome"] for t in data.get("tests", [])}
    bad = [f"{s}: {outcomes.get(s, 'did not run')}" for s in made.sentinels if outcomes.get(s) != "passed"]
    if bad:
        return "a sentinel did not pass (" + "; ".join(bad) + ")"
    log = Path(str((data.get("implementation") or {}).get("log") or ""))
    if log.is_file() and crashed(log.read_text(errors="replace")):
        return f"the controller crashed (an uncaught traceback in {log})"
    if data.get("error"):
        return f"the run failed: {data['error']}"
    return ""


def prove(
    first: Round,
    cluster: str,
    tmp_path: Path,
    descriptions: Mapping[str, str],
    patterns: Mapping[str, Sequence[str]],
    *,
    record: Callable[[str], bool] = lambda fault: True,
    whole_suite: bool = False,
    workers: int = ROUND_WORKERS,
    **options: Any,
) -> Outcome:
    """Run ``first`` (and what it leads to) on ``cluster``; every fault's final verdict.
    ``patterns``: fault -> its row (targets as written); ``record``: whether a fault's verdict is
    its record in reports/self-validation/; ``whole_suite``: every run selects every behaviour
    (``make test-all``); ``workers``: a scoped round's inner workers; ``options`` go to ``run()``."""
    queue, proofs, runs, seconds, reports = [first], {}, [], 0.0, []
    while queue:
        made = queue.pop(0)
        inner = 2 if whole_suite else workers if made.scoped else 1
        where = tmp_path / re.sub(r"[^A-Za-z0-9_.-]+", "_", made.name or "round")
        data = kept_run(
            where,
            cluster,
            ids=[] if whole_suite else made.ids(),
            reference_faults=made.specs(label),
            timeouts=WAIT_OVERRIDES,
            workers=inner,
            await_namespace_removal=False,  # the next run on this cluster need not wait for them
            **options,
        )
        reports.append(data)
        took = float((data.get("run") or {}).get("durationSeconds") or 0.0)
        seconds += took
        if data.get("error") and not data.get("tests"):  # nothing ran: splitting would only repeat it
            for fault in made.faults:
                verdict = judge_variant(fault, descriptions[fault], data, list(patterns[fault]), write=False)
                proofs[fault] = Proof(fault, verdict, made.name, made.scoped, str(data["error"]))
            runs.append(f"{made.name}: no behaviour ran: {data['error']}")
            continue
        why = untrusted(data, made) if made.scoped else ""
        proven: dict[str, bool] = {}
        for fault, targets in made.faults.items():
            judged = data if whole_suite else _only(data, targets)
            verdict = judge_variant(fault, descriptions[fault], judged, list(patterns[fault]), write=False)
            proven[fault] = bool(verdict.caught) and not verdict.missed
            final = not made.scoped or (not why and proven[fault])
            if final:
                if record(fault):
                    judge_variant(fault, descriptions[fault], judged, list(patterns[fault]), round=made.name,
                                  scoped=made.scoped, roundFaults=len(made.faults), roundBehaviours=len(made.ids()),
                                  roundWorkers=inner, seconds=round(took / len(made.faults), 1), roundSeconds=took,
                                  **_extra(options))  # fmt: skip
                proofs[fault] = Proof(fault, verdict, made.name, made.scoped, str(data.get("error") or ""))
        again = reruns(made, proven, trusted=not why)
        runs.append(
            f"{made.name} ({len(made.faults)} fault(s), {'scoped' if made.scoped else 'alone'}, {took:.0f} s)"
            + (f": not trusted, {why}" if why else "")
            + (f"; again: {', '.join(r.name for r in again)}" if again else "")
        )
        queue.extend(again)
    return Outcome(proofs, runs, seconds, reports)


def _extra(options: Mapping[str, Any]) -> dict[str, Any]:
    return {"realNodes": True} if options.get("real_nodes") else {}


def failures(outcome: Outcome, faults: Sequence[str]) -> list[str]:
    """One line per fault of ``faults`` without a proof: expected / seen / why."""
    lines = []
    for fault in faults:
        proof = outcome.proofs.get(fault)
        if proof is None:
            lines.append(f"{fault}: no final verdict (runs: {outcome.runs})")
            continue
        verdict = proof.verdict
        if verdict.caught and not verdict.missed:
            continue
        lines.append(
            f"{fault} ({proof.run}): expected every target non-conformant (or warning for a SHOULD); "
            f"not caught by {verdict.missed}; outcomes: {verdict.outcomes}; messages: {verdict.messages}"
            + (f"; run error: {proof.error}" if proof.error else "")
        )
    return lines
