"""A real node's configuration as data: directories, network, containerd, CNI and kubelet (pure).

Why this module exists: a real node is a containerd and a kubelet sharing the host with everything
else, so every path, port, subnet and setting that could touch the host is decided here, in one
place a unit test can read, before any process starts. The settings follow the feasibility run in
``shared/notes/real-node.md``:

- containerd keeps its root, state, socket, CNI configuration and CDI specs under the node's own
  directory (``imports = []`` so no host configuration is read), with NRI and tracing disabled (NRI
  creates ``/var/run/nri``), ``restrict_oom_score_adj`` (root here lacks CAP_SYS_RESOURCE: runc
  cannot set -998), network namespaces under its state directory, runc named explicitly and the
  sandbox image pinned to the one the harness imports (:data:`.images.SANDBOX_IMAGE`).
- the bridge CNI network gets a /24 of its own per node, chosen clear of every route on the host.
- the kubelet runs with cgroupfs under a cgroup root of its own, does not refuse cgroup v1 or swap,
  serves no read-only port, authenticates clients by the cluster CA and authorizes through the API
  server, never garbage-collects images (they cannot be pulled again) and keeps its pod logs and
  volume plugins under the node's directory.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import tomli_w

from ..errors import HarnessError
from .images import SANDBOX_IMAGE

# Where the real nodes' Pod subnets come from: a /24 per node, the first not overlapping a host route.
POD_SUBNETS = ipaddress.IPv4Network("10.244.0.0/16")
SUBNET_PREFIX = 24
BRIDGE_PREFIX = "kthena"  # + the node's index: "kthena0" (interface names are at most 15 bytes)
CGROUP_PREFIX = "kthena-"  # the kubelet's cgroupRoot: /kthena-<node>
CNI_NETWORK = "kthena-bridge"
CNI_VERSION = "1.0.0"
CNI_BIN_DIRS = (Path("/usr/lib/cni"),)  # Debian's containernetworking-plugins
NODE_KIND_LABEL = "kthena-conformance.io/node-kind"  # "real" on real nodes ("kwok" on the others)
DISABLED_CONTAINERD_PLUGINS = (
    "io.containerd.nri.v1.nri",  # creates /var/run/nri on the host
    "io.containerd.tracing.processor.v1.otlp",
    "io.containerd.internal.v1.tracing",
)


@dataclass(frozen=True)
class NodeDirs:
    """Everything one real node writes, under ``root`` (the cluster's run directory / the node)."""

    root: Path

    @property
    def containerd_root(self) -> Path:
        return self.root / "containerd" / "root"

    @property
    def containerd_state(self) -> Path:
        return self.root / "containerd" / "state"

    @property
    def containerd_socket(self) -> Path:
        return self.root / "containerd" / "containerd.sock"

    @property
    def containerd_config(self) -> Path:
        return self.root / "containerd" / "config.toml"

    @property
    def cni_conf(self) -> Path:
        return self.root / "cni" / "net.d"

    @property
    def cdi(self) -> Path:
        return self.root / "cdi"

    @property
    def kubelet_root(self) -> Path:
        return self.root / "kubelet"

    @property
    def dra_plugins(self) -> Path:
        """Where DRA kubelet plugins serve (``<plugins>/<driver>/dra.sock``): the kubelet's own layout."""
        return self.kubelet_root / "plugins"

    @property
    def plugin_registry(self) -> Path:
        """The directory the kubelet's plugin watcher scans for registration sockets."""
        return self.kubelet_root / "plugins_registry"

    @property
    def kubelet_config(self) -> Path:
        return self.root / "kubelet-config.yaml"

    @property
    def kubelet_kubeconfig(self) -> Path:
        return self.root / "kubelet.kubeconfig"

    @property
    def kubelet_certs(self) -> Path:
        return self.root / "pki"

    @property
    def pod_logs(self) -> Path:
        return self.root / "pod-logs"

    @property
    def volume_plugins(self) -> Path:
        return self.root / "volume-plugins"

    def all(self) -> tuple[Path, ...]:
        """The directories to create before containerd and the kubelet start."""
        return (
            self.containerd_root,
            self.containerd_state,
            self.cni_conf,
            self.cdi,
            self.kubelet_root,
            self.kubelet_certs,
            self.pod_logs,
            self.volume_plugins,
        )


@dataclass(frozen=True)
class NodeNetwork:
    """One real node's bridge and Pod subnet; the bridge's address is the node's IP."""

    bridge: str
    subnet: ipaddress.IPv4Network

    @property
    def gateway(self) -> ipaddress.IPv4Address:
        return next(self.subnet.hosts())

    @property
    def node_ip(self) -> str:
        return str(self.gateway)


def plan_networks(
    count: int, routes: Iterable[ipaddress.IPv4Network], pool: ipaddress.IPv4Network = POD_SUBNETS
) -> list[NodeNetwork]:
    """``count`` networks, each a /24 of ``pool`` overlapping none of the host's ``routes``.

    Raises :class:`HarnessError` naming the routes in the way when the pool has too few free /24s."""
    routes = [r for r in routes if r.prefixlen > 0]  # the default route overlaps everything
    free = [s for s in pool.subnets(new_prefix=SUBNET_PREFIX) if not any(s.overlaps(r) for r in routes)]
    if len(free) < count:
        in_the_way = sorted({str(r) for r in routes if r.overlaps(pool)})
        raise HarnessError(
            f"real nodes: {count} Pod subnet(s) of /{SUBNET_PREFIX} needed in {pool}, {len(free)} free;"
            f" host routes in the way: {', '.join(in_the_way) or 'none'}",
            "remove the conflicting routes or interfaces, or run with fewer real nodes",
        )
    return [NodeNetwork(f"{BRIDGE_PREFIX}{i}", subnet) for i, subnet in enumerate(free[:count])]


def api_server_route(net: NodeNetwork, service_ip: str, server: str) -> list[list[str]]:
    """What stands in for kube-proxy for the one Service a Pod's in-cluster configuration uses
    (``default/kubernetes``, ``KUBERNETES_SERVICE_HOST:443``): iptables DNAT rules sending the
    Service's address to the API server, which listens on loopback only (``server``,
    ``https://127.0.0.1:PORT``), for Pods on the node's bridge (PREROUTING) and host-network Pods
    (OUTPUT). Loopback as a DNAT target needs ``route_localnet`` on the bridge
    (:func:`route_localnet_path`); the kubelet's KUBE-FIREWALL lets DNAT'd packets through. The
    host restore deletes the rules (added after the snapshot) and the sysctl goes with the bridge.
    Pure."""
    parts = urlsplit(server)
    if parts.hostname is None or parts.port is None:
        raise HarnessError(f"real node: the API server address {server!r} has no host and port")
    target = f"{parts.hostname}:{parts.port}"
    match = ["-d", f"{service_ip}/32", "-p", "tcp", "-m", "tcp", "--dport", "443"]
    dnat = ["-j", "DNAT", "--to-destination", target]
    return [
        ["iptables", "-w", "-t", "nat", "-A", "PREROUTING", "-i", net.bridge, *match, *dnat],
        ["iptables", "-w", "-t", "nat", "-A", "OUTPUT", *match, *dnat],
    ]


def route_localnet_path(net: NodeNetwork) -> Path:
    """The bridge's ``route_localnet`` sysctl (1: packets DNAT'd to 127.0.0.1 may be routed)."""
    return Path("/proc/sys/net/ipv4/conf") / net.bridge / "route_localnet"


def containerd_config(dirs: NodeDirs, *, runc: Path, sandbox_image: str = SANDBOX_IMAGE) -> dict[str, Any]:
    """containerd v2's configuration (version 3) for one node."""
    runtime = "io.containerd.cri.v1.runtime"
    return {
        "version": 3,
        "root": str(dirs.containerd_root),
        "state": str(dirs.containerd_state),
        "imports": [],
        "disabled_plugins": list(DISABLED_CONTAINERD_PLUGINS),
        "grpc": {"address": str(dirs.containerd_socket)},
        "ttrpc": {"address": f"{dirs.containerd_socket}.ttrpc"},
        "plugins": {
            runtime: {
                "restrict_oom_score_adj": True,
                "netns_mounts_under_state_dir": True,
                "cdi_spec_dirs": [str(dirs.cdi)],
                "cni": {"bin_dirs": [str(p) for p in CNI_BIN_DIRS], "conf_dir": str(dirs.cni_conf)},
                "containerd": {
                    "default_runtime_name": "runc",
                    "runtimes": {
                        "runc": {
                            "runtime_type": "io.containerd.runc.v2",
                            "options": {"BinaryName": str(runc), "SystemdCgroup": False},
                        }
                    },
                },
            },
            "io.containerd.cri.v1.images": {"pinned_images": {"sandbox": sandbox_image}},
        },
    }


def containerd_toml(config: Mapping[str, Any]) -> str:
    return tomli_w.dumps(dict(config))


def cni_conflist(net: NodeNetwork) -> dict[str, Any]:
    """The bridge network with host-local addresses from the node's subnet, port mappings, loopback."""
    return {
        "cniVersion": CNI_VERSION,
        "name": CNI_NETWORK,
        "plugins": [
            {
                "type": "bridge",
                "bridge": net.bridge,
                "isGateway": True,
                "ipMasq": True,
                "hairpinMode": True,
                "ipam": {
                    "type": "host-local",
                    "ranges": [[{"subnet": str(net.subnet), "gateway": str(net.gateway)}]],
                    "routes": [{"dst": "0.0.0.0/0"}],
                },
            },
            {"type": "portmap", "capabilities": {"portMappings": True}},
        ],
    }


@dataclass(frozen=True)
class KubeletPorts:
    """The kubelet's API port (logs, exec, port-forward through the API server) and its healthz."""

    api: int
    healthz: int


def kubelet_config(
    node: str,
    net: NodeNetwork,
    dirs: NodeDirs,
    ports: KubeletPorts,
    *,
    client_ca: Path,
    cluster_dns: Sequence[str],
    cluster_domain: str = "cluster.local",
    taints: Sequence[Mapping[str, str]] = (),
    serving: tuple[Path, Path] | None = None,
) -> dict[str, Any]:
    """The KubeletConfiguration of one real node. ``serving``: the (certificate, key) its HTTPS
    server presents, issued by the cluster CA for its address, so the API server verifies the kubelet
    it reaches for logs and exec (without it the kubelet signs a certificate of its own)."""
    tls = {"tlsCertFile": str(serving[0]), "tlsPrivateKeyFile": str(serving[1])} if serving else {}
    return {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        "address": net.node_ip,
        "port": ports.api,
        "healthzBindAddress": "127.0.0.1",
        "healthzPort": ports.healthz,
        "readOnlyPort": 0,
        "authentication": {
            "anonymous": {"enabled": False},
            "webhook": {"enabled": True},
            "x509": {"clientCAFile": str(client_ca)},
        },
        "authorization": {"mode": "Webhook"},
        "containerRuntimeEndpoint": f"unix://{dirs.containerd_socket}",
        "cgroupDriver": "cgroupfs",
        "cgroupRoot": f"/{CGROUP_PREFIX}{node}",
        "failCgroupV1": False,
        "failSwapOn": False,
        "clusterDomain": cluster_domain,
        "clusterDNS": list(cluster_dns),
        "resolvConf": "",  # Pods get the cluster DNS only: the host's resolvers are not the cluster's
        "imageGCHighThresholdPercent": 100,
        "imageGCLowThresholdPercent": 99,
        "evictionHard": {"memory.available": "1Mi", "nodefs.available": "1%", "imagefs.available": "1%"},
        "podLogsDir": str(dirs.pod_logs),
        "volumePluginDir": str(dirs.volume_plugins),
        "serializeImagePulls": False,
        "registerNode": True,
        "registerWithTaints": [dict(t) for t in taints],
        **tls,
    }


def kubelet_argv(binary: Path, node: str, net: NodeNetwork, dirs: NodeDirs, labels: Mapping[str, str]) -> list[str]:
    """The kubelet's command line (what the configuration file cannot say)."""
    node_labels = {NODE_KIND_LABEL: "real", **labels}
    return [
        str(binary),
        f"--config={dirs.kubelet_config}",
        f"--kubeconfig={dirs.kubelet_kubeconfig}",
        f"--root-dir={dirs.kubelet_root}",
        f"--cert-dir={dirs.kubelet_certs}",
        f"--hostname-override={node}",
        f"--node-ip={net.node_ip}",
        "--node-labels=" + ",".join(f"{k}={v}" for k, v in sorted(node_labels.items())),
        "--v=2",
    ]


def containerd_argv(binary: Path, dirs: NodeDirs) -> list[str]:
    return [str(binary), f"--config={dirs.containerd_config}"]


def node_identity(node: str) -> tuple[str, str]:
    """The (common name, organization) of a node's client certificate: the Node authorizer's user."""
    return f"system:node:{node}", "system:nodes"
