"""``kthena-conformance run``: provision, deploy, preflight, run the suite, write the report.

The main job, end to end:

1. validate the inputs (support declaration, selection, waits): a mistake is one clear message,
   exit code 2, and a report saying so;
2. bring up the cluster (any provider) and deploy the implementation under test: the reference
   controller (least-privilege token, admission webhook), or ``external`` (already running);
3. preflight: what the cluster must provide (Nodes Ready, the ModelServing CRD served at
   v1alpha1, a validating webhook answering, the schedulers the suite's manifests name), each
   missing item named; a failed preflight runs no test (exit 3);
4. the suite in two pytest passes, in subprocesses: the tests that may share the cluster on
   ``--workers`` xdist workers, then the ones that must run alone;
5. merge both passes with the catalog: every behaviour of the selected profiles appears in the
   report, as run or as skipped-by-user / not-supported / not run (interrupted); verdicts per
   profile; the report (YAML + JSON), JUnit XML and allure results are written in every case,
   including Ctrl-C, and this run's leftover namespaces are swept.

Exit codes: 0 every selected profile succeeded; 1 a profile is failure, partial or not-run;
2 bad input; 3 the cluster or its preflight failed; 130 interrupted.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import secrets
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import __version__
from .cluster.errors import HarnessError
from .cluster.provider import ClusterInfo, Progress, quiet
from .cluster.registry import get_provider
from .cluster.spec import ClusterSpec

MODELSERVING_CRD = "modelservings.workload.serving.volcano.sh"
PACKAGE_DIR = Path(__file__).resolve().parent
REFERENCE_SUPPORT = PACKAGE_DIR / "implementations" / "kthena-ref-support.yaml"
EXIT_OK, EXIT_NONCONFORMANT, EXIT_USAGE, EXIT_CLUSTER, EXIT_INTERRUPTED = 0, 1, 2, 3, 130


@dataclass
class Check:
    name: str
    ok: bool
    message: str
    required: bool = True  # informational checks report "skipped" instead of blocking the run

    def as_dict(self) -> dict[str, Any]:
        result = "ok" if self.ok else "missing" if self.required else "skipped"
        return {"name": self.name, "result": result, "message": self.message}


@dataclass
class RunOptions:
    provider_name: str = "local"
    report_dir: Path = Path("reports")
    kubeconfig: str | None = None
    context: str | None = None
    keep_cluster: bool = False
    cluster_name: str | None = None  # reuse (or make and keep) this cluster; default: a fresh one
    cluster_owner_pid: int | None = None  # with keep_cluster: the kept cluster still dies with this process
    implementation: str = "reference"  # or "external"
    support_file: Path | None = None
    supported_features: list[str] = field(default_factory=list)
    all_features: bool = False
    implementation_name: str | None = None
    implementation_version: str | None = None
    profiles: list[str] = field(default_factory=list)
    features: list[str] = field(default_factory=list)
    ids: list[str] = field(default_factory=list)
    skip_slow: bool = False
    workers: int = 2
    timeout_scale: str = "1"
    timeouts: list[str] = field(default_factory=list)
    keep: str = "never"
    dry_run: bool = False
    reference_faults: list[str] = field(default_factory=list)  # self-validation only
    controller_log: Path | None = None  # external: the implementation's log, for evidence
    pytest_args: list[str] = field(default_factory=list)
    # Accelerators: capability files of the DRA drivers to certify; --fake-devices adds the fake
    # drivers' shipped files; fake_device_faults break the fake drivers (self-validation only).
    capabilities: list[Path] = field(default_factory=list)
    fake_devices: bool = False
    fake_device_faults: list[str] = field(default_factory=list)


@dataclass
class RunResult:
    report: dict[str, Any]
    paths: list[Path] = field(default_factory=list)
    exit_code: int = EXIT_OK
    listing: list[str] = field(default_factory=list)  # --dry-run


# -- preflight ------------------------------------------------------------------------------------


def webhook_check(api: Any) -> Check:
    """Does a validating admission webhook answer for ModelServings? (see :mod:`.framework.probes`)

    Informational: the spec does not require a webhook (validation may live in the CRD schema),
    so an implementation without one is judged by the Admission tests, not stopped here. The probe
    uses upstream's workerTemplate rule, which the spec does not state."""
    from .framework.modelserving import REFUSED
    from .framework.probes import webhook_answer

    status, _ = webhook_answer(api)
    if status in REFUSED:
        return Check("admission-webhook", True, "a spec without a workerTemplate for its workers was rejected")
    if status is not None:
        return Check("admission-webhook", False, f"the probe failed with HTTP {status}", required=False)
    return Check(
        "admission-webhook",
        False,
        "a spec without a workerTemplate for its workers was accepted: no upstream-style webhook answers "
        "(informational; admission is judged by the Admission tests)",
        required=False,
    )


