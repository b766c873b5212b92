"""A run's pytest processes end with the process that started them.

Why this module exists: ``kthena-conformance run`` runs the suite as a pytest subprocess, which
starts xdist workers. When the runner is killed (SIGKILL, an out-of-memory kill, a CI job torn
down), nothing told them: they went on for minutes, still writing into the report directory of
a run that was over. So the runner names itself in :data:`PARENT_ENV`; each pytest process of the
suite that finds it there (:func:`die_with_parent`, from the plugin's ``pytest_configure``) asks
Linux to SIGKILL it when its parent dies (``PR_SET_PDEATHSIG`` through ``prctl``, only where the
parent started it from its main thread, i.e. the runner's pytest), and in every case starts a
daemon thread that checks its parent twice a second and kills its own process once the parent is
gone. It then names itself in the variable, for the workers it will start. Plain pytest (no
variable) is left alone.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import os
import signal
import sys
import threading
from collections.abc import MutableMapping

PARENT_ENV = "KTHENA_CONFORMANCE_PARENT_PID"
# Set by the runner with PARENT_ENV: the runner started this process from its main thread, so
# PR_SET_PDEATHSIG (which fires when the parent *thread* ends) is safe here.
DIRECT_ENV = "KTHENA_CONFORMANCE_PARENT_MAIN_THREAD"
PR_SET_PDEATHSIG = 1
POLL_SECONDS = 0.5


def parent_gone(expected: int, actual: int) -> bool:
    """Whether a process started by ``expected`` has lost it (it was re-parented). Pure."""
    return actual != expected


def die_with_parent(environ: MutableMapping[str, str] | None = None) -> bool:
    """Arrange for this process to end when the parent named in :data:`PARENT_ENV` does (see the
    module docstring); False when not asked to (no variable, or not a pid)."""
    env = os.environ if environ is None else environ
    try:
        expected = int(env.get(PARENT_ENV, ""))
    except ValueError:
        return False
    if env.pop(DIRECT_ENV, None) == "1":
        _pdeathsig()
    if parent_gone(expected, os.getppid()):  # it died before we could ask
        os.kill(os.getpid(), signal.SIGKILL)
    threading.Thread(target=_watch, args=(expected,), name="die-with-parent", daemon=True).start()
    env[PARENT_ENV] = str(os.getpid())
    return True


def _pdeathsig() -> None:
    if not sys.platform.startswith("linux"):
        return
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def _watch(expected: int) -> None:
    stop = threading.Event()
    while not stop.wait(POLL_SECONDS):
        if parent_gone(expected, os.getppid()):
            os.kill(os.getpid(), signal.SIGKILL)
