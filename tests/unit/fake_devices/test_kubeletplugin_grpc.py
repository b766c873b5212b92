"""The kubelet plugin's gRPC services, in process: real servers on unix sockets in a temporary
directory, called through a real gRPC client with the generated stubs (as the kubelet would).
Claims come from a stub lookup; tests/integration/test_fake_devices.py uses the real API."""

from __future__ import annotations

import hashlib
import json
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest

from fake_devices.drivers import GPU, NPU
from fake_devices.kubeletplugin.pb import dra_v1_pb2 as dra
from fake_devices.kubeletplugin.pb import dra_v1_pb2_grpc as dra_grpc
from fake_devices.kubeletplugin.pb import pluginregistration_v1_pb2 as reg
from fake_devices.kubeletplugin.pb import pluginregistration_v1_pb2_grpc as reg_grpc
from fake_devices.kubeletplugin.server import KubeletPlugin

NODE = "gpu-0"


def claim(name: str, uid: str, results: list[tuple[str, str, str, str]]) -> dict[str, Any]:
    """A ResourceClaim as the API returns it; results are (request, driver, pool, device)."""
    return {
        "metadata": {"name": name, "namespace": "ns", "uid": uid},
        "status": {
            "allocation": {
                "devices": {
                    "results": [{"request": r, "driver": d, "pool": p, "device": dev} for r, d, p, dev in results]
                }
            }
        },
    }


CLAIMS = {
    ("ns", "one"): claim("one", "uid-one", [("gpu", GPU.driver, NODE, "gpu-1")]),
    ("ns", "two"): claim("two", "uid-two", [("gpus", GPU.driver, NODE, "gpu-2"), ("gpus", GPU.driver, NODE, "gpu-3")]),
    ("ns", "mixed"): claim(
        "mixed",
        "uid-mixed",
        [
            ("gpu", GPU.driver, NODE, "gpu-0"),
            ("npu", NPU.driver, NODE, "npu-0-0"),
            ("gpu2", GPU.driver, "other-node", "gpu-0"),
        ],
    ),
    ("ns", "elsewhere"): claim("elsewhere", "uid-elsewhere", [("gpu", GPU.driver, "other-node", "gpu-0")]),
    ("ns", "unallocated"): {"metadata": {"name": "unallocated", "namespace": "ns", "uid": "uid-unallocated"}},
}


def lookup(namespace: str, name: str) -> dict[str, Any] | None:
    if name == "api-down":
        raise ConnectionError("the API server is unreachable")
    return CLAIMS.get((namespace, name))


@pytest.fixture
def plugin() -> Iterator[KubeletPlugin]:
    root = Path(tempfile.mkdtemp(prefix="fd-", dir="/tmp"))  # short: unix socket paths are limited
    try:
        with KubeletPlugin(
            GPU,
            NODE,
            lookup,
            plugin_dir=root / "plugins",
            registry_dir=root / "registry",
            cdi_dir=root / "cdi",
            ready_file=root / "ready" / "gpu",
        ) as p:
            yield p
        assert not p.dra_socket.exists() and not p.registration_socket.exists()
        assert not (root / "ready" / "gpu").exists(), "the ready file goes with the plugin"
    finally:
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def channels(plugin: KubeletPlugin) -> Iterator[tuple[grpc.Channel, grpc.Channel]]:
    with (
        grpc.insecure_channel(f"unix://{plugin.registration_socket}") as reg_channel,
        grpc.insecure_channel(f"unix://{plugin.dra_socket}") as dra_channel,
    ):
        yield reg_channel, dra_channel


def c(name: str, uid: str) -> Any:
    return dra.Claim(namespace="ns", name=name, uid=uid)


def test_registration(plugin: KubeletPlugin, channels: tuple[grpc.Channel, grpc.Channel]) -> None:
    stub = reg_grpc.RegistrationStub(channels[0])
    info = stub.GetInfo(reg.InfoRequest(), timeout=5)
    assert info.type == "DRAPlugin"
    assert info.name == "gpu.fake.kthena-conformance.io"
    assert info.endpoint == str(plugin.dra_socket)
    assert list(info.supported_versions) == ["v1.DRAPlugin"]
    assert plugin.registration_socket.name == "gpu.fake.kthena-conformance.io-reg.sock"
    ready = plugin.registration.ready_file
    assert ready is not None and not ready.exists(), "not ready before the kubelet registers the plugin"
    stub.NotifyRegistrationStatus(reg.RegistrationStatus(plugin_registered=True), timeout=5)
    assert plugin.registration.registered.is_set() and ready.exists()
    stub.NotifyRegistrationStatus(reg.RegistrationStatus(plugin_registered=False, error="version skew"), timeout=5)
    assert not plugin.registration.registered.is_set() and plugin.registration.last_error == "version skew"
    assert not ready.exists(), "a refused registration is not ready"


