"""The Accelerators profile's self-validation and bad input (the fake drivers passing every
Accelerators behaviour is part of the control run, tests/integration/test_conformance_suite.py).

1. Self-validation: ``--fake-devices`` with ``FAKE_DEVICES_FAULT=device-count-off-by-one`` (every
   node publishes one device fewer than its label says): the device-count behaviour is
   non-conformant, the others of its kind pass, and the profile fails.
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
CAUGHT_BY = {"device-count-off-by-one": ["accelerators/resource-slices/device-count"]}


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
    assert "publishes 3 device(s) of DeviceClass gpu.example.com" in count["message"], count["message"]
    assert "publishes 7 device(s) of DeviceClass npu.example.com" in count["message"], count["message"]
    assert found["accelerators/device-class/exists"] == "passed"
    assert found["accelerators/resource-slices/attributes"] == "passed"
    assert data["accelerators"]["faults"] == ["device-count-off-by-one"]
    assert data["profiles"][0]["verdict"] == "failure" and data["exitCode"] == 1
    assert report.verify(tmp_path / "conformance-report.json", digest=catalog.suite_digest()) == []


@pytest.mark.parametrize(
    ("options", "message"),
    [
        pytest.param(
            {"capabilities": ["MALFORMED"]}, "deviceClasses: list should have at least 1 item", id="malformed"
        ),
        pytest.param({"fake_devices": False}, "the Accelerators profile certifies a DRA driver", id="no-file"),
        pytest.param({"capabilities": ["NVIDIA"]}, "cannot run on the embedded (local) cluster", id="real-driver"),
        pytest.param({"fake_device_faults": ["melt"]}, "unknown fault(s) melt", id="unknown-fault"),
    ],
)
def test_bad_input_is_refused_before_any_cluster(tmp_path: Path, options: dict[str, Any], message: str) -> None:
    files = {
        "MALFORMED": {"apiVersion": "conformance.kthena.io/capabilities/v1", "kind": "AcceleratorCapabilities",
                      "vendor": "x", "driver": "gpu.example.com", "deviceClasses": []},
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
