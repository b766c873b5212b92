"""Real nodes (containerd + kubelet) join the embedded control plane and run Pods for real; after
they stop, the host matches the snapshot taken before they started (issue 14).

Two real nodes start once for the module, each with a NoSchedule taint so the shared cluster's
other tests never land on them; the test Pods tolerate it and run the harness's workload images,
imported without a registry. The host snapshot covers processes, mounts, cgroups, iptables/nft,
links, sysctls and the paths a real node may create; at the end the restore plan computed from the
two snapshots is applied and a third snapshot must equal the first (a difference fails the
module's teardown, naming each leftover).

Needs root, the real-node binaries (``kthena-conformance binaries build --real-nodes``; ``make
test`` builds them) and the Debian packages runc, containernetworking-plugins, iptables and
busybox-static. Without them the tests are skipped with the missing parts named, unless
``KTHENA_REQUIRE_REAL_NODES=1`` (``.ci/run`` sets it): then they fail, so CI never passes by skipping.
"""

from __future__ import annotations

import ipaddress
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from conformance.cluster.binaries import BinaryCache
from conformance.cluster.local.processes import free_ports
from conformance.cluster.local.provider import LocalProvider
from conformance.cluster.pki import CertificateAuthority
from conformance.cluster.provider import ClusterInfo
from conformance.cluster.realnode import config as cfg
from conformance.cluster.realnode import host, images, preflight
from conformance.cluster.realnode.node import RealNode
from conformance.framework.waits import wait_for

from .real_nodes import POD_TIMEOUT, V2, in_container, pod, require_binaries, require_host, running, snapshot

pytestmark = [pytest.mark.cluster, pytest.mark.serial, pytest.mark.slow]

NODES = ("real-0", "real-1")
READY_TIMEOUT = 90.0  # kubelet start to Node Ready: ~1 s measured, generous for a loaded CI machine


@dataclass(frozen=True)
class Nodes:
    """The module's real nodes, by name."""

    nodes: dict[str, RealNode]

    def subnet(self, name: str) -> ipaddress.IPv4Network:
        return self.nodes[name].net.subnet


def _node_ready(core: client.CoreV1Api, name: str) -> bool:
    try:
        conditions = core.read_node(name).status.conditions or []
    except ApiException as exc:
        if exc.status == 404:
            return False
        raise
    return any(c.type == "Ready" and c.status == "True" for c in conditions)


def _explain_not_ready(core: client.CoreV1Api, node: RealNode) -> str:
    log = node.log("kubelet").read_text(errors="replace").splitlines()[-25:]
    try:
        conditions = [
            f"{c.type}={c.status} {c.reason}: {c.message}" for c in core.read_node(node.name).status.conditions
        ]
    except ApiException as exc:
        conditions = [f"the Node could not be read: {exc.status} {exc.reason}"]
    return "\n--- Node conditions ---\n" + "\n".join(conditions) + "\n--- kubelet log ---\n" + "\n".join(log)


@pytest.fixture(scope="module")
def real_nodes(cluster: ClusterInfo, api_client: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Nodes]:
    if cluster.provider != "local":
        pytest.skip(f"real nodes join the embedded cluster, not provider {cluster.provider}")
    require_host()
    binaries = BinaryCache().ensure(real_nodes=True)
    require_binaries(binaries.directory)
    core = client.CoreV1Api(api_client)
    ca = CertificateAuthority.load(LocalProvider().layout(cluster.name).pki)
    archives = images.standard_archives(images.read_busybox())
    routes = subprocess.run(["ip", "-4", "route"], capture_output=True, text=True, check=True).stdout
    networks = cfg.plan_networks(len(NODES), [n for n, _ in preflight.route_destinations(routes)])
    # Short: containerd's sockets live under it and a unix socket path has at most 107 bytes.
    root = Path(tempfile.mkdtemp(prefix="kthena-rn-"))
    logs = tmp_path_factory.mktemp("real-node-logs")  # kept after the nodes' directories go
    before = snapshot(binaries.directory, NODES)
    nodes: dict[str, RealNode] = {}
    try:
        for name, net in zip(NODES, networks, strict=True):
            api_port, healthz_port = free_ports(2)
            node = nodes[name] = RealNode(
                name=name,
                dirs=cfg.NodeDirs(root / name),
                net=net,
                bin_dir=binaries.directory,
                server=api_client.configuration.host,
                ports=cfg.KubeletPorts(api_port, healthz_port),
                cluster_dns=[net.node_ip],
                log_dir=logs / name,
            )
            node.start(ca, archives)
        for node in nodes.values():

            def kubelet_exited(_: object, __: float, node: RealNode = node) -> str | None:
                code = node.kubelet.poll() if node.kubelet is not None else None
                return None if code is None else f"the kubelet exited with {code}"

            try:
                wait_for(f"real node {node.name} Ready", lambda n=node.name: _node_ready(core, n),
                         timeout=READY_TIMEOUT, give_up=kubelet_exited)  # fmt: skip
            except AssertionError as exc:
                raise AssertionError(f"{exc}{_explain_not_ready(core, node)}") from None
        yield Nodes(nodes)
    finally:
        for node in nodes.values():
            node.stop()
            try:
                core.delete_node(node.name)
            except ApiException as exc:
                if exc.status != 404:
                    raise
        failures = host.apply(host.restore_plan(before, snapshot(binaries.directory, NODES)))
        shutil.rmtree(root, ignore_errors=True)
        left = host.diff(before, snapshot(binaries.directory, NODES)).lines()
        assert not failures and not left, "the host differs from before the real nodes started:\n" + "\n".join(
            [*(f.line() for f in failures), *left]
        )


