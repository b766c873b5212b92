"""The run's pytest processes end with their parent (conformance.framework.lifetime): a real
parent, child and grandchild; the parent SIGKILLed; both gone within seconds."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import psutil
import pytest

from conformance.framework.lifetime import DIRECT_ENV, PARENT_ENV, die_with_parent, parent_gone
from conformance.framework.waits import wait_for

# The child arranges to die with its parent, then starts a grandchild that does the same (as the
# suite's pytest starts xdist workers), prints both pids and sleeps.
CHILD = textwrap.dedent(
    """
    import os, subprocess, sys, time
    from conformance.framework.lifetime import die_with_parent
    assert die_with_parent()
    grand = subprocess.Popen([sys.executable, "-c", "from conformance.framework.lifetime import die_with_parent;"
                              "import time; assert die_with_parent(); time.sleep(120)"])
    print(os.getpid(), grand.pid, flush=True)
    time.sleep(120)
    """
)
# The parent starts the child from its main thread, naming itself, and sleeps (until SIGKILLed).
PARENT = textwrap.dedent(
    f"""
    import os, subprocess, sys, time
    env = {{**os.environ, {PARENT_ENV!r}: str(os.getpid()), {DIRECT_ENV!r}: "1"}}
    subprocess.Popen([sys.executable, "-c", {CHILD!r}], env=env)
    time.sleep(120)
    """
)


@pytest.mark.parametrize(("expected", "actual", "gone"), [(10, 10, False), (10, 1, True), (10, 77, True)])
def test_parent_gone(expected: int, actual: int, gone: bool) -> None:
    assert parent_gone(expected, actual) is gone


@pytest.mark.parametrize("value", [None, "", "not-a-pid"])
def test_without_the_variable_nothing_changes(value: str | None) -> None:
    env = {} if value is None else {PARENT_ENV: value}
    assert die_with_parent(env) is False
    assert env == ({} if value is None else {PARENT_ENV: value})


def test_the_suite_processes_die_with_a_killed_parent(tmp_path: Path) -> None:
    out = tmp_path / "pids"
    root = Path(__file__).resolve().parents[3]
    with out.open("w") as handle:
        parent = subprocess.Popen(
            [sys.executable, "-c", PARENT], stdout=handle, cwd=root, env={**os.environ, "PYTHONPATH": str(root)}
        )
    try:
        pids = wait_for("the child's pids", lambda: out.read_text().split(), until=lambda p: len(p) == 2, timeout=60)
        child, grandchild = (int(p) for p in pids)
        parent.send_signal(signal.SIGKILL)
        parent.wait()

        def alive() -> list[int]:
            return [p for p in (child, grandchild) if psutil.pid_exists(p) and psutil.Process(p).status() != "zombie"]

        wait_for("the child and the grandchild to end", alive, until=lambda a: not a, timeout=5)
    finally:
        for pid in (int(p) for p in out.read_text().split()):
            if psutil.pid_exists(pid):
                os.kill(pid, signal.SIGKILL)
