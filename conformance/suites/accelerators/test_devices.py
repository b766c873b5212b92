"""Accelerators: the driver publishes what its capability file declares (DeviceClasses, devices per
node, attributes). Read-only, so these share the cluster with other tests. What the driver
publishes is driver certification (feature DriverCertification), not ModelServing conformance."""

from __future__ import annotations

from typing import Any

import pytest

from conformance.framework.capabilities import Capabilities, check_device_classes, check_devices, inventory
from conformance.framework.catalog import behaviour
from conformance.framework.features import Feature
from conformance.framework.timeouts import Timeouts
from conformance.framework.waits import WaitTimeout, wait_for

from .devices import DRIVER_SPEC, Verdicts, device_class_names, evidence_dir, nodes, seconds, slices

ID_CLASSES = "accelerators/device-class/exists"
ID_COUNT = "accelerators/resource-slices/device-count"
ID_ATTRIBUTES = "accelerators/resource-slices/attributes"


@behaviour(
    ID_CLASSES,
    "Every DeviceClass the capability file declares MUST exist in the cluster (SHOULD-level classes are warnings).",
    DRIVER_SPEC,
    Feature.DRIVER_CERTIFICATION,
)
def test_device_classes_exist(
    kube: Any, capabilities: list[Capabilities], suite: Any, request: pytest.FixtureRequest
) -> None:
    verdicts = Verdicts(request, evidence_dir(suite, ID_CLASSES))
    existing = device_class_names(kube)
    for caps in capabilities:
        verdicts.add_findings(check_device_classes(caps, existing))
    verdicts.notes.append(f"DeviceClasses in the cluster: {', '.join(sorted(existing)) or 'none'}")
    verdicts.finish()


def _published(kube: Any, capabilities: list[Capabilities], check: str, timeouts: Timeouts) -> tuple[list[Any], Any]:
    """The findings of ``check`` once the drivers' slices settle (no MUST finding left, or the
    wait's end: a driver may still be publishing when the run starts), and what was read."""

    def probe() -> tuple[list[Any], dict[str, Any]]:
        seen_nodes, seen_slices = nodes(kube), slices(kube)
        found = [f for caps in capabilities for f in check_devices(caps, seen_nodes, seen_slices) if f.check == check]
        return found, {"nodes": seen_nodes, "slices": seen_slices}

    try:
        return wait_for(
            f"the drivers' ResourceSlices to match the capability files ({check})",
            probe,
            until=lambda r: not any(f.level == "MUST" for f in r[0]),
            timeout=seconds(timeouts, "devices-published", "status-updated"),
            interval=1.0,
        )
    except WaitTimeout:
        return probe()


def _inventory_summary(capabilities: list[Capabilities], seen: dict[str, Any]) -> dict[str, Any]:
    return {
        caps.driver: {
            node: {"pools": sorted(entry.pools), "devices": [str(d.get("name")) for _, d in entry.devices]}
            for node, entry in sorted(inventory(caps.driver, seen["slices"]).items())
        }
        for caps in capabilities
    }


@behaviour(
    ID_COUNT,
    "Every node matching a DeviceClass's selector MUST publish a ResourceSlice pool of its own with the declared "
    "number of devices, and at least minNodes nodes MUST match.",
    DRIVER_SPEC,
    Feature.DRIVER_CERTIFICATION,
)
def test_every_selected_node_publishes_the_declared_devices(
    kube: Any, capabilities: list[Capabilities], suite: Any, timeouts: Timeouts, request: pytest.FixtureRequest
) -> None:
    verdicts = Verdicts(request, evidence_dir(suite, ID_COUNT))
    findings, seen = _published(kube, capabilities, "nodes", timeouts)
    verdicts.add_findings(findings)
    summary = _inventory_summary(capabilities, seen)
    verdicts.evidence("devices-per-node.yaml", summary)
    counts = []
    for driver, per in summary.items():
        shown = ", ".join(f"{n}={len(v['devices'])}" for n, v in per.items())
        counts.append(f"{driver}: {shown or 'no node'}")
    verdicts.notes.append("devices per node: " + "; ".join(counts))
    verdicts.finish()


@behaviour(
    ID_ATTRIBUTES,
    "Every device of a declared DeviceClass on a selected node MUST carry each MUST-level attribute and capacity "
    "with the declared type and constraints (SHOULD-level ones are warnings).",
    DRIVER_SPEC,
    Feature.DRIVER_CERTIFICATION,
)
def test_devices_carry_the_declared_attributes(
    kube: Any, capabilities: list[Capabilities], suite: Any, timeouts: Timeouts, request: pytest.FixtureRequest
) -> None:
    verdicts = Verdicts(request, evidence_dir(suite, ID_ATTRIBUTES))
    findings, seen = _published(kube, capabilities, "attributes", timeouts)
    verdicts.add_findings(findings)
    checked = sum(len(cls.attributes) for caps in capabilities for cls in caps.device_classes)
    verdicts.notes.append(f"{checked} declared attribute(s) checked on every selected device")
    if findings:
        verdicts.evidence("slices.yaml", seen["slices"])
    verdicts.finish()
