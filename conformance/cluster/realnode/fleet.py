"""A cluster's real nodes, for its supervisor: one cluster per host, snapshot first, restore last.

Why this module exists: real nodes change the host (sysctls, iptables chains, cgroups, mounts, a
bridge; ``shared/notes/real-node.md``), and only a snapshot taken before the first of them starts
tells what to undo, including after a crash. This module owns that life cycle so the supervisor
stays a process monitor:

- :meth:`Fleet.start` checks the host (:mod:`.preflight`), takes the host-wide lock (the restore is
  host-wide, so two clusters with real nodes at once would undo each other's changes), writes the
  snapshot into the cluster's run directory *before* anything starts, then starts each node.
- :meth:`Fleet.stop` stops the nodes and restores the host.
- :func:`restore` does the same from the run directory alone: ``down`` and ``sweep`` call it for a
  cluster whose supervisor was killed (its kubelets and containerds die with it, but containers,
  shims, mounts and chains stay).
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from ..errors import HarnessError
from ..local.processes import free_ports
from ..pki import CertificateAuthority
from . import config as cfg
from . import host, images, preflight
from .node import PROCESS_BINARIES, WATCHED_PATHS, RealNode

STATE_FILE = "real-nodes.json"  # in the cluster's run directory: what restore() needs
# Host-wide, whatever cache root a run uses; like every file in /run/lock it stays (empty when free,
# gone at reboot): removing it on release would let two holders lock two different files.
HOST_LOCK = (Path("/run/lock") if Path("/run/lock").is_dir() else Path(tempfile.gettempdir())) / (
    "kthena-conformance-real-nodes.lock"
)
STATE_VERSION = 1


def host_lock_holder() -> str | None:
    """Who holds the host's real nodes now (what the holder wrote), None when they are free."""
    try:
        lock = HOST_LOCK.open("r")
    except FileNotFoundError:
        return None
    with lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return lock.read().strip() or "another cluster"
        fcntl.flock(lock, fcntl.LOCK_UN)
    return None


@dataclass(frozen=True)
class NodeRequest:
    """One real node to start: its name, labels and taints (``{"key", "value", "effect"}``)."""

    name: str
    labels: Mapping[str, str] = field(default_factory=dict)
    taints: Sequence[Mapping[str, str]] = ()


def nodes_root(run_dir: Path) -> Path:
    """Where the nodes of the cluster in ``run_dir`` keep their files: short, because containerd's
    sockets live under it and a unix socket path has at most 107 bytes."""
    digest = hashlib.sha256(str(run_dir).encode()).hexdigest()[:10]
    return Path(tempfile.gettempdir()) / f"kthena-rn-{digest}"


def _snapshot(bin_dir: Path, names: Sequence[str]) -> host.HostSnapshot:
    return host.take_snapshot(
        WATCHED_PATHS, [bin_dir / b for b in PROCESS_BINARIES], [f"{cfg.CGROUP_PREFIX}{n}" for n in names]
    )


