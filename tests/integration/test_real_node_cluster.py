"""``cluster up --real-nodes``: the local provider's real nodes, their host lock, and the host left
as it was after ``down`` and after a SIGKILLed supervisor (issue 14).

Each test brings up a private embedded cluster with one real node beside one kwok node (marker
``serial``), takes a host snapshot before, and checks the host equals it afterwards. Needs what
``test_real_node.py`` needs; skipped (or failed, with ``KTHENA_REQUIRE_REAL_NODES=1``) without it.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest
from kubernetes import client

from conformance.cluster.errors import HarnessError
from conformance.cluster.kube import api_client
from conformance.cluster.local.provider import LocalProvider
from conformance.cluster.realnode import config as cfg
from conformance.cluster.realnode import fleet, host, preflight
from conformance.cluster.spec import ClusterSpec, NodePool
from conformance.framework.waits import wait_for
from fake_devices.drivers import GPU, NPU, DriverShape
from fake_devices.kubeletplugin.cdi import device_env

from .conftest import isolated_cache
from .real_nodes import (
    built_binaries,
    in_container,
    pod,
    running,
    snapshot,
    unavailable,
)

pytestmark = [pytest.mark.serial, pytest.mark.slow]

SPEC = ClusterSpec(
    name="realnodes",
    node_pools=[NodePool(name="worker", count=1), NodePool(name="real", kind="real", count=1)],
)
CLI = [sys.executable, "-m", "conformance.cli"]
NODES = SPEC.node_names()


@pytest.fixture
def bin_dir() -> Path:
    return built_binaries()


@pytest.fixture
def isolated(tmp_path: Path, bin_dir: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A private cache root (runs and all) that still uses the real, already-built binaries."""
    yield from isolated_cache(tmp_path, bin_dir, monkeypatch)


def alive(pid: int) -> bool:
    """Running, not a zombie (the supervisor is this process's child until down reaps it)."""
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def assert_host_as_before(before: host.HostSnapshot, bin_dir: Path, nodes: list[str] = NODES) -> None:
    left = host.diff(before, snapshot(bin_dir, nodes)).lines()
    assert not left, "the host differs from before the cluster started:\n" + "\n".join(left)


def run_pod(core: client.CoreV1Api, node: str) -> Any:
    return running(core, "default", pod("on-real", node))


def a_member_behind_a_headless_service(core: client.CoreV1Api) -> Any:
    """Pod ``member`` (hostname m0, subdomain members) behind headless Service ``members``, Running."""
    service = {"metadata": {"name": "members"},
               "spec": {"clusterIP": "None", "selector": {"app": "member"}, "ports": [{"port": 80}]}}  # fmt: skip
    core.create_namespaced_service("default", service)
    return running(core, "default", pod("member", "real-0", spec={"hostname": "m0", "subdomain": "members"}))


def test_cluster_up_with_a_real_node_and_down_leaves_the_host_as_it_was(isolated: Path, bin_dir: Path) -> None:
    before = snapshot(bin_dir, NODES)
    provider = LocalProvider()
    info = provider.up(SPEC)
    try:
        assert info.details.get("real_nodes") == ["real-0"], info.details
        assert any(line.startswith("real nodes: real-0") for line in info.simulates), info.simulates
        core = client.CoreV1Api(api_client(info.kubeconfig))
        node = core.read_node("real-0")
        assert node.metadata.labels.get(cfg.NODE_KIND_LABEL) == "real"
        assert node.status.node_info.container_runtime_version.startswith("containerd://")
        pod = run_pod(core, "real-0")
        assert pod.status.container_statuses[0].container_id.startswith("containerd://")
        with pytest.raises(HarnessError) as second:
            provider.up(SPEC.model_copy(update={"name": "realnodes-2"}))
        assert "real nodes already run on this host" in second.value.message, second.value
    finally:
        provider.down(SPEC.name)
    assert not (isolated / SPEC.name).exists()
    assert_host_as_before(before, bin_dir)


def test_a_pod_on_a_real_node_resolves_a_member_address_through_the_cluster_dns(isolated: Path, bin_dir: Path) -> None:
    if not (bin_dir / "coredns").exists():
        unavailable("CoreDNS is not built (make binaries builds it)")
    before = snapshot(bin_dir, NODES)
    provider = LocalProvider()
    info = provider.up(SPEC)
    try:
        assert info.details.get("dns"), "the cluster runs CoreDNS"
        core = client.CoreV1Api(api_client(info.kubeconfig))
        run_pod(core, "real-0")
        member = a_member_behind_a_headless_service(core)
        name = "m0.members.default.svc.cluster.local"
        answer = wait_for(
            f"{name} resolved inside a Pod on real-0",
            lambda: in_container(core, "default", "on-real", "nslookup", name),
            until=lambda out: member.status.pod_ip in out,
            timeout=30,
        )
        assert member.status.pod_ip in answer
        resolv = in_container(core, "default", "on-real", "cat", "/etc/resolv.conf")
        node_ip = next(a.address for a in core.read_node("real-0").status.addresses if a.type == "InternalIP")
        assert f"nameserver {node_ip}" in resolv, f"the Pod asks its node's bridge (clusterDNS):\n{resolv}"
    finally:
        provider.down(SPEC.name)
    assert_host_as_before(before, bin_dir)


def test_a_killed_supervisor_s_real_nodes_are_undone_by_down(isolated: Path, bin_dir: Path) -> None:
    before = snapshot(bin_dir, NODES)
    provider = LocalProvider()
    info = provider.up(SPEC)
    state = provider.status(SPEC.name) or {}
    try:
        run_pod(client.CoreV1Api(api_client(info.kubeconfig)), "real-0")  # a container to leave behind
        os.kill(state["supervisor_pid"], signal.SIGKILL)
        wait_for("the supervisor gone", lambda: alive(state["supervisor_pid"]), until=lambda up: not up)
        assert (isolated / SPEC.name / fleet.STATE_FILE).exists(), "the snapshot outlives the supervisor"
    finally:
        provider.down(SPEC.name)
    assert_host_as_before(before, bin_dir)