def preflight(info: ClusterInfo, *, webhook: bool = True) -> list[Check]:
    """What the cluster must provide before any ModelServing test can mean anything."""
    from kubernetes import client

    from .cluster.kube import api_client

    api = api_client(info.kubeconfig, info.context)
    checks = []
    nodes: list[Any] = client.CoreV1Api(api).list_node().items
    ready = [
        n.metadata.name
        for n in nodes
        if any(c.type == "Ready" and c.status == "True" for c in (n.status.conditions or []))
    ]
    checks.append(Check("nodes-ready", bool(ready), f"{len(ready)}/{len(nodes)} nodes Ready"))
    items: list[Any] = client.ApiextensionsV1Api(api).list_custom_resource_definition().items
    crds = {c.metadata.name: c for c in items}
    crd = crds.get(MODELSERVING_CRD)
    served = [v.name for v in crd.spec.versions if v.served] if crd else []
    checks.append(
        Check(
            "crd-modelserving-v1alpha1",
            "v1alpha1" in served,
            f"CRD {MODELSERVING_CRD} serves {served}" if crd else f"CRD {MODELSERVING_CRD} is not installed",
        )
    )
    if crd is not None:
        subresources = next((v.subresources for v in crd.spec.versions if v.name == "v1alpha1"), None)
        has = [n for n in ("status", "scale") if subresources is not None and getattr(subresources, n) is not None]
        checks.append(Check("crd-subresources", len(has) == 2, f"subresources served: {has or 'none'}"))
    if webhook and "v1alpha1" in served:
        checks.append(webhook_check(api))
    checks.append(_scheduler_check(api))
    if "v1alpha1" in served:
        checks.append(_garbage_collection_check(api))
    return checks


def _garbage_collection_check(api: Any, timeout: float = 90.0) -> Check:
    """Dependents of a deleted ModelServing are garbage-collected (cleanup relies on it).

    kube-controller-manager's garbage collector starts tracking a new CRD's objects only at its
    next discovery sync (every 30 s): until then, deleting a ModelServing leaves its Pods behind.
    This probe waits for that once, so no test pays for it: a ConfigMap owned by a ModelServing
    with zero replicas must disappear after the ModelServing is deleted.
    """
    import time as _time

    from kubernetes import client

    from .framework.namespaces import SUITE_LABEL, delete_namespace
    from .framework.waits import WaitTimeout, wait_for

    core, custom = client.CoreV1Api(api), client.CustomObjectsApi(api)
    group, version, plural = "workload.serving.volcano.sh", "v1alpha1", "modelservings"
    ns = f"kc-preflight-{secrets.token_hex(3)}"
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=ns, labels={SUITE_LABEL: "true"})))
    started = _time.monotonic()
    try:
        body = {
            "apiVersion": f"{group}/{version}",
            "kind": "ModelServing",
            "metadata": {"name": "gc-probe"},
            "spec": {
                "replicas": 0,
                "schedulerName": "default-scheduler",
                "template": {
                    "roles": [
                        {"name": "probe", "replicas": 1, "workerReplicas": 0,
                         "entryTemplate": {"spec": {"containers": [{"name": "c", "image": "registry.example/p:v1"}]}}}
                    ]
                },
            },
        }  # fmt: skip
        owner: Any = custom.create_namespaced_custom_object(group, version, ns, plural, body)
        ref = client.V1OwnerReference(
            api_version=f"{group}/{version}", kind="ModelServing", name="gc-probe", uid=owner["metadata"]["uid"]
        )
        core.create_namespaced_config_map(
            ns, client.V1ConfigMap(metadata=client.V1ObjectMeta(name="gc-probe", owner_references=[ref]))
        )
        custom.delete_namespaced_custom_object(group, version, ns, plural, "gc-probe", propagation_policy="Background")
        wait_for(
            "the garbage collector to delete a ModelServing's dependent",
            lambda: [c for c in _config_map_names(core, ns) if c == "gc-probe"],
            until=lambda left: not left,
            timeout=timeout,
            interval=0.5,
        )
        took = _time.monotonic() - started
        return Check("garbage-collection", True, f"dependents of a deleted ModelServing are collected ({took:.0f} s)")
    except WaitTimeout as exc:
        return Check("garbage-collection", False, f"a deleted ModelServing's dependent was not collected: {exc}")
    except Exception as exc:
        return Check("garbage-collection", False, f"the probe failed: {type(exc).__name__}: {str(exc)[:300]}")
    finally:
        delete_namespace(_Kube(core), ns)


