"""A run that ends before its tests, on the real embedded cluster: what the terminal shows, the exit
code, the report, and that nothing is left behind (issue 30).

- Ctrl-C while the cluster starts is an interruption (130, the report says interrupted and when),
  not a cluster failure (it was 3, "not interrupted");
- a vendor's first run whose implementation declares some features and whose launch command exits
  at once ends with the command named, exit 3 and a report saying 3 (it was a KeyError traceback
  and exit 1).

Each run brings up its own cluster (the run removes it); Ctrl-C is sent as a terminal sends it, to
the run's whole process group.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from conformance.cluster.paths import runs_root
from conformance.framework.waits import wait_for

pytestmark = [pytest.mark.own_controller, pytest.mark.slow]

CLI = [sys.executable, "-m", "conformance.cli"]
LIGHT = ["--profile", "Core", "--no-real-nodes", "--no-fake-devices"]  # the smallest cluster a run makes


def start(report_dir: Path, *args: str) -> subprocess.Popen[bytes]:
    with (report_dir / "terminal.log").open("wb") as out:
        return subprocess.Popen(
            [*CLI, "run", *LIGHT, "--report-dir", str(report_dir), *args],
            start_new_session=True,
            stdout=out,
            stderr=subprocess.STDOUT,
            env={k: v for k, v in os.environ.items() if k != "KTHENA_DEBUG"},
        )


def finish(proc: subprocess.Popen[bytes], report_dir: Path, timeout: float) -> tuple[str, dict[str, Any]]:
    try:
        proc.wait(timeout=timeout)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    shown = (report_dir / "terminal.log").read_text(errors="replace")
    return shown, json.loads((report_dir / "conformance-report.json").read_text())


def test_ctrl_c_while_the_cluster_starts_is_an_interruption(tmp_path: Path) -> None:
    proc = start(tmp_path)
    log = tmp_path / "terminal.log"
    wait_for(
        "the cluster to be starting",
        lambda: "starting etcd" in log.read_text(errors="replace"),
        timeout=300,
        interval=0.1,
        give_up=lambda *_: None if proc.poll() is None else f"the run ended first: {log.read_text()[-2000:]}",
    )
    os.killpg(proc.pid, signal.SIGINT)
    shown, report = finish(proc, tmp_path, timeout=180)
    assert proc.returncode == 130, shown[-3000:]
    assert "interrupted (SIGINT) while the cluster started" in shown
    assert "Traceback" not in shown
    assert report["exitCode"] == 130 and report["run"]["interrupted"] is True
    assert not (runs_root() / f"conformance-{proc.pid}").exists(), "the cluster was left behind"


def test_a_first_run_whose_command_exits_names_it_with_exit_3(tmp_path: Path) -> None:
    proc = start(tmp_path, "--implementation-command", "false", "--supported-features", "Core,Admission,Recovery")
    shown, report = finish(proc, tmp_path, timeout=600)
    assert proc.returncode == 3, shown[-3000:]
    assert "Traceback" not in shown and "internal error" not in shown, shown[-3000:]
    assert "error: the implementation command exited with code 1 before it was ready: false" in shown
    assert "  -> its output is in " in shown
    assert report["exitCode"] == 3 and report["verdict"] == "error"
    outcomes = {t["outcome"] for t in report["tests"]}
    assert {"not-supported", "error"} <= outcomes, outcomes
    assert not (runs_root() / f"conformance-{proc.pid}").exists(), "the cluster was left behind"
