"""``kthena-conformance``: the command line of the harness.

``cluster up|down|status|kubeconfig|sweep`` manage clusters of any provider; ``binaries build|path``
manage the control-plane binary cache. Every failure a user can act on is printed as one message
and one hint, with exit code 1; nothing prints a stack trace (``KTHENA_DEBUG=1`` shows it).
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click
import yaml

from .cluster.errors import HarnessError
from .cluster.registry import PROVIDER_NAMES, get_provider
from .cluster.spec import MAX_REAL_NODES, ClusterSpec, NodePool, load_crds

F = TypeVar("F", bound=Callable[..., Any])


def _progress_printer() -> Callable[[str], None]:
    started = time.monotonic()

    def show(message: str) -> None:
        click.echo(f"[{time.monotonic() - started:6.1f}s] {message}", err=True)

    return show


def _fail(exc: HarnessError) -> None:
    click.secho(f"error: {exc.message}", fg="red", err=True)
    if exc.hint:
        click.echo(f"  -> {exc.hint}", err=True)
    sys.exit(1)


def provider_options(func: F) -> F:
    for option in reversed(
        [
            click.option(
                "--provider",
                "provider_name",
                default=os.environ.get("KTHENA_PROVIDER", "local"),
                show_default=True,
                help=f"one of: {', '.join(PROVIDER_NAMES)}",
            ),
            click.option("--name", default="kthena", show_default=True, help="cluster name"),
            click.option(
                "--kubeconfig", type=click.Path(dir_okay=False), default=None, help="existing provider: kubeconfig"
            ),
            click.option("--context", default=None, help="existing provider: kubeconfig context"),
        ]
    ):
        func = option(func)
    return func


def _parse_kv(values: tuple[str, ...], what: str) -> dict[str, str]:
    out = {}
    for item in values:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise HarnessError(f"{what} {item!r} is not KEY=VALUE", f"write it as --{what} key=value")
        out[key] = value
    return out


def _parse_taints(values: tuple[str, ...]) -> list[dict[str, str]]:
    """``KEY[=VALUE]:EFFECT`` strings as taint dicts; the spec validation checks their content."""
    taints = []
    for item in values:
        kv, sep, effect = item.rpartition(":")
        key, _, value = kv.partition("=")
        if not sep or not key:
            raise HarnessError(
                f"node-taint {item!r} is not KEY[=VALUE]:EFFECT", "for example --node-taint gpu=true:NoSchedule"
            )
        taints.append({"key": key, "value": value, "effect": effect})
    return taints


@click.group()
@click.version_option(package_name="kthena-conformance")
def main() -> None:
    """Kthena ModelServing conformance: clusters, binaries and (later) the suite."""


@main.group()
def cluster() -> None:
    """Provision and inspect clusters (local is the embedded default)."""


def device_pools(gpu_nodes: int | None, gpus: int, npu_nodes: int | None, npus: int) -> list[dict[str, Any]]:
    """The node pools ``--gpu-nodes``/``--npu-nodes`` ask for, labelled for the fake DRA drivers."""
    from fake_devices.drivers import GPU, NPU

    pools = []
    for key, nodes, count, shape in (("gpu", gpu_nodes, gpus, GPU), ("npu", npu_nodes, npus, NPU)):
        if nodes is not None:
            labels = {"conformance.kthena.io/accelerator": key, shape.count_label: str(count)}
            pools.append(NodePool(name=key, count=nodes, labels=labels).model_dump())
    return pools


@cluster.command("up")
@provider_options
@click.option("--config", "config_file", type=click.Path(dir_okay=False, path_type=Path), help="cluster spec YAML")
@click.option("--nodes", type=int, default=None, help="number of fake nodes (default 2)")
@click.option("--node-label", multiple=True, help="KEY=VALUE label on every node (repeatable)")
@click.option("--node-taint", multiple=True, help="KEY[=VALUE]:EFFECT taint on every node (repeatable)")
@click.option("--apiserver-port", type=int, default=None, help="fixed kube-apiserver port (default: a free one)")
@click.option("--gpu-nodes", type=click.IntRange(0, 500), default=None, help="add a pool of N fake GPU nodes")
@click.option("--gpus-per-node", type=click.IntRange(1, 128), default=4, show_default=True, help="GPUs per GPU node")
@click.option("--npu-nodes", type=click.IntRange(0, 500), default=None, help="add a pool of N fake NPU nodes")
@click.option(
    "--npus-per-node", type=click.IntRange(1, 128), default=8, show_default=True, help="NPU chips per NPU node"
)
@click.option(
    "--crd",
    "crd_files",
    multiple=True,
    type=click.Path(dir_okay=False, path_type=Path),
    help="a CRD manifest (YAML, several documents allowed) to install while the cluster starts; local: "
    "Established before kube-controller-manager starts, so its garbage collector knows it at once (repeatable)",
)
@click.option(
    "--real-nodes",
    type=click.IntRange(0, MAX_REAL_NODES),
    default=None,
    help="add a pool named real of N real nodes: containerd and a kubelet each, on this host "
    "(local provider; root, runc, containernetworking-plugins, iptables, busybox-static)",
)
@click.option("--owner-pid", type=int, default=None, hidden=True, help="tear down when this process exits")
def cluster_up(
    provider_name: str,
    name: str,
    kubeconfig: str | None,
    context: str | None,
    config_file: Path | None,
    nodes: int | None,
    node_label: tuple[str, ...],
    node_taint: tuple[str, ...],
    apiserver_port: int | None,
    gpu_nodes: int | None,
    gpus_per_node: int,
    npu_nodes: int | None,
    npus_per_node: int,
    crd_files: tuple[Path, ...],
    real_nodes: int | None,
    owner_pid: int | None,
) -> None:
    """Bring a cluster up and print its kubeconfig path.

    ``--gpu-nodes``/``--npu-nodes`` add (or replace) node pools named ``gpu``/``npu`` labelled
    with the fake DRA drivers' device counts; the local provider then runs those drivers."""
    try:
        spec = ClusterSpec.from_file(config_file) if config_file else ClusterSpec()
        overrides: dict[str, Any] = {}
        if config_file is None or name != "kthena":
            overrides["name"] = name
        if apiserver_port is not None:
            overrides["apiserver_port"] = apiserver_port
        if nodes is not None or node_label or node_taint:
            base = spec.node_pools[0] if spec.node_pools else NodePool()
            pool = base.model_dump()
            if nodes is not None:
                pool["count"] = nodes
            pool["labels"] = {**pool["labels"], **_parse_kv(node_label, "node-label")}
            pool["taints"] = [*pool["taints"], *_parse_taints(node_taint)]
            overrides["node_pools"] = [pool, *(p.model_dump() for p in spec.node_pools[1:])]
        accelerators = device_pools(gpu_nodes, gpus_per_node, npu_nodes, npus_per_node)
        if accelerators:
            pools = overrides.get("node_pools") or [p.model_dump() for p in spec.node_pools]
            names = {p["name"] for p in accelerators}
            overrides["node_pools"] = [p for p in pools if p["name"] not in names] + accelerators
        if real_nodes is not None:
            pools = overrides.get("node_pools") or [p.model_dump() for p in spec.node_pools]
            real = NodePool(name="real", kind="real", count=real_nodes).model_dump()
            overrides["node_pools"] = [p for p in pools if p["name"] != "real"] + [real]
        if crd_files:
            overrides["crds"] = [*spec.crds, *load_crds(list(crd_files))]
        spec = ClusterSpec.parse({**spec.model_dump(), **overrides}, source="cluster options")
        provider = get_provider(provider_name, kubeconfig=kubeconfig, context=context)
        info = provider.up(spec, progress=_progress_printer(), owner_pid=owner_pid)
    except HarnessError as exc:
        _fail(exc)
        return
    timings = info.details.get("timings", {})
    took = f" in {timings['up_total']:.1f}s" if "up_total" in timings else ""
    click.echo(f"cluster '{info.name}' ({info.provider}, Kubernetes {info.kubernetes_version}) is up{took}", err=True)
    for line in info.simulates:
        click.echo(f"  simulated: {line}", err=True)
    click.echo(f"  export KUBECONFIG={info.kubeconfig}", err=True)
    click.echo(str(info.kubeconfig))


