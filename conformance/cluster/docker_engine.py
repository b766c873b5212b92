"""A Docker engine of the harness's own for the kind provider: installed, started, stopped, and the
host put back as it was.

kind needs a Docker engine. On a machine without one the harness installs Debian's ``docker.io``
(``apt-get``; it brings dockerd, containerd, runc and iptables) and starts its own ``dockerd``:
data root under the cache (``<cache>/docker``: the locally built node image survives between
runs), exec root, socket, pidfile and log in ``<cache>/kind/dockerd`` (not under ``<cache>/clusters``,
which the local provider sweeps).
Every Docker command the harness runs (and kind, which runs ``docker``) is pointed at that socket
with ``DOCKER_HOST``. An engine that already answers (``DOCKER_HOST``, or ``/var/run/docker.sock``)
is used as it is and never stopped.

Where the process's capability bounding set lacks ``CAP_SYS_RESOURCE`` (a sandbox like the one
this project is developed in), ``docker run --privileged`` fails ("unable to apply caps"), and
kind runs every node privileged. The engine is then started with a runtime wrapper (written here,
a short Python script) registered with ``--add-runtime``/``--default-runtime``: it drops the
missing capability from the OCI config on ``create``/``run`` and from the process file on
``exec``, then runs Debian's runc with the same arguments.

dockerd changes the host: iptables chains and rules, the ``FORWARD`` policy, bridges and veths,
``net.ipv4.ip_forward``, overlay/shm/netns mounts, ``docker`` cgroups in every hierarchy, plain
directories runc makes in ``/sys/fs/cgroup``, ``/etc/docker``, ``/lib/modules`` (kind bind-mounts
it). So :meth:`DockerEngine.start` first takes a host snapshot (:mod:`.realnode.host`) and
:meth:`DockerEngine.stop` removes every container, stops the daemon, and undoes what differs from
that snapshot, then reports what it could not undo.

The engine holds the host-wide lock real nodes take (:data:`.realnode.fleet.HOST_LOCK`) for as
long as it runs (dockerd inherits the locked file): a cluster with real nodes and a kind cluster
are never up on one host at the same time, and the second one is refused with the first named.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from .errors import HarnessError
from .paths import cache_root

if TYPE_CHECKING:
    from .realnode.host import HostSnapshot

Progress = Callable[[str], None]

PACKAGES = ("docker.io",)
"""Debian's Docker engine (dockerd 20.10, its containerd and runc, iptables as a dependency)."""

DOCKERD = "dockerd"
RUNC = "/usr/sbin/runc"
RUNTIME_NAME = "kthena-runc"
MISSING_CAPABILITY = "CAP_SYS_RESOURCE"
CAP_SYS_RESOURCE_BIT = 24
DEFAULT_SOCKET = Path("/var/run/docker.sock")
START_TIMEOUT = 60.0
STOP_TIMEOUT = 30.0

# Where dockerd, its containerd and runc leave things outside their own roots (the snapshot watches
# them; anything added is removed at stop).
WATCHED_PATHS = (
    "/etc/docker",
    "/lib/modules",
    "/run/docker",
    "/run/docker.pid",
    "/run/docker.sock",
    "/run/containerd",
    "/run/runc",
    "/var/lib/docker",
    "/var/lib/containerd",
    "/var/lib/cni",
    "/etc/cni",
)
# Plain directories runc creates in /sys/fs/cgroup on cgroup v1 for controllers the host did not
# mount (no hierarchies: removable, and removed).
CGROUP_STRAYS = ("cpu,cpuacct", "net_cls,net_prio", "net_cls", "net_prio", "hugetlb", "perf_event", "rdma", "misc")
PROCESS_PATHS = (
    "/usr/sbin/dockerd",
    "/usr/bin/dockerd",
    "/usr/bin/containerd",
    "/usr/bin/containerd-shim-runc-v2",
    "/usr/bin/docker-proxy",
    "/usr/sbin/docker-proxy",
    "/usr/sbin/runc",
    "/usr/bin/docker-init",
)
CGROUP_NAMES = ("docker",)


def _quiet(_: str) -> None:
    pass


def kind_root() -> Path:
    """The kind provider's state (its dockerd's run directory, its clusters' directories): outside
    ``runs_root()``, whose directories the local provider sweeps when no supervisor holds them."""
    return cache_root() / "kind"


