"""The pytest plugin classifies by level: a failed assertion in a SHOULD or MAY behaviour is a
``warning`` in the pass's results and progress files, in a MUST behaviour ``non-conformant``.
A tiny suite of four tests that need no cluster runs in a pytest subprocess with the plugin."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

SUITE = """
from conformance.framework.catalog import behaviour
from conformance.framework.outcomes import Inconclusive

SPEC = "api-reference-workload-v1alpha1.txt#ModelServingSpec"


@behaviour("levels/must/fails", "The controller MUST do it.", SPEC, "Core")
def test_must() -> None:
    assert False, "expected it done"


@behaviour("levels/should/fails", "Refusals SHOULD use HTTP 429.", SPEC, "Core")
def test_should() -> None:
    assert False, "expected 429, got 403"


@behaviour("levels/may/fails", "A message is OPTIONAL.", SPEC, "Core")
def test_may() -> None:
    assert False, "no message"


@behaviour("levels/should/inconclusive", "Status SHOULD NOT lag.", SPEC, "Core")
def test_should_inconclusive() -> None:
    raise Inconclusive("the cluster went away")
"""


def test_a_failed_should_or_may_is_a_warning(tmp_path: Path) -> None:
    (tmp_path / "test_levels.py").write_text(SUITE)
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    results, progress = tmp_path / "results.json", tmp_path / "progress.jsonl"
    argv = [
        sys.executable, "-m", "pytest", "-p", "conformance.framework.plugin", "-p", "no:cacheprovider",
        "-c", str(tmp_path / "pytest.ini"), "--rootdir", str(tmp_path), str(tmp_path / "test_levels.py"),
        "--all-features", "--results-file", str(results), "--progress-file", str(progress), "-q",
    ]  # fmt: skip
    proc = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=300, check=False)
    assert results.is_file(), proc.stdout[-3000:] + proc.stderr[-3000:]
    by_id = {r["id"]: r for r in json.loads(results.read_text())["results"]}
    assert {i: (r["outcome"], r["level"]) for i, r in by_id.items()} == {
        "levels/must/fails": ("non-conformant", "MUST"),
        "levels/should/fails": ("warning", "SHOULD"),
        "levels/may/fails": ("warning", "MAY"),
        "levels/should/inconclusive": ("error", "SHOULD"),
    }
    assert "expected 429, got 403" in by_id["levels/should/fails"]["message"]
    lines = map(json.loads, progress.read_text().splitlines())
    events = {e["id"]: e["outcome"] for e in lines if e["event"] == "finished"}
    assert events["levels/should/fails"] == "warning" and events["levels/must/fails"] == "non-conformant"