def _scheduler_check(api: Any, timeout: float = 30.0) -> Check:
    """The suite's manifests name ``default-scheduler``: a probe Pod must get a node.

    The probe runs in a throwaway namespace labelled as the suite's (so a sweep finds it if this
    process dies), tolerates every taint, and is deleted with its namespace right away.
    """
    from kubernetes import client

    from .framework.namespaces import SUITE_LABEL, delete_namespace
    from .framework.waits import WaitTimeout, wait_for

    core = client.CoreV1Api(api)
    ns = f"kc-preflight-{secrets.token_hex(3)}"
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=ns, labels={SUITE_LABEL: "true"})))
    try:
        wait_for(
            "the preflight namespace's ServiceAccount",
            lambda: core.read_namespaced_service_account("default", ns),
            timeout=timeout,
        )
        pod = client.V1Pod(
            metadata=client.V1ObjectMeta(name="scheduler-probe"),
            spec=client.V1PodSpec(
                scheduler_name="default-scheduler",
                tolerations=[client.V1Toleration(operator="Exists")],
                containers=[client.V1Container(name="probe", image="registry.example/probe:v1")],
            ),
        )
        core.create_namespaced_pod(ns, pod)
        placed = wait_for(
            "the scheduler probe Pod to get a node",
            lambda: (core.read_namespaced_pod("scheduler-probe", ns).spec or client.V1PodSpec(containers=[])).node_name,
            timeout=timeout,
        )
        return Check("scheduler", True, f"default-scheduler placed a probe Pod on {placed}")
    except WaitTimeout as exc:
        return Check("scheduler", False, f"default-scheduler did not place a probe Pod: {exc}")
    finally:
        delete_namespace(_Kube(core), ns)


def _config_map_names(core: Any, ns: str) -> list[str]:
    items: list[Any] = core.list_namespaced_config_map(ns).items
    return [str(c.metadata.name) for c in items]


@dataclass
class _Kube:
    core: Any


# -- the run ----------------------------------------------------------------------------------------


