"""The Accelerators profile's self-validation and bad input (the fake drivers passing every
Accelerators behaviour is part of the control run, tests/integration/test_conformance_suite.py).

1. Self-validation: ``--fake-devices`` with ``FAKE_DEVICES_FAULT=device-count-off-by-one`` (every
   node publishes one device fewer than its label says): the device-count behaviour is
   non-conformant, the others of its kind pass, and the profile fails. Every other fault of the
   publisher and the DeviceClasses (:data:`CAUGHT_BY`), and the reference controller's faults only
   an Accelerators run shows (:data:`REFERENCE_CAUGHT_BY`), run as variants the way
   test_self_validation.py runs its own: every target non-conformant, a record in
   reports/self-validation/.
2. Bad input: a malformed capability file, an Accelerators run without one, and a non-fake driver
   on the embedded cluster are refused before any cluster starts (exit 2, one clear message).

The broken run starts its own cluster (the fault is read by the publishers when they start), so
the module runs in the pass where tests start clusters of their own.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
import yaml

from conformance.cluster.local.provider import LocalProvider
from conformance.framework import catalog, report
from conformance.runner import EXIT_USAGE, RunOptions, fake_capability_files, run
from fake_devices.drivers import FAULTS as DEVICE_FAULTS
from kthena_ref.faults import FAULTS
from tests.integration.kept_runs import WAIT_OVERRIDES
from tests.integration.variant_records import judge_variant

pytestmark = [pytest.mark.serial, pytest.mark.own_controller, pytest.mark.slow]


def accelerators(tmp: Path, cluster: str, **options: Any) -> dict[str, Any]:
    try:
        result = run(
            RunOptions(
                report_dir=tmp,
                profiles=["Accelerators"],
                fake_devices=True,
                keep_cluster=True,
                cluster_name=cluster,
                cluster_owner_pid=os.getpid(),
                workers=1,
                **options,
            )
        )
        status = LocalProvider().status(cluster) or {}
        result.report["_alive"] = status.get("components_alive", {})
        return result.report
    finally:
        LocalProvider().down(cluster)


def outcomes(data: dict[str, Any]) -> dict[str, str]:
    return {t["id"]: t["outcome"] for t in data["tests"]}


# the publisher's faults -> the behaviours that catch them (the kubelet plugin's: test_real_node_variants.py)
CAUGHT_BY: dict[str, list[str]] = {
    "device-count-off-by-one": ["accelerators/resource-slices/device-count"],
    "device-class-missing": ["accelerators/device-class/exists"],
    "model-attribute-dropped": ["accelerators/resource-slices/attributes"],
    # one allocatable device per node: the 2-device claim, the 4 Pods of one-device-per-pod and the Pods asking
    # for every free device stay Pending (what frees the devices is kube-controller-manager's, not the driver's)
    "device-class-first-device-only": [
        "accelerators/scheduling/multi-device-claim",
        "accelerators/scheduling/devices-freed",
        "accelerators/scheduling/exclusive-devices",
        "accelerators/scheduling/one-device-per-pod",
    ],
    # a node has one device more than it declares: the Pod past the free devices and the claim past the most on a
    # node both get a device
    "spare-device-published": [
        "accelerators/scheduling/exclusive-devices",
        "accelerators/scheduling/unsatisfiable-claim-pending",
    ],
}
# The reference controller's faults only an Accelerators run shows: they need the device node pools and the fake
# drivers, a cluster of their own (self-validation's kept cluster has neither), so their variants run here.
REFERENCE_CAUGHT_BY: dict[str, list[str]] = {
    "resource-claims-dropped": ["accelerators/scheduling/one-device-per-pod"],
}


def test_the_suite_catches_a_driver_publishing_the_wrong_device_count(tmp_path: Path) -> None:
    data = accelerators(
        tmp_path,
        f"accel-broken-{os.getpid()}",
        fake_device_faults=["device-count-off-by-one"],
        ids=["accelerators/resource-slices/*", "accelerators/device-class/*"],
        timeout_scale="0.25",
    )
    found = outcomes(data)
    assert found["accelerators/resource-slices/device-count"] == "non-conformant", data["tests"]
    count = next(t for t in data["tests"] if t["id"] == "accelerators/resource-slices/device-count")
    assert "publishes 3 device(s) of DeviceClass gpu.fake.kthena-conformance.io" in count["message"], count["message"]
    assert "publishes 7 device(s) of DeviceClass npu.fake.kthena-conformance.io" in count["message"], count["message"]
    assert found["accelerators/device-class/exists"] == "passed"
    assert found["accelerators/resource-slices/attributes"] == "passed"
    assert data["accelerators"]["faults"] == ["device-count-off-by-one"]
    assert data["profiles"][0]["verdict"] == "failure" and data["exitCode"] == 1
    assert report.verify(tmp_path / "conformance-report.json", digest=catalog.suite_digest()) == []


VARIANTS = [
    *((fault, False) for fault in sorted(CAUGHT_BY) if fault != "device-count-off-by-one"),  # the test above
    *((fault, True) for fault in sorted(REFERENCE_CAUGHT_BY)),
]


@pytest.mark.parametrize(("fault", "reference"), VARIANTS, ids=[fault for fault, _ in VARIANTS])
def test_the_suite_catches_a_broken_variant(fault: str, reference: bool, tmp_path: Path) -> None:
    """Like test_self_validation.py's variants (the same waits as the control run, only the targets
    run, every target non-conformant, a record in reports/self-validation/), on a cluster of its
    own: a fake driver's fault is read when the cluster's drivers start."""
    targets = (REFERENCE_CAUGHT_BY if reference else CAUGHT_BY)[fault]
    broken = {"reference_faults": [fault]} if reference else {"fake_device_faults": [fault]}
    data = accelerators(
        tmp_path,
        f"accel-variant-{VARIANTS.index((fault, reference))}-{os.getpid()}",
        ids=targets,
        timeouts=WAIT_OVERRIDES,
        await_namespace_removal=False,
        **broken,
    )
    verdict = judge_variant(fault, (FAULTS if reference else DEVICE_FAULTS)[fault], data, targets)
    assert not verdict.missed, (
        f"fault {fault!r} was not caught by {verdict.missed}; outcomes: {verdict.outcomes}; "
        f"messages: {verdict.messages}"
    )
    assert data["verdict"] == "failure" and data["exitCode"] == 1, (data["verdict"], data["exitCode"])
    if reference:
        assert data["implementation"]["faults"] == [fault]
    else:
        assert data["accelerators"]["faults"] == [fault]


@pytest.mark.parametrize(
    ("options", "message"),
    [
        pytest.param(
            {"capabilities": ["MALFORMED"]}, "deviceClasses: list should have at least 1 item", id="malformed"
        ),
        pytest.param({"fake_devices": False}, "the Accelerators profile certifies a DRA driver", id="no-file"),
        pytest.param({"capabilities": ["NVIDIA"]}, "is not installed on the cluster a run makes", id="real-driver"),
        pytest.param({"fake_device_faults": ["melt"]}, "unknown fault(s) melt", id="unknown-fault"),
    ],
)
def test_bad_input_is_refused_before_any_cluster(tmp_path: Path, options: dict[str, Any], message: str) -> None:
    files = {
        "MALFORMED": {"apiVersion": "conformance.kthena.io/capabilities/v1", "kind": "AcceleratorCapabilities",
                      "vendor": "x", "driver": "gpu.fake.kthena-conformance.io", "deviceClasses": []},
        "NVIDIA": {**yaml.safe_load(fake_capability_files()[0].read_text()), "driver": "gpu.nvidia.com"},
    }  # fmt: skip
    if "capabilities" in options:
        name = options["capabilities"][0]
        path = tmp_path / f"{name}.yaml"
        path.write_text(yaml.safe_dump(files[name]))
        options = {**options, "capabilities": [path], "fake_devices": False}
    result = run(RunOptions(report_dir=tmp_path, profiles=["Accelerators"], **{"fake_devices": True, **options}))
    assert result.exit_code == EXIT_USAGE
    assert message in result.report["error"]["message"], result.report["error"]
    assert "cluster" not in result.report