@cluster.command("down")
@provider_options
def cluster_down(provider_name: str, name: str, kubeconfig: str | None, context: str | None) -> None:
    """Stop a cluster and remove everything it left behind."""
    try:
        started = time.monotonic()
        removed = get_provider(provider_name, kubeconfig=kubeconfig, context=context).down(name)
    except HarnessError as exc:
        _fail(exc)
        return
    if removed:
        click.echo(f"cluster '{name}' is down ({time.monotonic() - started:.1f}s)", err=True)
    else:
        click.echo(f"no {provider_name} cluster named '{name}' to remove", err=True)


@cluster.command("status")
@provider_options
@click.option("--output", "-o", type=click.Choice(["yaml", "json"]), default="yaml")
def cluster_status(provider_name: str, name: str, kubeconfig: str | None, context: str | None, output: str) -> None:
    """Show what is known about a cluster (exit code 3 when there is none)."""
    try:
        state = get_provider(provider_name, kubeconfig=kubeconfig, context=context).status(name)
    except HarnessError as exc:
        _fail(exc)
        return
    if state is None:
        click.echo(f"no {provider_name} cluster named '{name}'", err=True)
        sys.exit(3)
    click.echo(json.dumps(state, indent=2) if output == "json" else yaml.safe_dump(state, sort_keys=False))


@cluster.command("kubeconfig")
@provider_options
@click.option("--print", "print_contents", is_flag=True, help="print the file's contents instead of its path")
def cluster_kubeconfig(
    provider_name: str, name: str, kubeconfig: str | None, context: str | None, print_contents: bool
) -> None:
    """Print the admin kubeconfig's path (or contents) of a running cluster."""
    try:
        path = get_provider(provider_name, kubeconfig=kubeconfig, context=context).kubeconfig(name)
    except HarnessError as exc:
        _fail(exc)
        return
    click.echo(path.read_text() if print_contents else str(path), nl=not print_contents)


@cluster.command("restart-component")
@click.option("--name", default="kthena", show_default=True, help="cluster name")
@click.argument(
    "component",
    type=click.Choice(["etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok", "coredns"]),
)
def cluster_restart_component(name: str, component: str) -> None:
    """Restart one process of a local cluster (same flags and port) and wait until it is healthy."""
    from .cluster.local.provider import LocalProvider

    try:
        started = time.monotonic()
        LocalProvider().restart_component(name, component)
    except HarnessError as exc:
        _fail(exc)
        return
    click.echo(f"{component} of cluster '{name}' restarted ({time.monotonic() - started:.1f}s)", err=True)