@dataclass(frozen=True)
class EnginePaths:
    """Where the harness's dockerd keeps its state (pure)."""

    run_dir: Path
    data_root: Path

    @classmethod
    def default(cls) -> EnginePaths:
        return cls(kind_root() / "dockerd", cache_root() / "docker")

    @property
    def exec_root(self) -> Path:
        return self.run_dir / "exec"

    @property
    def socket(self) -> Path:
        return self.run_dir / "docker.sock"

    @property
    def pidfile(self) -> Path:
        return self.run_dir / "docker.pid"

    @property
    def log(self) -> Path:
        return self.run_dir / "dockerd.log"

    @property
    def wrapper(self) -> Path:
        return self.run_dir / "runc-wrapper"

    @property
    def snapshot(self) -> Path:
        return self.run_dir / "host-snapshot.json"

    @property
    def host(self) -> str:
        return f"unix://{self.socket}"


def dockerd_argv(paths: EnginePaths, *, wrapper: bool) -> list[str]:
    """The dockerd command line (pure). No ``docker0`` bridge: kind makes its own network."""
    argv = [
        DOCKERD,
        "--data-root",
        str(paths.data_root),
        "--exec-root",
        str(paths.exec_root),
        "--host",
        paths.host,
        "--pidfile",
        str(paths.pidfile),
        "--bridge",
        "none",
        "--log-level",
        "warn",
    ]
    if wrapper:
        argv += ["--add-runtime", f"{RUNTIME_NAME}={paths.wrapper}", "--default-runtime", RUNTIME_NAME]
    return argv


def wrapper_script(python: str, runc: str = RUNC) -> str:
    """The runtime wrapper: runc's arguments, minus CAP_SYS_RESOURCE in what it is given (pure)."""
    return f"""#!{python} -IS
# Written by kthena-conformance (conformance/cluster/docker_engine.py): runs {runc} with the same
# arguments after dropping {MISSING_CAPABILITY}, which this host's capability bounding set lacks,
# from the OCI config (create, run) or the process file (exec).
import json, os, sys

RUNC = {runc!r}
CAP = {MISSING_CAPABILITY!r}
VALUED = {{"--root", "--log", "--log-format", "--criu"}}


def strip(doc, inner):
    process = doc.get("process", {{}}) if inner else doc
    caps = process.get("capabilities") or {{}}
    for key in list(caps):
        if isinstance(caps[key], list):
            caps[key] = [c for c in caps[key] if c != CAP]
    return doc


def edit(path, inner):
    try:
        with open(path) as f:
            doc = json.load(f)
    except (OSError, ValueError):
        return
    tmp = path + ".kthena-tmp"
    with open(tmp, "w") as f:
        json.dump(strip(doc, inner), f)
    os.replace(tmp, path)


def option(args, names):
    for i, a in enumerate(args):
        for n in names:
            if a == n and i + 1 < len(args):
                return args[i + 1]
            if a.startswith(n + "="):
                return a.split("=", 1)[1]
    return None


args = sys.argv[1:]
i, command = 0, None
while i < len(args):
    a = args[i]
    if a in VALUED:
        i += 2
        continue
    if a.startswith("-"):
        i += 1
        continue
    command = a
    break
rest = args[i + 1:]
if command in ("create", "run"):
    bundle = option(rest, ("--bundle", "-b")) or os.getcwd()
    edit(os.path.join(bundle, "config.json"), True)
elif command == "exec":
    process = option(rest, ("--process", "-p"))
    if process:
        edit(process, False)
os.execv(RUNC, [RUNC] + args)
"""


def capability_missing(status_text: str, bit: int = CAP_SYS_RESOURCE_BIT) -> bool:
    """Whether ``CapBnd`` in ``/proc/self/status`` text lacks capability ``bit`` (pure)."""
    for line in status_text.splitlines():
        if line.startswith("CapBnd:"):
            return not (int(line.split()[1], 16) >> bit) & 1
    return False


def install_commands(packages: tuple[str, ...] = PACKAGES) -> list[list[str]]:
    """The apt-get commands that install ``packages`` (pure)."""
    return [
        ["apt-get", "update", "-q"],
        ["apt-get", "-o", "DPkg::Lock::Timeout=600", "install", "-y", "-q", "--no-install-recommends", *packages],
    ]


