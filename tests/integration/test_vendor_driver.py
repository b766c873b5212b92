"""The vendor recipe of docs/accelerators.md, run as a user runs it, with a driver the project builds
for the purpose: the fake GPU kubelet plugin started the vendor way, under a name of its own
(``--driver-name``), publishing its own node's devices (``--publish-devices``) as a real driver's
kubelet plugin does. Nothing in the harness knows it is the fake: it is a cluster spec's
``dra_drivers`` command like any vendor's.

One real node (marker ``serial``): ``cluster up --config`` runs the command on it and waits until
its kubelet registers it; ``cluster status`` names the node's plugin directories and the driver's
build; ``run --provider existing`` certifies it (the Accelerators profile narrowed to what a
driver alone decides, the container environment on the real node included) and the report names
the executable and its SHA-256; a capability file for a driver the cluster does not run ends the
run with one line; ``cluster down`` leaves the host as it was. Each step's time is printed
(``pytest -s``), the figures docs/accelerators.md quotes.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client

from conformance.cluster.existing import ExistingProvider
from conformance.cluster.kube import api_client
from conformance.cluster.realnode import fleet, host, images
from conformance.framework.waits import wait_for
from conformance.runner import fake_capability_files

from .conftest import isolated_cache
from .real_nodes import built_binaries, pod, running, snapshot

pytestmark = [pytest.mark.serial, pytest.mark.slow]

CLI = [sys.executable, "-m", "conformance.cli"]
DRIVER = "gpu.vendor-test.kthena-conformance.io"  # not the fakes' domain: the harness cannot tell it from a vendor's
NODE_LABEL = "vendor-test.kthena-conformance.io/gpu"
CLUSTER = "vendor"
IMAGE = "vendor.example/gpu-kubelet-plugin:1.0"  # a stand-in image: loaded, declared, run; not a driver
IMAGE_DRIVER = "gpu.image-test.kthena-conformance.io"
IDS = [
    "accelerators/device-class/exists",
    "accelerators/resource-slices/device-count",
    "accelerators/resource-slices/attributes",
    "accelerators/cdi/container-environment",
    "accelerators/scheduling/multi-device-claim",
]


@pytest.fixture
def bin_dir() -> Path:
    return built_binaries()


@pytest.fixture
def isolated(tmp_path: Path, bin_dir: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    yield from isolated_cache(tmp_path, bin_dir, monkeypatch)


def cli(*args: str, timeout: float = 600, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*CLI, *args], capture_output=True, text=True, timeout=timeout, check=False, env={**os.environ, **(env or {})}
    )


def capability_file(path: Path, driver: str) -> Path:
    """The fake GPU driver's capability file, as a vendor writes one for its driver: its name, its
    nodes (one real node, two devices), its container environment."""
    doc: dict[str, Any] = yaml.safe_load(fake_capability_files()[0].read_text())
    doc["vendor"] = "kthena-conformance (the fake GPU kubelet plugin started the vendor way)"
    doc["driver"] = driver
    (cls,) = doc["deviceClasses"]
    cls["name"] = driver
    cls["nodes"] = {"selector": {NODE_LABEL: "present"}, "devicesPerNode": 2, "minNodes": 1}
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def test_a_vendor_driver_on_a_real_node_is_certified_by_the_documented_recipe(
    isolated: Path, bin_dir: Path, tmp_path: Path
) -> None:
    timings: dict[str, float] = {}
    # The vendor's DeviceClass (its chart ships one; the fake prints its own under the name given).
    classes = subprocess.run(
        [sys.executable, "-m", "fake_devices", "device-classes", "--driver", "gpu", "--driver-name", DRIVER],
        capture_output=True, text=True, check=True, timeout=60,
    )  # fmt: skip
    (tmp_path / "deviceclass.yaml").write_text(classes.stdout)
    command = [sys.executable, "-m", "fake_devices", "kubelet-plugin", "--driver", "gpu"]
    spec = {
        "name": CLUSTER,
        "node_pools": [
            {"name": "worker", "count": 1},
            {"name": "real", "kind": "real", "count": 1, "labels": {NODE_LABEL: "present"}},
        ],
        "dra_drivers": [
            {
                "name": DRIVER,
                "command": [*command, "--driver-name", DRIVER, "--publish-devices", "2"],
                "manifests": ["deviceclass.yaml"],
            }
        ],
    }
    (tmp_path / "cluster.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    caps = capability_file(tmp_path / "vendor.yaml", DRIVER)
    absent = capability_file(tmp_path / "absent.yaml", "gpu.absent.example")
    before = snapshot(bin_dir, ["real-0"])

    started = time.monotonic()
    up = cli("cluster", "up", "--config", str(tmp_path / "cluster.yaml"))
    timings["cluster up"] = time.monotonic() - started
    try:
        assert up.returncode == 0, up.stderr
        assert f"starting the DRA drivers on the real nodes: {DRIVER}" in up.stderr, up.stderr
        kubeconfig = up.stdout.strip()
        status = yaml.safe_load(cli("cluster", "status", "--name", CLUSTER).stdout)
        node_dir = fleet.nodes_root(isolated / CLUSTER) / "real-0"
        assert status["real_node_dirs"] == {
            "real-0": {
                "plugins": str(node_dir / "kubelet" / "plugins"),
                "registry": str(node_dir / "kubelet" / "plugins_registry"),
                "cdi": str(node_dir / "cdi"),
            }
        }, status
        executable = Path(sys.executable).absolute()  # as run: a virtualenv's python is a symlink
        sha256 = hashlib.sha256(executable.read_bytes()).hexdigest()
        (record,) = status["dra_drivers"]
        assert (record["name"], record["executable"], record["sha256"], record["nodes"]) == (
            DRIVER, str(executable), sha256, ["real-0"]
        )  # fmt: skip
        assert "dra_drivers_registered" in status["timings"], status["timings"]
        # The image route's pieces: an image loaded into the real node's containerd (declared as a
        # driver's build), and a Pod of it on the real node reaching the API server through its
        # in-cluster address, as a driver's DaemonSet Pod would (no kube-proxy: the harness routes it).
        archive = tmp_path / "driver-image.tar"
        archive.write_bytes(images.build_archive(images.workload_image(images.read_busybox(), "driver"), [IMAGE]))
        started = time.monotonic()
        loaded = cli("cluster", "load-image", "--name", CLUSTER, "--driver", IMAGE_DRIVER, str(archive))
        timings["cluster load-image"] = time.monotonic() - started
        assert loaded.returncode == 0 and f"real-0: {IMAGE}@sha256:" in loaded.stderr, loaded.stderr
        declared = ExistingProvider(kubeconfig=kubeconfig).info("vendor").details["draDrivers"]
        assert [(d["name"], d.get("image"), d.get("digest", "")[:7]) for d in declared] == [
            (DRIVER, None, ""),
            (IMAGE_DRIVER, IMAGE, "sha256:"),
        ], declared
        core = client.CoreV1Api(api_client(Path(kubeconfig)))
        # a TCP connection to the Service address (busybox nc fails when it cannot connect)
        reach = "nc -w 5 $KUBERNETES_SERVICE_HOST $KUBERNETES_SERVICE_PORT </dev/null && echo reached"
        body = pod("in-cluster", "real-0", IMAGE, command=["sh", "-c", f"{reach}; sleep 3600"])
        running(core, "default", body)
        logs = wait_for(
            "the Pod on real-0 to connect to the kubernetes Service",
            lambda: core.read_namespaced_pod_log("in-cluster", "default"),
            until=lambda text: "reached" in text,
            timeout=30,
        )
        assert "reached" in logs

        started = time.monotonic()
        ids = [arg for i in IDS for arg in ("--id", i)]
        report_dir = tmp_path / "report"
        certified = cli(
            "run", "--provider", "existing", "--kubeconfig", kubeconfig, "--implementation", "reference",
            "--capabilities", str(caps), "--profile", "Accelerators", *ids, "--report-dir", str(report_dir),
        )  # fmt: skip
        timings["run (5 behaviours)"] = time.monotonic() - started
        data = json.loads((report_dir / "conformance-report.json").read_text())
        outcomes = {t["id"]: t["outcome"] for t in data["tests"]}
        messages = {t["id"]: t.get("message") for t in data["tests"] if t["outcome"] != "passed"}
        # --id narrows the profile (verdict partial), and a narrowed run is judged on its selection:
        # all selected passed, so exit 0 (docs/running-the-suite.md)
        assert (certified.returncode, data["verdict"]) == (0, "partial"), (messages, certified.stderr[-3000:])
        assert {i: outcomes[i] for i in IDS} == dict.fromkeys(IDS, "passed"), messages
        assert set(outcomes.values()) == {"passed", "skipped-by-user"}, messages
        accelerators = data["accelerators"]
        assert accelerators["fakeDevices"] is False
        drivers = [{k: v for k, v in d.items() if v is not None} for d in accelerators["drivers"]]
        assert drivers == [
            {
                "driver": DRIVER,
                "fake": False,
                "installedBy": "cluster spec dra_drivers (a command per real node)",
                "version": "1.0.0",
                "executable": str(executable),
                "size": executable.stat().st_size,
                "sha256": sha256,
                "command": [str(executable), *command[1:], "--driver-name", DRIVER, "--publish-devices", "2"],
                "nodes": ["real-0"],
            }
        ], drivers
        assert cli("report", "verify", str(report_dir / "conformance-report.json")).returncode == 0

        started = time.monotonic()
        refused = cli(
            "run", "--provider", "existing", "--kubeconfig", kubeconfig, "--implementation", "reference",
            "--capabilities", str(absent), "--profile", "Accelerators", "--report-dir", str(tmp_path / "absent"),
            env={"KTHENA_DRIVER_PUBLISH_WAIT": "3"},  # how long a run waits for a driver's first slice
        )  # fmt: skip
        timings["run refused (driver not installed)"] = time.monotonic() - started
        error = json.loads((tmp_path / "absent" / "conformance-report.json").read_text())["error"]["message"]
        assert refused.returncode == 3 and "\n" not in error, (refused.returncode, error)
        assert error == (
            f"{absent}: driver gpu.absent.example publishes no ResourceSlice in the cluster: it is not installed "
            "(or has no devices); install it, or pass the capability file of the driver the cluster runs"
        )
        assert "Traceback" not in refused.stderr, refused.stderr
    finally:
        started = time.monotonic()
        down = cli("cluster", "down", "--name", CLUSTER)
        timings["cluster down"] = time.monotonic() - started
        print("vendor recipe timings: " + ", ".join(f"{k} {v:.1f} s" for k, v in timings.items()))
    assert down.returncode == 0, down.stderr
    left = host.diff(before, snapshot(bin_dir, ["real-0"])).lines()
    assert not left, "the host differs from before the cluster started:\n" + "\n".join(left)
