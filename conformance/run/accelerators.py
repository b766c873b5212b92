"""The Accelerators profile's inputs: capability files, device node pools, fake-device faults.

Which DRA drivers a run certifies (the ``--capabilities`` files, the fake GPU and NPU drivers'
shipped files), what the cluster needs for them (node pools shaped by the files), and the
self-validation switch that breaks the fake drivers. Kept apart from the run's orchestration so
the decisions stay pure and testable without a cluster.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .options import RunOptions


def fake_capability_files() -> list[Path]:
    """The fake drivers' shipped capability files (package data of ``fake_devices``)."""
    import fake_devices

    return fake_devices.capability_files()


ACCELERATORS = "Accelerators"


@dataclass(frozen=True)
class AcceleratorPlan:
    """What a run does about the Accelerators profile, decided before anything is loaded.

    ``files`` the capability files to certify against; ``profiles`` the profiles to run with (the
    ones asked for, or every profile but Accelerators when it is left out); ``left_out`` why
    Accelerators is left out (empty when it is not); ``notes`` what the report and the terminal
    say about it; ``by_default`` the fake drivers' files were chosen without being asked for."""

    files: tuple[Path, ...]
    profiles: tuple[str, ...]
    notes: tuple[str, ...] = ()
    left_out: str = ""
    by_default: bool = False


def plan_accelerators(
    *,
    provider: str,
    given: Sequence[Path],
    fake_devices: bool | None,
    profiles: Sequence[str],
    narrowed: bool,
    selected: bool,
    shipped: Sequence[Path],
    all_profiles: Sequence[str],
) -> AcceleratorPlan:
    """Decide which capability files a run certifies and whether Accelerators stays in. Pure.

    ``given`` the ``--capabilities`` files; ``fake_devices`` True for ``--fake-devices``, False for
    ``--no-fake-devices``, None when neither was given; ``profiles`` the ``--profile`` values;
    ``narrowed`` a ``--profile``, ``--feature`` or ``--id`` was given; ``selected`` that selection
    picks at least one Accelerators behaviour; ``shipped`` the fake drivers' capability files.

    On the embedded (local) cluster, which runs the fake GPU and NPU drivers, a run that selects
    Accelerators behaviours without a capability file certifies the fake drivers against their
    shipped files (as ``--fake-devices`` does), unless ``--no-fake-devices``. Elsewhere, without a
    capability file, Accelerators is left out of a run that did not ask for it (with the reason)
    and a run that asked for it is refused (:class:`CapabilityFileError`)."""
    from ..framework.capabilities import CapabilityFileError

    files = list(given)
    notes: list[str] = []
    by_default = False
    if fake_devices:
        if not shipped:
            raise CapabilityFileError(
                "--fake-devices: the fake drivers' capability files (fake_devices/capabilities/*.yaml) are not "
                "installed; pass them with --capabilities FILE"
            )
        seen = {p.resolve() for p in files}
        files += [f for f in shipped if f.resolve() not in seen]
    elif fake_devices is None and provider == "local" and not files and selected and shipped:
        files = list(shipped)
        by_default = True
        notes.append(
            f"the Accelerators profile certifies the fake GPU and NPU drivers against their shipped capability "
            f"files ({', '.join(f.name for f in shipped)}), chosen by default: the embedded (local) cluster runs "
            "them and no --capabilities was given (--no-fake-devices leaves the profile out)"
        )
    if files or not selected:
        if not files and not profiles:  # none of its behaviours is selected: the report leaves it out
            return _left_out("none of its behaviours is selected (--feature/--id/--skip-slow)", all_profiles)
        return AcceleratorPlan(tuple(files), tuple(profiles), tuple(notes), by_default=by_default)
    if provider == "local" and fake_devices is False:
        why = "--no-fake-devices was given and no capability file"
    elif provider == "local":
        why = "no capability file was given and the fake drivers' files (fake_devices/capabilities/*.yaml) are missing"
    else:
        why = f"no capability file was given and the {provider} provider runs no fake drivers by default"
    hint = "--capabilities FILE for each DRA driver to certify, or --fake-devices for the fake GPU and NPU drivers"
    if narrowed:
        raise CapabilityFileError(
            f"the Accelerators profile certifies a DRA driver against its capability file, but {why}: pass {hint}"
        )
    return _left_out(f"{why} ({hint})", all_profiles)


