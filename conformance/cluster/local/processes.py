"""Child processes that cannot outlive their supervisor, and free loopback ports.

Every component is started with ``PR_SET_PDEATHSIG`` so the kernel kills it when the supervisor
dies for any reason, including SIGKILL: an orphaned control plane is impossible by construction.
Each component gets its own log file; its tail is what the user sees when it fails to start.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import random
import signal
import socket
import subprocess
import time
from collections.abc import Iterable
from pathlib import Path

_PR_SET_PDEATHSIG = 1
_libc = ctypes.CDLL(None, use_errno=True)


def _die_with_parent() -> None:  # runs in the child between fork and exec
    _libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    # Leave the supervisor's process group so a terminal Ctrl-C reaches the supervisor only,
    # which then stops the components in order.
    os.setpgid(0, 0)


def spawn(argv: Iterable[str], log_path: Path, *, env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    """Start ``argv`` with stdout and stderr appended to ``log_path``; dies with this process."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with log_path.open("ab") as log:
        return subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            preexec_fn=_die_with_parent,  # noqa: PLW1509 - the supervisor is single-threaded
            env=env,
            close_fds=True,
        )


def stop_all(procs: Iterable[subprocess.Popen[bytes]], *, grace: float = 0.5) -> None:
    """SIGTERM every live process at once, then SIGKILL whatever is left after ``grace`` seconds."""
    live = [p for p in procs if p.poll() is None]
    for p in live:
        _signal(p, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while live and time.monotonic() < deadline:
        live = [p for p in live if p.poll() is None]
        if live:
            time.sleep(0.02)
    for p in live:
        _signal(p, signal.SIGKILL)
    for p in live:
        with contextlib.suppress(subprocess.TimeoutExpired):  # a process stuck in the kernel
            p.wait(timeout=5)


def _signal(p: subprocess.Popen[bytes], sig: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        p.send_signal(sig)


def log_tail(path: Path, lines: int = 12) -> list[str]:
    try:
        with path.open("rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - 16384))
            text = f.read().decode(errors="replace")
    except OSError:
        return []
    return [line for line in text.splitlines() if line.strip()][-lines:]


# Where the kernel takes ephemeral ports from (for ``bind(0)`` and for every outgoing connection).
EPHEMERAL_RANGE_FILE = Path("/proc/sys/net/ipv4/ip_local_port_range")
# Listening ports are picked below the ephemeral range, from here up: a port picked from inside it
# can be taken by any outgoing connection (the clients of six clusters make thousands) between the
# pick and the component's bind, which made a controller start fail now and then under load.
LISTEN_FLOOR = 20000


def listen_port_range(ephemeral: str | None) -> range | None:
    """The ports to pick listening ports from, given the text of ``ip_local_port_range`` (``None``
    when unreadable): from :data:`LISTEN_FLOOR` up to the first ephemeral port; ``None`` when that
    leaves fewer than 1,000 ports (then the kernel picks). Pure."""
    try:
        low = int((ephemeral or "").split()[0])
    except (IndexError, ValueError):
        return None
    return range(LISTEN_FLOOR, low) if low - LISTEN_FLOOR >= 1000 else None


def _ephemeral_text() -> str | None:
    try:
        return EPHEMERAL_RANGE_FILE.read_text()
    except OSError:
        return None


def free_ports(count: int) -> list[int]:
    """``count`` distinct loopback ports that were free a moment ago (all held while picking),
    below the ephemeral range when there is room (:func:`listen_port_range`), so no outgoing
    connection takes one before its server binds it."""
    pool = listen_port_range(_ephemeral_text())
    socks: list[socket.socket] = []
    try:
        tries = 0
        while len(socks) < count:
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            port = random.choice(pool) if pool is not None and tries < 200 else 0
            tries += 1
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                s.close()
                continue
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def port_in_use(port: int) -> bool:
    """True when a server could not bind 127.0.0.1:``port`` (something listens there).

    SO_REUSEADDR, as every server sets it: connections of a stopped server lingering in
    TIME_WAIT do not make the port "in use"."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError as exc:
            return exc.errno == errno.EADDRINUSE
    return False


def pid_alive(pid: int) -> bool:
    """True while ``pid`` runs (a zombie, exited but not yet reaped, counts as gone)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return True
