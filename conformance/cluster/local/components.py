"""The embedded cluster's components as data: command lines and configuration files (pure).

Everything here is computed from a :class:`RunLayout` (where files live), the picked ports and
the binary directory, without touching the disk or starting anything, so the exact flags the
cluster runs with are unit tested and printed by ``cluster status --verbose``. The flag sets follow
kwokctl's binary runtime (``pkg/kwokctl/components``) with the differences this harness needs:
RBAC and the full default admission chain (webhooks included), per-component identities, a
``volcano`` scheduler profile, and etcd without fsync (the data is thrown away at ``down``).

The optional DNS server (CoreDNS with its kubernetes plugin, when the binary is built) runs beside
the control plane like the other components: :func:`dns_component`, :func:`corefile` and
:func:`dns_files` describe it, :data:`COREDNS_RBAC` is the read-only access it is granted.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from ..spec import ClusterSpec

SERVICE_CIDR = "10.96.0.0/16"
POD_CIDR = "10.244.0.0/16"
NODE_IP = "10.0.0.1"
KWOK_NODE_ANNOTATION = "kwok.x-k8s.io/node"
STAGES_FILE = Path(__file__).with_name("kwok-stages.yaml")
CLUSTER_DOMAIN = "cluster.local"
COREDNS_USER = "system:coredns"  # the CoreDNS client certificate's common name (its RBAC user)
FAKE_DEVICES_USER = "fake-devices"  # the fake DRA drivers' publishers' identity (one certificate)
APISERVER_SANS = (
    "127.0.0.1",
    "localhost",
    "10.96.0.1",
    "kubernetes",
    "kubernetes.default",
    "kubernetes.default.svc",
    "kubernetes.default.svc.cluster.local",
)


@dataclass(frozen=True)
class RunLayout:
    """Where every file of one cluster lives, all under ``root``."""

    root: Path

    @property
    def pki(self) -> Path:
        return self.root / "pki"

    @property
    def etcd_data(self) -> Path:
        return self.root / "etcd-data"

    @property
    def logs(self) -> Path:
        return self.root / "logs"

    @property
    def kubeconfig(self) -> Path:
        """The admin kubeconfig users and tests use."""
        return self.root / "kubeconfig"

    @property
    def state(self) -> Path:
        return self.root / "state.json"

    @property
    def spec(self) -> Path:
        return self.root / "spec.json"

    @property
    def lock(self) -> Path:
        return self.root / "supervisor.lock"

    def component_kubeconfig(self, component: str) -> Path:
        return self.root / "kubeconfigs" / f"{component}.yaml"

    def config(self, name: str) -> Path:
        return self.root / "config" / name

    def log(self, component: str) -> Path:
        return self.logs / f"{component}.log"


@dataclass(frozen=True)
class Ports:
    """The loopback ports one cluster listens on (picked free at start)."""

    etcd_client: int
    etcd_peer: int
    apiserver: int
    controller_manager: int
    scheduler: int
    kwok: int
    # CoreDNS: the DNS port (UDP and TCP) and its readiness endpoint; None when DNS does not run.
    dns: int | None = None
    dns_ready: int | None = None

    def as_dict(self) -> dict[str, int]:
        return {k: v for k, v in self.__dict__.items() if v is not None}


@dataclass(frozen=True)
class Component:
    """One process of the cluster: how to start it and where to ask whether it is healthy."""

    name: str
    argv: tuple[str, ...]
    health_url: str | None = None
    # Components whose readiness this one waits for before it is started.
    after: tuple[str, ...] = field(default=())
    # Variables set over the supervisor's environment (name, value), for a vendor's driver.
    env: tuple[tuple[str, str], ...] = field(default=())


def kubeconfig_yaml(server: str, ca: Path, cert: Path, key: Path, *, context: str) -> str:
    """A kubeconfig with one cluster, one user (client certificate) and one context."""
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": context, "cluster": {"server": server, "certificate-authority": str(ca)}}],
        "users": [{"name": context, "user": {"client-certificate": str(cert), "client-key": str(key)}}],
        "contexts": [{"name": context, "context": {"cluster": context, "user": context}}],
        "current-context": context,
    }
    return yaml.safe_dump(doc, sort_keys=False)


def scheduler_config(kubeconfig: Path, extra_profiles: list[str]) -> str:
    """KubeSchedulerConfiguration with ``default-scheduler`` plus one profile per extra name.

    The extra profiles (``volcano`` by default) are plain kube-scheduler profiles: they schedule
    pods that ask for that scheduler name, one pod at a time, without gang semantics.
    """
    doc = {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "clientConnection": {"kubeconfig": str(kubeconfig), "qps": 200, "burst": 400},
        "leaderElection": {"leaderElect": False},
        "profiles": [{"schedulerName": name} for name in dict.fromkeys(["default-scheduler", *extra_profiles])],
    }
    return yaml.safe_dump(doc, sort_keys=False)


def kwok_config() -> str:
    """kwok's configuration: its options plus the Stage documents from ``kwok-stages.yaml``."""
    options = {
        "apiVersion": "config.kwok.x-k8s.io/v1alpha1",
        "kind": "KwokConfiguration",
        "options": {
            "cidr": POD_CIDR,
            "nodeIP": NODE_IP,
            "manageAllNodes": False,
            "manageNodesWithAnnotationSelector": f"{KWOK_NODE_ANNOTATION}=fake",
            "nodeLeaseDurationSeconds": 40,
            # kwok's generated defaults are not applied to a config file's options: set them.
            "podPlayStageParallelism": 8,
            "nodePlayStageParallelism": 4,
            "nodeLeaseParallelism": 4,
            "podsOnNodeSyncParallelism": 2,
            "enablePodsOnNodeSyncListPager": True,
            "enablePodsOnNodeSyncStreamWatch": True,
        },
    }
    return yaml.safe_dump(options, sort_keys=False) + "---\n" + STAGES_FILE.read_text()


