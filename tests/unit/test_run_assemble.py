"""Assembling a run's report after an error that stopped it (a failed deployment, say): every
selected behaviour is an error naming it, and the verdict is ``error``, as ``report verify``
requires of a report that carries an error; and a run whose only finding is a warning, whose
report (with the spec map's coverage) verifies."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from conformance.framework import catalog, junit, report, specmap
from conformance.framework.outcomes import Outcome, TestResult
from conformance.framework.selection import Selection
from conformance.framework.support import load_support
from conformance.run.finish import RunResult, _assemble
from conformance.run.options import EXIT_CLUSTER, REFERENCE_SUPPORT


def test_an_error_after_the_cluster_is_up_makes_the_verdict_error() -> None:
    data: dict[str, Any] = {"run": {}, "notes": [], "error": {"message": "deploying the controller failed", "hint": ""}}
    result = RunResult(data, exit_code=EXIT_CLUSTER)
    selection = Selection.parse(["Core"], [], [], include_slow=True)
    _assemble(data, [], catalog.collect(), selection, load_support(REFERENCE_SUPPORT), result)
    assert data["verdict"] == "error"
    assert result.exit_code == EXIT_CLUSTER
    core = [t for t in data["tests"] if t["id"].startswith("core/")]
    assert core and all(t["outcome"] == str(Outcome.ERROR) for t in core)
    assert all(t["message"] == "not run: deploying the controller failed" for t in core)


def test_a_run_with_a_warning_writes_a_report_that_verifies(tmp_path: Path) -> None:
    """The report path end to end without a cluster: a pass in which a SHOULD behaviour warned and
    the rest passed gives Core success (a warning fails nothing), exit code 0, the warning counted,
    the spec map's coverage of the judged profile, and a report, page and JUnit that verify."""
    behaviours = catalog.collect()
    should = next(b for b in behaviours if b.profile.name == "Core" and b.level == "SHOULD")
    support = load_support(REFERENCE_SUPPORT)
    core = [b for b in behaviours if b.profile.name == "Core" and all(support.supports(f) for f in b.features)]
    results = [
        TestResult(b.id, f"n::{b.id}", b.feature, Outcome.WARNING if b is should else Outcome.PASSED, 0.1,
                   "expected x, saw y" if b is should else "", b.statement, b.spec, level=b.level).as_dict()
        for b in core
    ]  # fmt: skip
    data: dict[str, Any] = {
        "suite": {"name": "kthena-conformance", "version": "0", "digest": catalog.suite_digest()},
        "run": {"id": "r", "startedAt": "2026-01-02T03:04:05+00:00", "keep": "never",
                "selection": {"profiles": ["Core"], "features": [], "ids": []}},
        "implementation": {**support.as_report(), "deployedBy": "harness"},
        "verdict": "error",
        "notes": [],
        "exitCode": 0,
    }  # fmt: skip
    result = RunResult(data)
    selection = Selection.parse(["Core"], [], [], include_slow=True)
    _assemble(data, [{"pass": "parallel", "results": results}], behaviours, selection, support, result)
    (profile,) = data["profiles"]
    assert profile["verdict"] == "success" and profile["warnings"] == [should.id] and profile["counts"]["warning"] == 1
    assert data["verdict"] == "success" and result.exit_code == 0
    if specmap.SPECMAP_PATH.exists():
        assert [p["profile"] for p in data["coverage"]["profiles"]] == ["Core"]
    paths = report.write(data, tmp_path)
    junit.write(data, tmp_path / "junit.xml")
    assert (tmp_path / "index.html").is_file()
    for path in paths:
        assert report.verify(path, digest=catalog.suite_digest(), catalog=behaviours) == []


def test_failed_behaviours_of_a_feature_whose_field_the_crd_lacks_point_at_the_finding() -> None:
    """The preflight found maxSurge missing: a failed MaxSurge behaviour's message starts with
    that cause, a failed behaviour of another feature and a passed MaxSurge one are left alone."""
    from conformance.framework.features import Feature

    behaviours = catalog.collect()
    support = load_support(REFERENCE_SUPPORT)
    surge = [b for b in behaviours if Feature.MAX_SURGE in b.features][:2]
    other = next(b for b in behaviours if b.profile.name == "Rollout" and Feature.MAX_SURGE not in b.features)
    outcomes = {surge[0].id: Outcome.NON_CONFORMANT, surge[1].id: Outcome.PASSED, other.id: Outcome.NON_CONFORMANT}
    results = [
        TestResult(b.id, f"n::{b.id}", b.feature, outcomes[b.id], 0.1, "saw 4 Pods", level=b.level).as_dict()
        for b in [*surge, other]
    ]
    missing = "spec.rolloutStrategy.rollingUpdateConfiguration.maxSurge"
    data: dict[str, Any] = {"run": {}, "notes": [], "cluster": {"crdMissingFields": [missing]}}
    selection = Selection.parse(["Rollout"], [], [b.id for b in [*surge, other]], include_slow=True)
    _assemble(data, [{"pass": "parallel", "results": results}], behaviours, selection, support, RunResult(data))
    messages = {t["id"]: t["message"] for t in data["tests"]}
    assert messages[surge[0].id] == f"the installed CRD lacks {missing} (preflight crd-documented-fields), so this " \
        "cannot pass: saw 4 Pods"  # fmt: skip
    assert messages[surge[1].id] == "saw 4 Pods" and messages[other.id] == "saw 4 Pods"


