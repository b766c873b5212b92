"""Restarting the implementation's controller from a test.

Why this module exists: "maintains" (no recreation on resync *or restart*) can only be seen
across a restart, and the suite cannot restart an arbitrary controller by itself. Two sources
say how, the first found wins: the runner's ``--controller-restart`` (it runs the controller, see
:mod:`conformance.run.restarts`), or the implementation's support file (``controllerRestart``).
With neither, a test that needs a restart is inconclusive, never passed.
"""

from __future__ import annotations

import json
import subprocess
import time

from .outcomes import Inconclusive
from .support import ControllerRestart, Support

NOT_DECLARED = (
    "the implementation declares no way to restart its controller (support file controllerRestart.command), and "
    "the harness does not run it"
)


class RestartConfigError(ValueError):
    """``--controller-restart`` is not a JSON list of strings."""


def restart_from_option(value: str | None, support: Support) -> ControllerRestart | None:
    """The restart to use: the runner's option (JSON argv) over the support file's declaration."""
    if not value:
        return support.restart
    try:
        argv = json.loads(value)
    except json.JSONDecodeError as exc:
        raise RestartConfigError(f"--controller-restart: not JSON ({exc.msg} at {exc.pos})") from None
    if not isinstance(argv, list) or not argv or not all(isinstance(a, str) and a for a in argv):
        raise RestartConfigError(f"--controller-restart: expected a JSON list of non-empty strings, got {value!r}")
    return ControllerRestart(tuple(argv), source="the harness (it runs the controller)")


def restart_controller(restart: ControllerRestart | None) -> float:
    """Run the restart command; the seconds it took. Inconclusive when none is declared; an
    error (not a verdict) when the command fails or overruns its timeout."""
    if restart is None:
        raise Inconclusive(NOT_DECLARED)
    started = time.monotonic()
    try:
        done = subprocess.run(
            restart.command,
            check=False,
            capture_output=True,
            text=True,
            timeout=restart.timeout,
            stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired:
        raise RuntimeError(
            f"the controller restart command {list(restart.command)} (from {restart.source}) did not return within "
            f"{restart.timeout:g}s"
        ) from None
    except OSError as exc:
        raise RuntimeError(
            f"the controller restart command {list(restart.command)} (from {restart.source}) could not run: {exc}"
        ) from None
    if done.returncode != 0:
        output = (done.stderr or done.stdout).strip()[-400:]
        raise RuntimeError(
            f"the controller restart command {list(restart.command)} (from {restart.source}) exited "
            f"{done.returncode}: {output or '(no output)'}"
        )
    return time.monotonic() - started
