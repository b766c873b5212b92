"""The two driver shapes: devices per node, label values, DeviceClasses, environment names."""

from __future__ import annotations

import re

import pytest

from fake_devices.drivers import DRIVERS, GPU, MAX_DEVICES, NPU, DriverShape, get_driver, parse_count

GPU_UUID = re.compile(r"^gpu-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")


@pytest.mark.parametrize(
    ("value", "count", "problem"),
    [
        pytest.param(None, 0, None, id="no-label"),
        pytest.param("0", 0, None, id="zero"),
        pytest.param("4", 4, None, id="four"),
        pytest.param("007", 7, None, id="leading-zeros"),
        pytest.param(str(MAX_DEVICES), MAX_DEVICES, None, id="max"),
        pytest.param(str(MAX_DEVICES + 1), None, "more than one ResourceSlice holds", id="one-too-many"),
        pytest.param("999999", None, "more than one ResourceSlice holds", id="huge"),
        pytest.param("99999999999999999999", None, "not a non-negative decimal integer", id="absurd"),
        pytest.param("-1", None, "not a non-negative decimal integer", id="negative"),
        pytest.param("four", None, "not a non-negative decimal integer", id="word"),
        pytest.param("", None, "not a non-negative decimal integer", id="empty"),
        pytest.param("1e3", None, "not a non-negative decimal integer", id="float-syntax"),
        pytest.param("4.0", None, "not a non-negative decimal integer", id="decimal"),
        pytest.param(" 4", None, "not a non-negative decimal integer", id="space"),
        pytest.param("٤", None, "not a non-negative decimal integer", id="non-ascii-digit"),
    ],
)
def test_parse_count(value: str | None, count: int | None, problem: str | None) -> None:
    got_count, got_problem = parse_count(value)
    assert got_count == count
    if problem is None:
        assert got_problem is None
    else:
        assert got_problem is not None and problem in got_problem


@pytest.mark.parametrize(
    ("shape", "count", "names"),
    [
        pytest.param(GPU, 0, [], id="gpu-none"),
        pytest.param(GPU, 1, ["gpu-0"], id="gpu-one"),
        pytest.param(GPU, 4, ["gpu-0", "gpu-1", "gpu-2", "gpu-3"], id="gpu-four"),
        pytest.param(NPU, 2, ["npu-0-0", "npu-1-0"], id="npu-two"),
        pytest.param(NPU, 8, [f"npu-{i}-0" for i in range(8)], id="npu-eight"),
    ],
)
def test_device_names(shape: DriverShape, count: int, names: list[str]) -> None:
    assert [d["name"] for d in shape.devices("node-a", count)] == names


def test_gpu_device_has_the_example_driver_shape() -> None:
    dev = GPU.devices("gpu-node", 3)[2]
    attrs = dev["attributes"]
    assert set(attrs) == {"index", "uuid", "model", "driverVersion"}
    assert attrs["index"] == {"int": 2}
    assert GPU_UUID.match(attrs["uuid"]["string"])
    assert attrs["model"] == {"string": "LATEST-GPU-MODEL"}
    assert attrs["driverVersion"] == {"version": "1.0.0"}
    assert dev["capacity"] == {"memory": {"value": "80Gi"}}


def test_npu_device_has_the_ascend_driver_shape() -> None:
    dev = NPU.devices("npu-node", 4)[3]
    attrs = dev["attributes"]
    assert set(attrs) == {"index", "physicalID", "uuid", "model", "productName", "brand", "type", "cores", "memory"}
    assert attrs["index"] == {"int": 3}
    assert attrs["physicalID"] == {"int": 3}
    assert attrs["uuid"] == {"string": "npu-node-3"}
    assert attrs["brand"] == {"string": "Huawei"}
    assert attrs["type"] == {"string": "NPU"}
    assert attrs["model"] == attrs["productName"]
    assert isinstance(attrs["cores"]["int"], int) and isinstance(attrs["memory"]["int"], int)


@pytest.mark.parametrize("shape", [GPU, NPU], ids=["gpu", "npu"])
def test_uuids_are_deterministic_and_unique(shape: DriverShape) -> None:
    def uuids(node: str) -> list[str]:
        return [d["attributes"]["uuid"]["string"] for d in shape.devices(node, 16)]

    assert uuids("node-a") == uuids("node-a")
    everything = uuids("node-a") + uuids("node-b")
    assert len(set(everything)) == len(everything)


@pytest.mark.parametrize("shape", [GPU, NPU], ids=["gpu", "npu"])
def test_device_class_selects_the_driver(shape: DriverShape) -> None:
    dc = shape.device_class()
    driver = shape.driver
    assert dc["apiVersion"] == "resource.k8s.io/v1"
    assert dc["kind"] == "DeviceClass"
    assert dc["metadata"]["name"] == driver
    assert dc["spec"]["selectors"] == [{"cel": {"expression": f'device.driver == "{driver}"'}}]


@pytest.mark.parametrize(
    ("shape", "device", "env"),
    [
        pytest.param(GPU, "gpu-0", "GPU_DEVICE_0", id="gpu-0"),
        pytest.param(GPU, "gpu-17", "GPU_DEVICE_17", id="gpu-17"),
        pytest.param(NPU, "npu-3-0", "NPU_DEVICE_3_0", id="npu-3-0"),
    ],
)
def test_env_name(shape: DriverShape, device: str, env: str) -> None:
    assert shape.env_name(device) == env


def test_labels_and_lookup() -> None:
    assert GPU.count_label == "gpu.fake.kthena-conformance.io/device-count"
    assert NPU.count_label == "npu.fake.kthena-conformance.io/device-count"
    assert get_driver("gpu") is GPU and set(DRIVERS) == {"gpu", "npu"}
    with pytest.raises(ValueError, match="unknown driver 'tpu'"):
        get_driver("tpu")
