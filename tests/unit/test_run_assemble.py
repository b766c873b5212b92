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