def ensure_packages(needs: Mapping[str, str], *, progress: Progress = _quiet, what: str = "the kind provider") -> None:
    """Install the Debian packages providing the missing programs (``needs``: program -> package).

    One clear line when that cannot be done: not root, no apt-get, or apt-get failed.
    """
    missing = sorted({package for program, package in needs.items() if shutil.which(program) is None})
    if not missing:
        return
    listed = " ".join(missing)
    if os.geteuid() != 0:
        raise HarnessError(
            f"{what} needs the Debian package(s) {listed} and this process is not root, so it cannot install them",
            f"run `sudo apt-get install -y {listed}` once, or run as root",
        )
    if shutil.which("apt-get") is None:
        raise HarnessError(
            f"{what} needs {listed} (Debian packages) and this machine has no apt-get",
            f"install the equivalent of {listed} with the system's package manager",
        )
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for argv in install_commands(tuple(missing)):
        progress(f"installing {listed}: {' '.join(argv)}")
        proc = subprocess.run(argv, env=env, capture_output=True, text=True, check=False, timeout=1200)
        if proc.returncode != 0:
            last = (proc.stderr.strip() or proc.stdout.strip()).splitlines()[-1:] or ["no output"]
            raise HarnessError(
                f"`{' '.join(argv)}` failed (exit {proc.returncode}): {last[0]}",
                f"fix the package sources (/etc/apt) or install {listed} by hand",
            )


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _read_pid(path: Path) -> int | None:
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):
        return None