def run(options: RunOptions, progress: Progress = quiet) -> RunResult:
    """The whole job; always writes the report (see the module docstring)."""
    from .framework import catalog
    from .framework.features import SelectionError
    from .framework.selection import Selection
    from .framework.support import SupportFileError
    from .framework.timeouts import TimeoutConfigError, Timeouts

    started = dt.datetime.now(dt.UTC)
    run_id = secrets.token_hex(4)
    behaviours = catalog.collect()
    data: dict[str, Any] = {
        "suite": {"name": "kthena-conformance", "version": __version__, "digest": catalog.suite_digest()},
        "run": {
            "id": run_id,
            "startedAt": started.isoformat(),
            "command": list(sys.argv),
            "keep": options.keep,
            "selection": {"profiles": options.profiles, "features": options.features, "ids": options.ids},
        },
        "implementation": {"name": options.implementation_name or options.implementation},
        "verdict": "error",
        "notes": [],
    }
    result = RunResult(data)
    from .framework.capabilities import CapabilityFileError, effective_support

    try:
        capabilities, options = _accelerators(options, data)
        support = effective_support(_support(options), capabilities)
        selection = Selection.parse(options.profiles, options.features, options.ids, include_slow=not options.skip_slow)
        selection.check_ids(behaviours)
        timeouts = Timeouts.from_options(options.timeout_scale, options.timeouts)
    except (SupportFileError, SelectionError, TimeoutConfigError, CapabilityFileError) as exc:
        data["error"] = {"message": str(exc), "hint": "see `kthena-conformance run --help`"}
        result.exit_code = EXIT_USAGE
        return _finish(result, options, started)
    data["implementation"] = {**support.as_report(), "deployedBy": "harness" if options.implementation == "reference"
                              else "external"}  # fmt: skip
    data["run"]["selection"] = selection.as_report()
    data["run"]["timeouts"] = timeouts.as_report()
    selected = [b for b in behaviours if selection.selects(b)]
    if options.dry_run:
        result.listing = [
            f"{b.id:60} {b.profile.name:20} {'serial' if b.serial else 'parallel':8} "
            + ("run" if all(support.supports(f) for f in b.features) else "not-supported")
            for b in selected
        ]
        data["verdict"] = "not-run"
        data["notes"].append("dry run: nothing was run")
        data["tests"] = []
        return _finish(result, options, started, write=False)

    provider = get_provider(options.provider_name, kubeconfig=options.kubeconfig, context=options.context)
    info: ClusterInfo | None = None
    controller: Any = None
    passes: list[dict[str, Any]] = []
    secrets_dir = tempfile.TemporaryDirectory(prefix="kthena-conformance-secrets-")
    report_dir = options.report_dir.resolve()
    work = report_dir / ".passes"
    try:
        _clean(report_dir)
        progress(f"bringing up the {options.provider_name} cluster")
        spec = ClusterSpec(name=options.cluster_name or f"conformance-{os.getpid()}")
        if capabilities and options.provider_name in ("local", "kind"):
            spec = spec.model_copy(update={"node_pools": [*spec.node_pools, *device_pools(capabilities)]})
        with _fake_device_faults(options.fake_device_faults):
            info = provider.up(
                spec, progress=progress, owner_pid=options.cluster_owner_pid if options.keep_cluster else os.getpid()
            )
        data["cluster"] = info.as_report()
        controller_log = options.controller_log
        if options.implementation == "reference":
            progress("deploying the reference controller (least-privilege token, webhook)")
            controller = _deploy_reference(info, Path(secrets_dir.name), report_dir, options.reference_faults)
            controller_log = controller.log
            data["implementation"]["log"] = str(controller.log)
            if options.reference_faults:
                data["implementation"]["faults"] = list(options.reference_faults)
        progress("running preflight checks")
        checks = preflight(info)
        data["preflight"] = [c.as_dict() for c in checks]
        if not all(c.ok or not c.required for c in checks):
            missing = ", ".join(c.name for c in checks if not c.ok and c.required)
            data["error"] = {"message": f"preflight failed: {missing}", "hint": "see the preflight section"}
            result.exit_code = EXIT_CLUSTER
            return result
        work.mkdir(parents=True, exist_ok=True)
        info_file = work / "cluster.json"
        info_file.write_text(info.to_json())
        base = _pytest_base(options, info, info_file, run_id, report_dir, controller_log)
        for pass_name in ("parallel", "serial"):
            if not any(_in_pass(b, pass_name) for b in selected):
                continue
            progress(f"running the {pass_name} pass")
            passes.append(_run_pass(base, pass_name, options, work, progress))
            if passes[-1]["interrupted"]:
                break
    except KeyboardInterrupt:
        data["run"]["interrupted"] = True
        data["run"]["interruption"] = "interrupted (SIGINT) while running"
        result.exit_code = EXIT_INTERRUPTED
    except HarnessError as exc:
        data["error"] = {"message": exc.message, "hint": exc.hint}
        result.exit_code = EXIT_CLUSTER
    finally:
        try:
            if info is not None and passes is not None:
                _assemble(data, passes, behaviours, selection, support, result)
                _sweep(info, run_id, options, data)
        finally:
            if controller is not None:
                controller.stop()
            secrets_dir.cleanup()
            if info is not None and not options.keep_cluster:
                provider.down(info.name)
            _finish(result, options, started)
    return result