def config_files(layout: RunLayout, spec: ClusterSpec, ports: Ports) -> dict[Path, str]:
    """Every configuration file the components read, by path (certificates excluded)."""
    server = f"https://127.0.0.1:{ports.apiserver}"
    ca = layout.pki / "ca.crt"
    files = {
        layout.kubeconfig: kubeconfig_yaml(
            server, ca, layout.pki / "admin.crt", layout.pki / "admin.key", context=f"kthena-{spec.name}"
        ),
        layout.config("scheduler.yaml"): scheduler_config(
            layout.component_kubeconfig("kube-scheduler"), spec.extra_scheduler_names
        ),
        layout.config("kwok.yaml"): kwok_config(),
    }
    for component in ("kube-controller-manager", "kube-scheduler", "kwok"):
        files[layout.component_kubeconfig(component)] = kubeconfig_yaml(
            server, ca, layout.pki / f"{component}.crt", layout.pki / f"{component}.key", context=component
        )
    return files


def components(layout: RunLayout, bin_dir: Path, ports: Ports) -> list[Component]:
    """The cluster's processes in start order, with their exact command lines."""
    pki = layout.pki
    etcd_url = f"http://127.0.0.1:{ports.etcd_client}"
    etcd = Component(
        "etcd",
        (
            str(bin_dir / "etcd"),
            "--name=node0",
            f"--data-dir={layout.etcd_data}",
            f"--listen-client-urls={etcd_url}",
            f"--advertise-client-urls={etcd_url}",
            f"--listen-peer-urls=http://127.0.0.1:{ports.etcd_peer}",
            f"--initial-advertise-peer-urls=http://127.0.0.1:{ports.etcd_peer}",
            f"--initial-cluster=node0=http://127.0.0.1:{ports.etcd_peer}",
            "--auto-compaction-retention=1",
            "--quota-backend-bytes=8589934592",
            "--unsafe-no-fsync=true",
            "--log-level=warn",
        ),
        health_url=f"{etcd_url}/health",
    )
    apiserver = Component(
        "kube-apiserver",
        (
            str(bin_dir / "kube-apiserver"),
            f"--etcd-servers={etcd_url}",
            "--bind-address=127.0.0.1",
            "--advertise-address=127.0.0.1",
            f"--secure-port={ports.apiserver}",
            f"--tls-cert-file={pki / 'apiserver.crt'}",
            f"--tls-private-key-file={pki / 'apiserver.key'}",
            f"--client-ca-file={pki / 'ca.crt'}",
            f"--service-account-key-file={pki / 'sa.pub'}",
            f"--service-account-signing-key-file={pki / 'sa.key'}",
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
            f"--service-cluster-ip-range={SERVICE_CIDR}",
            "--authorization-mode=Node,RBAC",
            # Reaching real nodes' kubelets (logs, exec, port-forward): by the address the kubelet
            # registers (its bridge IP; a real node's name does not resolve), as a user the kubelet's
            # webhook authorizer lets in, checking the kubelet's serving certificate (issued by the
            # cluster CA for that address).
            "--kubelet-preferred-address-types=InternalIP,Hostname",
            f"--kubelet-client-certificate={pki / 'apiserver-kubelet-client.crt'}",
            f"--kubelet-client-key={pki / 'apiserver-kubelet-client.key'}",
            f"--kubelet-certificate-authority={pki / 'ca.crt'}",
            # The default plugin set (NamespaceLifecycle, ServiceAccount, mutating and validating
            # webhooks, ValidatingAdmissionPolicy, ResourceQuota, ...) is left on, plus
            # NodeRestriction, as every production cluster has it: a real node's kubelet may change
            # only its own Node and the Pods bound to it (kwok acts as an administrator, unaffected).
            "--enable-admission-plugins=NodeRestriction",
            "--allow-privileged=true",
            "--runtime-config=resource.k8s.io/v1=true",
            "--endpoint-reconciler-type=none",
            "--enable-priority-and-fairness=false",
            "--max-requests-inflight=0",
            "--max-mutating-requests-inflight=0",
            "--shutdown-delay-duration=0s",
            "--shutdown-watch-termination-grace-period=0s",
            "--v=1",
        ),
        health_url=f"https://127.0.0.1:{ports.apiserver}/readyz",
        after=("etcd",),
    )
    controller_manager = Component(
        "kube-controller-manager",
        (
            str(bin_dir / "kube-controller-manager"),
            f"--kubeconfig={layout.component_kubeconfig('kube-controller-manager')}",
            f"--authentication-kubeconfig={layout.component_kubeconfig('kube-controller-manager')}",
            f"--authorization-kubeconfig={layout.component_kubeconfig('kube-controller-manager')}",
            "--bind-address=127.0.0.1",
            f"--secure-port={ports.controller_manager}",
            f"--cert-dir={layout.root / 'kcm-certs'}",
            "--leader-elect=false",
            "--use-service-account-credentials=true",
            f"--service-account-private-key-file={pki / 'sa.key'}",
            f"--root-ca-file={pki / 'ca.crt'}",
            "--controllers=*",
            f"--service-cluster-ip-range={SERVICE_CIDR}",
            "--allocate-node-cidrs=false",
            "--kube-api-qps=500",
            "--kube-api-burst=1000",
            "--concurrent-gc-syncs=10",
            "--v=1",
        ),
        health_url=f"https://127.0.0.1:{ports.controller_manager}/healthz",
        after=("kube-apiserver",),
    )
    scheduler = Component(
        "kube-scheduler",
        (
            str(bin_dir / "kube-scheduler"),
            f"--config={layout.config('scheduler.yaml')}",
            f"--authentication-kubeconfig={layout.component_kubeconfig('kube-scheduler')}",
            f"--authorization-kubeconfig={layout.component_kubeconfig('kube-scheduler')}",
            "--bind-address=127.0.0.1",
            f"--secure-port={ports.scheduler}",
            f"--cert-dir={layout.root / 'scheduler-certs'}",
            "--v=1",
        ),
        health_url=f"https://127.0.0.1:{ports.scheduler}/healthz",
        after=("kube-apiserver",),
    )
    kwok = Component(
        "kwok",
        (
            str(bin_dir / "kwok"),
            f"--kubeconfig={layout.component_kubeconfig('kwok')}",
            f"--config={layout.config('kwok.yaml')}",
            f"--server-address=127.0.0.1:{ports.kwok}",
            f"--node-port={ports.kwok}",
        ),
        health_url=f"http://127.0.0.1:{ports.kwok}/healthz",
        after=("kube-apiserver",),
    )
    return [etcd, apiserver, controller_manager, scheduler, kwok]