@cluster.command("load-image")
@click.option("--name", default="kthena", show_default=True, help="cluster name")
@click.option(
    "--driver",
    default=None,
    help="declare the image as this DRA driver's build (the Accelerators report names its reference and digest)",
)
@click.argument("archive", type=click.Path(dir_okay=False, path_type=Path))
def cluster_load_image(name: str, driver: str | None, archive: Path) -> None:
    """Import an image tar (docker save's, or OCI) into every real node's containerd of a local
    cluster, so Pods there run it without a registry (imagePullPolicy IfNotPresent or Never)."""
    from .cluster.local.provider import LocalProvider

    try:
        started = time.monotonic()
        loaded = LocalProvider().load_image(name, archive, driver=driver)
    except HarnessError as exc:
        _fail(exc)
        return
    for node, images in loaded.items():
        shown = ", ".join(f"{ref}@{digest}" for ref, digest in sorted(images.items())) or "nothing new"
        click.echo(f"{node}: {shown}", err=True)
    click.echo(f"loaded into {len(loaded)} real node(s) in {time.monotonic() - started:.1f}s", err=True)


@cluster.command("sweep")
def cluster_sweep() -> None:
    """Remove leftovers of local clusters whose supervisor was killed."""
    from .cluster.local.provider import LocalProvider

    removed = LocalProvider().sweep(progress=lambda m: click.echo(m, err=True))
    click.echo(f"swept {len(removed)} stale cluster run director{'y' if len(removed) == 1 else 'ies'}", err=True)


@main.group()
def binaries() -> None:
    """The control-plane binary cache (built from the Go module proxy)."""


@binaries.command("build")
@click.option("--force", is_flag=True, help="rebuild even when the cache is complete")
@click.option("--real-nodes", is_flag=True, help="also build the real nodes' kubelet, containerd (with its runc shim "
              "and ctr) and crictl")  # fmt: skip
@click.option("--prometheus", is_flag=True, help="also build the Prometheus server (the autoscaling tests' metrics)")
def binaries_build(force: bool, real_nodes: bool, prometheus: bool) -> None:
    """Build (or verify) the cached binaries; prints their directory."""
    from .cluster.binaries import BinaryCache

    try:
        cache = BinaryCache()
        result = cache.ensure(force=force, progress=_progress_printer(), real_nodes=real_nodes, prometheus=prometheus)
        cache.load(result.versions, deep=True)
    except HarnessError as exc:
        _fail(exc)
        return
    built = result.build_seconds
    for name, entry in dict(result.manifest.get("binaries", {})).items():  # type: ignore[call-overload]
        click.echo(f"  {name:24} {entry.get('version', '')}", err=True)
    click.echo(f"{f'built in {built:.0f}s' if built is not None else 'cached'}: {result.directory}", err=True)
    click.echo(str(result.directory))


@binaries.command("path")
def binaries_path() -> None:
    """Print the cache directory of the pinned versions (exit code 3 if not built)."""
    from .cluster.binaries import BinaryCache
    from .cluster.versions import PINNED

    try:
        found = BinaryCache().load(PINNED)
    except HarnessError as exc:
        _fail(exc)
        return
    if found is None:
        click.echo("the binaries are not built yet: run `make binaries`", err=True)
        sys.exit(3)
    click.echo(str(found.directory))


@main.command("run")
@provider_options
@click.option(
    "--report-dir", type=click.Path(file_okay=False, path_type=Path), default=Path("reports"), show_default=True
)
@click.option("--keep-cluster", is_flag=True, help="leave the cluster running afterwards")
@click.option(
    "--implementation",
    type=click.Choice(["reference", "external"]),
    default="reference",
    help="deploy the reference controller, or test one already running in the cluster (or started by "
    "--implementation-command or the support file's launch)  [default: external when a command starts it, "
    "else reference]",
)
@click.option("--support-file", type=click.Path(dir_okay=False, path_type=Path), help="ImplementationSupport YAML")
@click.option("--supported-features", multiple=True, help="declare supported features (comma-separated)")
@click.option("--all-features", is_flag=True, help="declare every feature supported")
@click.option("--implementation-name", default=None, help="implementation name (with --supported-features)")
@click.option("--implementation-version", default=None, help="implementation version (with --supported-features)")
@click.option("--profile", "profiles", multiple=True, help="run these profiles (default: all)")
@click.option("--feature", "features", multiple=True, help="run these features only")
@click.option("--id", "ids", multiple=True, help="run these behaviour ids (shell patterns: dns/*)")
@click.option("--skip-slow", is_flag=True, help="skip tests marked slow")
@click.option(
    "--shard",
    default=None,
    metavar="I/N",
    help="run only the I-th of N slices of the selection (CI fleets; merge the reports with `report merge`)",
)
@click.option("--workers", "-n", type=click.IntRange(1, 64), default=2, show_default=True, help="parallel pass workers")
@click.option("--timeout-scale", default="1", show_default=True, help="multiply every documented wait")
@click.option("--timeout", "timeouts", multiple=True, metavar="NAME=SECONDS", help="override one documented wait")
@click.option("--keep", type=click.Choice(["never", "on-failure", "always"]), default="never", show_default=True,
              help="keep test namespaces")  # fmt: skip
