"""The two fake drivers as data: which devices a node has, and the DeviceClass that selects them.

Both fakes publish under a domain this project owns (``*.fake.kthena-conformance.io``), a name no
real driver uses, so a run can never certify a vendor's capability file (which names the vendor's
driver) with a fake, nor a fake be mistaken for the driver it is shaped like.

GPU (``gpu.fake.kthena-conformance.io``), shaped like kubernetes-sigs/dra-example-driver (whose
real name is ``gpu.example.com``): devices ``gpu-0`` .. ``gpu-<N-1>`` with attributes ``index``
(int), ``uuid`` (``gpu-<uuid>``), ``model`` and ``driverVersion`` (a semantic version), and
capacity ``memory`` (80Gi).

NPU (``npu.fake.kthena-conformance.io``), shaped like the Ascend DRA driver
(Project-HAMi/ascend-dra-driver, whose real driver name is ``ascend.project-hami.io``): devices
``npu-<i>-<j>`` where ``i`` is the chip's logical index and ``j`` the vNPU slot, always ``0`` here
because the fake publishes whole chips only (the real driver's full-card mode). Attributes, with
the real driver's unqualified names: ``index`` and ``physicalID`` (int), ``uuid``
(``<node>-<index>``, the real driver's format), ``model`` and ``productName`` (the chip type),
``brand`` (``Huawei``), ``type`` (``NPU``), ``cores`` (AI cores, int) and ``memory`` (GiB, int).

A node serves a driver when it carries the driver's count label, ``<driver>/device-count``
(``gpu.fake.kthena-conformance.io/device-count: "4"``); the value is the number of devices (GPUs or
NPU chips). :func:`parse_count` says what a value means; anything but a plain decimal integer from 0 to
:data:`MAX_DEVICES` is rejected (and the node publishes nothing).

Everything here is pure and deterministic: the same node name and index always give the same
uuid, so a recreated slice is identical to the one it replaces.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

# A ResourceSlice holds at most 128 devices (resource.k8s.io/v1 ResourceSliceMaxDevices); the
# fake publishes one slice per node, so a node has at most that many devices of one driver.
MAX_DEVICES = 128
MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"
MANAGED_BY = "fake-devices"
# Fixed namespace for the uuids (uuid5 of "fake-devices.kthena.io" in the DNS namespace).
_UUID_NAMESPACE = uuid.uuid5(uuid.NAMESPACE_DNS, "fake-devices.kthena.io")
_COUNT = re.compile(r"^[0-9]{1,6}$")

Device = dict[str, Any]


@dataclass(frozen=True)
class DriverShape:
    """One fake driver: its names and how it makes a node's devices."""

    key: str  # "gpu" or "npu": the CLI's --driver value
    driver: str  # the DRA driver name (ResourceSlice spec.driver, DeviceClass selector)
    cdi_class: str  # the CDI device class: CDI kind is "<driver>/<cdi_class>"
    env_prefix: str  # GPU_DEVICE_0=gpu-0, NPU_DEVICE_3_0=npu-3-0
    make_device: Callable[[str, int], Device]

    @property
    def count_label(self) -> str:
        """The node label whose value is the node's device count."""
        return f"{self.driver}/device-count"

    @property
    def device_class_name(self) -> str:
        return self.driver

    @property
    def cdi_kind(self) -> str:
        return f"{self.driver}/{self.cdi_class}"

    def devices(self, node: str, count: int) -> list[Device]:
        """The devices of ``node`` (``count`` of them), in index order."""
        return [self.make_device(node, i) for i in range(count)]

    def device_class(self, faults: frozenset[str] = frozenset()) -> dict[str, Any]:
        """The DeviceClass (resource.k8s.io/v1) that selects every device of this driver.

        ``faults`` (self-validation only, see :data:`FAULTS`): ``device-class-first-device-only``
        narrows the selector to each node's device of index 0."""
        expression = f'device.driver == "{self.driver}"'
        if "device-class-first-device-only" in faults:
            expression += f' && device.attributes["{self.driver}"].index == 0'
        return {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceClass",
            "metadata": {"name": self.device_class_name, "labels": {MANAGED_BY_LABEL: MANAGED_BY}},
            "spec": {"selectors": [{"cel": {"expression": expression}}]},
        }

    def env_name(self, device_name: str) -> str:
        """The environment variable a container gets for ``device_name`` (``gpu-0`` ->
        ``GPU_DEVICE_0``, ``npu-3-0`` -> ``NPU_DEVICE_3_0``)."""
        suffix = device_name.removeprefix(f"{self.key}-")
        return f"{self.env_prefix}_{re.sub(r'[^A-Za-z0-9]', '_', suffix).upper()}"


def device_uuid(node: str, kind: str, index: int) -> str:
    """A stable uuid for device ``index`` of ``kind`` on ``node``."""
    return str(uuid.uuid5(_UUID_NAMESPACE, f"{node}/{kind}/{index}"))