def corefile(*, port: int, ready_port: int, kubeconfig: Path, context: str, pod_facing: Sequence[str] = ()) -> str:
    """The CoreDNS configuration: the cluster's zones served from the API by the kubernetes
    plugin, on 127.0.0.1 only. No ``forward`` (names outside the cluster are refused: this server
    answers for the cluster, it is nobody's resolver) and no ``cache`` (answers follow the API at
    once, which is what tests polling for a record want).

    ``pod_facing``: the real nodes' bridge addresses, each a node's ``clusterDNS``: the same zones
    are served there on port 53, where the Pods of real nodes ask."""
    plugin = (
        f"    kubernetes {CLUSTER_DOMAIN} in-addr.arpa ip6.arpa {{\n"
        f"        kubeconfig {kubeconfig} {context}\n"
        "        pods verified\n"
        "    }\n"
    )
    text = (
        "# Generated by kthena-conformance: the embedded cluster's DNS server.\n"
        f"{CLUSTER_DOMAIN}:{port} in-addr.arpa:{port} ip6.arpa:{port} {{\n"
        "    bind 127.0.0.1\n"
        f"    ready 127.0.0.1:{ready_port}\n"
        "    errors\n"
        "    log\n" + plugin + "}\n"
    )
    if pod_facing:
        text += (
            f"{CLUSTER_DOMAIN}:53 in-addr.arpa:53 ip6.arpa:53 {{\n"
            f"    bind {' '.join(pod_facing)}\n"
            "    errors\n"
            "    log\n" + plugin + "}\n"
        )
    return text