DEVICES_SPEC = ClusterSpec(
    name="realdevices",
    node_pools=[
        NodePool(name="worker", count=1),
        NodePool(name="gpu", kind="real", count=1, labels={GPU.count_label: "2"}),
        NodePool(name="npu", kind="real", count=1, labels={NPU.count_label: "2"}),
    ],
)


def a_pod_with_a_device(
    core: client.CoreV1Api, resource: client.ResourceV1Api, shape: DriverShape, node: str
) -> tuple[Any, str]:
    """A Pod on ``node`` whose container claims one device of ``shape``'s class (through a
    ResourceClaimTemplate), Running; and the device the scheduler allocated to it."""
    name = f"with-{shape.key}"
    template = {
        "metadata": {"name": name},
        "spec": {"spec": {"devices": {"requests": [
            {"name": "dev", "exactly": {"deviceClassName": shape.driver, "count": 1}}
        ]}}},
    }  # fmt: skip
    resource.create_namespaced_resource_claim_template("default", template)
    body = pod(
        name,
        node,
        spec={"resourceClaims": [{"name": "dev", "resourceClaimTemplateName": name}]},
        resources={"claims": [{"name": "dev"}]},
    )
    started = running(core, "default", body)
    (status,) = started.status.resource_claim_statuses
    claim = resource.read_namespaced_resource_claim(status.resource_claim_name, "default")
    (result,) = claim.status.allocation.devices.results
    assert (result.driver, result.pool) == (shape.driver, node), result
    return started, result.device


def test_the_fake_drivers_kubelet_plugins_prepare_devices_on_real_nodes(isolated: Path, bin_dir: Path) -> None:
    """A claimed device's CDI environment reaches the container on a real GPU and a real NPU node,
    and the claim is unprepared (its CDI spec removed) when the Pod goes."""
    nodes = DEVICES_SPEC.node_names()
    before = snapshot(bin_dir, nodes)
    provider = LocalProvider()
    info = provider.up(DEVICES_SPEC)
    try:
        assert "kubelet_plugins_registered" in info.details.get("timings", {}), info.details
        kube = api_client(info.kubeconfig)
        core, resource = client.CoreV1Api(kube), client.ResourceV1Api(kube)
        for shape, node in ((GPU, "gpu-0"), (NPU, "npu-0")):
            started, device = a_pod_with_a_device(core, resource, shape, node)
            env = in_container(core, "default", started.metadata.name, "env").split()
            for variable in device_env(shape, device):
                assert variable in env, f"{variable} (CDI, device {device}) not in the container's environment: {env}"
            cdi_dir = fleet.nodes_root(isolated / DEVICES_SPEC.name) / node / "cdi"
            specs = sorted(p.name for p in cdi_dir.glob(f"{shape.driver}-*.json"))
            assert len(specs) == 1, f"one prepared claim, one CDI spec in {cdi_dir}: {specs}"
            core.delete_namespaced_pod(started.metadata.name, "default")
            wait_for(
                f"the claim of Pod {started.metadata.name} unprepared (its CDI spec removed from {cdi_dir})",
                lambda d=cdi_dir, s=shape: sorted(p.name for p in d.glob(f"{s.driver}-*.json")),
                until=lambda left: not left,
                timeout=60,
            )
    finally:
        provider.down(DEVICES_SPEC.name)
    assert_host_as_before(before, bin_dir, nodes)


def test_more_real_nodes_than_allowed_is_one_clear_message(isolated: Path) -> None:
    result = subprocess.run(
        [*CLI, "cluster", "up", "--real-nodes", "9"], capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 2 and "--real-nodes" in result.stderr and "Traceback" not in result.stderr, (
        result.stderr
    )


def _without(program: str) -> list[str]:
    """A wrapper that runs the CLI in a private mount namespace where ``program`` is hidden (an
    empty, non-executable file bound over it): the host itself keeps it, nothing to restore."""
    found = shutil.which(program, path=os.pathsep.join([os.environ.get("PATH", ""), *preflight.EXTRA_PATH]))
    assert found, f"{program} must be on this host for the test to hide it"
    return ["unshare", "--mount", "sh", "-c", f'mount --bind /dev/null {found} && exec "$0" "$@"']


@pytest.mark.parametrize(
    ("host_lacks", "wrapper", "message"),
    [
        # A user namespace without a mapping: euid 65534 and no capability on the host, as a real non-root user.
        ("root", ["unshare", "--user"], "not running as root (euid 65534)"),
        ("runc", _without("runc"), "runc missing (apt-get install -y runc)"),
        ("iptables", _without("iptables"), "iptables missing (apt-get install -y iptables)"),
    ],
)
def test_a_host_without_what_real_nodes_need_is_one_clear_message_before_anything_starts(
    isolated: Path, host_lacks: str, wrapper: list[str], message: str
) -> None:
    result = subprocess.run(
        [*wrapper, *CLI, "cluster", "up", "--real-nodes", "1"], capture_output=True, text=True, timeout=60, check=False
    )
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert result.returncode == 1 and len(errors) == 1 and message in errors[0], (
        f"a host without {host_lacks}: expected exit 1 and one error naming {message!r}; "
        f"got exit {result.returncode}:\n{result.stderr}"
    )
    assert "Traceback" not in result.stderr and "starting etcd" not in result.stderr, result.stderr
    left = [p for p in isolated.iterdir()] if isolated.exists() else []
    assert not left, f"a refused `up` left run directories: {left}"
