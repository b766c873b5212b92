"""Shard reports into one report (``kthena-conformance report merge``), pure.

A CI fleet runs the suite as ``--shard 1/N`` ... ``--shard N/N``, each shard on its own cluster.
:func:`merge` combines their reports into the report one unsharded run would have written, which
``report verify`` checks like any other:

- each behaviour's outcome is the one of the shard that was given it (``run.shard.behaviours``);
  the other shards' ``skipped-by-user`` placeholders disappear. A behaviour outside the selection
  keeps its ``skipped-by-user`` entry; one whose shard reported nothing for it (that shard failed
  before its tests) is an ``error`` saying so;
- the profiles' verdicts and counts and the overall verdict are recomputed by the rules of
  :mod:`.outcomes` (:func:`~.outcomes.profile_verdict`, :func:`~.outcomes.overall_verdict`), as
  a single run computes them;
- the rest comes from the shards, which each ran on their own cluster: ``cluster`` is the first
  shard's (a note says so) and every shard's cluster, preflight, run id, times, verdict and exit
  code are in ``run.shards``; ``preflight`` has one entry per check with the worst result and
  every shard's message; an error, interruption or note of a shard is kept, naming the shard;
  accelerator warnings are the union; the spec map's ``coverage`` is the shards' (one spec map).

It refuses (:class:`MergeError`, every problem named) reports that are not shard reports, come
from different suites (digests), cover different selections or implementations (mixed
implementations), disagree on the number of shards or the accelerator capability files, repeat a
shard, leave a shard out (``shard 3/4 is missing``), both ran one behaviour (overlap), or carry the
coverage of different spec maps (digests).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .causes import causes
from .exit_codes import EXIT_CLUSTER, EXIT_INTERRUPTED, EXIT_NONCONFORMANT, EXIT_OK
from .features import PROFILES
from .judged import judge
from .outcomes import RAN, Outcome, TestResult, Verdict, overall_verdict, profile_verdict
from .report import Report, ShardRecord
from .support import Support, SupportFileError

_PREFLIGHT_RANK = ["missing", "skipped", "ok"]  # worst first
# What identifies the implementation under test (its log path and declaration file differ per machine).
_IMPLEMENTATION_KEYS = ("name", "version", "supportedFeatures", "deployedBy", "faults")


class MergeError(Exception):
    """The shard reports cannot be merged; ``problems`` names each reason."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = list(problems)
        super().__init__("\n".join(self.problems))


@dataclass(frozen=True)
class ShardReport:
    """One shard's report and where it was read from (named in messages)."""

    source: str
    report: Report

    @property
    def label(self) -> str:
        shard = self.report.run.shard
        return f"{self.source} (shard {shard.index}/{shard.total})" if shard else self.source


@dataclass(frozen=True)
class _Shard:
    index: int
    total: int
    behaviours: tuple[str, ...]

    def __str__(self) -> str:
        return f"{self.index}/{self.total}"


def _shard(s: ShardReport) -> _Shard:
    shard = s.report.run.shard
    assert shard is not None  # _checked refuses reports without one
    return _Shard(shard.index, shard.total, tuple(shard.behaviours))