def _left_out(why: str, all_profiles: Sequence[str]) -> AcceleratorPlan:
    """A plan that runs every profile but Accelerators, saying why."""
    kept = tuple(p for p in all_profiles if p != ACCELERATORS)
    return AcceleratorPlan((), kept, (f"the Accelerators profile was left out: {why}",), left_out=why)


def load_accelerators(
    options: RunOptions, data: dict[str, Any], behaviours: Sequence[Any]
) -> tuple[list[Any], RunOptions, AcceleratorPlan]:
    """Plan (:func:`plan_accelerators`), load the capability files and check them against the
    provider; record the plan's notes and the ``accelerators`` section in the report ``data``.

    Returns the capabilities, the options to run with and the plan. The fake drivers run only
    where the harness makes the cluster (local; kind gets the labelled nodes, its DaemonSets are
    deployed by the user)."""
    import dataclasses

    from fake_devices.drivers import DRIVERS, FAULT_ENV, parse_faults

    from ..framework.capabilities import CapabilityFileError, load_all
    from ..framework.features import PROFILES
    from ..framework.selection import Selection

    asked = Selection.parse(options.profiles, options.features, options.ids, include_slow=not options.skip_slow)
    plan = plan_accelerators(
        provider=options.provider_name,
        given=options.capabilities,
        fake_devices=options.fake_devices,
        profiles=options.profiles,
        narrowed=bool(asked.profiles or asked.features or asked.ids),
        selected=any(b.profile.name == ACCELERATORS and asked.selects(b) for b in behaviours),
        shipped=fake_capability_files(),
        all_profiles=list(PROFILES),
    )
    capabilities = load_all(plan.files)
    try:
        parse_faults(",".join(options.fake_device_faults))
    except ValueError as exc:
        raise CapabilityFileError(f"--fake-devices-fault: {exc}") from None
    fake = {shape.driver for shape in DRIVERS.values()}
    if options.provider_name == "local":
        for caps in capabilities:
            if caps.driver not in fake:
                raise CapabilityFileError(
                    f"{caps.path}: driver {caps.driver!r} is not installed on the cluster a run makes, which runs "
                    f"only the fake drivers ({', '.join(sorted(fake))}); run your driver on real nodes "
                    "(`cluster up --config SPEC` with dra_drivers, then --provider existing --kubeconfig FILE: "
                    "docs/accelerators.md) or certify it on your own cluster with --provider existing"
                )
    elif options.fake_device_faults:
        raise CapabilityFileError(
            f"--fake-devices-fault ({FAULT_ENV}) breaks the fake drivers the embedded cluster runs; "
            f"the {options.provider_name} provider's drivers are deployed outside the harness"
        )
    if options.fake_device_faults and not any(c.driver in fake for c in capabilities):
        raise CapabilityFileError("--fake-devices-fault needs a fake driver's capability file (or --fake-devices)")
    data["notes"].extend(plan.notes)
    if capabilities:
        data["accelerators"] = {
            "capabilities": [c.as_report() for c in capabilities],
            "fakeDevices": any(c.driver in fake for c in capabilities),
            "chosenByDefault": plan.by_default,
            "faults": sorted(set(options.fake_device_faults)),
            "warnings": [],
        }
    options = dataclasses.replace(options, capabilities=list(plan.files), profiles=list(plan.profiles))
    return capabilities, options, plan


def fake_build() -> dict[str, str]:
    """The fake drivers' build: the package's version and a SHA-256 over its files (sources and
    capability files, in path order), what a report names when it certified a fake."""
    import hashlib
    from importlib import metadata

    import fake_devices

    root = Path(fake_devices.__file__).parent
    digest = hashlib.sha256()
    for path in sorted(p for p in root.rglob("*") if p.is_file() and p.suffix in (".py", ".yaml")):
        digest.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes() + b"\0")
    try:
        version = metadata.version("kthena-conformance")
    except metadata.PackageNotFoundError:
        version = "unknown"
    return {"version": f"fake_devices (kthena-conformance {version})", "sha256": digest.hexdigest()}