@click.option("--dry-run", is_flag=True, help="list what would run, run nothing")
@click.option("--reference-fault", "reference_faults", multiple=True, hidden=True, help="self-validation only")
@click.option("--controller-log", type=click.Path(dir_okay=False, path_type=Path), help="external: its log (evidence)")
@click.option(
    "--implementation-command",
    default=None,
    metavar="CMD",
    help="start your implementation with this command (quoted as for a shell, run without one) once the cluster "
    "is up, KUBECONFIG set to it; its output goes to REPORT_DIR/implementation.log; implies --implementation "
    "external",
)
@click.option(
    "--implementation-manifest",
    "implementation_manifests",
    multiple=True,
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="with --implementation-command: YAML applied before it starts (its CRD, RBAC, webhook configuration); "
    "repeatable",
)
@click.option(
    "--implementation-ready-log",
    default=None,
    metavar="REGEX",
    help="with --implementation-command: it is ready once a line of its output matches (default: once it has run 3 s)",
)
@click.option(
    "--implementation-webhook",
    is_flag=True,
    help="with --implementation-command: make a loopback serving certificate and a free port for its admission "
    "webhook; {webhook_port}, {webhook_cert}, {webhook_key}, {webhook_ca} in the command and manifests (and "
    "{webhook_ca_bundle}, base64) are filled in, webhook configurations applied once it is ready",
)
@click.option(
    "--implementation-ready-timeout",
    type=click.FloatRange(min=0, min_open=True),
    default=60.0,
    show_default=True,
    help="with --implementation-command: seconds it may take to be ready",
)
@click.option(
    "--capabilities",
    "capability_files",
    multiple=True,
    type=click.Path(dir_okay=False, path_type=Path),
    help="accelerator capability file of a DRA driver to certify (repeatable; the Accelerators profile)",
)
@click.option(
    "--fake-devices/--no-fake-devices",
    default=None,
    help="certify the fake GPU and NPU drivers with their shipped capability files [default: on the embedded "
    "(local) cluster when no --capabilities is given; --no-fake-devices leaves the Accelerators profile out]",
)
@click.option("--fake-devices-fault", "fake_device_faults", multiple=True, hidden=True, help="self-validation only")
@click.option(
    "--real-nodes/--no-real-nodes",
    default=None,
    help="real nodes (containerd and a kubelet on this host) in the embedded cluster, for the behaviours only "
    "observable inside a running container: one per accelerator device class, or one plain node [default: when "
    "the host supports them, or as KTHENA_REAL_NODES=on|off|auto says; --real-nodes makes a host that cannot an "
    "error]",
)
@click.option(
    "--runner-address",
    default=None,
    metavar="HOST",
    help="the address at which the cluster's workloads (an in-cluster autoscaler) reach this machine; the "
    "Autoscaling tests' Prometheus server listens there [default: the provider's: kind its Docker network's "
    "gateway, local 127.0.0.1; give it for an existing cluster whose controller runs in the cluster]",
)
def run_command(
    provider_name: str,
    name: str,
    kubeconfig: str | None,
    context: str | None,
    report_dir: Path,
    keep_cluster: bool,
    implementation: str,
    support_file: Path | None,
    supported_features: tuple[str, ...],
    all_features: bool,
    implementation_name: str | None,
    implementation_version: str | None,
    profiles: tuple[str, ...],
    features: tuple[str, ...],
    ids: tuple[str, ...],
    skip_slow: bool,
    shard: str | None,
    workers: int,
    timeout_scale: str,
    timeouts: tuple[str, ...],
    keep: str,
    dry_run: bool,
    reference_faults: tuple[str, ...],
    controller_log: Path | None,
    implementation_command: str | None,
    implementation_manifests: tuple[Path, ...],
    implementation_ready_log: str | None,
    implementation_ready_timeout: float,
    implementation_webhook: bool,
    capability_files: tuple[Path, ...],
    fake_devices: bool | None,
    fake_device_faults: tuple[str, ...],
    real_nodes: bool | None,
    runner_address: str | None,
) -> None:
    """Provision a cluster, deploy the implementation, run the suite, write the report.

    Exit codes: 0 every selected profile succeeded; 1 a profile is failure, partial or not-run;
    2 bad input; 3 the cluster or its preflight failed; 130 interrupted. The report
    (REPORT_DIR/conformance-report.{yaml,json}), junit.xml and allure-results/ are written in
    every case.
    """
    from .run.options import RunOptions
    from .run.orchestration import run as run_suite

    named = click.get_current_context().get_parameter_source("name") is not click.core.ParameterSource.DEFAULT
    source = click.get_current_context().get_parameter_source("implementation")
    if source is click.core.ParameterSource.DEFAULT:
        implementation = "auto"  # external when a command (flag or support file launch) starts it
    options = RunOptions(
        provider_name=provider_name,
        report_dir=report_dir,
        kubeconfig=kubeconfig,
        context=context,
        keep_cluster=keep_cluster,
        cluster_name=name if keep_cluster or named else None,  # a kept cluster is reused by name next time
        implementation=implementation,
        support_file=support_file,
        supported_features=list(supported_features),
        all_features=all_features,
        implementation_name=implementation_name,
        implementation_version=implementation_version,
        profiles=list(profiles),
        features=list(features),
        ids=list(ids),
        skip_slow=skip_slow,
        shard=shard,
        workers=workers,
        timeout_scale=timeout_scale,
        timeouts=list(timeouts),
        keep=keep,
        dry_run=dry_run,
        reference_faults=list(reference_faults),
        controller_log=controller_log,
        implementation_command=implementation_command,
        implementation_manifests=list(implementation_manifests),
        implementation_ready_log=implementation_ready_log,
        implementation_ready_timeout=implementation_ready_timeout,
        implementation_webhook=implementation_webhook,
        capabilities=list(capability_files),
        fake_devices=fake_devices,
        fake_device_faults=list(fake_device_faults),
        real_nodes=real_nodes,
        runner_address=runner_address,
    )
    result = run_suite(options, progress=_progress_printer())
    report = result.report
    if dry_run and not report.get("error"):
        for line in result.listing:
            click.echo(line)
        click.echo(f"{len(result.listing)} behaviour(s) selected{f' in shard {shard}' if shard else ''}", err=True)
        sys.exit(result.exit_code)
    for check in report.get("preflight", []):
        click.echo(f"  preflight {check['name']:28} {check['result']:8} {check['message']}", err=True)
    for profile in report.get("profiles", []):
        counts = ", ".join(f"{v} {k}" for k, v in profile["counts"].items() if v)
        click.echo(f"  profile {profile['profile']:20} {profile['verdict']:9} {counts}", err=True)
    explained = set()
    for cause in report.get("causes", []):  # one line per shared cause, then the failures of their own
        explained.update(cause["behaviours"])
        click.echo(f"  cause ({len(cause['behaviours'])} behaviours): {cause['cause']}", err=True)
    for test in report.get("tests", []):
        if test["outcome"] in ("non-conformant", "warning", "error") and test["id"] not in explained:
            click.echo(f"  {test['outcome']:15} {test['id']}: {test['message'][:300]}", err=True)
    if report.get("error"):
        click.secho(f"error: {report['error']['message']}", fg="red", err=True)
    for note in report.get("notes", []):
        click.echo(f"  note: {note[:500]}", err=True)
    click.echo(f"verdict: {report['verdict']}; report: {', '.join(str(p) for p in result.paths)}", err=True)
    sys.exit(result.exit_code)