# -- accelerators ------------------------------------------------------------------------------------


def fake_capability_files() -> list[Path]:
    """The fake drivers' shipped capability files (``fake-devices/capabilities/*.yaml``)."""
    import fake_devices

    return sorted((Path(fake_devices.__file__).resolve().parent.parent / "capabilities").glob("*.yaml"))


def _accelerators(options: RunOptions, data: dict[str, Any]) -> tuple[list[Any], RunOptions]:
    """Load the capability files and decide what the Accelerators profile can do on this run.

    Returns the capabilities and the options to run with: without a capability file, a run that
    names no profile covers every profile but Accelerators (there is no driver to certify), and
    one that asks for Accelerators is refused. The fake drivers run only where the harness makes
    the cluster (local; kind gets the labelled nodes, its DaemonSets are deployed by the user)."""
    import dataclasses

    from fake_devices.drivers import DRIVERS, FAULT_ENV, parse_faults

    from .framework.capabilities import CapabilityFileError, load_all
    from .framework.features import PROFILES

    files = list(options.capabilities)
    if options.fake_devices:
        shipped = fake_capability_files()
        if not shipped:
            raise CapabilityFileError(
                "--fake-devices: the fake drivers' capability files (fake-devices/capabilities/*.yaml) are not "
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

    from .cluster.spec import NodePool, Taint

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
def _fake_device_faults(faults: list[str]) -> Iterator[None]:
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


def _in_pass(b: Any, pass_name: str) -> bool:
    from .framework.selection import in_pass

    return in_pass(b, pass_name)


def _support(options: RunOptions) -> Any:
    from .framework.support import SupportFileError, load_support, support_from_flags

    if options.support_file is not None:
        return load_support(options.support_file)
    if options.supported_features or options.all_features:
        return support_from_flags(
            options.implementation_name or options.implementation,
            options.implementation_version or "unknown",
            options.supported_features,
            options.all_features,
        )
    if options.implementation == "reference":
        return load_support(REFERENCE_SUPPORT)
    raise SupportFileError(
        "an external implementation must declare what it supports: --support-file FILE, "
        "--supported-features A,B or --all-features"
    )


def _pytest_base(
    options: RunOptions,
    info: ClusterInfo,
    info_file: Path,
    run_id: str,
    report_dir: Path,
    controller_log: Path | None,
) -> list[str]:
    args = [
        sys.executable, "-m", "pytest",
        "-p", "conformance.framework.plugin", "-p", "no:cacheprovider",
        "-c", str(PACKAGE_DIR / "suites" / "pytest.ini"), "--rootdir", str(PACKAGE_DIR / "suites"),
        str(PACKAGE_DIR / "suites"),
        "--kubeconfig", str(info.kubeconfig),
        "--cluster-info", str(info_file),
        "--run-id", run_id,
        "--keep", options.keep,
        "--artifacts-dir", str(report_dir / "artifacts"),
        "--wait-scale", options.timeout_scale,
        "--alluredir", str(report_dir / "allure-results"),
        "-q", "-rN", "--durations=15",
    ]  # fmt: skip
    if info.context:
        args += ["--context", info.context]
    if options.support_file is not None:
        args += ["--support-file", str(options.support_file.resolve())]
    elif options.supported_features or options.all_features:
        args += ["--implementation-name", options.implementation_name or options.implementation]
        args += ["--implementation-version", options.implementation_version or "unknown"]
        args += [f"--supported-features={f}" for f in options.supported_features]
        args += ["--all-features"] if options.all_features else []
    else:
        args += ["--support-file", str(REFERENCE_SUPPORT)]
    for flag, values in (("--profile", options.profiles), ("--feature", options.features), ("--id", options.ids)):
        args += [f"{flag}={v}" for v in values]
    args += [f"--wait={w}" for w in options.timeouts]
    if options.skip_slow:
        args.append("--skip-slow")
    if controller_log is not None:
        args += ["--controller-log", str(controller_log)]
    args += [f"--capabilities={p.resolve()}" for p in options.capabilities]
    return [*args, *options.pytest_args]


def _run_pass(base: list[str], pass_name: str, options: RunOptions, work: Path, progress: Progress) -> dict[str, Any]:
    results = work / f"{pass_name}.json"
    results.unlink(missing_ok=True)
    args = [*base, "--suite-pass", pass_name, "--results-file", str(results)]
    if pass_name == "parallel" and options.workers > 1:
        args += ["-n", str(options.workers)]
    log = work / f"{pass_name}.log"
    started = time.monotonic()
    with log.open("w") as out:
        proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, cwd=str(work), stdin=subprocess.DEVNULL)
        try:
            code = proc.wait()
        except KeyboardInterrupt:
            # The same SIGINT reached pytest (same process group): let it finish its report.
            try:
                code = proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                code = proc.wait()
            payload = _read_pass(results, pass_name, code, log)
            payload["interrupted"] = True
            progress(f"{pass_name} pass interrupted after {time.monotonic() - started:.0f}s")
            return payload
    progress(f"{pass_name} pass finished in {time.monotonic() - started:.0f}s (pytest exit {code})")
    return _read_pass(results, pass_name, code, log)


