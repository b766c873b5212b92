"""A run that explains itself and never loses a result, on the real embedded cluster.

Each test starts ``kthena-conformance run`` (one worker, a kept cluster shared by the module), waits
until a test of the run is under way, then breaks something the way it breaks in life:

- SIGKILL of the controller under test: one line names it, the run stops at once, exit code 1,
  no HTTP header dump on the terminal, the report's error and first cause say it;
- SIGTERM to the whole process group after a behaviour passed (what ``timeout 40 kthena-conformance
  run`` does): the passed behaviours stay passed in the report, which says interrupted (exit 130);
- SIGKILL of the runner alone: the report on disk (written as results arrived) is valid, marked
  interrupted with its progress, and the run's pytest processes are gone within seconds;
- a run narrowed by ``--id`` whose selection passed: exit code 0;
- SIGKILL of kube-apiserver (last: it breaks the cluster): one line names it, exit code 3.

Every report left is checked by ``kthena-conformance report verify``.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from conformance.framework.waits import wait_for

pytestmark = [pytest.mark.serial, pytest.mark.own_controller, pytest.mark.slow]

CLI = [sys.executable, "-m", "conformance.cli"]
FIRST_TEST_TIMEOUT = 420  # a cluster start and a deployment under a loaded machine included
STOP_TIMEOUT = 120  # the run must end this soon after what it depends on died
# Behaviours of ~10-60 s each: a kill lands mid-test with more left to run.
SELECTION = ("core/recovery/*", "core/scale/*")


@pytest.fixture(scope="module")
def cluster_name() -> Iterator[str]:
    from conformance.cluster.local.provider import LocalProvider

    name = f"expl-{os.getpid()}"
    yield name
    LocalProvider().down(name)


def start(cluster: str, report_dir: Path, *ids: str, workers: int = 1) -> subprocess.Popen[bytes]:
    args = [*CLI, "run", "--keep-cluster", "--name", cluster, "--report-dir", str(report_dir), "-n", str(workers)]
    args.append("--no-real-nodes")  # kwok: these behaviours need no container; the host's lock stays free
    args += [f"--id={i}" for i in ids]
    with (report_dir / "terminal.log").open("wb") as out:
        return subprocess.Popen(args, start_new_session=True, stdout=out, stderr=subprocess.STDOUT)


def terminal(report_dir: Path) -> str:
    return (report_dir / "terminal.log").read_text(errors="replace")


def ended_early(proc: subprocess.Popen[bytes], report_dir: Path) -> Any:
    def check(_: object, __: float) -> str | None:
        if proc.poll() is None:
            return None
        return f"the run exited with code {proc.returncode}; its output ends:\n{terminal(report_dir)[-3000:]}"

    return check


PASSED = re.compile(r"\] \[\s*\d+/\d+\] (\S+) passed ")  # a behaviour's line: [  12.3s] [1/9] core/x passed 3.1s


def wait_for_a_pass(proc: subprocess.Popen[bytes], report_dir: Path) -> None:
    wait_for(
        "a behaviour's 'passed' line on the run's terminal",
        lambda: PASSED.search(terminal(report_dir)) is not None,
        timeout=FIRST_TEST_TIMEOUT,
        interval=0.3,
        give_up=ended_early(proc, report_dir),
    )


def wait_for_a_running_test(proc: subprocess.Popen[bytes], report_dir: Path) -> None:
    """Until the pass's progress file says a test started."""

    def started() -> bool:
        events = report_dir / ".passes"
        return any('"event": "started"' in p.read_text() for p in events.glob("*.progress.jsonl"))

    wait_for("a test of the run to start", started, timeout=FIRST_TEST_TIMEOUT, interval=0.3,
             give_up=ended_early(proc, report_dir))  # fmt: skip


def ended(proc: subprocess.Popen[bytes], report_dir: Path, timeout: float = STOP_TIMEOUT) -> str:
    try:
        proc.wait(timeout=timeout)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    shown = terminal(report_dir)
    print(f"--- the run's terminal (exit {proc.returncode}), its end:\n{shown[-2500:]}\n---")
    return shown


def verified(report_dir: Path) -> dict[str, Any]:
    path = report_dir / "conformance-report.json"
    argv = [*CLI, "report", "verify", str(path)]
    check = subprocess.run(argv, check=False, capture_output=True, text=True, timeout=120)
    assert check.returncode == 0, check.stdout + check.stderr
    data: dict[str, Any] = json.loads(path.read_text())
    return data


def _done(report_dir: Path) -> int:
    """How many behaviours the report on disk says are done (it is replaced atomically: always whole)."""
    path = report_dir / "conformance-report.json"
    progress = json.loads(path.read_text())["run"].get("progress") if path.is_file() else None
    return int(progress["done"]) if progress else 0


def descendants(pid: int, *words: str) -> list[psutil.Process]:
    try:
        found = psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []
    out = []
    for p in found:
        try:
            if any(w in " ".join(p.cmdline()) for w in words):
                out.append(p)
        except psutil.NoSuchProcess:
            continue
    return out


def the_runs_own(pid: int) -> list[psutil.Process]:
    """The processes the run started, but the kept cluster (its supervisor and the components under it)."""
    try:
        found = psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []
    cluster: set[int] = set()
    for p in found:
        try:
            if "conformance.cluster.local.supervisor" in " ".join(p.cmdline()):
                cluster |= {p.pid, *(c.pid for c in p.children(recursive=True))}
        except psutil.NoSuchProcess:
            continue
    return [p for p in found if p.pid not in cluster]


