"""The ``cluster`` fixture: one cluster per test run across xdist workers, gone when the run ends.

Each test runs pytest itself, in a subprocess, on a small generated test module, under a private
cache root: that is the only honest way to check what happens after a failing test, a Ctrl-C or
a SIGKILL of the whole run.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import psutil
import pytest

from conformance.cluster.binaries import BinaryCache
from conformance.cluster.versions import PINNED
from conformance.framework.waits import wait_for

pytestmark = [pytest.mark.serial, pytest.mark.slow]

CONFTEST = 'pytest_plugins = ["conformance.cluster.testing"]\n'

USES_CLUSTER = textwrap.dedent(
    """
    import json, os, pathlib, time

    def record(cluster, name):
        state = json.loads((pathlib.Path(cluster.details["run_dir"]) / "state.json").read_text())
        out = pathlib.Path(os.environ["RECORD_DIR"]) / f"{name}.json"
        out.write_text(json.dumps({"supervisor": state["supervisor_pid"], "run_dir": cluster.details["run_dir"],
                                   "components": state["components"], "worker": os.environ.get("PYTEST_XDIST_WORKER")}))
    """
)


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    found = BinaryCache().load(PINNED)
    assert found is not None, "run `make binaries` first"
    records = tmp_path / "records"
    records.mkdir()
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("KTHENA_PYTEST_", "PYTEST_"))}
    return {
        **clean,
        "KTHENA_CACHE_DIR": str(tmp_path / "cache"),
        "KTHENA_BIN_DIR": str(found.directory),
        "RECORD_DIR": str(records),
    }


def write_suite(directory: Path, tests: str) -> Path:
    suite = directory / "suite"
    suite.mkdir()
    (suite / "conftest.py").write_text(CONFTEST)
    (suite / "test_generated.py").write_text(USES_CLUSTER + textwrap.dedent(tests))
    return suite


def pytest_argv(suite: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", str(suite), *extra]


def records(env: dict[str, str]) -> list[dict[str, object]]:
    return [json.loads(p.read_text()) for p in sorted(Path(env["RECORD_DIR"]).glob("*.json"))]


def assert_cluster_gone(record: dict[str, object]) -> None:
    pids = [int(record["supervisor"]), *(int(p) for p in dict(record["components"]).values())]  # type: ignore[call-overload, arg-type]
    wait_for(
        "every cluster process to exit",
        lambda: [p for p in pids if psutil.pid_exists(p)],
        until=lambda alive: not alive,
        timeout=15,
    )
    assert not Path(str(record["run_dir"])).exists()


def test_xdist_workers_share_one_cluster_and_it_is_gone_after_a_failing_run(
    tmp_path: Path, env: dict[str, str]
) -> None:
    tests = "\n".join(
        f"def test_{i}(cluster):\n    record(cluster, 'test_{i}')\n    assert {i} != 3, 'a deliberate failure'\n"
        for i in range(6)
    )
    suite = write_suite(tmp_path, tests)
    result = subprocess.run(
        pytest_argv(suite, "-n", "2"), env=env, capture_output=True, text=True, timeout=180, check=False
    )
    assert result.returncode == 1, result.stdout + result.stderr
    assert "5 passed" in result.stdout and "1 failed" in result.stdout, result.stdout[-4000:] + result.stderr[-2000:]
    seen = records(env)
    assert len(seen) == 6
    assert {r["worker"] for r in seen} == {"gw0", "gw1"}, "both workers must have run tests"
    assert len({r["supervisor"] for r in seen}) == 1, "one cluster per run, not per worker"
    assert_cluster_gone(seen[0])


def test_ctrl_c_of_a_test_run_tears_the_cluster_down(tmp_path: Path, env: dict[str, str]) -> None:
    tests = """
    def test_blocks(cluster):
        record(cluster, "blocks")
        print("RECORDED", flush=True)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:  # the run is interrupted from outside
            time.sleep(0.1)
    """
    suite = write_suite(tmp_path, tests)
    proc = subprocess.Popen(
        pytest_argv(suite, "-s"), env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    assert proc.stdout is not None
    for line in proc.stdout:
        if "RECORDED" in line:
            break
    proc.send_signal(signal.SIGINT)
    output, _ = proc.communicate(timeout=60)
    assert proc.returncode == 2, output  # pytest's "interrupted"
    assert_cluster_gone(records(env)[0])


def test_sigkill_of_an_xdist_run_tears_the_cluster_down(tmp_path: Path, env: dict[str, str]) -> None:
    tests = """
    def test_blocks(cluster):
        record(cluster, "blocks")
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:  # the run is killed from outside
            time.sleep(0.1)
    """
    suite = write_suite(tmp_path, tests)
    proc = subprocess.Popen(
        pytest_argv(suite, "-n", "2"),
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    record_file = Path(env["RECORD_DIR"]) / "blocks.json"
    wait_for("the test to record its cluster", record_file.exists, timeout=90)
    os.killpg(proc.pid, signal.SIGKILL)  # the controller and its workers, as a CI timeout would
    proc.wait()
    assert_cluster_gone(records(env)[0])
