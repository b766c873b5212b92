"""The run's secrets directory: private, gone when the run ends, swept when its owner died.

A run writes credentials there (the reference controller's kubeconfig with a client certificate,
webhook serving certificates). ``TemporaryDirectory`` removes it when the run ends, also on Ctrl-C
and SIGTERM (the CLI turns SIGTERM into an interruption: :mod:`.signals`); after SIGKILL, or when a
process running the suite in-process is killed, nothing can. So the directory's name carries the
owner's pid, and every run first removes the directories of owners that are gone
(:func:`sweep_orphans`). A directory without a pid (written by an older version) is left alone:
its owner cannot be known.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path

from ..cluster.local.processes import pid_alive

PREFIX = "kthena-conformance-secrets-"


def make() -> tempfile.TemporaryDirectory[str]:
    return tempfile.TemporaryDirectory(prefix=f"{PREFIX}{os.getpid()}-")


def owner(name: str) -> int | None:
    """The owner pid a directory name carries (None: not one of ours, or no pid)."""
    if not name.startswith(PREFIX):
        return None
    pid, sep, _ = name[len(PREFIX) :].partition("-")
    return int(pid) if sep and pid.isdigit() else None


def orphans(names: Iterable[str], alive: Callable[[int], bool]) -> list[str]:
    """The names among ``names`` whose owner is gone (pure)."""
    return sorted(n for n in names if (pid := owner(n)) is not None and not alive(pid))


def sweep_orphans(root: Path | None = None) -> list[Path]:
    """Remove the secrets directories of dead owners under ``root`` (the temp dir); what was removed."""
    base = root or Path(tempfile.gettempdir())
    removed = [base / n for n in orphans((p.name for p in base.glob(f"{PREFIX}*")), pid_alive)]
    for path in removed:
        shutil.rmtree(path, ignore_errors=True)
    return removed
