"""One real node started, joined and stopped: containerd and a kubelet (the imperative shell).

Why this module exists: :mod:`.config` decides every file and flag; this module writes them,
starts the two processes, imports the harness's images and takes the node down again in the order
the feasibility run found safe (``shared/notes/real-node.md``): the kubelet first, then every Pod
sandbox removed through the CRI so the CNI plugin releases its addresses and network namespaces,
then containerd and any shim left on its socket. What is left on the host after that (cgroups,
mounts, iptables chains, the bridge, sysctls) is undone by :mod:`.host` from a snapshot taken
before the first node started: that is the only way to catch what a crash left too.

It talks to the API server only through the kubelet; waiting for the Node to be Ready is the
caller's (it has a client).
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from ..errors import HarnessError
from ..local.components import kubeconfig_yaml
from ..local.processes import spawn, stop_all
from ..pki import CertificateAuthority
from . import config as cfg
from . import host, images

CONTAINERD_START_TIMEOUT = 20.0  # seconds for containerd's socket to answer
RUNC = Path("/usr/sbin/runc")  # Debian's runc
REAL_NODE_TAINT = {"key": "kthena-conformance.io/real-node", "value": "true", "effect": "NoSchedule"}
# The executables whose processes a real node starts (shims and containerd outlive a SIGKILLed kubelet):
# a host snapshot counts processes of these files only, never other clusters' control planes that
# share the binary directory.
PROCESS_BINARIES = ("kubelet", "containerd", "containerd-shim-runc-v2", "ctr", "crictl")
WATCHED_PATHS = (  # host paths a real node may create outside its own directory (the note's list)
    "/run/containerd",
    "/var/run/nri",
    "/var/lib/cni",
    "/var/lib/kubelet",
    "/var/log/pods",
    "/var/log/containers",
    "/etc/cni",
    "/opt/cni",
    "/usr/libexec/kubernetes",
    "/run/netns",
)


@dataclass
class RealNode:
    """A real node's processes and files; :meth:`start` then :meth:`stop`."""

    name: str
    dirs: cfg.NodeDirs
    net: cfg.NodeNetwork
    bin_dir: Path
    server: str  # the API server's URL, as the kubelet reaches it
    ports: cfg.KubeletPorts
    cluster_dns: Sequence[str]
    labels: Mapping[str, str] = field(default_factory=dict)
    taints: Sequence[Mapping[str, str]] = (REAL_NODE_TAINT,)
    log_dir: Path | None = None  # where containerd-<name>.log and kubelet-<name>.log go (default: the node's directory)
    containerd: subprocess.Popen[bytes] | None = None
    kubelet: subprocess.Popen[bytes] | None = None

    @property
    def logs(self) -> Path:
        return self.log_dir or self.dirs.root / "logs"

    def process_name(self, program: str) -> str:
        """``kubelet-<node>``, ``containerd-<node>``: the process's name, and its log file's stem."""
        return f"{program}-{self.name}"

    def log(self, program: str) -> Path:
        return self.logs / f"{self.process_name(program)}.log"

    def processes(self) -> dict[str, subprocess.Popen[bytes]]:
        """The node's running processes by :meth:`process_name`."""
        procs = {"containerd": self.containerd, "kubelet": self.kubelet}
        return {self.process_name(k): p for k, p in procs.items() if p is not None}

    def write_files(self, ca: CertificateAuthority) -> None:
        """Directories, containerd's config, the CNI network, the kubelet's config and identity."""
        for directory in (*self.dirs.all(), self.logs):
            directory.mkdir(parents=True, exist_ok=True)
        self.dirs.containerd_config.write_text(
            cfg.containerd_toml(cfg.containerd_config(self.dirs, runc=RUNC, sandbox_image=images.SANDBOX_IMAGE))
        )
        (self.dirs.cni_conf / "10-kthena.conflist").write_text(json.dumps(cfg.cni_conflist(self.net), indent=1))
        common_name, organization = cfg.node_identity(self.name)
        pair = ca.issue(f"node-{self.name}", common_name=common_name, organization=organization, client=True)
        self.dirs.kubelet_kubeconfig.write_text(
            kubeconfig_yaml(self.server, ca.pair.cert, pair.cert, pair.key, context=self.name)
        )
        # The API server reaches the kubelet by its bridge address (InternalIP) and verifies it
        # against the cluster CA (--kubelet-certificate-authority).
        serving = ca.issue(f"node-{self.name}-serving", common_name=common_name, hosts=(self.net.node_ip,), server=True)
        kubelet = cfg.kubelet_config(
            self.name,
            self.net,
            self.dirs,
            self.ports,
            client_ca=ca.pair.cert,
            cluster_dns=self.cluster_dns,
            taints=self.taints,
            serving=(serving.cert, serving.key),
        )
        self.dirs.kubelet_config.write_text(yaml.safe_dump(kubelet, sort_keys=False))

    def _env(self) -> dict[str, str]:
        # containerd finds its shim on PATH: its own directory first, then the host's (runc, CNI, iptables).
        return {**os.environ, "PATH": f"{self.bin_dir}:{os.environ.get('PATH', '/usr/sbin:/usr/bin:/sbin:/bin')}"}

    def ctr(self, *args: str, timeout: float = 60.0) -> str:
        argv = [str(self.bin_dir / "ctr"), "--address", str(self.dirs.containerd_socket), "-n", "k8s.io", *args]
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=self._env(), check=False)
        if done.returncode != 0:
            raise HarnessError(f"real node {self.name}: {' '.join(argv[5:])} failed: {done.stderr.strip()[-500:]}")
        return done.stdout

    def start_containerd(self) -> None:
        argv = cfg.containerd_argv(self.bin_dir / "containerd", self.dirs)
        self.containerd = spawn(argv, self.log("containerd"), env=self._env())
        deadline = time.monotonic() + CONTAINERD_START_TIMEOUT
        while True:
            if self.containerd.poll() is not None:
                raise HarnessError(
                    f"real node {self.name}: containerd exited with {self.containerd.returncode}",
                    f"see {self.log('containerd')}",
                )
            if self.dirs.containerd_socket.exists():
                try:
                    self.ctr("version", timeout=5)
                    return
                except (HarnessError, subprocess.TimeoutExpired):
                    pass
            if time.monotonic() > deadline:
                raise HarnessError(
                    f"real node {self.name}: containerd did not answer on {self.dirs.containerd_socket} "
                    f"within {CONTAINERD_START_TIMEOUT:.0f} s",
                    f"see {self.log('containerd')}",
                )
            time.sleep(0.1)  # polling the socket with a deadline

    def import_images(self, archives: Mapping[str, bytes]) -> None:
        """Import each docker-archive (reference -> bytes) so Pods find it without a registry."""
        directory = self.dirs.root / "images"
        directory.mkdir(exist_ok=True)
        for number, (reference, data) in enumerate(sorted(archives.items())):
            path = directory / f"{number}.tar"
            images.write_archive(path, data)
            self.ctr("images", "import", str(path))
            listed = self.ctr("images", "ls", "-q")
            if reference not in listed.split():
                raise HarnessError(f"real node {self.name}: {reference} not listed after its import")

    def make_cgroup_root(self, cgroup_fs: Path = Path("/sys/fs/cgroup")) -> None:
        """The kubelet's cgroupRoot in every hierarchy: the kubelet requires it to exist and does not
        create it (the host restore removes it with everything below)."""
        for hierarchy in host.cgroup_hierarchies(cgroup_fs):
            path = hierarchy / f"{cfg.CGROUP_PREFIX}{self.name}"
            try:
                path.mkdir(exist_ok=True)
            except OSError as exc:
                raise HarnessError(
                    f"real node {self.name}: cannot create its cgroup {path}: {exc.strerror or exc}",
                    "the cgroup hierarchy must be writable (as root: mount -o remount,rw "
                    f"{hierarchy}); `cluster up` checks that first, so it changed while the node started",
                ) from None

    def make_bridge(self) -> None:
        """The node's bridge with the gateway address, before the kubelet listens on it (the CNI
        bridge plugin reuses a bridge that exists; the host restore deletes the link)."""
        exists = (
            subprocess.run(["ip", "link", "show", self.net.bridge], capture_output=True, check=False).returncode == 0
        )
        commands = [] if exists else [["ip", "link", "add", self.net.bridge, "type", "bridge"]]
        commands += [
            ["ip", "addr", "replace", f"{self.net.gateway}/{self.net.subnet.prefixlen}", "dev", self.net.bridge],
            ["ip", "link", "set", self.net.bridge, "up"],
        ]
        for argv in commands:
            done = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False)
            if done.returncode != 0:
                raise HarnessError(f"real node {self.name}: {' '.join(argv)} failed: {done.stderr.strip()}")

    def route_api_server(self, service_ip: str) -> None:
        """Pods on this node reach the API server at the ``kubernetes`` Service's address
        (:func:`.config.api_server_route`); idempotent (a rule already there is not added twice)."""
        try:
            cfg.route_localnet_path(self.net).write_text("1\n")
        except OSError as exc:
            raise HarnessError(
                f"real node {self.name}: cannot set route_localnet on {self.net.bridge}: {exc}"
            ) from None
        for argv in cfg.api_server_route(self.net, service_ip, self.server):
            check = [*argv[:4], "-C", *argv[5:]]
            if subprocess.run(check, capture_output=True, timeout=30, check=False).returncode == 0:
                continue
            done = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False)
            if done.returncode != 0:
                raise HarnessError(f"real node {self.name}: {' '.join(argv)} failed: {done.stderr.strip()}")

    def start_kubelet(self) -> None:
        self.make_bridge()  # idempotent: made earlier when CoreDNS had to listen on it first
        self.make_cgroup_root()
        argv = cfg.kubelet_argv(self.bin_dir / "kubelet", self.name, self.net, self.dirs, self.labels)
        self.kubelet = spawn(argv, self.log("kubelet"), env=self._env())

    def start(self, ca: CertificateAuthority, archives: Mapping[str, bytes]) -> None:
        """Files, containerd, images, kubelet. On failure everything started is stopped again."""
        try:
            self.write_files(ca)
            self.start_containerd()
            self.import_images(archives)
            self.start_kubelet()
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        """kubelet, then every sandbox (so CNI releases addresses), then containerd; the shims of
        sandboxes that could not be removed are left to the host restore (:mod:`.host`)."""
        if self.kubelet is not None:
            stop_all([self.kubelet], grace=5.0)
        if self.containerd is not None and self.containerd.poll() is None:
            crictl = [str(self.bin_dir / "crictl"), "--runtime-endpoint", f"unix://{self.dirs.containerd_socket}"]
            subprocess.run([*crictl, "rmp", "-fa"], capture_output=True, timeout=60, env=self._env(), check=False)
            stop_all([self.containerd], grace=5.0)
