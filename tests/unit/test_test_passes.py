"""ci/test_passes.py (``make test``): the passes' markers partition the integration tests, and the
closing summary says each pass's time, verdict and the total."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("test_passes_script", ROOT / "ci" / "test_passes.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


tp = _load()


def _selects(markexpr: str, marks: set[str]) -> bool:
    names = {"cluster", "serial", "own_controller", "self_validation", "slow", "browser"}
    return bool(eval(markexpr, {}, {n: n in marks for n in names}))


@pytest.mark.parametrize(
    ("marks", "expected"),
    [
        ({"cluster"}, "shared-cluster"),
        ({"cluster", "slow"}, "shared-cluster"),
        ({"browser"}, "shared-cluster"),
        ({"serial"}, "serial"),
        ({"cluster", "serial"}, "serial"),
        ({"serial", "own_controller"}, "own-controller"),
        ({"cluster", "serial", "own_controller"}, "own-controller"),
        ({"serial", "own_controller", "self_validation"}, "own-controller"),
    ],
)
def test_every_integration_test_runs_in_exactly_one_pass(marks: set[str], expected: str) -> None:
    chosen = [p.name for p in tp.passes(2, 3) if p.name != "unit" and _selects(p.args[p.args.index("-m") + 1], marks)]
    assert chosen == [expected]


def test_the_worker_counts_reach_the_passes() -> None:
    by_name = {p.name: p.args for p in tp.passes(4, 5)}
    assert by_name["unit"][:2] == ("-n", "4") and by_name["shared-cluster"][:2] == ("-n", "4")
    assert by_name["own-controller"][:2] == ("-n", "5")
    assert by_name["own-controller"][2:4] == ("--maxschedchunk", "1")  # one test at a time to an idle worker
    assert "-n" not in by_name["serial"]


def test_the_summary_names_each_pass_and_the_total() -> None:
    lines = tp.summary([("unit", 0, 21.04), ("serial", 1, 70.5)], 754.2)
    assert lines[2] == "  unit                21.0 s  passed"
    assert lines[3] == "  serial              70.5 s  FAILED (pytest exit 1)"
    assert lines[4] == "  total              754.2 s  (12 m 34 s)"


@pytest.mark.parametrize(
    ("base", "expected_prefix"),
    [
        ({"PATH": "/bin"}, "/cache/pycache"),
        ({"PATH": "/bin", "PYTHONDONTWRITEBYTECODE": "1"}, "/cache/pycache"),
        ({"PATH": "/bin", "PYTHONPYCACHEPREFIX": "/mine"}, "/mine"),
    ],
)
def test_the_passes_keep_bytecode_outside_the_checkout(base: dict[str, str], expected_prefix: str) -> None:
    env = tp.pass_environment(base, Path("/cache"))
    assert "PYTHONDONTWRITEBYTECODE" not in env
    assert env["PYTHONPYCACHEPREFIX"] == expected_prefix
    assert env["PATH"] == "/bin"