def merge(shards: Sequence[ShardReport], *, run_id: str, command: list[str]) -> Report:
    """The merged report of ``shards`` (see the module docstring); :class:`MergeError` if refused.

    ``run_id`` and ``command`` become the merged run's id and command line."""
    ordered = _checked(shards)
    first = ordered[0].report
    total = _shard(ordered[0]).total

    owner: dict[str, ShardReport] = {}
    for s in ordered:
        for id_ in _shard(s).behaviours:
            owner[id_] = s
    order: list[str] = []
    entries: dict[str, dict[int, dict[str, Any]]] = {}
    for s in ordered:
        for t in s.report.tests:
            if t.id not in entries:
                order.append(t.id)
                entries[t.id] = {}
            entries[t.id][_shard(s).index] = t.model_dump(mode="json", by_alias=True)

    tests: list[TestResult] = []
    for id_ in order:
        found = entries[id_]
        mine = owner.get(id_)
        if mine is None:
            raw = found[min(found)]
        elif _shard(mine).index in found:
            raw = found[_shard(mine).index]
        else:
            raw = {**next(iter(found.values())), "nodeid": "", "durationSeconds": 0.0, "evidence": None}
            reason = f": {mine.report.error.message}" if mine.report.error else ""
            raw.update(outcome=Outcome.ERROR.value, message=f"not run: shard {_shard(mine)} reported no result{reason}")
        tests.append(TestResult.from_dict(raw))

    preflight = _preflight(ordered)
    interrupted = any(s.report.run.interrupted for s in ordered)
    errors = [s for s in ordered if s.report.error is not None]
    preflight_ok = all(c["result"] != "missing" for c in preflight)
    if tests:
        support = Support.from_report(first.implementation)  # checked readable in _checked when there are tests
        selected = first.run.selection.profiles
        profiles = [p for p in PROFILES.values() if not selected or p.name in selected]
        results = [profile_verdict(p, [t for t in tests if t.feature in p.features], support) for p in profiles]
        # judged on what the sharded run selected, as one run is (.judged): its exit code follows it
        judged: dict[str, Any] | None = judge(
            profiles, tests, support, preflight_ok=preflight_ok, interrupted=interrupted, error=bool(errors)
        )
    else:  # no shard got as far as its tests (as a single run that failed that early)
        results = []
        judged = None
    verdict = Verdict.ERROR if errors else overall_verdict(results, preflight_ok, interrupted)
    exit_code = _exit_code(errors, interrupted, Verdict(judged["verdict"]) if judged else verdict)

    started = min(s.report.run.started_at for s in ordered)
    ends = [s.report.run.finished_at for s in ordered if s.report.run.finished_at is not None]
    finished = max(ends) if ends else None
    implementation = {k: v for k, v in first.implementation.items() if k != "log"}
    cluster = next((s.report.cluster for s in ordered if s.report.cluster), {})
    notes = [
        f"merged from {total} shard reports ({', '.join(s.source for s in ordered)}): each behaviour's outcome is "
        "the one of the shard that ran it; every shard ran on its own cluster, so `cluster` is the first shard's "
        "and `preflight` combines the shards' checks (each shard's cluster and preflight are in run.shards)",
        *(f"shard {_shard(s)}: {note}" for s in ordered for note in s.report.notes),
    ]
    data: dict[str, Any] = {
        "suite": first.suite.model_dump(mode="json", by_alias=True),
        "run": {
            "id": run_id,
            "startedAt": started.isoformat(),
            "finishedAt": finished.isoformat() if finished else None,
            "durationSeconds": round((finished - started).total_seconds(), 1) if finished else None,
            "interrupted": interrupted,
            "interruption": "; ".join(
                f"shard {_shard(s)}: {s.report.run.interruption or 'interrupted'}"
                for s in ordered
                if s.report.run.interrupted
            )
            or None,
            "command": list(command),
            "selection": first.run.selection.model_dump(mode="json", by_alias=True),
            "keep": first.run.keep,
            "timeouts": dict(first.run.timeouts),
            "shards": [_record(s).model_dump(mode="json", by_alias=True) for s in ordered],
        },
        "implementation": implementation,
        "cluster": dict(cluster),
        "preflight": preflight,
        "profiles": [r.as_dict() for r in results],
        "tests": [t.as_dict() for t in tests],
        "causes": causes([t.as_dict() for t in tests]),
        "verdict": verdict.value,
        "error": _error(errors),
        "notes": notes,
        "exitCode": exit_code,
        **({"judged": judged} if judged is not None else {}),
        "accelerators": _accelerators(ordered),
        "coverage": next(
            (s.report.coverage.model_dump(mode="json", by_alias=True) for s in ordered if s.report.coverage), None
        ),
    }
    return Report.model_validate(data)


