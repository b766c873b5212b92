"""SIGTERM ends a run the way Ctrl-C does: the same cleanup, the same report, exit code 130.

Without this, SIGTERM (``kill``, a CI job's timeout, a container stop) ends Python at once: no
``finally`` runs, so the run's cluster is left to its supervisor's owner check and its secrets
directory stays behind. :class:`Terminated` is a ``KeyboardInterrupt``, so every Ctrl-C path
handles it; the report names the signal.
"""

from __future__ import annotations

import signal
import threading
from types import FrameType


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where the main thread was."""


def _terminate(signum: int, frame: FrameType | None) -> None:
    raise Terminated


def terminate_like_interrupt() -> None:
    """Install the SIGTERM handler (main thread only; elsewhere nothing changes)."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _terminate)


def name_of(interruption: BaseException) -> str:
    return "SIGTERM" if isinstance(interruption, Terminated) else "SIGINT"
