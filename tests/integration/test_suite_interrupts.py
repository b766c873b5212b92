"""An interrupted conformance run still leaves a report that says so, and nothing behind.

Ctrl-C is simulated the way a terminal sends it: SIGINT to the run's whole process group
(``kthena-conformance run``, its pytest passes and their xdist workers). A killed xdist worker
is simulated with SIGKILL to one worker process. The cluster is kept between the two runs and
removed at the end; after each run the suite's namespaces of that run are gone or swept.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from conformance.framework.waits import wait_for

pytestmark = [pytest.mark.serial, pytest.mark.own_controller, pytest.mark.slow]

CLI = [sys.executable, "-m", "conformance.cli"]


@pytest.fixture(scope="module")
def cluster_name() -> Iterator[str]:
    from conformance.cluster.local.provider import LocalProvider

    name = f"intr-{os.getpid()}"
    yield name
    LocalProvider().down(name)


# A run's first start brings the cluster up, deploys the reference and runs preflight: minutes when
# the own-controller pass's other workers load both cores.
FIRST_TEST_TIMEOUT = 420


def start(cluster: str, report_dir: Path, *ids: str) -> subprocess.Popen[bytes]:
    """The run, its terminal output in ``report_dir/terminal.log`` (readable while it runs)."""
    args = [*CLI, "run", "--keep-cluster", "--name", cluster, "--report-dir", str(report_dir), "-n", "2"]
    args += [f"--id={i}" for i in ids]
    with (report_dir / "terminal.log").open("wb") as out:
        return subprocess.Popen(args, start_new_session=True, stdout=out, stderr=subprocess.STDOUT)


def terminal(report_dir: Path) -> str:
    return (report_dir / "terminal.log").read_text(errors="replace")


def ended_early(proc: subprocess.Popen[bytes], report_dir: Path) -> Any:
    """A ``give_up`` for waits on a run: the run ended before the awaited moment (its output says why)."""

    def check(_: object, __: float) -> str | None:
        if proc.poll() is None:
            return None
        return f"the run exited with code {proc.returncode}; its output ends:\n{terminal(report_dir)[-3000:]}"

    return check


def running_tests(cluster: str) -> list[str]:
    """Active (not terminating) namespaces of a test that is running now."""
    from conformance.cluster.local.provider import LocalProvider
    from conformance.framework.kube import Kube
    from conformance.framework.namespaces import BEHAVIOUR_LABEL

    info = LocalProvider().info(cluster)
    items = Kube.connect(info.kubeconfig, info.context).core.list_namespace(label_selector=BEHAVIOUR_LABEL).items
    return [n.metadata.name for n in items if n.status.phase == "Active"]


def suite_namespaces(cluster: str) -> list[str]:
    from conformance.cluster.local.provider import LocalProvider
    from conformance.framework import namespaces
    from conformance.framework.kube import Kube

    info = LocalProvider().info(cluster)
    return namespaces.leftovers(Kube.connect(info.kubeconfig, info.context))


def xdist_workers(proc: subprocess.Popen[bytes]) -> list[psutil.Process]:
    try:
        children = psutil.Process(proc.pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []
    return [c for c in children if "xdist" in " ".join(c.cmdline()) or "-c" in c.cmdline()[:3]]


def interrupt_when_running(proc: subprocess.Popen[bytes], cluster: str, report_dir: Path, send: Any) -> str:
    """Once a test of the run has a namespace, call ``send()``; the run's output (it is killed if it
    outlives the interruption by 240 s)."""
    try:
        wait_for(
            "a test namespace of the run",
            lambda: suite_namespaces(cluster) if (report_dir / ".passes").exists() else [],
            timeout=FIRST_TEST_TIMEOUT,
            interval=0.3,
            give_up=ended_early(proc, report_dir),
        )
        send()
        proc.wait(timeout=240)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    return terminal(report_dir)


def test_ctrl_c_leaves_a_report_saying_so_and_no_leftovers(cluster_name: str, tmp_path: Path) -> None:
    proc = start(cluster_name, tmp_path, "core/*", "plugins/*")
    shown = interrupt_when_running(proc, cluster_name, tmp_path, lambda: os.killpg(proc.pid, signal.SIGINT))
    assert proc.returncode == 130, shown[-3000:]
    assert "verdict: error" in shown and "interrupted" in shown, shown[-3000:]  # what the terminal says
    report = json.loads((tmp_path / "conformance-report.json").read_text())
    assert report["run"]["interrupted"] is True
    assert report["verdict"] == "error" and report["exitCode"] == 130
    assert any("interrupted" in t["message"] for t in report["tests"] if t["outcome"] == "error"), report["tests"]
    subprocess.run([*CLI, "sweep", "--name", cluster_name], check=True, capture_output=True, timeout=180)
    assert suite_namespaces(cluster_name) == []


def test_sigterm_to_the_run_alone_ends_it_as_ctrl_c_does(cluster_name: str, tmp_path: Path) -> None:
    """``kill <pid>`` (or a CI timeout) reaches only the CLI: it passes the interruption on to its
    pytest pass, writes the report (naming SIGTERM), removes its secrets directory, exits 130."""
    from conformance.run.credentials import PREFIX

    proc = start(cluster_name, tmp_path, "core/*")
    secrets: list[Path] = []

    def terminate() -> None:
        secrets.extend(Path(tempfile.gettempdir()).glob(f"{PREFIX}{proc.pid}-*"))
        proc.send_signal(signal.SIGTERM)

    shown = interrupt_when_running(proc, cluster_name, tmp_path, terminate)
    assert secrets, "the run keeps its credentials in a directory named after its pid"
    assert proc.returncode == 130, shown[-3000:]
    report = json.loads((tmp_path / "conformance-report.json").read_text())
    assert report["run"]["interrupted"] is True and "SIGTERM" in report["run"]["interruption"], report["run"]
    assert [p for p in secrets if p.exists()] == [], "the secrets directory outlived the run"
    subprocess.run([*CLI, "sweep", "--name", cluster_name], check=True, capture_output=True, timeout=180)
    assert suite_namespaces(cluster_name) == []


def test_a_killed_worker_is_an_error_in_the_report(cluster_name: str, tmp_path: Path) -> None:
    proc = start(cluster_name, tmp_path, "core/recovery/*")  # tests of ~10 s: a kill lands mid-test
    try:
        workers = wait_for(
            "xdist workers with a test running",
            lambda: xdist_workers(proc) if running_tests(cluster_name) else [],
            timeout=FIRST_TEST_TIMEOUT,
            interval=0.3,
            give_up=ended_early(proc, tmp_path),
        )
        for worker in workers:
            worker.kill()
        proc.wait(timeout=600)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    report = json.loads((tmp_path / "conformance-report.json").read_text())
    errors = [t for t in report["tests"] if t["outcome"] == "error"]
    assert errors, f"a killed worker must show as an error; tests: {report['tests']}"
    shown = terminal(tmp_path)
    assert report["verdict"] != "success" and proc.returncode == 1, shown[-3000:]
    # the terminal: the crash named as it happens, then one cause line with the count it left undecided
    assert re.search(r"\berror\b.*worker '\w+' crashed", shown), shown[-3000:]
    assert re.search(r"cause \(\d+ behaviours?\)", shown) and "verdict: " in shown, shown[-3000:]
    assert suite_namespaces(cluster_name) == [], "the run sweeps its own namespaces at the end"