def docker_answers(host: str, timeout: float = 20) -> bool:
    """Whether a Docker engine answers at ``host`` (``unix://...``)."""
    if shutil.which("docker") is None:
        return False
    try:
        proc = subprocess.run(
            ["docker", "version", "--format", "{{.Server.Version}}"],
            env={**os.environ, "DOCKER_HOST": host},
            capture_output=True,
            text=True,
            check=False,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired:
        return False
    return proc.returncode == 0


class DockerEngine:
    """The Docker engine kind talks to: an existing one, or the harness's own dockerd."""

    def __init__(self, paths: EnginePaths | None = None) -> None:
        self.paths = paths or EnginePaths.default()

    # -- which engine ---------------------------------------------------------------------------

    def external_host(self) -> str | None:
        """An engine not started by the harness that answers (``DOCKER_HOST``, the default socket)."""
        explicit = os.environ.get("DOCKER_HOST")
        if explicit and explicit != self.paths.host:
            return explicit if docker_answers(explicit) else None
        if DEFAULT_SOCKET.exists() and docker_answers(f"unix://{DEFAULT_SOCKET}"):
            return f"unix://{DEFAULT_SOCKET}"
        return None

    def own_running(self) -> bool:
        pid = _read_pid(self.paths.pidfile)
        return pid is not None and _pid_alive(pid) and docker_answers(self.paths.host)

    def host(self) -> str:
        """The ``DOCKER_HOST`` of the engine in use (the harness's own when none other answers)."""
        return self.external_host() or self.paths.host

    def env(self) -> dict[str, str]:
        return {**os.environ, "DOCKER_HOST": self.host()}

    # -- start ----------------------------------------------------------------------------------

    def ensure(self, *, progress: Progress = _quiet) -> str:
        """An engine that answers: an existing one, or the harness's own, installed and started now.
        Returns its ``DOCKER_HOST``."""
        external = self.external_host()
        if external is not None:
            return external
        if self.own_running():
            return self.paths.host
        ensure_packages({DOCKERD: "docker.io", "iptables": "iptables"}, progress=progress)
        if shutil.which("docker") is None:
            ensure_packages({"docker": "docker.io"}, progress=progress)
        self.start(progress=progress)
        return self.paths.host

    def start(self, *, progress: Progress = _quiet) -> None:
        """Take the host lock, snapshot the host, write the wrapper and start dockerd."""
        from .realnode import host as hoststate
        from .realnode.fleet import HOST_LOCK

        if os.geteuid() != 0:
            raise HarnessError(
                "the kind provider starts its own Docker engine here and that needs root",
                "run as root, or start Docker yourself and set DOCKER_HOST",
            )
        paths = self.paths
        self._clean_stale()
        paths.run_dir.mkdir(parents=True, exist_ok=True)
        paths.data_root.mkdir(parents=True, exist_ok=True)
        lock = HOST_LOCK.open("a+")
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            lock.seek(0)
            holder = lock.read().strip() or "another cluster"
            lock.close()
            raise HarnessError(
                f"a cluster with real nodes is up on this host ({holder}); its host state and a Docker engine's "
                "would undo each other",
                "take that cluster down first (`kthena-conformance cluster down`), then start the kind cluster",
            ) from None
        try:
            snapshot = self.take_snapshot()
            paths.snapshot.write_text(snapshot.to_json())
            use_wrapper = capability_missing(Path("/proc/self/status").read_text())
            if use_wrapper:
                python = "/usr/bin/python3" if Path("/usr/bin/python3").exists() else sys.executable
                paths.wrapper.write_text(wrapper_script(python))
                paths.wrapper.chmod(0o755)
            argv = dockerd_argv(paths, wrapper=use_wrapper)
            progress(f"starting dockerd (data root {paths.data_root}, socket {paths.socket})")
            with paths.log.open("ab") as log:
                proc = subprocess.Popen(
                    argv,
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                    pass_fds=(lock.fileno(),),
                )
            lock.seek(0)
            lock.truncate()
            lock.write(f"the kind provider's Docker engine (dockerd pid {proc.pid}, {paths.run_dir})\n")
            lock.flush()
            deadline = time.monotonic() + START_TIMEOUT
            while not docker_answers(paths.host, timeout=5):
                if proc.poll() is not None or time.monotonic() > deadline:
                    tail = paths.log.read_text(errors="replace").strip().splitlines()[-3:]
                    self.stop()
                    raise HarnessError(
                        f"dockerd did not come up: {' | '.join(tail) or 'no output'}", f"see {paths.log}"
                    )
                time.sleep(0.5)
        finally:
            lock.close()  # dockerd holds the lock now (an inherited descriptor) for as long as it runs
        del hoststate

    def take_snapshot(self) -> HostSnapshot:
        from .realnode import host as hoststate

        cgroup_root = Path("/sys/fs/cgroup")
        strays = [str(cgroup_root / name) for name in CGROUP_STRAYS]
        return hoststate.take_snapshot([*WATCHED_PATHS, *strays], PROCESS_PATHS, CGROUP_NAMES)

    def _clean_stale(self) -> None:
        """A pidfile of a dockerd that is gone (a crash): its snapshot is still the one to restore to."""
        pid = _read_pid(self.paths.pidfile)
        if pid is not None and not _pid_alive(pid):
            self.paths.pidfile.unlink(missing_ok=True)

    # -- stop -----------------------------------------------------------------------------------

    def stop(self, *, progress: Progress = _quiet) -> list[str]:
        """Remove every container of the harness's engine, stop it and put the host back as the
        snapshot taken at start had it. Returns what is still different (empty: host as before)."""
        from .realnode import host as hoststate

        paths = self.paths
        env = {**os.environ, "DOCKER_HOST": paths.host}
        pid = _read_pid(paths.pidfile)
        if pid is not None and _pid_alive(pid):
            ids = subprocess.run(
                ["docker", "ps", "-aq"], env=env, capture_output=True, text=True, check=False, timeout=60
            ).stdout.split()
            if ids:
                progress(f"removing {len(ids)} container(s) of the harness's Docker engine")
                subprocess.run(
                    ["docker", "rm", "-f", "-v", *ids], env=env, capture_output=True, check=False, timeout=300
                )
            subprocess.run(["docker", "network", "prune", "-f"], env=env, capture_output=True, check=False, timeout=60)
            progress(f"stopping dockerd (pid {pid})")
            os.kill(pid, signal.SIGTERM)
            deadline = time.monotonic() + STOP_TIMEOUT
            while _pid_alive(pid) and time.monotonic() < deadline:
                time.sleep(0.2)
            if _pid_alive(pid):
                os.kill(pid, signal.SIGKILL)
        if not paths.snapshot.exists():
            return []
        before = hoststate.HostSnapshot.from_json(paths.snapshot.read_text())
        after = self.take_snapshot()
        failures = hoststate.apply(hoststate.restore_plan(before, after))
        for failure in failures:
            progress(f"could not undo: {failure.line()}")
        final = self.take_snapshot()
        remaining = hoststate.diff(before, final).lines()
        if not remaining:
            shutil.rmtree(paths.run_dir, ignore_errors=True)
        else:
            (paths.run_dir / "host-diff.json").write_text(json.dumps(remaining, indent=1) + "\n")
        return remaining