@pytest.fixture
def core(api_client: Any) -> client.CoreV1Api:
    return client.CoreV1Api(api_client)


def test_a_pod_runs_on_containerd_with_an_ip_from_its_node(
    real_nodes: Nodes, core: client.CoreV1Api, namespace: str
) -> None:
    for node in NODES:
        p = running(core, namespace, pod(f"on-{node}", node))
        assert p.spec.node_name == node
        assert ipaddress.IPv4Address(p.status.pod_ip) in real_nodes.subnet(node), (
            f"Pod IP {p.status.pod_ip} is not from {node}'s bridge subnet {real_nodes.subnet(node)}"
        )
        status = p.status.container_statuses[0]
        assert status.container_id.startswith("containerd://") and status.state.running is not None, status


def test_logs_and_exec_go_through_the_api_server(real_nodes: Nodes, core: client.CoreV1Api, namespace: str) -> None:
    body = pod("talker", NODES[0], command=["/bin/sh", "-c", "echo hello from a real node; exec sleep 3600"])
    running(core, namespace, body)
    wait_for("the container's output in its log", lambda: core.read_namespaced_pod_log("talker", namespace),
             until=lambda log: "hello from a real node" in log, timeout=30)  # fmt: skip
    assert in_container(core, namespace, "talker", "cat", images.VARIANT_FILE).strip() == "v1"


def test_an_exec_readiness_probe_flips_ready_and_the_endpointslice_follows(
    real_nodes: Nodes, core: client.CoreV1Api, namespace: str
) -> None:
    probe = {"exec": {"command": ["test", "-f", "/tmp/ready"]}, "periodSeconds": 1, "failureThreshold": 1}
    service = {"metadata": {"name": "probed"},
               "spec": {"clusterIP": "None", "selector": {"app": "probed"}, "ports": [{"port": 80}]}}  # fmt: skip
    core.create_namespaced_service(namespace, service)
    running(core, namespace, pod("probed", NODES[0], readinessProbe=probe))
    discovery = client.DiscoveryV1Api(core.api_client)

    def state() -> tuple[bool, bool | None]:
        p = core.read_namespaced_pod("probed", namespace)
        ready = any(c.type == "Ready" and c.status == "True" for c in p.status.conditions or [])
        slices = discovery.list_namespaced_endpoint_slice(namespace, label_selector="kubernetes.io/service-name=probed")
        endpoints = [
            e for s in slices.items for e in s.endpoints or [] if e.target_ref and e.target_ref.name == "probed"
        ]
        return ready, (endpoints[0].conditions.ready if endpoints else None)

    assert wait_for("not Ready before the probe's file exists", state, until=lambda s: s == (False, False)) == (
        False,
        False,
    )
    in_container(core, namespace, "probed", "touch", "/tmp/ready")
    wait_for("Ready, and ready in the EndpointSlice", state, until=lambda s: s == (True, True))
    in_container(core, namespace, "probed", "rm", "/tmp/ready")
    wait_for("not Ready again, and not ready in the EndpointSlice", state, until=lambda s: s == (False, False))


def test_an_image_patch_restarts_the_container_in_place(
    real_nodes: Nodes, core: client.CoreV1Api, namespace: str
) -> None:
    before = running(core, namespace, pod("patched", NODES[0]))
    patch = {"spec": {"containers": [{"name": "main", "image": V2}]}}
    core.patch_namespaced_pod("patched", namespace, patch)

    def restarted(p: Any) -> bool:
        status = p.status.container_statuses[0]
        return bool(
            status.restart_count == 1
            and status.state.running is not None
            and status.image.endswith(V2.rsplit("/", 1)[-1])
        )

    after = wait_for("the container restarted on v2", lambda: core.read_namespaced_pod("patched", namespace),
                     until=restarted, describe=lambda p: str(p.status.container_statuses), timeout=POD_TIMEOUT)  # fmt: skip
    assert after.metadata.uid == before.metadata.uid and after.status.pod_ip == before.status.pod_ip
    assert after.status.container_statuses[0].container_id != before.status.container_statuses[0].container_id
    assert in_container(core, namespace, "patched", "cat", images.VARIANT_FILE).strip() == "v2"


def test_pods_on_two_real_nodes_talk(real_nodes: Nodes, core: client.CoreV1Api, namespace: str) -> None:
    server = running(core, namespace, pod("server", NODES[0], command=["httpd", "-f", "-p", "8080", "-h", "/var/www"]))
    running(core, namespace, pod("client", NODES[1]))
    page = wait_for(
        f"the page served on {NODES[0]}, fetched from {NODES[1]}",
        lambda: in_container(core, namespace, "client", "wget", "-qO-", f"http://{server.status.pod_ip}:8080/"),
        until=lambda text: "kthena-conformance workload v1" in text,
        timeout=30,
    )
    assert "v1" in page