@main.group("capabilities")
def capabilities_group() -> None:
    """Accelerator capability files (what a DRA driver's vendor declares)."""


@capabilities_group.command("check")
@click.argument("files", nargs=-1, required=True, type=click.Path(dir_okay=False, path_type=Path))
def capabilities_check(files: tuple[Path, ...]) -> None:
    """Validate capability files. Exit 0 valid, 1 with one line per problem (file:line: field: reason)."""
    from .framework.capabilities import CapabilityFileError, load_all

    try:
        loaded = load_all(files)
    except CapabilityFileError as exc:
        for line in exc.problems:
            click.secho(f"error: {line}", fg="red", err=True)
        sys.exit(1)
    for caps in loaded:
        classes = ", ".join(
            f"{c.name} ({c.level}, {len(c.attributes)} attributes, "
            f"{'exactly' if c.nodes.devices_per_node else 'at least'} {c.nodes.fewest_devices} per node)"
            for c in caps.device_classes
        )
        click.echo(f"{caps.path}: valid: driver {caps.driver} by {caps.vendor}; DeviceClasses: {classes}")


@main.group("support")
def support_group() -> None:
    """Support files: what an implementation declares it supports."""


@support_group.command("init")
@click.option("--name", "impl_name", default="my-implementation", show_default=True, help="implementation name")
@click.option("--version", "impl_version", default="0.1.0", show_default=True, help="implementation version")
@click.option(
    "--output", "-o", type=click.Path(dir_okay=False, path_type=Path), default=None, help="write here (default: stdout)"
)
@click.option("--force", is_flag=True, help="overwrite --output if it exists")
def support_init(impl_name: str, impl_version: str, output: Path | None, force: bool) -> None:
    """Write a support file that declares every feature, each with its profile and meaning, to trim."""
    from .framework.scaffold import support_scaffold

    text = support_scaffold(impl_name, impl_version)
    if output is None:
        click.echo(text, nl=False)
        return
    if output.exists() and not force:
        click.secho(f"error: {output} exists", fg="red", err=True)
        click.echo("  -> pass --force to overwrite it, or another --output", err=True)
        sys.exit(2)
    output.write_text(text)
    click.echo(f"wrote {output}: every feature declared supported; delete what {impl_name} lacks", err=True)


@support_group.command("check")
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path))
def support_check(file: Path) -> None:
    """Validate a support file. Exit 0 valid (its features by profile), 2 with one line per problem."""
    from .framework.features import PROFILES
    from .framework.support import SupportFileError, load_support

    try:
        support = load_support(file)
    except SupportFileError as exc:
        for line in exc.problems:
            click.secho(f"error: {line}", fg="red", err=True)
        sys.exit(2)
    click.echo(f"{file}: valid: {support.name} {support.version}")
    for profile in PROFILES.values():
        missing = sorted(f.value for f in profile.required if not support.supports(f))
        optional = sorted(f.value for f in profile.optional if support.supports(f))
        verdict = f"cannot pass (required, not supported: {', '.join(missing)})" if missing else "can pass"
        click.echo(f"  {profile.name:20} {verdict}; optional supported: {', '.join(optional) or 'none'}")


@main.group("install")
def install_group() -> None:
    """Install what the suite needs in a cluster besides the implementation."""