def _base(support: Any, ids: list[str] | None = None) -> dict[str, Any]:
    return {
        "suite": {"name": "kthena-conformance", "version": "0", "digest": catalog.suite_digest()},
        "run": {"id": "r", "startedAt": "2026-01-02T03:04:05+00:00", "keep": "never",
                "selection": {"profiles": ["Core"], "features": [], "ids": ids or []}},
        "implementation": {**support.as_report(), "deployedBy": "harness"},
        "verdict": "error",
        "notes": [],
        "exitCode": 0,
    }  # fmt: skip


def _core(support: Any) -> list[Any]:
    return [b for b in catalog.collect() if b.profile.name == "Core" and all(support.supports(f) for f in b.features)]


def test_a_dead_controller_is_one_cause_and_what_ended_after_it_is_undecided(tmp_path: Path) -> None:
    """Three behaviours passed before the controller died, one failed (HTTP 500) 2 s after it, the
    rest never ran: one error, one cause naming all that was left, the early pass kept, a report
    that verifies."""
    from conformance.run.health import controller_lost
    from conformance.run.options import EXIT_NONCONFORMANT

    support = load_support(REFERENCE_SUPPORT)
    core = _core(support)
    lost = controller_lost(-9, False, 1000.0, None)
    assert lost is not None
    ran = core[:4]
    results = [
        TestResult(b.id, f"n::{b.id}", b.feature, Outcome.ERROR if i == 3 else Outcome.PASSED, 1.0,
                   "HTTP 500 Internal Server Error: failed calling webhook" if i == 3 else "", b.statement, b.spec,
                   level=b.level).as_dict()
        for i, b in enumerate(ran)
    ]  # fmt: skip
    at = {f"n::{b.id}": 990.0 + i for i, b in enumerate(ran)}
    at[f"n::{ran[3].id}"] = 1002.0
    data = _base(support)
    data["error"] = lost.as_error()
    result = RunResult(data, exit_code=lost.exit_code)
    selection = Selection.parse(["Core"], [], [], include_slow=True)
    payload = {"pass": "parallel", "results": results, "lost": lost, "finishedAt": at, "interrupted": False}
    _assemble(data, [payload], catalog.collect(), selection, support, result)
    assert result.exit_code == EXIT_NONCONFORMANT and data["verdict"] == "error"
    by_id = {t["id"]: t for t in data["tests"]}
    assert [by_id[b.id]["outcome"] for b in ran[:3]] == ["passed"] * 3
    assert by_id[ran[3].id]["message"].startswith(f"undecided: {lost.cause} -- HTTP 500")
    first = data["causes"][0]
    assert first["cause"].startswith(lost.cause) and len(first["behaviours"]) == len(data["tests"]) - 3 - sum(
        t["outcome"] in ("not-supported", "skipped-by-user") for t in data["tests"]
    )
    path = report.write(data, tmp_path)[1]
    assert report.verify(path, digest=catalog.suite_digest()) == []


def test_a_narrowed_run_whose_selection_passed_exits_0() -> None:
    """--id selecting two Core behaviours, both passed: the profile is partial (not fully run), the
    run's verdict on the selection is success, exit code 0."""
    support = load_support(REFERENCE_SUPPORT)
    chosen = _core(support)[:2]
    results = [
        TestResult(b.id, f"n::{b.id}", b.feature, Outcome.PASSED, 1.0, "", b.statement, b.spec, level=b.level).as_dict()
        for b in chosen
    ]
    data = _base(support, ids=[b.id for b in chosen])
    result = RunResult(data)
    selection = Selection.parse(["Core"], [], [b.id for b in chosen], include_slow=True)
    _assemble(data, [{"pass": "parallel", "results": results}], catalog.collect(), selection, support, result)
    assert data["verdict"] == "partial" and result.exit_code == 0
    core_total = sum(1 for b in catalog.collect() if b.profile.name == "Core")
    assert data["judged"] == {
        "verdict": "success",
        "fullyRun": [],
        "narrowed": [{"profile": "Core", "selected": 2, "of": core_total}],
    }


def test_a_report_written_while_the_run_goes_on_verifies(tmp_path: Path) -> None:
    """The provisional report (what finished, the rest not run, interrupted, progress) is valid."""
    from conformance.run.orchestration import _write_draft
    from conformance.run.progress import RunProgress

    support = load_support(REFERENCE_SUPPORT)
    core = _core(support)
    progress = RunProgress(len(core))
    progress.lines(
        [{"event": "finished", "id": b.id, "nodeid": f"n::{b.id}", "pass": "parallel", "outcome": "passed",
          "duration": 1.0, "message": "", "at": 1.0} for b in core[:5]]
    )  # fmt: skip
    data = _base(support)
    selection = Selection.parse(["Core"], [], [], include_slow=True)
    _write_draft(data, [], progress, len(core), catalog.collect(), selection, support, None, {}, tmp_path)
    written = report.read(tmp_path / "conformance-report.json")
    assert written["run"]["interrupted"] is True and written["run"]["progress"]["done"] == 5
    assert sum(t["outcome"] == "passed" for t in written["tests"]) == 5 and written["exitCode"] is None
    assert report.verify(tmp_path / "conformance-report.json", digest=catalog.suite_digest()) == []
    assert "tests" not in data  # the run's own data is left alone
