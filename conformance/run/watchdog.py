"""Run a command in its own process group and take the whole group down with its owner.

Why this module exists: ``run --implementation-command`` starts someone else's controller, which
knows nothing of the runner. If the runner is killed (SIGKILL, a crashed CI job), nothing would
stop that controller, and it would keep reconciling a cluster that is gone or, worse, one reused
later. So the runner starts ``python -m conformance.run.watchdog --owner PID -- CMD ...``: the
watchdog starts CMD in a new process group, and ends the group (SIGTERM, then SIGKILL after a
grace period) when the owner process is gone, when it is itself asked to stop (SIGTERM/SIGINT),
or passes CMD's exit code on when CMD exits by itself. Children CMD starts stay in its group, so
they go too. A process of its own, not a thread in the runner, so it outlives nothing it should
not: it polls its owner twice a second.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import subprocess
import sys
import time
from types import FrameType

from ..cluster.local.processes import pid_alive

POLL_SECONDS = 0.5
GRACE_SECONDS = 10.0  # SIGTERM first: a controller may want to release a Lease or flush a log


def end_group(proc: subprocess.Popen[bytes], grace: float = GRACE_SECONDS) -> int:
    """SIGTERM ``proc``'s process group, SIGKILL it after ``grace`` seconds; ``proc``'s exit code."""
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            break
        try:
            return proc.wait(timeout=wait)
        except subprocess.TimeoutExpired:
            continue
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)  # stragglers of the group after the leader exited
    return proc.wait()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m conformance.run.watchdog")
    parser.add_argument("--owner", type=int, required=True, help="end the command when this process is gone")
    parser.add_argument("--grace", type=float, default=GRACE_SECONDS, help="seconds between SIGTERM and SIGKILL")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- CMD [ARGS...]")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no command given after --")
    stop = False

    def asked(signum: int, frame: FrameType | None) -> None:
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, asked)
    signal.signal(signal.SIGINT, asked)
    try:
        proc = subprocess.Popen(command, start_new_session=True)
    except OSError as exc:
        print(f"watchdog: cannot start {command[0]!r}: {exc}", file=sys.stderr)
        return 127
    while True:
        code = proc.poll()
        if code is not None:
            end_group(proc, grace=0.0)  # the leader is gone; take what it left in its group too
            return code
        if stop or not pid_alive(args.owner):
            return end_group(proc, grace=args.grace)
        time.sleep(POLL_SECONDS)


if __name__ == "__main__":
    raise SystemExit(main())