@install_group.command("prerequisites")
@provider_options
@click.option("--profile", "profiles", multiple=True, help="these profiles' prerequisites (default: every profile's)")
@click.option("--list", "list_only", is_flag=True, help="say what each profile needs; install nothing")
def install_prerequisites(
    provider_name: str, name: str, kubeconfig: str | None, context: str | None, profiles: tuple[str, ...],
    list_only: bool,
) -> None:  # fmt: skip
    """Install the selected profiles' prerequisites (the PodGroup CRD for GangScheduling, ...) into a
    cluster: a local one by --name, or any by --provider existing --kubeconfig/--context. Runs on a
    cluster the harness creates do this by themselves."""
    from .framework.features import SelectionError, get_profile
    from .run.deploy import apply_manifests
    from .run.prerequisites import for_profiles, installable

    try:
        names = [get_profile(p).name for p in profiles]
    except SelectionError as exc:
        click.secho(f"error: {exc}", fg="red", err=True)
        sys.exit(2)
    for item in for_profiles(names):
        how = "installed by this command" if item.load else "not installable by this command"
        click.echo(f"{item.profile}: {item.what} ({how})")
    if list_only:
        return
    try:
        docs = installable(names)  # may fetch a CRD (the LeaderWorkerSet CRD from its Go module)
        if not docs:
            return
        info = get_provider(provider_name, kubeconfig=kubeconfig, context=context).info(name)
        where = [(f"{d['kind']} {d['metadata']['name']}", d) for d in docs]
        apply_manifests(info, where, set(), lambda line: click.echo(line, err=True))
    except HarnessError as exc:
        _fail(exc)
        return
    click.echo(f"installed: {', '.join(w for w, _ in where)}", err=True)


@main.group("webhook")
def webhook_group() -> None:
    """An admission webhook your implementation serves on this machine: certificate and registration."""


@webhook_group.command("serve-cert")
@click.option("--dir", "directory", type=click.Path(file_okay=False, path_type=Path), required=True,
              help="write ca.crt, tls.crt and tls.key here")  # fmt: skip
@click.option("--host", "hosts", multiple=True, default=("127.0.0.1", "localhost"), show_default=True,
              help="a name or IP the certificate is valid for (repeatable)")  # fmt: skip
def webhook_serve_cert(directory: Path, hosts: tuple[str, ...]) -> None:
    """Make a CA and a serving certificate for a webhook on loopback (the embedded cluster's API
    server runs on this machine and calls it there). Prints the caBundle (base64 CA) on stdout."""
    from .run.webhooks import serve_cert

    existing = [n for n in ("ca.crt", "tls.crt", "tls.key") if (directory / n).exists()]
    if existing:
        click.secho(f"error: --dir: {directory} already holds {', '.join(existing)}", fg="red", err=True)
        click.echo("  -> choose an empty directory (a new CA would not match a running webhook)", err=True)
        sys.exit(2)
    cert = serve_cert(directory, hosts)
    click.echo(f"wrote {cert.ca} (CA), {cert.cert} and {cert.key} (serving, for {', '.join(hosts)})", err=True)
    click.echo(cert.ca_bundle())


@webhook_group.command("register")
@provider_options
@click.option("--url", required=True, help="https URL (with path) that validates ModelServing CREATE/UPDATE")
@click.option("--eviction-url", default=None, help="https URL (with path) that judges Pod evictions (optional)")
@click.option("--autoscaling-url", default=None,
              help="https URL (with path) that validates AutoscalingPolicy CREATE/UPDATE (optional)")  # fmt: skip
@click.option("--ca-file", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None,
              help="the CA that signed the serving certificate (serve-cert's ca.crt); without it, --print writes "
              "the {webhook_ca_bundle} placeholder that run --implementation-webhook fills in")  # fmt: skip
@click.option("--webhook-name", default="my-implementation", show_default=True,
              help="the ValidatingWebhookConfiguration's name")  # fmt: skip
@click.option("--print", "print_only", is_flag=True, help="print the configuration as YAML; apply nothing")
def webhook_register(
    provider_name: str, name: str, kubeconfig: str | None, context: str | None, url: str, eviction_url: str | None,
    autoscaling_url: str | None, ca_file: Path | None, webhook_name: str, print_only: bool,
) -> None:  # fmt: skip
    """Point a cluster's API server at your webhook: a ValidatingWebhookConfiguration for
    ModelServings (AutoscalingPolicies with --autoscaling-url, Pod evictions with --eviction-url)
    trusting --ca-file, applied to a local cluster by --name or any by --provider existing
    --kubeconfig/--context, or printed (--print) for --implementation-manifest."""
    from .run.deploy import apply_manifests
    from .run.webhooks import PLACEHOLDER_CA_BUNDLE, WebhookInputError, ca_bundle_of, check_url, configuration

    try:
        check_url("--url", url)
        if eviction_url is not None:
            check_url("--eviction-url", eviction_url)
        if autoscaling_url is not None:
            check_url("--autoscaling-url", autoscaling_url)
        if ca_file is None and not print_only:
            raise WebhookInputError("--ca-file: needed to apply the configuration (the API server must trust the CA)")
    except WebhookInputError as exc:
        click.secho(f"error: {exc}", fg="red", err=True)
        click.echo("  -> see `kthena-conformance webhook register --help`", err=True)
        sys.exit(2)
    bundle = ca_bundle_of(ca_file) if ca_file is not None else PLACEHOLDER_CA_BUNDLE
    body = configuration(webhook_name, url, bundle, eviction_url, autoscaling_url=autoscaling_url)
    if print_only:
        click.echo(yaml.safe_dump(body, sort_keys=False), nl=False)
        return
    try:
        info = get_provider(provider_name, kubeconfig=kubeconfig, context=context).info(name)
        apply_manifests(info, [(f"ValidatingWebhookConfiguration {webhook_name}", body)], set(),
                        lambda line: click.echo(line, err=True))  # fmt: skip
    except HarnessError as exc:
        _fail(exc)
        return
    click.echo(f"registered ValidatingWebhookConfiguration {webhook_name} -> {url}", err=True)


