"""Assembling a run's report after an error that stopped it (a failed deployment, say): every
selected behaviour is an error naming it, and the verdict is ``error``, as ``report verify``
requires of a report that carries an error."""

from __future__ import annotations

from typing import Any

from conformance.framework import catalog
from conformance.framework.outcomes import Outcome
from conformance.framework.selection import Selection
from conformance.framework.support import load_support
from conformance.run.options import EXIT_CLUSTER, REFERENCE_SUPPORT
from conformance.run.orchestration import RunResult, _assemble


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
