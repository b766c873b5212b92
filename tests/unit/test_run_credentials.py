"""conformance.run.credentials and .signals: the secrets directory's owner, the sweep of dead owners'
directories, and SIGTERM taken as an interruption."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from conformance.run import credentials, signals

P = credentials.PREFIX


@pytest.mark.parametrize(
    ("name", "pid"),
    [
        pytest.param(f"{P}123-abcd", 123, id="ours"),
        pytest.param(f"{P}abcd", None, id="older-without-pid"),
        pytest.param(f"{P}12x-abcd", None, id="not-a-pid"),
        pytest.param("kthena-wheel-123-abcd", None, id="not-ours"),
        pytest.param(f"{P}123", None, id="pid-without-suffix"),
    ],
)
def test_owner(name: str, pid: int | None) -> None:
    assert credentials.owner(name) == pid


def test_orphans_are_the_dead_owners_only() -> None:
    names = [f"{P}1-a", f"{P}2-b", f"{P}c", "other-3-d"]
    assert credentials.orphans(names, alive=lambda pid: pid == 2) == [f"{P}1-a"]


def test_the_sweep_removes_a_dead_owners_directory_and_keeps_the_rest(tmp_path: Path) -> None:
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, check=True)
    gone = tmp_path / f"{P}{int(dead.stdout)}-x"
    mine = tmp_path / f"{P}{os.getpid()}-y"
    legacy = tmp_path / f"{P}zzz"
    for d in (gone, mine, legacy):
        d.mkdir()
        (d / "kubeconfig").write_text("secret")
    assert credentials.sweep_orphans(tmp_path) == [gone]
    assert not gone.exists() and mine.exists() and legacy.exists()


def test_a_run_directory_names_its_owner() -> None:
    with credentials.make() as path:
        assert credentials.owner(Path(path).name) == os.getpid()


def test_sigterm_is_an_interruption_that_names_itself() -> None:
    before = signal.getsignal(signal.SIGTERM)
    try:
        signals.terminate_like_interrupt()
        with pytest.raises(KeyboardInterrupt) as caught:
            os.kill(os.getpid(), signal.SIGTERM)
        assert signals.name_of(caught.value) == "SIGTERM"
    finally:
        signal.signal(signal.SIGTERM, before)
    assert signals.name_of(KeyboardInterrupt()) == "SIGINT"
