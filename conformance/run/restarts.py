"""Restarting a controller the harness runs, on request from a test.

Why this module exists: the spec says the headless-service plugin *maintains* its Services (no
recreation on resync or restart), and the only way to see a restart is to cause one. The suite
runs in pytest subprocesses; the controller (the reference, or later an implementation started
from a command) is a child of the runner. So the runner serves restarts through a directory:
a test runs :func:`request_command` (this module as a program), which writes
``<id>.request`` and waits for ``<id>.done``; a :class:`RestartService` thread in the runner sees
the request, restarts the controller and writes the outcome. Files, not sockets: nothing to
listen on, nothing left behind beyond the run's own work directory.

An implementation the harness does not run declares its own command in the support file
(``controllerRestart.command``); the suite runs either the same way (:mod:`conformance.framework.restart`).
"""

from __future__ import annotations

import json
import sys
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from types import TracebackType

POLL_SECONDS = 0.1
DEFAULT_TIMEOUT = 120.0  # a request unanswered this long fails (the runner restarts within ~30 s)


class RestartService:
    """A runner thread answering restart requests in ``directory`` by calling ``restart``."""

    def __init__(self, directory: Path, restart: Callable[[], None]) -> None:
        self.directory = directory
        self._restart = restart
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, name="controller-restarts", daemon=True)
        self.served = 0

    def command(self) -> list[str]:
        """The argv a test runs to restart the controller (blocks until it is back)."""
        return [sys.executable, "-m", "conformance.run.restarts", str(self.directory)]

    def __enter__(self) -> RestartService:
        self.directory.mkdir(parents=True, exist_ok=True)
        self._thread.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _serve(self) -> None:
        while not self._stop.wait(POLL_SECONDS):
            for request in sorted(self.directory.glob("*.request")):
                self._answer(request)

    def _answer(self, request: Path) -> None:
        started = time.monotonic()
        try:
            self._restart()
        except Exception as exc:  # the answer carries it to the test; the runner goes on
            outcome = {"ok": False, "message": f"{type(exc).__name__}: {exc}"}
        else:
            outcome = {"ok": True, "message": "restarted"}
        outcome["seconds"] = round(time.monotonic() - started, 2)
        self.served += 1
        done = request.with_suffix(".done")
        done.with_suffix(".tmp").write_text(json.dumps(outcome))
        done.with_suffix(".tmp").replace(done)  # atomic: the requester never reads half a file
        request.unlink(missing_ok=True)


def request_restart(directory: Path, timeout: float = DEFAULT_TIMEOUT) -> dict[str, object]:
    """Ask the runner serving ``directory`` for a restart and wait for its answer."""
    if not directory.is_dir():
        return {"ok": False, "message": f"no restart service at {directory} (is the run still going?)"}
    name = uuid.uuid4().hex
    request = directory / f"{name}.request"
    done = directory / f"{name}.done"
    request.write_text("")
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if done.exists():
            answer: dict[str, object] = json.loads(done.read_text())
            done.unlink(missing_ok=True)
            return answer
        time.sleep(POLL_SECONDS)
    request.unlink(missing_ok=True)
    return {"ok": False, "message": f"the runner did not answer the restart request within {timeout:g}s"}


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m conformance.run.restarts DIRECTORY", file=sys.stderr)
        return 2
    answer = request_restart(Path(argv[0]))
    print(answer.get("message", ""), file=sys.stdout if answer.get("ok") else sys.stderr)
    return 0 if answer.get("ok") else 1


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