@main.command("catalog")
@click.option("--write", "write_file", is_flag=True, help="regenerate conformance/catalog.yaml")
@click.option("--check", is_flag=True, help="exit 1 if the checked-in catalog differs from the tests")
def catalog_command(write_file: bool, check: bool) -> None:
    """Print the behaviour catalog generated from the suite's tests."""
    from .framework import catalog

    behaviours = catalog.collect()
    text = catalog.render(behaviours)
    if write_file:
        catalog.CATALOG_PATH.write_text(text)
        click.echo(f"wrote {len(behaviours)} behaviours to {catalog.CATALOG_PATH}", err=True)
    elif check:
        problems = catalog.drift(behaviours, catalog.CATALOG_PATH.read_text())
        for line in problems:
            click.echo(line, err=True)
        sys.exit(1 if problems else 0)
    else:
        click.echo(text, nl=False)


@main.command("coverage")
@click.option("--profile", "profiles", multiple=True, help="only these profiles (repeatable; default: all)")
@click.option("--uncovered", "only_uncovered", is_flag=True, help="print only the uncovered MUST statements")
@click.option("--format", "output_format", type=click.Choice(["text", "json"]), default="text", show_default=True)
@click.option(
    "--spec-map",
    "spec_map",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="the spec map to read [default: the packaged conformance/specmap.yaml]",
)
def coverage_command(
    profiles: tuple[str, ...], only_uncovered: bool, output_format: str, spec_map: Path | None
) -> None:
    """How much of the spec the suite asserts: per profile and overall, the in-scope (ModelServing,
    AutoscalingPolicy) MUST and SHOULD statements of the spec map asserted by a behaviour, explained (not asserted,
    with a reason) and gaps; then every uncovered MUST statement with its reason.

    Exit 0; 2 on bad input (an unknown profile, a spec map that cannot be read or is invalid)."""
    from .framework import catalog, specmap
    from .framework.features import PROFILES, SelectionError, get_profile

    try:
        names = [get_profile(p).name for p in profiles] or list(PROFILES)
    except SelectionError as exc:
        click.secho(f"error: --profile: {exc}", fg="red", err=True)
        sys.exit(2)
    behaviours = catalog.collect()
    try:
        loaded = specmap.load(spec_map or specmap.SPECMAP_PATH, catalog=behaviours)
    except specmap.SpecMapError as exc:
        for line in exc.problems:
            click.secho(f"error: {line}", fg="red", err=True)
        sys.exit(2)
    cov = specmap.coverage(loaded.statements)
    rows = [p for p in cov.profiles if p.profile in names]
    uncovered = [s for s in cov.uncovered if s.profile in names]
    api_only = specmap.without_implementation_code(loaded.statements)
    named = loaded.named_behaviours()
    unmapped = sorted(b.id for b in behaviours if b.id not in named and b.profile.name in names)
    if output_format == "json":
        payload: dict[str, Any] = {"uncovered": [s.as_dict() for s in uncovered]}
        if not only_uncovered:
            payload = {
                "specMap": {"file": loaded.source, "digest": loaded.digest, "statements": len(loaded.statements)},
                "scope": specmap.SCOPE_TEXT,
                "profiles": [_coverage_json(p) for p in rows],
                "overall": _coverage_json(cov.overall),
                "overallWithoutImplementationCode": {"must": api_only.as_dict() | {"percent": _rounded(api_only)}},
                **payload,
                "unmappedBehaviours": unmapped,
            }
        click.echo(json.dumps(payload, indent=2))
        return
    if not only_uncovered:
        click.echo(
            f"spec map {loaded.source} ({loaded.digest[:19]}..., {len(loaded.statements)} statements); "
            f"in scope: topics {specmap.SCOPE_TEXT}"
        )
        head = f"{'profile':20} {'MUST asserted':16} {'explained':>9} {'gaps':>5}  {'SHOULD asserted':16} {'gaps':>5}"
        click.echo(head)
        for p in [*rows, cov.overall]:
            label = "all profiles" if p.profile == specmap.OVERALL else p.profile
            click.echo(
                f"{label:20} {_fraction(p.must):16} {p.must.explained:>9} {p.must.gaps:>5}  "
                f"{_fraction(p.should):16} {p.should.gaps:>5}"
            )
        click.echo(
            f"MUST, all profiles, without the {cov.overall.must.total - api_only.total} statement(s) about one "
            f"implementation's own code (reason {specmap.NOT_MODELSERVING}): {_fraction(api_only)}"
        )
    gaps = sum(1 for s in uncovered if s.reason == specmap.GAP)
    click.echo(
        f"uncovered MUST statements: {len(uncovered)} ({gaps} {'gap' if gaps == 1 else 'gaps'}, "
        f"{len(uncovered) - gaps} explained){':' if uncovered else ''}"
    )
    for s in uncovered:
        click.echo(f"  {s.id} ({s.where}, {s.profile})\n      {s.reason}: {s.detail}")
    if unmapped and not only_uncovered:
        click.echo(
            f"{len(unmapped)} catalog behaviour(s) of these profiles assert no statement of the spec map "
            "(--format json lists them)"
        )


