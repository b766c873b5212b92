"""Fake DRA drivers for the embedded cluster and kind: a GPU shaped like the DRA example driver and
an NPU shaped like the Ascend DRA driver.

- :mod:`.drivers`: the two driver shapes as data (devices per node, DeviceClasses, node labels);
- :mod:`.publisher`: the ResourceSlice publisher (a pure planner and a thin watch loop);
- :mod:`.kubeletplugin`: the kubelet-side gRPC plugin (Registration and DRAPlugin v1, CDI specs),
  for clusters with real kubelets (kind);
- :mod:`.cli`: ``fake-devices publish|kubelet-plugin|device-classes``;
- ``capabilities/``: the drivers' capability files (package data, :func:`capability_files`), what
  ``kthena-conformance run --fake-devices`` certifies them against.

The package depends on ``kubernetes``, ``grpcio`` and ``protobuf`` only, so its container image
(``fake-devices/Dockerfile``) stays small.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["capability_files"]


def capability_files() -> list[Path]:
    """The fake drivers' capability files (``gpu.yaml``, ``npu.yaml``), shipped inside the package
    so an installed wheel finds them as a checkout does."""
    return sorted((Path(__file__).resolve().parent / "capabilities").glob("*.yaml"))
