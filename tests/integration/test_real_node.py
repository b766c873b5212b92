"""A real node (containerd + kubelet) joins the embedded control plane and runs a Pod for real;
afterwards the host matches the snapshot taken before (issue 14, first slice).

The node carries a NoSchedule taint, so the shared cluster's other tests never land on it; the test
Pod tolerates it and runs the harness's workload image, imported without a registry. The host
snapshot covers processes, mounts, cgroups, iptables/nft, links, sysctls and the paths a real node
may create; after the node stops, the restore plan computed from the two snapshots is applied and
a third snapshot must equal the first.

Needs root, the real-node binaries (``kthena-conformance binaries build --real-nodes``) and the
Debian packages runc, containernetworking-plugins, iptables and busybox-static. Without them the
test is skipped with the missing parts named, unless ``KTHENA_REQUIRE_REAL_NODES=1`` (CI sets it):
then it fails, so CI never passes by skipping.
"""

from __future__ import annotations

import ipaddress
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
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
from conformance.cluster.realnode.node import REAL_NODE_TAINT, WATCHED_PATHS, RealNode
from conformance.framework.waits import wait_for

pytestmark = [pytest.mark.cluster, pytest.mark.serial, pytest.mark.slow]

NODE = "real-0"
READY_TIMEOUT = 90.0  # kubelet start to Node Ready: ~1 s measured, generous for a loaded CI machine
POD_TIMEOUT = 90.0


def unavailable(reason: str) -> None:
    if os.environ.get("KTHENA_REQUIRE_REAL_NODES") == "1":
        pytest.fail(f"real nodes are required here (KTHENA_REQUIRE_REAL_NODES=1) but {reason}")
    pytest.skip(reason)


@pytest.fixture
def bin_dir(cluster: ClusterInfo) -> Path:
    if cluster.provider != "local":
        pytest.skip(f"real nodes join the embedded cluster, not provider {cluster.provider}")
    reqs = preflight.evaluate(preflight.gather_facts())
    if not preflight.usable(reqs):
        unavailable(preflight.summary(reqs))
    binaries = BinaryCache().ensure(real_nodes=True)
    missing = [
        n for n in ("kubelet", "containerd", "containerd-shim-runc-v2", "ctr", "crictl") if not binaries.optional(n)
    ]
    if missing:
        unavailable(
            f"real-node binaries not built: {', '.join(missing)} (kthena-conformance binaries build --real-nodes)"
        )
    return binaries.directory


@pytest.fixture
def node_root() -> Iterator[Path]:
    # Short: containerd's sockets live under it and a unix socket path has at most 107 bytes.
    root = Path(tempfile.mkdtemp(prefix="kthena-rn-"))
    try:
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)


def snapshot(bin_dir: Path, node_root: Path) -> host.HostSnapshot:
    return host.take_snapshot((*WATCHED_PATHS, str(node_root)), [bin_dir], [f"{cfg.CGROUP_PREFIX}{NODE}"])


def workload_pod(name: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "spec": {
            "nodeSelector": {cfg.NODE_KIND_LABEL: "real"},
            "tolerations": [{**REAL_NODE_TAINT, "operator": "Equal"}],
            "automountServiceAccountToken": False,
            "containers": [{"name": "main", "image": images.WORKLOAD_IMAGES["v1"], "imagePullPolicy": "IfNotPresent"}],
        },
    }


def test_a_real_node_runs_a_pod_with_a_real_ip_and_leaves_the_host_as_it_was(
    cluster: ClusterInfo, api_client: Any, namespace: str, bin_dir: Path, node_root: Path, tmp_path: Path
) -> None:
    core = client.CoreV1Api(api_client)
    layout = LocalProvider().layout(cluster.name)
    routes = subprocess.run(["ip", "-4", "route"], capture_output=True, text=True, check=True).stdout
    net = cfg.plan_networks(1, [n for n, _ in preflight.route_destinations(routes)])[0]
    api_port, healthz_port = free_ports(2)
    server = api_client.configuration.host
    before = snapshot(bin_dir, node_root)
    node = RealNode(
        name=NODE,
        dirs=cfg.NodeDirs(node_root / NODE),
        net=net,
        bin_dir=bin_dir,
        server=server,
        ports=cfg.KubeletPorts(api_port, healthz_port),
        cluster_dns=[net.node_ip],
        log_dir=tmp_path,  # kept after the node's directory goes
    )
    try:
        node.start(CertificateAuthority.load(layout.pki), images.standard_archives(images.read_busybox()))

        def kubelet_exited(_: object, __: float) -> str | None:
            code = node.kubelet.poll() if node.kubelet is not None else None
            return None if code is None else f"the kubelet exited with {code}"

        def ready() -> bool:
            try:
                conditions = core.read_node(NODE).status.conditions or []
            except ApiException as exc:
                if exc.status == 404:
                    return False
                raise
            return any(c.type == "Ready" and c.status == "True" for c in conditions)

        try:
            wait_for(f"real node {NODE} Ready", ready, until=bool, timeout=READY_TIMEOUT, give_up=kubelet_exited)
        except AssertionError as exc:
            kubelet_log = (tmp_path / "kubelet.log").read_text(errors="replace").splitlines()[-25:]
            try:
                conditions = [
                    f"{c.type}={c.status} {c.reason}: {c.message}" for c in core.read_node(NODE).status.conditions
                ]
            except ApiException as read_error:
                conditions = [f"the Node could not be read: {read_error.status} {read_error.reason}"]
            raise AssertionError(
                f"{exc}\n--- Node conditions ---\n"
                + "\n".join(conditions)
                + "\n--- kubelet log (last lines) ---\n"
                + "\n".join(kubelet_log)
            ) from None
        labels = core.read_node(NODE).metadata.labels
        assert labels.get(cfg.NODE_KIND_LABEL) == "real", labels

        core.create_namespaced_pod(namespace, workload_pod("real-pod"))
        pod = wait_for(
            "the Pod Running on the real node",
            lambda: core.read_namespaced_pod("real-pod", namespace),
            until=lambda p: p.status.phase == "Running",
            timeout=POD_TIMEOUT,
        )
        assert pod.spec.node_name == NODE
        assert ipaddress.IPv4Address(pod.status.pod_ip) in net.subnet, (
            f"Pod IP {pod.status.pod_ip} is not from the node's bridge subnet {net.subnet}"
        )
        status = pod.status.container_statuses[0]
        assert status.container_id and status.container_id.startswith("containerd://"), status.container_id
        assert status.state.running is not None and status.image_id, status
        core.delete_namespaced_pod("real-pod", namespace, grace_period_seconds=1)
        wait_for("the Pod gone", lambda: [p.metadata.name for p in core.list_namespaced_pod(namespace).items],
                 until=lambda names: "real-pod" not in names, timeout=POD_TIMEOUT)  # fmt: skip
    finally:
        node.stop()
        try:
            core.delete_node(NODE)
        except ApiException as exc:
            if exc.status != 404:
                raise
        after = snapshot(bin_dir, node_root)
        failures = host.apply(host.restore_plan(before, after))
        shutil.rmtree(node_root / NODE, ignore_errors=True)
    assert not failures, "restoring the host failed:\n" + "\n".join(f.line() for f in failures)
    left = host.diff(before, snapshot(bin_dir, node_root))
    assert not left.lines(), "the host differs from before the node started:\n" + "\n".join(left.lines())