def _fraction(f: Any) -> str:
    from .framework.specmap import percent_text

    return f"{f.asserted}/{f.total} ({percent_text(f.percent)})"


def _rounded(f: Any) -> float | None:
    return None if f.percent is None else round(f.percent, 2)


def _coverage_json(p: Any) -> dict[str, Any]:
    data: dict[str, Any] = p.as_dict()
    for level, figures in (("must", p.must), ("should", p.should)):
        data[level]["percent"] = _rounded(figures)
    return data


@main.group("report")
def report_group() -> None:
    """Work with conformance reports."""


@report_group.command("verify")
@click.argument("path", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--any-suite", is_flag=True, help="do not require the report to come from this suite's code")
def report_verify(path: Path, any_suite: bool) -> None:
    """Check a report's integrity and consistency. Exit 0 valid, 1 problems found, 2 unreadable."""
    from .framework import catalog, report

    try:
        problems = report.verify(path, digest=None if any_suite else catalog.suite_digest(), catalog=catalog.collect())
    except report.ReportError as exc:
        click.secho(f"error: {exc}", fg="red", err=True)
        sys.exit(2)
    for line in problems:
        click.echo(f"  - {line}", err=True)
    click.echo(f"{path}: {'valid' if not problems else f'{len(problems)} problem(s)'}", err=True)
    sys.exit(1 if problems else 0)


@report_group.command("merge")
@click.argument("shard_reports", nargs=-1, required=True, type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "--output",
    "-o",
    required=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="directory for the merged conformance-report.{yaml,json} and junit.xml",
)
def report_merge(shard_reports: tuple[Path, ...], output: Path) -> None:
    """Merge the reports of `run --shard 1/N` ... `N/N` (YAML or JSON) into one report.

    Each behaviour's outcome comes from the shard that ran it; counts and verdicts are recomputed
    as one run computes them. Refused (exit 2, every reason named): reports of different suites,
    selections or implementations, a missing, repeated or overlapping shard. Otherwise the exit
    code is the one the whole run would have had (0 success; 1 failure, partial or not-run; 3 a
    shard's cluster or preflight failed; 130 interrupted).
    """
    import secrets

    from .framework import junit, merge, report

    problems: list[str] = []
    targets = {(output / name).resolve() for name in (report.YAML_NAME, report.JSON_NAME)}
    problems += [f"--output {output} would overwrite the shard report {p}" for p in shard_reports
                 if p.resolve() in targets]  # fmt: skip
    loaded = []
    for path in shard_reports:
        try:
            loaded.append(merge.ShardReport(str(path), report.load(path)))
        except report.ReportError as exc:
            problems += exc.problems
    if not problems:
        try:
            merged = merge.merge(loaded, run_id=secrets.token_hex(4), command=list(sys.argv))
        except merge.MergeError as exc:
            problems += exc.problems
    if problems:
        for line in problems:
            click.secho(f"error: {line}", fg="red", err=True)
        click.echo("  -> merge the reports of one sharded run: `run --shard 1/N` ... `--shard N/N`", err=True)
        sys.exit(2)
    data = merged.as_data()
    paths = report.write(merged, output)
    paths.append(junit.write(data, output / "junit.xml"))
    for profile in data["profiles"]:
        counts = ", ".join(f"{v} {k}" for k, v in profile["counts"].items() if v)
        click.echo(f"  profile {profile['profile']:20} {profile['verdict']:9} {counts}", err=True)
    if data.get("error"):
        click.secho(f"error: {data['error']['message']}", fg="red", err=True)
    click.echo(
        f"merged {len(loaded)} shard reports; verdict: {data['verdict']}; report: {', '.join(map(str, paths))}",
        err=True,
    )
    sys.exit(int(data.get("exitCode") or 0))


@main.command("sweep")
@provider_options
@click.option("--run-id", default=None, help="only this run's namespaces (default: every suite namespace)")
def sweep_command(
    provider_name: str, name: str, kubeconfig: str | None, context: str | None, run_id: str | None
) -> None:
    """Delete test namespaces left by interrupted or --keep runs."""
    from .framework import namespaces
    from .framework.kube import Kube

    try:
        provider = get_provider(provider_name, kubeconfig=kubeconfig, context=context)
        info = provider.info(name)
        swept = namespaces.sweep(Kube.connect(info.kubeconfig, info.context), run_id, wait=120)
    except HarnessError as exc:
        _fail(exc)
        return
    click.echo(f"swept {len(swept)} namespace(s){': ' + ', '.join(swept) if swept else ''}", err=True)


def run() -> None:  # pragma: no cover - console entry with debug switch
    from .run.signals import terminate_like_interrupt

    terminate_like_interrupt()
    if os.environ.get("KTHENA_DEBUG") == "1":
        main()
    else:
        try:
            main()
        except KeyboardInterrupt:
            click.echo("interrupted", err=True)
            sys.exit(130)


if __name__ == "__main__":
    run()