def _read_pass(results: Path, pass_name: str, code: int, log: Path) -> dict[str, Any]:
    try:
        payload: dict[str, Any] = json.loads(results.read_text())
    except (OSError, ValueError):
        tail = log.read_text(errors="replace")[-3000:] if log.exists() else ""
        return {"pass": pass_name, "exitStatus": code, "interrupted": code == 2, "results": [], "crashed": tail}
    if code not in (0, 1, 2, 5):
        payload["crashed"] = log.read_text(errors="replace")[-3000:]
    return payload


def _assemble(
    data: dict[str, Any],
    passes: list[dict[str, Any]],
    behaviours: list[Any],
    selection: Any,
    support: Any,
    result: RunResult,
) -> None:
    """Every selected profile's behaviours, as run or as the reason they were not."""
    from .framework.features import PROFILES
    from .framework.outcomes import Outcome, TestResult, overall_verdict, profile_verdict

    by_id: dict[str, TestResult] = {}
    for payload in passes:
        for raw in payload.get("results", []):
            r = TestResult.from_dict(raw)
            by_id[r.id] = r
        if payload.get("interrupted"):
            data["run"]["interrupted"] = True
            data["run"].setdefault("interruption", f"the {payload['pass']} pass was interrupted")
        if payload.get("crashed"):
            data["notes"].append(f"the {payload['pass']} pass ended abnormally: {payload['crashed'][-800:]}")
        if payload.get("warnings") and data.get("accelerators") is not None:
            for bid, text in sorted(payload["warnings"].items()):
                data["accelerators"]["warnings"].append(f"{bid}: {text}")
    interrupted = bool(data["run"].get("interrupted"))
    profiles = [p for p in PROFILES.values() if not selection.profiles or p.name in selection.profiles]
    wanted = {f for p in profiles for f in p.features}
    tests: list[TestResult] = []
    for b in behaviours:
        if b.feature not in wanted:
            continue
        found = by_id.get(b.id)
        if found is None:
            if not selection.selects(b):
                outcome, message = Outcome.SKIPPED_BY_USER, "not selected (--profile/--feature/--id/--skip-slow)"
            elif not all(support.supports(f) for f in b.features):
                missing = next(f for f in b.features if not support.supports(f))
                outcome, message = Outcome.NOT_SUPPORTED, f"{missing}: {support.reason(missing)}"
            else:
                outcome = Outcome.ERROR
                message = (
                    "not run: the run was interrupted"
                    if interrupted
                    else f"not run: {data['error']['message']}"
                    if data.get("error")
                    else "not run: its pass did not report it"
                )
            found = TestResult(b.id, "", b.feature, outcome, 0.0, message, b.statement, b.spec)
        tests.append(found)
    data["tests"] = [t.as_dict() for t in tests]
    results = [profile_verdict(p, [t for t in tests if t.feature in p.features], support) for p in profiles]
    data["profiles"] = [r.as_dict() for r in results]
    preflight_ok = all(c.get("result") != "missing" for c in data.get("preflight", []))
    verdict = overall_verdict(results, preflight_ok, interrupted)
    data["verdict"] = str(verdict)
    if result.exit_code == EXIT_OK:
        if interrupted:
            result.exit_code = EXIT_INTERRUPTED
        elif str(verdict) != "success":
            result.exit_code = EXIT_NONCONFORMANT


