"""CDI spec files: content, atomic idempotent writes, removal."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fake_devices.drivers import GPU, NPU, DriverShape
from fake_devices.kubeletplugin import cdi

UID = "0b5f3c2e-1111-2222-3333-444455556666"


@pytest.mark.parametrize(
    ("shape", "devices", "kind", "envs"),
    [
        pytest.param(GPU, ["gpu-0"], "gpu.fake.kthena-conformance.io/gpu", [["GPU_DEVICE_0=gpu-0"]], id="one-gpu"),
        pytest.param(
            GPU,
            ["gpu-1", "gpu-3"],
            "gpu.fake.kthena-conformance.io/gpu",
            [["GPU_DEVICE_1=gpu-1"], ["GPU_DEVICE_3=gpu-3"]],
            id="two-gpus",
        ),
        pytest.param(
            NPU,
            ["npu-2-0"],
            "npu.fake.kthena-conformance.io/npu",
            [["NPU_DEVICE_2_0=npu-2-0", "ASCEND_VISIBLE_DEVICES=2"]],
            id="one-npu",
        ),
    ],
)
def test_cdi_spec(shape: DriverShape, devices: list[str], kind: str, envs: list[list[str]]) -> None:
    spec = cdi.cdi_spec(shape, UID, devices)
    assert spec["cdiVersion"] == cdi.CDI_VERSION
    assert spec["kind"] == kind
    assert [d["name"] for d in spec["devices"]] == [f"{UID}-{d}" for d in devices]
    assert [d["containerEdits"]["env"] for d in spec["devices"]] == envs
    assert cdi.cdi_id(shape, UID, devices[0]) == f"{kind}={UID}-{devices[0]}"


def test_write_is_atomic_and_idempotent(tmp_path: Path) -> None:
    cdi_dir = tmp_path / "cdi"
    path = cdi.write_spec(cdi_dir, GPU, UID, ["gpu-0", "gpu-1"])
    assert path == cdi_dir / f"gpu.fake.kthena-conformance.io-{UID}.json"
    first = path.read_text()
    assert json.loads(first) == cdi.cdi_spec(GPU, UID, ["gpu-0", "gpu-1"])
    assert cdi.write_spec(cdi_dir, GPU, UID, ["gpu-0", "gpu-1"]) == path
    assert path.read_text() == first
    assert sorted(p.name for p in cdi_dir.iterdir()) == [path.name]  # no temporary file left
    assert path.stat().st_mode & 0o777 == 0o644


def test_specs_of_different_claims_and_drivers_do_not_collide(tmp_path: Path) -> None:
    a = cdi.write_spec(tmp_path, GPU, "uid-a", ["gpu-0"])
    b = cdi.write_spec(tmp_path, GPU, "uid-b", ["gpu-1"])
    c = cdi.write_spec(tmp_path, NPU, "uid-a", ["npu-0-0"])
    assert len({a, b, c}) == 3


def test_remove(tmp_path: Path) -> None:
    path = cdi.write_spec(tmp_path, NPU, UID, ["npu-0-0"])
    assert cdi.remove_spec(tmp_path, NPU, UID) is True
    assert not path.exists()
    assert cdi.remove_spec(tmp_path, NPU, UID) is False  # idempotent


@pytest.mark.parametrize(
    ("shape", "device", "env"),
    [
        pytest.param(GPU, "gpu-0", ["GPU_DEVICE_1=gpu-1"], id="gpu"),
        pytest.param(NPU, "npu-3-0", ["NPU_DEVICE_4_0=npu-4-0", "ASCEND_VISIBLE_DEVICES=4"], id="npu"),
    ],
)
def test_the_next_device_fault_exposes_another_device(shape: DriverShape, device: str, env: list[str]) -> None:
    (entry,) = cdi.cdi_spec(shape, "uid", [device], next_device_env=True)["devices"]
    assert entry["name"] == f"uid-{device}", "the CDI device is still the allocated one"
    assert entry["containerEdits"]["env"] == env