def _checked(shards: Sequence[ShardReport]) -> list[ShardReport]:
    """The shards ordered by index, or :class:`MergeError` naming every reason to refuse them."""
    if not shards:
        raise MergeError(["no shard reports to merge"])
    problems: list[str] = []
    unsharded = [s.source for s in shards if s.report.run.shard is None]
    if unsharded:
        raise MergeError([f"{src}: not a shard report (its run had no --shard): nothing to merge" for src in unsharded])
    first = shards[0]

    digests = {s.report.suite.digest for s in shards}
    if len(digests) > 1:
        problems.append(
            "the reports come from different suites (suite digests differ): "
            + "; ".join(f"{s.source}: {s.report.suite.digest}" for s in shards)
        )
    totals = {_shard(s).total for s in shards}
    if len(totals) > 1:
        problems.append("the reports disagree on the number of shards: " + ", ".join(f"{s.label}" for s in shards))
    by_index: dict[int, list[ShardReport]] = {}
    for s in shards:
        by_index.setdefault(_shard(s).index, []).append(s)
    for index, same in sorted(by_index.items()):
        if len(same) > 1:
            problems.append(f"shard {index} is given more than once: {', '.join(s.source for s in same)}")
    if len(totals) == 1:
        total = totals.pop()
        missing = [i for i in range(1, total + 1) if i not in by_index]
        if missing:
            given = ", ".join(f"{i}/{total}" for i in sorted(by_index))
            problems.append(
                f"{'shards' if len(missing) > 1 else 'shard'} {', '.join(f'{i}/{total}' for i in missing)} "
                f"{'are' if len(missing) > 1 else 'is'} missing (given: {given}): every shard's report is needed"
            )

    def identity(s: ShardReport) -> dict[str, Any]:
        return {k: s.report.implementation.get(k) for k in _IMPLEMENTATION_KEYS}

    if any(identity(s) != identity(first) for s in shards):
        problems.append(
            "the reports test different implementations (mixed implementations): "
            + "; ".join(f"{s.source}: {_describe(identity(s))}" for s in shards)
        )
    elif any(s.report.tests for s in shards):  # without tests (every shard failed first) no verdict needs it
        try:
            Support.from_report(first.report.implementation)
        except SupportFileError as exc:
            problems += [f"{first.source}: {p}" for p in exc.problems]
    selection = first.report.run.selection
    for s in shards[1:]:
        if s.report.run.selection != selection:
            problems.append(
                f"{s.source} selected {_selection(s)} but {first.source} selected {_selection(first)}: "
                "the shards of one run share one selection"
            )
    capabilities = [
        c.model_dump() for c in (first.report.accelerators.capabilities if first.report.accelerators else [])
    ]
    for s in shards[1:]:
        theirs = [c.model_dump() for c in (s.report.accelerators.capabilities if s.report.accelerators else [])]
        if theirs != capabilities:
            problems.append(
                f"{s.source} certified other accelerator capability files than {first.source} "
                "(accelerators.capabilities differ)"
            )

    maps = {s.report.coverage.spec_map.digest for s in shards if s.report.coverage is not None}
    if len(maps) > 1:
        problems.append(
            "the reports measured coverage against different spec maps (coverage.specMap.digest differs): "
            + "; ".join(f"{s.source}: {s.report.coverage.spec_map.digest}" for s in shards if s.report.coverage)
        )

    ran: dict[str, list[ShardReport]] = {}
    for s in shards:
        assigned = set(_shard(s).behaviours)
        for t in s.report.tests:
            if t.id in assigned or t.outcome in RAN:
                ran.setdefault(t.id, []).append(s)
        for id_ in sorted(assigned - {t.id for t in s.report.tests}):
            ran.setdefault(id_, []).append(s)
    overlap = [f"{id_} ({', '.join(s.label for s in who)})" for id_, who in sorted(ran.items()) if len(who) > 1]
    if overlap:
        shown = "; ".join(overlap[:5]) + (f"; ... ({len(overlap) - 5} more)" if len(overlap) > 5 else "")
        problems.append(
            f"overlapping shards: {len(overlap)} {'behaviour was' if len(overlap) == 1 else 'behaviours were'} "
            f"run by more than one shard: {shown}"
        )
    if problems:
        raise MergeError(problems)
    return sorted(shards, key=lambda s: _shard(s).index)