def _sweep(info: ClusterInfo, run_id: str, options: RunOptions, data: dict[str, Any]) -> None:
    """Remove what this run left (a killed worker's namespace), unless asked to keep it."""
    if options.keep != "never":
        return
    from .framework import namespaces
    from .framework.kube import Kube

    try:  # tests delete their namespaces without waiting; the run waits for all of them here
        kube = Kube.connect(info.kubeconfig, info.context)
        swept = namespaces.sweep(kube, run_id, wait=options_wait(options))
    except Exception as exc:
        data["notes"].append(f"sweeping this run's namespaces failed: {exc}")
        return
    if swept:
        data["notes"].append(f"waited for the removal of {len(swept)} test namespace(s) of this run")


def options_wait(options: RunOptions) -> float:
    from .framework.timeouts import Timeouts

    return Timeouts.from_options(options.timeout_scale, options.timeouts).seconds("namespace-cleanup")


def _clean(report_dir: Path) -> None:
    """A report directory holds one run: old results, JUnit and allure files go first."""
    import shutil

    for name in ("allure-results", "artifacts", ".passes"):
        shutil.rmtree(report_dir / name, ignore_errors=True)
    for name in ("junit.xml", "conformance-report.yaml", "conformance-report.json"):
        (report_dir / name).unlink(missing_ok=True)


def _finish(result: RunResult, options: RunOptions, started: dt.datetime, *, write: bool = True) -> RunResult:
    from .framework import junit, report

    data = result.report
    finished = dt.datetime.now(dt.UTC)
    data["run"]["finishedAt"] = finished.isoformat()
    data["run"]["durationSeconds"] = round((finished - started).total_seconds(), 1)
    data["exitCode"] = result.exit_code
    data.setdefault("tests", [])
    if not write:
        return result
    result.paths = report.write(data, options.report_dir)
    result.paths.append(junit.write(data, options.report_dir / "junit.xml"))
    return result


def _deploy_reference(info: ClusterInfo, secrets_dir: Path, report_dir: Path, faults: list[str]) -> Any:
    """The reference controller as the harness runs it: manifests, token, webhook on loopback.
    The token and keys go to ``secrets_dir`` (a private temporary directory), never to the report."""
    from .implementations import reference

    report_dir.mkdir(parents=True, exist_ok=True)
    reference.install(info)
    kubeconfig = reference.token_kubeconfig(info, secrets_dir)
    webhook = reference.webhook_certificates(secrets_dir) if info.provider == "local" else None
    log = report_dir / "kthena-ref.log"
    log.unlink(missing_ok=True)
    extra = [*(webhook.flags() if webhook else ()), *(f"--fault={f}" for f in faults)]
    controller = reference.start(kubeconfig, log, owner_pid=os.getpid(), extra=tuple(extra))
    if webhook is not None:
        reference.register_webhook(info, webhook)
    return controller
