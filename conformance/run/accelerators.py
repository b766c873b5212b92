"""The Accelerators profile's inputs: capability files, device node pools, fake-device faults.

Which DRA drivers a run certifies (the ``--capabilities`` files, the fake GPU and NPU drivers'
shipped files), what the cluster needs for them (node pools shaped by the files), and the
self-validation switch that breaks the fake drivers. Kept apart from the run's orchestration so
the decisions stay pure and testable without a cluster.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from .options import RunOptions


def fake_capability_files() -> list[Path]:
    """The fake drivers' shipped capability files (package data of ``fake_devices``)."""
    import fake_devices

    return fake_devices.capability_files()


def load_accelerators(options: RunOptions, data: dict[str, Any]) -> tuple[list[Any], RunOptions]:
    """Load the capability files and decide what the Accelerators profile can do on this run.

    Returns the capabilities and the options to run with: without a capability file, a run that
    names no profile covers every profile but Accelerators (there is no driver to certify), and
    one that asks for Accelerators is refused. The fake drivers run only where the harness makes
    the cluster (local; kind gets the labelled nodes, its DaemonSets are deployed by the user)."""
    import dataclasses

    from fake_devices.drivers import DRIVERS, FAULT_ENV, parse_faults

    from ..framework.capabilities import CapabilityFileError, load_all
    from ..framework.features import PROFILES

    files = list(options.capabilities)
    if options.fake_devices:
        shipped = fake_capability_files()
        if not shipped:
            raise CapabilityFileError(
                "--fake-devices: the fake drivers' capability files (fake_devices/capabilities/*.yaml) are not "
                "installed; pass them with --capabilities FILE"
            )
        files += [f for f in shipped if f.resolve() not in {p.resolve() for p in files}]
    capabilities = load_all(files)
    try:
        parse_faults(",".join(options.fake_device_faults))
    except ValueError as exc:
        raise CapabilityFileError(f"--fake-devices-fault: {exc}") from None
    fake = {shape.driver for shape in DRIVERS.values()}
    if options.provider_name == "local":
        for caps in capabilities:
            if caps.driver not in fake:
                raise CapabilityFileError(
                    f"{caps.path}: driver {caps.driver!r} cannot run on the embedded (local) cluster, which runs only "
                    f"the fake drivers ({', '.join(sorted(fake))}); certify it on a real cluster with --provider "
                    "existing --kubeconfig FILE (or kind)"
                )
    elif options.fake_device_faults:
        raise CapabilityFileError(
            f"--fake-devices-fault ({FAULT_ENV}) breaks the fake drivers the embedded cluster runs; "
            f"the {options.provider_name} provider's drivers are deployed outside the harness"
        )
    if options.fake_device_faults and not any(c.driver in fake for c in capabilities):
        raise CapabilityFileError("--fake-devices-fault needs a fake driver's capability file (or --fake-devices)")
    profiles = list(options.profiles)
    if not capabilities:
        asked = {p.strip().casefold() for v in profiles for p in v.split(",")}
        asked_features = {f.strip().casefold() for v in options.features for f in v.split(",")}
        if "accelerators" in asked or "accelerators" in asked_features:
            raise CapabilityFileError(
                "the Accelerators profile certifies a DRA driver against its capability file: pass "
                "--capabilities FILE (repeatable), or --fake-devices for the fake GPU and NPU drivers"
            )
        if not profiles:
            profiles = [name for name in PROFILES if name != "Accelerators"]
            data["notes"].append(
                "the Accelerators profile was not selected: no capability file was given (--capabilities FILE, "
                "or --fake-devices for the fake drivers)"
            )
    else:
        data["accelerators"] = {
            "capabilities": [c.as_report() for c in capabilities],
            "fakeDevices": options.provider_name == "local" or options.fake_devices,
            "faults": sorted(set(options.fake_device_faults)),
            "warnings": [],
        }
    return capabilities, dataclasses.replace(options, capabilities=files, profiles=profiles)


# Label on the embedded cluster's device node pools (as `cluster up --gpu-nodes` sets it).
ACCELERATOR_LABEL = "conformance.kthena.io/accelerator"
FAKE_POOL_NODES = 2


def device_pools(capabilities: list[Any]) -> list[Any]:
    """Node pools for the fake drivers' device classes: the selector's labels plus the driver's
    device-count label (the declared count), tainted as the tolerations say; at least
    :data:`FAKE_POOL_NODES` nodes (or the declared ``minNodes``). Pure."""
    from fake_devices.drivers import DRIVERS

    from ..cluster.spec import NodePool, Taint

    shapes = {shape.driver: shape for shape in DRIVERS.values()}
    pools: list[NodePool] = []
    for caps in capabilities:
        shape = shapes.get(caps.driver)
        if shape is None:
            continue
        for i, cls in enumerate(caps.device_classes):
            labels = {ACCELERATOR_LABEL: shape.key, **cls.nodes.selector}
            labels.setdefault(shape.count_label, str(cls.nodes.fewest_devices))
            taints = [
                Taint(key=t.key, value=t.value or "", effect=t.effect)
                for t in cls.nodes.tolerations
                if t.key and t.effect
            ]
            name = f"accel-{shape.key}" + (f"-{i}" if i else "")
            count = max(FAKE_POOL_NODES, cls.nodes.min_nodes)
            pools.append(NodePool(name=name, count=count, labels=labels, taints=taints))
    return pools


@contextlib.contextmanager
def fake_device_faults(faults: list[str]) -> Iterator[None]:
    """Set ``FAKE_DEVICES_FAULT`` while the cluster starts (the fake drivers' publishers inherit
    the environment through the cluster's supervisor), and restore it afterwards."""
    from fake_devices.drivers import FAULT_ENV

    saved = os.environ.get(FAULT_ENV)
    if faults:
        os.environ[FAULT_ENV] = ",".join(faults)
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop(FAULT_ENV, None)
        else:
            os.environ[FAULT_ENV] = saved