def test_prepare_and_unprepare(plugin: KubeletPlugin, channels: tuple[grpc.Channel, grpc.Channel]) -> None:
    stub = dra_grpc.DRAPluginStub(channels[1])
    cdi_dir = plugin.dra.cdi_dir
    resp = stub.NodePrepareResources(
        dra.NodePrepareResourcesRequest(claims=[c("one", "uid-one"), c("two", "uid-two"), c("mixed", "uid-mixed")]),
        timeout=5,
    )
    assert set(resp.claims) == {"uid-one", "uid-two", "uid-mixed"}
    assert all(not entry.error for entry in resp.claims.values())
    got = {
        uid: [(list(d.request_names), d.pool_name, d.device_name, list(d.cdi_device_ids)) for d in entry.devices]
        for uid, entry in resp.claims.items()
    }
    assert got["uid-one"] == [(["gpu"], NODE, "gpu-1", ["gpu.fake.kthena-conformance.io/gpu=uid-one-gpu-1"])]
    assert [d[2] for d in got["uid-two"]] == ["gpu-2", "gpu-3"]
    # only this driver's devices on this node
    assert got["uid-mixed"] == [(["gpu"], NODE, "gpu-0", ["gpu.fake.kthena-conformance.io/gpu=uid-mixed-gpu-0"])]

    spec = json.loads((cdi_dir / "gpu.fake.kthena-conformance.io-uid-two.json").read_text())
    assert spec["kind"] == "gpu.fake.kthena-conformance.io/gpu"
    assert [d["containerEdits"]["env"] for d in spec["devices"]] == [["GPU_DEVICE_2=gpu-2"], ["GPU_DEVICE_3=gpu-3"]]

    again = stub.NodePrepareResources(dra.NodePrepareResourcesRequest(claims=[c("one", "uid-one")]), timeout=5)
    assert again.claims["uid-one"] == resp.claims["uid-one"]  # idempotent

    un = stub.NodeUnprepareResources(
        dra.NodeUnprepareResourcesRequest(claims=[c("one", "uid-one"), c("two", "uid-two"), c("mixed", "uid-mixed")]),
        timeout=5,
    )
    assert set(un.claims) == {"uid-one", "uid-two", "uid-mixed"} and all(not e.error for e in un.claims.values())
    assert list(cdi_dir.iterdir()) == []
    un_again = stub.NodeUnprepareResources(dra.NodeUnprepareResourcesRequest(claims=[c("one", "uid-one")]), timeout=5)
    assert not un_again.claims["uid-one"].error  # idempotent: nothing left to remove is fine


@pytest.mark.parametrize(
    ("name", "uid", "error"),
    [
        pytest.param("missing", "uid-missing", "not found", id="claim-gone"),
        pytest.param("one", "uid-stale", "has uid uid-one", id="uid-mismatch"),
        pytest.param(
            "elsewhere",
            "uid-elsewhere",
            "no device of driver gpu.fake.kthena-conformance.io allocated on node gpu-0",
            id="other-node",
        ),
        pytest.param("unallocated", "uid-unallocated", "no device", id="not-allocated"),
        pytest.param("api-down", "uid-x", "unreachable", id="api-error"),
    ],
)
def test_prepare_errors_are_per_claim(
    plugin: KubeletPlugin, channels: tuple[grpc.Channel, grpc.Channel], name: str, uid: str, error: str
) -> None:
    stub = dra_grpc.DRAPluginStub(channels[1])
    resp = stub.NodePrepareResources(
        dra.NodePrepareResourcesRequest(claims=[c(name, uid), c("one", "uid-one")]), timeout=5
    )
    assert error in resp.claims[uid].error
    assert not resp.claims[uid].devices
    assert not resp.claims["uid-one"].error  # the other claim is still prepared
    assert not (plugin.dra.cdi_dir / f"gpu.fake.kthena-conformance.io-{uid}.json").exists()


def test_stale_sockets_are_replaced() -> None:
    root = Path(tempfile.mkdtemp(prefix="fd-", dir="/tmp"))
    try:
        kwargs: dict[str, Any] = {"plugin_dir": root / "p", "registry_dir": root / "r", "cdi_dir": root / "c"}
        first = KubeletPlugin(NPU, "npu-0", lookup, **kwargs)
        first.dra_socket.parent.mkdir(parents=True)
        first.dra_socket.write_text("stale")  # a previous run's leftover
        with (
            KubeletPlugin(NPU, "npu-0", lookup, **kwargs) as p,
            grpc.insecure_channel(f"unix://{p.registration_socket}") as ch,
        ):
            info = reg_grpc.RegistrationStub(ch).GetInfo(reg.InfoRequest(), timeout=5)
            assert info.name == "npu.fake.kthena-conformance.io"
    finally:
        shutil.rmtree(root, ignore_errors=True)


def test_socket_path_too_long_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="too long"):
        KubeletPlugin(GPU, NODE, lookup, plugin_dir=tmp_path / ("x" * 120), registry_dir=tmp_path, cdi_dir=tmp_path)


@pytest.mark.parametrize(
    ("registry", "driver", "expected"),
    [
        (
            "/var/lib/kubelet/plugins_registry",
            "gpu.fake.kthena-conformance.io",
            "gpu.fake.kthena-conformance.io-reg.sock",
        ),
        # a deep real-node directory (CI: 107 bytes with the driver's name, which gRPC refuses)
        (
            "/tmp/kthena-rn-bf1d038b67/accel-gpu-real-0/kubelet/plugins_registry",
            "gpu.fake.kthena-conformance.io",
            "gpu-" + hashlib.sha256(b"gpu.fake.kthena-conformance.io").hexdigest()[:8] + "-reg.sock",
        ),
    ],
)
def test_the_registration_socket_fits_grpc(registry: str, driver: str, expected: str) -> None:
    from fake_devices.kubeletplugin.server import MAX_SOCKET_PATH, registration_socket

    path = registration_socket(Path(registry), driver)
    assert path.name == expected
    assert len(str(path).encode()) <= MAX_SOCKET_PATH