def dns_files(layout: RunLayout, ports: Ports, pod_facing: Sequence[str] = ()) -> dict[Path, str]:
    """The files CoreDNS reads: its Corefile and its own kubeconfig (client certificate)."""
    if ports.dns is None or ports.dns_ready is None:
        raise ValueError("dns_files needs the DNS ports")
    kubeconfig = layout.component_kubeconfig("coredns")
    ca = layout.pki / "ca.crt"
    return {
        kubeconfig: kubeconfig_yaml(
            f"https://127.0.0.1:{ports.apiserver}",
            ca,
            layout.pki / "coredns.crt",
            layout.pki / "coredns.key",
            context="coredns",
        ),
        layout.config("Corefile"): corefile(
            port=ports.dns, ready_port=ports.dns_ready, kubeconfig=kubeconfig, context="coredns", pod_facing=pod_facing
        ),
    }


def dns_component(layout: RunLayout, binary: Path, ports: Ports) -> Component:
    """CoreDNS, started once kube-apiserver is ready; healthy when its kubernetes plugin has
    synced (the ``ready`` plugin's endpoint)."""
    if ports.dns is None or ports.dns_ready is None:
        raise ValueError("dns_component needs the DNS ports")
    return Component(
        "coredns",
        (str(binary), f"-conf={layout.config('Corefile')}"),
        health_url=f"http://127.0.0.1:{ports.dns_ready}/ready",
        after=("kube-apiserver",),
    )


# What CoreDNS's kubernetes plugin reads (kubeadm's system:coredns role), bound to its user.
COREDNS_RBAC: tuple[tuple[str, dict[str, Any]], ...] = (
    (
        "/apis/rbac.authorization.k8s.io/v1/clusterroles",
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": COREDNS_USER},
            "rules": [
                {
                    "apiGroups": [""],
                    "resources": ["endpoints", "services", "pods", "namespaces"],
                    "verbs": ["list", "watch"],
                },
                {"apiGroups": ["discovery.k8s.io"], "resources": ["endpointslices"], "verbs": ["list", "watch"]},
            ],
        },
    ),
    (
        "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": COREDNS_USER},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": COREDNS_USER},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": COREDNS_USER}],
        },
    ),
)


def fake_devices_files(layout: RunLayout, ports: Ports) -> dict[Path, str]:
    """The fake DRA drivers' publishers' kubeconfig (their own client certificate)."""
    return {
        layout.component_kubeconfig("fake-devices"): kubeconfig_yaml(
            f"https://127.0.0.1:{ports.apiserver}",
            layout.pki / "ca.crt",
            layout.pki / "fake-devices.crt",
            layout.pki / "fake-devices.key",
            context="fake-devices",
        )
    }


def fake_devices_components(layout: RunLayout, drivers: list[str], *, python: str = sys.executable) -> list[Component]:
    """One ResourceSlice publisher per fake DRA driver (``fake-devices publish``), started once the
    Nodes exist; no health endpoint (the supervisor waits for the slices instead)."""
    return [
        Component(
            f"fake-devices-{key}",
            (
                python,
                "-m",
                "fake_devices",
                "publish",
                f"--driver={key}",
                f"--kubeconfig={layout.component_kubeconfig('fake-devices')}",
                "--resync=10",
            ),
            after=("kube-apiserver",),
        )
        for key in drivers
    ]