def alive(processes: list[psutil.Process]) -> list[psutil.Process]:
    out = []
    for p in processes:
        try:
            if p.is_running() and p.status() != psutil.STATUS_ZOMBIE:
                out.append(p)
        except psutil.NoSuchProcess:
            continue
    return out


def test_a_killed_controller_is_named_once_and_ends_the_run(cluster_name: str, tmp_path: Path) -> None:
    proc = start(cluster_name, tmp_path, *SELECTION)
    wait_for_a_running_test(proc, tmp_path)
    controllers = descendants(proc.pid, "kthena_ref.cli run")
    assert controllers, "the run starts the reference controller"
    for c in controllers:
        c.send_signal(signal.SIGKILL)
    shown = ended(proc, tmp_path)
    assert proc.returncode == 1, shown[-3000:]
    errors = [line for line in shown.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and "the controller under test was killed by SIGKILL" in errors[0], shown[-3000:]
    assert "HTTP response headers" not in shown and "ServiceException" not in shown, shown[-3000:]
    assert shown.count("not run:") == 0, shown[-3000:]  # one cause, not one line per behaviour
    report = verified(tmp_path)
    assert "the controller under test was killed by SIGKILL" in report["error"]["message"]
    assert report["causes"][0]["cause"].startswith("the controller under test was killed by SIGKILL")
    print(f"controller SIGKILL: exit {proc.returncode}; {errors[0]}")


def test_sigterm_to_the_group_keeps_what_passed(cluster_name: str, tmp_path: Path) -> None:
    proc = start(cluster_name, tmp_path, *SELECTION)
    wait_for_a_pass(proc, tmp_path)
    os.killpg(proc.pid, signal.SIGTERM)  # what `timeout` does
    shown = ended(proc, tmp_path)
    assert proc.returncode == 130, shown[-3000:]
    printed = set(PASSED.findall(shown))
    report = verified(tmp_path)
    passed = {t["id"] for t in report["tests"] if t["outcome"] == "passed"}
    assert printed and printed <= passed, (printed, passed)
    assert report["run"]["interrupted"] is True and report["exitCode"] == 130
    print(f"SIGTERM to the group: exit {proc.returncode}; {len(printed)} printed passed, {len(passed)} in the report")


def test_a_killed_runner_leaves_a_valid_report_and_no_process(cluster_name: str, tmp_path: Path) -> None:
    proc = start(cluster_name, tmp_path, *SELECTION, workers=2)  # xdist workers too
    wait_for_a_pass(proc, tmp_path)
    wait_for(  # the report is rewritten at most every 5 s: the one on disk has the pass once written
        "the report written while the run goes on, with a finished behaviour",
        lambda: _done(tmp_path),
        until=lambda done: done >= 1,
        timeout=60,
        give_up=ended_early(proc, tmp_path),
    )
    suite = the_runs_own(proc.pid)
    assert len(suite) >= 4, f"the pass, its two xdist workers and the controller run: {suite}"
    proc.send_signal(signal.SIGKILL)  # the runner alone
    proc.wait()
    killed = time.monotonic()
    left = wait_for("the run's processes to end", lambda: alive(suite), until=lambda a: not a, timeout=10)
    assert not left
    gone_after = time.monotonic() - killed
    report = verified(tmp_path)
    assert report["run"]["interrupted"] is True and report["run"]["progress"]["done"] >= 1, report["run"]
    assert any(t["outcome"] == "passed" for t in report["tests"])
    print(f"runner SIGKILL: report {report['run']['progress']}; {len(suite)} processes gone {gone_after:.1f}s after")


def test_a_narrowed_run_whose_selection_passed_exits_0(cluster_name: str, tmp_path: Path) -> None:
    """--id: the selected behaviour passed, so exit 0; the verdict line says what was judged."""
    proc = start(cluster_name, tmp_path, "core/scale/*")
    shown = ended(proc, tmp_path, timeout=FIRST_TEST_TIMEOUT + 300)
    assert proc.returncode == 0, shown[-3000:]
    assert "judged on the selection: success" in shown and "narrowed: Core (1 of" in shown, shown[-3000:]
    report = verified(tmp_path)
    assert report["exitCode"] == 0 and report["judged"]["verdict"] == "success"
    print(f"narrowed run: exit {proc.returncode}; {shown.splitlines()[-1][:160]}")


def test_a_killed_api_server_is_named_and_exits_3(cluster_name: str, tmp_path: Path) -> None:
    from conformance.cluster.local.provider import LocalProvider

    proc = start(cluster_name, tmp_path, *SELECTION)
    wait_for_a_running_test(proc, tmp_path)
    state = LocalProvider().status(cluster_name) or {}
    os.kill(int(state["components"]["kube-apiserver"]), signal.SIGKILL)
    shown = ended(proc, tmp_path)
    assert proc.returncode == 3, shown[-3000:]
    errors = [line for line in shown.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and "kube-apiserver" in errors[0], shown[-3000:]
    assert "MaxRetryError" not in shown, shown[-3000:]
    report = verified(tmp_path)
    assert report["exitCode"] == 3 and "kube-apiserver" in report["error"]["message"]
    print(f"kube-apiserver SIGKILL: exit {proc.returncode}; {errors[0]}")
