"""CDI spec files: how a prepared claim's devices reach the container (as environment variables).

One file per prepared claim, ``<cdi-dir>/<driver>-<claim uid>.json``, with CDI kind
``<driver>/<class>`` (``gpu.fake.kthena-conformance.io/gpu``) and one CDI device per allocated device, named
``<claim uid>-<device>``, whose container edits set the device's variable
(``GPU_DEVICE_0=gpu-0``, ``NPU_DEVICE_3_0=npu-3-0``). The NPU devices also get the variable the
Ascend container runtime reads, ``ASCEND_VISIBLE_DEVICES=<chip index>``. Writes are atomic (a
temporary file renamed into place) and idempotent; removing a spec that is not there is not an error.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..drivers import DriverShape

CDI_VERSION = "0.6.0"
_NPU_INDEX = re.compile(r"^npu-([0-9]+)-[0-9]+$")


@dataclass(frozen=True)
class PreparedDevice:
    request_names: tuple[str, ...]
    pool: str
    device: str
    cdi_ids: tuple[str, ...]


def spec_path(cdi_dir: Path, shape: DriverShape, claim_uid: str) -> Path:
    return cdi_dir / f"{shape.driver}-{claim_uid}.json"


def cdi_device_name(claim_uid: str, device: str) -> str:
    return f"{claim_uid}-{device}"


def cdi_id(shape: DriverShape, claim_uid: str, device: str) -> str:
    """The fully qualified CDI device id the runtime resolves: ``<kind>=<name>``."""
    return f"{shape.cdi_kind}={cdi_device_name(claim_uid, device)}"


def device_env(shape: DriverShape, device: str) -> list[str]:
    env = [f"{shape.env_name(device)}={device}"]
    match = _NPU_INDEX.match(device) if shape.key == "npu" else None
    if match:
        env.append(f"ASCEND_VISIBLE_DEVICES={match.group(1)}")
    return env


def next_device(device: str) -> str:
    """The device whose first number is one higher (``gpu-0`` -> ``gpu-1``, ``npu-3-0`` -> ``npu-4-0``):
    the self-validation fault ``cdi-env-next-device`` exposes its variables instead."""
    return re.sub(r"[0-9]+", lambda m: str(int(m.group()) + 1), device, count=1)


def cdi_spec(
    shape: DriverShape, claim_uid: str, devices: list[str], *, next_device_env: bool = False
) -> dict[str, Any]:
    """The CDI spec exposing ``devices`` of one claim (pure); ``next_device_env`` is the
    self-validation fault ``cdi-env-next-device``."""
    return {
        "cdiVersion": CDI_VERSION,
        "kind": shape.cdi_kind,
        "devices": [
            {
                "name": cdi_device_name(claim_uid, d),
                "containerEdits": {"env": device_env(shape, next_device(d) if next_device_env else d)},
            }
            for d in devices
        ],
    }


def write_spec(
    cdi_dir: Path, shape: DriverShape, claim_uid: str, devices: list[str], *, next_device_env: bool = False
) -> Path:
    """Write (or rewrite) the claim's CDI spec atomically; returns its path."""
    cdi_dir.mkdir(parents=True, exist_ok=True)
    path = spec_path(cdi_dir, shape, claim_uid)
    spec = cdi_spec(shape, claim_uid, devices, next_device_env=next_device_env)
    text = json.dumps(spec, indent=2, sort_keys=True) + "\n"
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=cdi_dir)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def remove_spec(cdi_dir: Path, shape: DriverShape, claim_uid: str) -> bool:
    """Remove the claim's CDI spec; False when there was none."""
    try:
        spec_path(cdi_dir, shape, claim_uid).unlink()
    except FileNotFoundError:
        return False
    return True