def certified_drivers(
    capabilities: Sequence[Any], declared: Sequence[Mapping[str, Any]], fake: Mapping[str, str]
) -> list[dict[str, Any]]:
    """What the run certifies for each capability file's driver. Pure.

    A fake driver's name is the fakes' (``*.fake.kthena-conformance.io``), run by the harness:
    ``fake`` is their build (:func:`fake_build`). Any other driver is the vendor's: the entry the
    cluster declares for it (its executable and SHA-256, or its image and digest; cluster details
    ``draDrivers``), or, when the cluster declares none, a line saying it was installed outside
    the harness and nothing identifies its build."""
    from fake_devices.drivers import DRIVERS

    fakes = {shape.driver for shape in DRIVERS.values()}
    by_name = {str(d.get("name")): d for d in declared}
    out: list[dict[str, Any]] = []
    for caps in capabilities:
        if caps.driver in fakes:
            out.append({"driver": caps.driver, "fake": True, "installedBy": "the harness (fake-devices)", **dict(fake)})
            continue
        entry = by_name.get(caps.driver)
        if entry is None:
            out.append(
                {
                    "driver": caps.driver,
                    "fake": False,
                    "installedBy": "outside the harness (the cluster declares no build of it)",
                    **({"version": caps.driver_version} if caps.driver_version else {}),
                }
            )
            continue
        known = ("version", "executable", "size", "sha256", "command", "image", "digest", "nodes")
        out.append(
            {
                "driver": caps.driver,
                "fake": False,
                "installedBy": str(entry.get("installedBy") or "the cluster's maker"),
                **{k: entry[k] for k in known if entry.get(k) is not None},
            }
        )
        if "version" not in out[-1] and caps.driver_version:
            out[-1]["version"] = caps.driver_version
    return out


def uninstalled(capabilities: Sequence[Any], published: Collection[str]) -> list[str]:
    """One line per capability file whose driver publishes no ResourceSlice in the cluster
    (``published``: the ``spec.driver`` of every slice). Pure."""
    return [
        f"{caps.path}: driver {caps.driver} publishes no ResourceSlice in the cluster: it is not installed "
        "(or has no devices); install it, or pass the capability file of the driver the cluster runs"
        for caps in capabilities
        if caps.driver not in published
    ]


def published_drivers(kubeconfig: Path, context: str | None) -> set[str]:
    """The ``spec.driver`` of every ResourceSlice in the cluster."""
    import json

    from kubernetes import client

    from ..cluster.kube import api_client

    resource: Any = client.ResourceV1Api(api_client(kubeconfig, context))
    resp = resource.list_resource_slice(_preload_content=False, _request_timeout=30)
    items = json.loads(resp.data or b"{}").get("items") or []
    return {str((item.get("spec") or {}).get("driver")) for item in items}


# How long a run waits for every certified driver's first ResourceSlice after the cluster is up (a
# driver deployed with the cluster may still be starting; the embedded cluster's are there already).
DRIVER_PUBLISH_WAIT = float(os.environ.get("KTHENA_DRIVER_PUBLISH_WAIT", "60"))


def drivers_absent(capabilities: Sequence[Any], info: Any, progress: Any) -> list[str]:
    """:func:`uninstalled`'s lines once :data:`DRIVER_PUBLISH_WAIT` has passed without every
    driver publishing (empty as soon as each has a slice)."""
    from ..framework.waits import WaitTimeout, wait_for

    def missing() -> list[str]:
        return uninstalled(capabilities, published_drivers(info.kubeconfig, info.context))

    first = missing()
    if not first:
        return []
    progress(f"waiting up to {DRIVER_PUBLISH_WAIT:g}s for the drivers' ResourceSlices: " + "; ".join(first))
    try:
        wait_for("every certified driver's ResourceSlices", missing, until=lambda m: not m, timeout=DRIVER_PUBLISH_WAIT)
    except WaitTimeout:
        return missing()
    return []


# Label on the embedded cluster's device node pools (as `cluster up --gpu-nodes` sets it).
ACCELERATOR_LABEL = "conformance.kthena.io/accelerator"
FAKE_POOL_NODES = 2


def device_pools(capabilities: list[Any], *, real_nodes: bool = False) -> list[Any]:
    """Node pools for the fake drivers' device classes: the selector's labels plus the driver's
    device-count label (the declared count), tainted as the tolerations say; at least
    :data:`FAKE_POOL_NODES` nodes (or the declared ``minNodes``). With ``real_nodes`` one node of
    each class (while :data:`MAX_REAL_NODES` allows) is a real one (pool ``<name>-real``), the
    rest kwok nodes. Pure."""
    from fake_devices.drivers import DRIVERS

    from ..cluster.spec import MAX_REAL_NODES, NodePool, Taint

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
            if real_nodes and sum(p.count for p in pools if p.kind == "real") < MAX_REAL_NODES:
                pools.append(NodePool(name=f"{name}-real", kind="real", count=1, labels=labels, taints=taints))
                count -= 1
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
