"""The end of a run: the passes' results merged with the catalog into the report (every selected
behaviour, run or with the reason it was not), the verdicts and the exit code, the coverage block,
the report's files written, and what the run leaves behind swept.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..cluster.provider import ClusterInfo
from .options import (
    EXIT_INTERRUPTED,
    EXIT_NONCONFORMANT,
    EXIT_OK,
    EXIT_USAGE,
    RunOptions,
)
from .realnodes import observed_notes


@dataclass
class RunResult:
    report: dict[str, Any]
    paths: list[Path] = field(default_factory=list)
    exit_code: int = EXIT_OK
    listing: list[str] = field(default_factory=list)  # --dry-run
    unwritten: str | None = None  # why no report could be written (its directory refused it)


def interrupted(data: dict[str, Any], result: RunResult, interruption: BaseException, when: str) -> None:
    """Ctrl-C or SIGTERM: the report says so (and which signal, and when), exit code 130."""
    from . import signals

    data["run"]["interrupted"] = True
    data["run"]["interruption"] = f"interrupted ({signals.name_of(interruption)}) {when}"
    result.exit_code = EXIT_INTERRUPTED


def internal_error(data: dict[str, Any], result: RunResult, exc: BaseException) -> None:
    """An exception nothing expected (a bug): the report's error names it, exit code 1 (its stack
    trace goes to stderr with ``KTHENA_DEBUG=1``)."""
    import traceback

    from ..cluster.errors import DEBUG_ENV, debugging

    if debugging():
        traceback.print_exception(exc)
    text = " ".join(str(exc).split())[:500]
    if not data.get("error"):
        data["error"] = {
            "message": f"internal error: {type(exc).__name__}: {text}",
            "hint": f"a bug in kthena-conformance: {DEBUG_ENV}=1 shows where; please report it",
        }
    else:
        data["notes"].append(f"then an internal error: {type(exc).__name__}: {text}")
    if result.exit_code in (EXIT_OK, EXIT_NONCONFORMANT):
        result.exit_code = EXIT_NONCONFORMANT


def _assemble(
    data: dict[str, Any],
    passes: list[dict[str, Any]],
    behaviours: list[Any],
    selection: Any,
    support: Any,
    result: RunResult,
    *,
    shard: Any = None,
    owners: dict[str, int] | None = None,
) -> None:
    """Every selected profile's behaviours, as run or as the reason they were not (with a
    ``shard``, the behaviours ``owners`` gives other shards are skipped-by-user)."""
    from ..framework.catalog import source_text
    from ..framework.causes import causes, not_run, stopped_by
    from ..framework.documented_fields import blame
    from ..framework.features import PROFILES
    from ..framework.judged import judge
    from ..framework.outcomes import Outcome, TestResult, Verdict, overall_verdict, profile_verdict

    owners = owners or {}

    by_id: dict[str, TestResult] = {}
    lost: Any = next((payload["lost"] for payload in passes if payload.get("lost") is not None), None)
    for payload in passes:
        for raw in payload.get("results", []):
            r = _after_the_loss(TestResult.from_dict(raw), payload, lost)
            by_id[r.id] = merge_cases(by_id[r.id], r) if r.id in by_id else r
        if payload.get("interrupted"):
            data["run"]["interrupted"] = True
            by = f" ({payload['signal']})" if payload.get("signal") else ""
            data["run"].setdefault("interruption", f"the {payload['pass']} pass was interrupted{by}")
        if payload.get("crashed"):
            data["notes"].append(f"the {payload['pass']} pass ended abnormally: {payload['crashed'][-800:]}")
        if payload.get("warnings") and data.get("accelerators") is not None:
            for bid, text in sorted(payload["warnings"].items()):
                data["accelerators"]["warnings"].append(f"{bid}: {text}")
    interrupted = bool(data["run"].get("interrupted"))
    missing = list(data.get("cluster", {}).get("crdMissingFields", []))
    failed = {Outcome.NON_CONFORMANT, Outcome.ERROR, Outcome.WARNING}
    profiles = [p for p in PROFILES.values() if not selection.profiles or p.name in selection.profiles]
    wanted = {f for p in profiles for f in p.features}
    tests: list[TestResult] = []
    for b in behaviours:
        if b.feature not in wanted:
            continue
        found = by_id.get(b.id)
        if found is None:
            if not selection.selects(b):
                outcome, message = Outcome.SKIPPED_BY_USER, "not selected (--profile/--feature/--id/--skip-slow)"
            elif shard is not None and owners.get(b.id, shard.index) != shard.index:
                outcome, message = Outcome.SKIPPED_BY_USER, shard.skip_reason(owners[b.id])
            elif not all(support.supports(f) for f in b.features):
                lacking = next(f for f in b.features if not support.supports(f))
                outcome, message = Outcome.NOT_SUPPORTED, f"{lacking}: {support.reason(lacking)}"
            else:
                outcome = Outcome.ERROR
                message = not_run(
                    lost.cause
                    if lost is not None
                    else str(data["run"].get("interruption") or "the run was interrupted")
                    if interrupted
                    else data["error"]["message"]
                    if data.get("error")
                    else "its pass did not report it"
                )
            found = TestResult(b.id, "", b.feature, outcome, 0.0, message, b.statement, b.spec, level=b.level)
        prefix = (
            blame(b.features, missing, source_text(b))
            if found.outcome in failed and missing and not stopped_by(found.message)
            else ""
        )
        if prefix and not found.message.startswith(prefix):
            found.message = prefix + found.message
        tests.append(found)
    data["tests"] = [t.as_dict() for t in tests]
    data["notes"] += observed_notes(tests)
    data["causes"] = causes(data["tests"])
    results = [profile_verdict(p, [t for t in tests if t.feature in p.features], support) for p in profiles]
    data["profiles"] = [r.as_dict() for r in results]
    _coverage(data, behaviours, [p.name for p in profiles])
    preflight_ok = all(c.get("result") != "missing" for c in data.get("preflight", []))
    # An error that stopped the run (a failed deployment, say) is the verdict, whatever the
    # profiles' unrun tests add up to: the report's error and its verdict must agree.
    verdict = Verdict.ERROR if data.get("error") else overall_verdict(results, preflight_ok, interrupted)
    data["verdict"] = str(verdict)
    # A narrowed run (--id, --feature, --skip-slow, a shard) is judged on what it selected: the
    # behaviours skipped by the user make the report's profiles partial, not the exit code.
    data["judged"] = judge(
        profiles, tests, support, preflight_ok=preflight_ok, interrupted=interrupted, error=bool(data.get("error"))
    )
    verdict = Verdict(data["judged"]["verdict"])
    if result.exit_code == EXIT_OK:
        if interrupted:
            result.exit_code = EXIT_INTERRUPTED
        elif str(verdict) != "success":
            result.exit_code = EXIT_NONCONFORMANT


# A test that failed this long before the run noticed what it depended on was gone failed of it too.
LOSS_MARGIN = 5.0


def _after_the_loss(r: Any, payload: dict[str, Any], lost: Any) -> Any:
    """``r`` as it stands once the run knows what died (``lost``, :class:`.health.Lost`): a test that
    did not pass and ended after the loss (``LOSS_MARGIN`` included) could not be decided."""
    from ..framework.causes import undecided
    from ..framework.outcomes import Outcome

    if lost is None or r.outcome in (Outcome.PASSED, Outcome.NOT_SUPPORTED, Outcome.SKIPPED_BY_USER):
        return r
    at = payload.get("finishedAt", {}).get(r.nodeid)
    if at is None or at < lost.at - LOSS_MARGIN:
        return r
    return dataclasses.replace(r, outcome=Outcome.ERROR, message=undecided(lost.cause, r.message))


def _coverage(data: dict[str, Any], behaviours: list[Any], profiles: list[str]) -> None:
    """The report's ``coverage`` block: how much of the packaged spec map the suite asserts, for
    the judged ``profiles``. A spec map that cannot be read costs only the block (a note says why)."""
    from ..framework import specmap

    try:
        loaded = specmap.load(specmap.SPECMAP_PATH, catalog=behaviours)
    except specmap.SpecMapError as exc:
        more = f" (and {len(exc.problems) - 1} more problems)" if len(exc.problems) > 1 else ""
        data["notes"].append(f"spec coverage not computed: {exc.problems[0]}{more}")
        return
    data["coverage"] = specmap.report_block(loaded, specmap.coverage(loaded.statements), profiles)


def _sweep(info: ClusterInfo, run_id: str, options: RunOptions, data: dict[str, Any]) -> None:
    """Remove what this run left (a killed worker's namespace), unless asked to keep it."""
    if options.keep != "never":
        return
    from ..framework import namespaces
    from ..framework.kube import Kube

    wait = options_wait(options) if options.await_namespace_removal else 0.0
    try:  # tests delete their namespaces without waiting; the run waits for all of them here
        kube = Kube.connect(info.kubeconfig, info.context)
        swept = namespaces.sweep(kube, run_id, wait=wait)
    except Exception as exc:
        data["notes"].append(f"sweeping this run's namespaces failed: {exc}")
        return
    if swept and wait:
        data["notes"].append(f"waited for the removal of {len(swept)} test namespace(s) of this run")
    elif swept:
        data["notes"].append(f"asked for the removal of {len(swept)} test namespace(s) of this run (not waited for)")


def options_wait(options: RunOptions) -> float:
    from ..framework.timeouts import Timeouts

    return Timeouts.from_options(options.timeout_scale, options.timeouts).seconds("namespace-cleanup")


#: What a run writes into its report directory (and a new run removes first, whatever its inputs).
RUN_DIRECTORIES = ("allure-results", "artifacts", ".passes")
RUN_FILES = ("junit.xml", "conformance-report.yaml", "conformance-report.json", "index.html", "kthena-ref.log",
             "implementation.log")  # fmt: skip


def _clean(report_dir: Path) -> None:
    """A report directory holds one run: the previous run's reports, results, allure files and
    controller logs go first."""
    import shutil

    for name in RUN_DIRECTORIES:
        shutil.rmtree(report_dir / name, ignore_errors=True)
    for name in RUN_FILES:
        (report_dir / name).unlink(missing_ok=True)


def _finish(result: RunResult, options: RunOptions, started: dt.datetime, *, write: bool = True) -> RunResult:
    from ..framework import junit, report

    data = result.report
    finished = dt.datetime.now(dt.UTC)
    data["run"]["finishedAt"] = finished.isoformat()
    data["run"]["durationSeconds"] = round((finished - started).total_seconds(), 1)
    data["exitCode"] = result.exit_code
    data.setdefault("tests", [])
    if not write:
        return result
    try:
        result.paths = report.write(data, options.report_dir)
        result.paths.append(junit.write(data, options.report_dir / "junit.xml"))
    except OSError as exc:  # a full or read-only disk: say so, keep nothing half-written
        for name in RUN_FILES[:4]:
            with contextlib.suppress(OSError):
                (options.report_dir / name).unlink(missing_ok=True)
        result.paths = []
        result.unwritten = f"--report-dir {options.report_dir}: no report could be written ({exc.strerror or exc})"
        if result.exit_code != EXIT_INTERRUPTED:
            result.exit_code = EXIT_USAGE
        return result
    page = options.report_dir / "index.html"
    if page.is_file():
        result.paths.insert(0, page)
    return result


def merge_cases(first: Any, second: Any) -> Any:
    """One behaviour's result from two of its test cases (a parametrized test): the worst outcome wins,
    so a failing case is never hidden by a passing one; the messages of both, each named by its case. Pure."""
    from ..framework.outcomes import combine

    def tagged(r: Any) -> str:
        if not r.message or "[" not in r.nodeid or r.message.startswith("["):  # none, or already tagged
            return str(r.message)
        return f"[{r.nodeid.rpartition('[')[2].rstrip(']')}] {r.message}"

    worst = combine([first.outcome, second.outcome])
    base = first if worst == first.outcome else second
    message = "; ".join(m for m in (tagged(first), tagged(second)) if m)[:4000]
    duration = round(first.duration + second.duration, 3)
    return dataclasses.replace(base, outcome=worst, duration=duration, message=message)