def _describe(identity: dict[str, Any]) -> str:
    features = identity.get("supportedFeatures") or []
    text = f"{identity.get('name')} {identity.get('version')} supporting {', '.join(map(str, features)) or 'nothing'}"
    if identity.get("deployedBy"):
        text += f", deployed by {identity['deployedBy']}"
    if identity.get("faults"):
        text += f", faults {', '.join(map(str, identity['faults']))}"
    return text


def _selection(s: ShardReport) -> str:
    sel = s.report.run.selection
    parts = [f"{k} {', '.join(v)}" for k, v in (("profiles", sel.profiles), ("features", sel.features),
                                                 ("ids", sel.ids)) if v]  # fmt: skip
    return "; ".join(parts) or "everything"


def _record(s: ShardReport) -> ShardRecord:
    run, shard = s.report.run, _shard(s)
    log = s.report.implementation.get("log")
    return ShardRecord(
        index=shard.index,
        total=shard.total,
        source=s.source,
        run_id=run.id,
        started_at=run.started_at,
        finished_at=run.finished_at,
        duration_seconds=run.duration_seconds,
        verdict=s.report.verdict,
        exit_code=s.report.exit_code,
        behaviours=len(shard.behaviours),
        cluster=dict(s.report.cluster),
        preflight=list(s.report.preflight),
        implementation_log=str(log) if log is not None else None,
        error=s.report.error,
    )


def _preflight(ordered: list[ShardReport]) -> list[dict[str, str]]:
    """One entry per check: the worst result over the shards, with every shard's message."""
    names: list[str] = []
    found: dict[str, list[tuple[Any, Any]]] = {}
    for s in ordered:
        for check in s.report.preflight:
            if check.name not in found:
                names.append(check.name)
                found[check.name] = []
            found[check.name].append((_shard(s), check))
    merged = []
    for name in names:
        checks = found[name]
        result = min((c.result for _, c in checks), key=_PREFLIGHT_RANK.index)
        message = "; ".join(f"shard {shard}: {c.result}, {c.message}" for shard, c in checks)
        merged.append({"name": name, "result": result, "message": message})
    return merged


def _error(errors: list[ShardReport]) -> dict[str, Any] | None:
    if not errors:
        return None
    message = "; ".join(f"shard {_shard(s)}: {s.report.error.message}" for s in errors if s.report.error)
    hint = next((s.report.error.hint for s in errors if s.report.error and s.report.error.hint), None)
    return {"message": message, "hint": hint}


def _exit_code(errors: list[ShardReport], interrupted: bool, verdict: Verdict) -> int:
    """What one run with these outcomes exits with: a shard's error code first, then interruption."""
    for s in errors:
        code = s.report.exit_code
        if code is not None and code not in (EXIT_OK, EXIT_NONCONFORMANT):
            return code
    if errors:
        return EXIT_CLUSTER
    if interrupted:
        return EXIT_INTERRUPTED
    return EXIT_OK if verdict is Verdict.SUCCESS else EXIT_NONCONFORMANT


def _accelerators(ordered: list[ShardReport]) -> dict[str, Any] | None:
    first = next((s.report.accelerators for s in ordered if s.report.accelerators is not None), None)
    if first is None:
        return None
    warnings: list[str] = []
    for s in ordered:
        for w in s.report.accelerators.warnings if s.report.accelerators else []:
            if w not in warnings:
                warnings.append(w)
    return {**first.model_dump(mode="json", by_alias=True), "warnings": warnings}
