"""The fake drivers' self-validation faults: each changes exactly what it names, and only it.

Each row of :data:`CASES` is one fault of :data:`fake_devices.drivers.FAULTS` with a probe: what the
conformance suite observes of the broken behaviour (the capability file's checks on the published
slices, the DeviceClasses installed, a class's selector, a prepared claim's environment). The probe
must give ``off`` with no fault, ``on`` with the fault, and ``off`` under every other fault (the
rule ``tests/unit/kthena_ref/test_faults.py`` applies to the reference controller's faults).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest

from conformance.framework.capabilities import Capabilities, check_devices, load_capabilities
from fake_devices import capability_files
from fake_devices.drivers import FAULTS, GPU, NPU, DriverShape, device_classes
from fake_devices.kubeletplugin import cdi
from fake_devices.publisher import plan

Faults = frozenset[str]
SHAPES = {GPU.driver: GPU, NPU.driver: NPU}


def _capabilities() -> list[Capabilities]:
    return [load_capabilities(path) for path in capability_files()]


def _published(caps: Capabilities, faults: Faults) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Two nodes labelled as the capability file's first class selects, and the slices the publisher makes."""
    shape = SHAPES[caps.driver]
    labels = dict(caps.device_classes[0].nodes.selector)
    nodes = [{"metadata": {"name": f"{shape.key}-{i}", "uid": f"uid-{i}", "labels": labels}} for i in range(2)]
    return nodes, plan(shape, nodes, [], faults).creates


def _must_findings(check: str) -> Callable[[Faults], list[tuple[str, str]]]:
    """The MUST findings of the suite's ``check`` (nodes: device count; attributes) on both fake drivers."""

    def probe(faults: Faults) -> list[tuple[str, str]]:
        found = []
        for caps in _capabilities():
            nodes, slices = _published(caps, faults)
            found += [
                (f.subject, f.message)
                for f in check_devices(caps, nodes, slices)
                if f.check == check and f.level == "MUST"
            ]
        return sorted(found)

    return probe


def probe_device_classes(faults: Faults) -> list[str]:
    """The DeviceClasses the harness (or ``fake-devices device-classes``) installs."""
    return [dc["metadata"]["name"] for dc in device_classes(["gpu", "npu"], faults)]


def probe_selectors(faults: Faults) -> list[str]:
    """Each driver's DeviceClass CEL selectors."""
    return [s["cel"]["expression"] for shape in (GPU, NPU) for s in shape.device_class(faults)["spec"]["selectors"]]


def probe_undeclared_devices(faults: Faults) -> list[str]:
    """The devices the publisher puts on a node that the class's deviceNamePattern does not declare
    (the DeviceClass selects every device of its driver, so these are allocatable all the same)."""
    out = []
    for caps in _capabilities():
        pattern = re.compile(caps.device_classes[0].device_name_pattern or "")
        _, slices = _published(caps, faults)
        out += [d["name"] for s in slices for d in s["spec"]["devices"] if not pattern.match(d["name"])]
    return sorted(out)


def probe_cdi_env(faults: Faults) -> list[str]:
    """The environment a prepared claim of gpu-0 gives a container (as the kubelet plugin writes it)."""
    (entry,) = cdi.cdi_spec(GPU, "uid", ["gpu-0"], next_device_env="cdi-env-next-device" in faults)["devices"]
    return list(entry["containerEdits"]["env"])


CASES: list[tuple[str, Callable[[Faults], Any], Any, Callable[[Any], bool], tuple[str, ...]]] = [
    # (fault, probe, off, on (a predicate of the probe's output), overlaps)
    ("device-count-off-by-one", _must_findings("nodes"), [], lambda got: len(got) > 0, ()),
    (
        "model-attribute-dropped",
        _must_findings("attributes"),
        [],
        lambda got: len(got) == 2 and all("model" in subject for subject, _ in got),
        (),
    ),
    (
        "device-class-missing",
        probe_device_classes,
        ["gpu.fake.kthena-conformance.io", "npu.fake.kthena-conformance.io"],
        lambda got: got == [],
        (),
    ),
    (
        "device-class-first-device-only",
        probe_selectors,
        ['device.driver == "gpu.fake.kthena-conformance.io"', 'device.driver == "npu.fake.kthena-conformance.io"'],
        lambda got: (
            got
            == [
                'device.driver == "gpu.fake.kthena-conformance.io" && device.attributes["gpu.fake.kthena-conformance.io"].index == 0',
                'device.driver == "npu.fake.kthena-conformance.io" && device.attributes["npu.fake.kthena-conformance.io"].index == 0',
            ]
        ),
        (),
    ),
    (
        "spare-device-published",
        probe_undeclared_devices,
        [],
        lambda got: got == ["gpu-spare", "gpu-spare", "npu-spare", "npu-spare"],
        (),
    ),
    ("cdi-env-next-device", probe_cdi_env, ["GPU_DEVICE_0=gpu-0"], lambda got: got == ["GPU_DEVICE_1=gpu-1"], ()),
]
IDS = [case[0] for case in CASES]


def test_every_fault_has_exactly_one_case() -> None:
    assert sorted(IDS) == sorted(FAULTS)


@pytest.mark.parametrize(("fault", "probe", "off", "on", "overlaps"), CASES, ids=IDS)
def test_the_fault_changes_its_behaviour(
    fault: str, probe: Callable[[Faults], Any], off: Any, on: Callable[[Any], bool], overlaps: tuple[str, ...]
) -> None:
    assert probe(frozenset()) == off
    got = probe(frozenset({fault}))
    assert got != off and on(got), got


@pytest.mark.parametrize(("fault", "probe", "off", "on", "overlaps"), CASES, ids=IDS)
def test_no_other_fault_changes_the_behaviour(
    fault: str, probe: Callable[[Faults], Any], off: Any, on: Callable[[Any], bool], overlaps: tuple[str, ...]
) -> None:
    changed = {other: probe(frozenset({other})) for other in FAULTS if other != fault and other not in overlaps}
    assert {k: v for k, v in changed.items() if v != off} == {}


@pytest.mark.parametrize("shape", [GPU, NPU], ids=["gpu", "npu"])
def test_the_spare_device_is_a_device_of_the_driver_like_the_others(shape: DriverShape) -> None:
    """The spare device carries what a declared device carries (so the attribute checks would pass
    on it), and the publisher keeps it stable: a second round plans no update."""
    nodes = [{"metadata": {"name": "n", "uid": "u", "labels": {shape.count_label: "2"}}}]
    faults = frozenset({"spare-device-published"})
    (created,) = plan(shape, nodes, [], faults).creates
    *declared, spare = created["spec"]["devices"]
    assert [d["name"] for d in declared] == [d["name"] for d in shape.devices("n", 2)]
    assert spare["name"] == f"{shape.key}-spare" and spare["attributes"].keys() == declared[0]["attributes"].keys()
    assert plan(shape, nodes, [created], faults).empty