@dataclass(frozen=True)
class KubeletPluginSite:
    """A fake DRA driver's kubelet plugin on one real node: where it serves and writes CDI specs."""

    driver: str  # the driver's key: gpu, npu
    node: str
    plugin_dir: Path  # the kubelet's <root-dir>/plugins
    registry_dir: Path  # the kubelet's <root-dir>/plugins_registry
    cdi_dir: Path  # the node's containerd reads CDI specs here


def kubelet_plugin_ready_file(layout: RunLayout, driver: str, node: str) -> Path:
    """Kept by the plugin exactly while the node's kubelet has it registered."""
    return layout.root / "fake-devices" / f"{driver}-{node}.ready"


def fake_devices_plugin_components(
    layout: RunLayout, sites: Sequence[KubeletPluginSite], *, python: str = sys.executable
) -> list[Component]:
    """One fake DRA kubelet plugin (``fake-devices kubelet-plugin``) per driver per real device
    node, with the publishers' identity (it reads ResourceClaims). It registers through the
    kubelet's plugin watcher; the supervisor waits for its ready file (no health endpoint)."""
    return [
        Component(
            f"fake-devices-{site.driver}-plugin-{site.node}",
            (
                python,
                "-m",
                "fake_devices",
                "kubelet-plugin",
                f"--driver={site.driver}",
                f"--node-name={site.node}",
                f"--kubeconfig={layout.component_kubeconfig('fake-devices')}",
                f"--plugin-dir={site.plugin_dir}",
                f"--registry-dir={site.registry_dir}",
                f"--cdi-dir={site.cdi_dir}",
                f"--ready-file={kubelet_plugin_ready_file(layout, site.driver, site.node)}",
            ),
            after=("kube-apiserver",),
        )
        for site in sites
    ]


def fake_devices_objects(drivers: list[str], *, kubelet_plugins: bool = False) -> list[tuple[str, dict[str, Any]]]:
    """What the publishers need before they start: least-privilege RBAC for their user (read
    Nodes, own ResourceSlices: the rules of fake-devices/deploy/rbac.yaml; read ResourceClaims too
    when ``kubelet_plugins`` run on real nodes) and the drivers' DeviceClasses, as (collection
    path, object) pairs to POST."""
    from fake_devices.drivers import FAULT_ENV, device_classes, parse_faults

    rbac = "/apis/rbac.authorization.k8s.io/v1"
    claims = [{"apiGroups": ["resource.k8s.io"], "resources": ["resourceclaims"], "verbs": ["get"]}]
    objects: list[tuple[str, dict[str, Any]]] = [
        (
            f"{rbac}/clusterroles",
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "ClusterRole",
                "metadata": {"name": FAKE_DEVICES_USER},
                "rules": [
                    {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "watch"]},
                    {
                        "apiGroups": ["resource.k8s.io"],
                        "resources": ["resourceslices"],
                        "verbs": ["get", "list", "watch", "create", "update", "delete"],
                    },
                    *(claims if kubelet_plugins else []),
                ],
            },
        ),
        (
            f"{rbac}/clusterrolebindings",
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "ClusterRoleBinding",
                "metadata": {"name": FAKE_DEVICES_USER},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": FAKE_DEVICES_USER},
                "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": FAKE_DEVICES_USER}],
            },
        ),
    ]
    # a broken variant's faults (self-validation) reach the classes as they reach the publishers: the environment
    faults = parse_faults(os.environ.get(FAULT_ENV))
    objects += [("/apis/resource.k8s.io/v1/deviceclasses", dc) for dc in device_classes(drivers, faults)]
    return objects


def node_manifest(
    name: str, pool_labels: dict[str, str], capacity: dict[str, str], taints: list[dict[str, str]]
) -> str:
    """A kwok-managed Node object, as JSON (the supervisor POSTs it)."""
    labels = {
        "type": "kwok",
        "kubernetes.io/hostname": name,
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        "node-role.kubernetes.io/agent": "",
        **pool_labels,
    }
    node = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": labels,
            "annotations": {KWOK_NODE_ANNOTATION: "fake", "node.alpha.kubernetes.io/ttl": "0"},
        },
        "spec": {"taints": taints} if taints else {},
        "status": {"capacity": capacity, "allocatable": capacity},
    }
    return json.dumps(node)


def node_manifests(spec: ClusterSpec) -> list[str]:
    out = []
    for pool in spec.node_pools:
        if pool.kind == "real":
            continue  # a real node's kubelet registers it
        taints = [t.model_dump() for t in pool.taints]
        for name in pool.node_names():
            out.append(node_manifest(name, pool.labels, pool.capacity, taints))
    return out
