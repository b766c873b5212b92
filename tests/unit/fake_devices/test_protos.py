"""The checked-in gRPC modules are exactly what the vendored protos generate, and the vendored
protos are upstream's (when the Go module cache has k8s.io/kubelet)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
FAKE = ROOT / "fake-devices"
PB = FAKE / "fake_devices" / "kubeletplugin" / "pb"
KUBELET = "k8s.io/kubelet@v0.36.3"


def test_generated_modules_are_up_to_date(tmp_path: Path) -> None:
    pytest.importorskip("grpc_tools")
    subprocess.run(
        [sys.executable, str(FAKE / "generate_protos.py"), "--out", str(tmp_path)], check=True, capture_output=True
    )
    fresh = tmp_path / "fake_devices" / "kubeletplugin" / "pb"
    names = sorted(p.name for p in fresh.iterdir())
    assert names == sorted(p.name for p in PB.iterdir() if p.name not in {"__init__.py", "__pycache__"})
    for name in names:
        assert (fresh / name).read_text() == (PB / name).read_text(), (
            f"{name} is stale: run fake-devices/generate_protos.py"
        )


def test_services_keep_their_upstream_wire_names() -> None:
    from fake_devices.kubeletplugin.pb import dra_v1_pb2, pluginregistration_v1_pb2

    assert dra_v1_pb2.DESCRIPTOR.services_by_name["DRAPlugin"].full_name == "k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin"
    assert (
        pluginregistration_v1_pb2.DESCRIPTOR.services_by_name["Registration"].full_name
        == "pluginregistration.Registration"
    )


def test_vendored_protos_match_the_go_module() -> None:
    modcache = os.environ.get("GOMODCACHE") or str(Path(os.environ.get("GOPATH", Path.home() / "go")) / "pkg" / "mod")
    upstream = Path(modcache) / KUBELET
    if not upstream.is_dir():
        pytest.skip(f"{KUBELET} is not in the Go module cache ({modcache})")
    for rel in ("pkg/apis/dra/v1/api.proto", "pkg/apis/pluginregistration/v1/api.proto", "LICENSE"):
        vendored = FAKE / "proto" / "k8s.io" / "kubelet" / rel
        assert vendored.read_bytes() == (upstream / rel).read_bytes(), rel