@dataclass
class Fleet:
    """The real nodes of the cluster in ``run_dir``: :meth:`prepare`, :meth:`start`, :meth:`stop`."""

    run_dir: Path
    bin_dir: Path
    logs: Path
    nodes: list[RealNode] = field(default_factory=list)
    _lock: IO[str] | None = None

    def prepare(self, requests: Sequence[NodeRequest], *, server: str, service_ip: str | None = None) -> list[str]:
        """Check the host, take the host lock, write the snapshot, plan each node and make its
        bridge (and, with ``service_ip``, the route from its Pods to the API server at that
        ``kubernetes`` Service address); returns the bridges' addresses (the nodes' clusterDNS,
        where CoreDNS must listen before the kubelets start). On failure the host is restored
        before the error propagates."""
        preflight.require_usable()
        missing = [b for b in PROCESS_BINARIES if not (self.bin_dir / b).exists()]
        if missing:
            raise HarnessError(
                f"real nodes need {', '.join(missing)} in {self.bin_dir}",
                "run `kthena-conformance binaries build --real-nodes`",
            )
        self._take_host_lock()
        try:
            routes = subprocess.run(["ip", "-4", "route"], capture_output=True, text=True, check=True).stdout
            networks = cfg.plan_networks(len(requests), [n for n, _ in preflight.route_destinations(routes)])
            root = nodes_root(self.run_dir)
            names = [r.name for r in requests]
            before = _snapshot(self.bin_dir, names)
            state = {
                "version": STATE_VERSION,
                "root": str(root),
                "binDir": str(self.bin_dir),
                "nodes": names,
                "snapshot": json.loads(before.to_json()),
            }
            (self.run_dir / STATE_FILE).write_text(json.dumps(state, indent=1) + "\n")
            for request, net in zip(requests, networks, strict=True):
                api_port, healthz_port = free_ports(2)
                node = RealNode(
                    name=request.name,
                    dirs=cfg.NodeDirs(root / request.name),
                    net=net,
                    bin_dir=self.bin_dir,
                    server=server,
                    ports=cfg.KubeletPorts(api_port, healthz_port),
                    cluster_dns=[net.node_ip],
                    labels=request.labels,
                    taints=request.taints,
                    log_dir=self.logs,
                )
                self.nodes.append(node)
                node.make_bridge()
                if service_ip is not None:
                    node.route_api_server(service_ip)
        except BaseException:
            self.stop()
            raise
        return [node.net.node_ip for node in self.nodes]

    def start(self, *, ca: CertificateAuthority, progress: Callable[[str], None] = lambda _: None) -> None:
        """Start every prepared node (not waiting for Ready). On failure what started is stopped and
        the host restored before the error propagates."""
        try:
            progress(
                "writing the real nodes' images: " + ", ".join([images.SANDBOX_IMAGE, *images.WORKLOAD_IMAGES.values()])
            )
            archives = images.standard_archives(images.read_busybox())
            for node in self.nodes:
                progress(f"starting real node {node.name} (bridge {node.net.bridge}, Pods in {node.net.subnet})")
                node.start(ca, archives)
        except BaseException:
            self.stop()
            raise

    def _take_host_lock(self) -> None:
        lock = HOST_LOCK.open("a+")
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            lock.seek(0)
            holder = lock.read().strip() or "another cluster"
            lock.close()
            raise HarnessError(
                f"real nodes already run on this host ({holder}); one cluster at a time may run them",
                "take that cluster down first (kthena-conformance cluster down --name ...), or run without real nodes",
            ) from None
        lock.seek(0)
        lock.truncate()
        lock.write(f"cluster run directory {self.run_dir}\n")
        lock.flush()
        self._lock = lock

    def processes(self) -> dict[str, subprocess.Popen[bytes]]:
        return {name: proc for node in self.nodes for name, proc in node.processes().items()}

    def stop(self) -> list[str]:
        """Stop every node and restore the host; returns what could not be undone (empty: clean)."""
        for node in reversed(self.nodes):
            node.stop()
        self.nodes = []
        problems = restore(self.run_dir)
        if self._lock is not None:
            self._lock.truncate(0)  # no holder named while free
            self._lock.close()  # releases the flock
            self._lock = None
        return problems


def restore(run_dir: Path) -> list[str]:
    """Undo what the real nodes of the cluster in ``run_dir`` changed on the host, from the snapshot
    written before they started; nothing to do when they never did. Returns what could not be
    undone (each a line), after trying everything."""
    state_file = run_dir / STATE_FILE
    try:
        state = json.loads(state_file.read_text())
    except FileNotFoundError:
        return []
    except (OSError, ValueError) as exc:
        return [f"{state_file}: unreadable ({exc}); the host was not restored"]
    try:
        before = host.HostSnapshot.from_json(json.dumps(state["snapshot"]))
        bin_dir, names, root = Path(state["binDir"]), list(state["nodes"]), Path(state["root"])
    except (KeyError, TypeError, HarnessError) as exc:
        return [f"{state_file}: damaged ({exc}); the host was not restored"]
    failures = host.apply(host.restore_plan(before, _snapshot(bin_dir, names)))
    shutil.rmtree(root, ignore_errors=True)
    left = host.diff(before, _snapshot(bin_dir, names)).lines()
    state_file.unlink(missing_ok=True)
    return [f.line() for f in failures] + [f"left on the host: {line}" for line in left]