def gpu_device(node: str, index: int) -> Device:
    return {
        "name": f"gpu-{index}",
        "attributes": {
            "index": {"int": index},
            "uuid": {"string": f"gpu-{device_uuid(node, 'gpu', index)}"},
            "model": {"string": "LATEST-GPU-MODEL"},
            "driverVersion": {"version": "1.0.0"},
        },
        "capacity": {"memory": {"value": "80Gi"}},
    }


NPU_MODEL = "Ascend910B3"
NPU_AI_CORES = 20
NPU_MEMORY_GIB = 64


def npu_device(node: str, index: int) -> Device:
    return {
        "name": f"npu-{index}-0",
        "attributes": {
            "index": {"int": index},
            "physicalID": {"int": index},
            "uuid": {"string": f"{node}-{index}"},
            "model": {"string": NPU_MODEL},
            "productName": {"string": NPU_MODEL},
            "brand": {"string": "Huawei"},
            "type": {"string": "NPU"},
            "cores": {"int": NPU_AI_CORES},
            "memory": {"int": NPU_MEMORY_GIB},
        },
    }


FAKE_DOMAIN = "fake.kthena-conformance.io"
"""The domain of the fake drivers' names: owned by this project, used by no real driver."""
GPU = DriverShape(
    key="gpu", driver=f"gpu.{FAKE_DOMAIN}", cdi_class="gpu", env_prefix="GPU_DEVICE", make_device=gpu_device
)
NPU = DriverShape(
    key="npu", driver=f"npu.{FAKE_DOMAIN}", cdi_class="npu", env_prefix="NPU_DEVICE", make_device=npu_device
)
DRIVERS: dict[str, DriverShape] = {GPU.key: GPU, NPU.key: NPU}


def get_driver(key: str) -> DriverShape:
    try:
        return DRIVERS[key]
    except KeyError:
        raise ValueError(f"unknown driver {key!r}: choose one of {', '.join(DRIVERS)}") from None


def device_classes(keys: Iterable[str], faults: frozenset[str] = frozenset()) -> list[dict[str, Any]]:
    """The DeviceClasses of the drivers ``keys``, which whoever installs the drivers creates.

    ``faults`` (self-validation only, see :data:`FAULTS`): ``device-class-missing`` gives none."""
    if "device-class-missing" in faults:
        return []
    return [get_driver(key).device_class(faults) for key in keys]


# Self-validation only: deliberately broken variants of the fake drivers, so the conformance suite's
# Accelerators profile can be shown to fail on the right behaviour. Switched on for a publisher with
# ``--fault NAME`` or the environment variable (comma-separated names); never on by default.
FAULT_ENV = "FAKE_DEVICES_FAULT"
FAULTS: dict[str, str] = {
    "device-count-off-by-one": "every served node publishes one device fewer than its count label asks for",
    "cdi-env-next-device": (
        "the kubelet plugin's CDI spec gives a container the variables of the next device (index + 1), not of the "
        "device allocated"
    ),
    "device-class-missing": (
        "the driver installs no DeviceClass: the DeviceClasses its capability file declares do not exist in the cluster"
    ),
    "model-attribute-dropped": (
        "every published device lacks its model attribute, which the capability file declares at level MUST"
    ),
    "device-class-first-device-only": (
        "the DeviceClass selects only each node's device of index 0, so at most one device per node can be "
        "allocated: claims for several devices on a node, or for more devices than there are nodes, stay unsatisfied"
    ),
    "spare-device-published": (
        "every served node also publishes one device (<kind>-spare) its capability file does not declare and the "
        "DeviceClass still selects: a node has one allocatable device more than it declares"
    ),
}


def parse_faults(value: str | None) -> frozenset[str]:
    """The fault names in ``value`` (comma-separated); ValueError naming an unknown one."""
    names = frozenset(n.strip() for n in (value or "").split(",") if n.strip())
    unknown = sorted(names - FAULTS.keys())
    if unknown:
        raise ValueError(f"unknown fault(s) {', '.join(unknown)} (known: {', '.join(FAULTS)})")
    return names


def parse_count(value: str | None) -> tuple[int | None, str | None]:
    """The device count a label value asks for, or the reason it is rejected.

    ``None`` (no label) is 0 devices. A plain decimal integer from 0 to :data:`MAX_DEVICES` is the
    count; anything else (``"four"``, ``"-1"``, ``"1e3"``, ``" 4"``, ``"100000"``) is rejected with
    a reason, so the caller can log it and publish nothing for that node.
    """
    if value is None:
        return 0, None
    if not _COUNT.match(value):
        return None, f"{value!r} is not a non-negative decimal integer"
    count = int(value)
    if count > MAX_DEVICES:
        return None, f"{count} devices is more than one ResourceSlice holds ({MAX_DEVICES})"
    return count, None
