"""``kthena-conformance cluster up|down|status|kubeconfig|restart-component|sweep``: clusters of any
provider.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

import click
import yaml

from ..cluster.errors import HarnessError
from ..cluster.registry import get_provider
from ..cluster.spec import MAX_REAL_NODES, ClusterSpec, NodePool, load_crds
from .base import _fail, _parse_kv, _parse_taints, _progress_printer, main, provider_options


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
    """Show what is known about a cluster (exit code 3 when there is none or it is not running:
    dead, stopped, starting or unreachable)."""
    try:
        state = get_provider(provider_name, kubeconfig=kubeconfig, context=context).status(name)
    except HarnessError as exc:
        _fail(exc)
        return
    if state is None:
        click.echo(f"no {provider_name} cluster named '{name}'", err=True)
        sys.exit(3)
    click.echo(json.dumps(state, indent=2) if output == "json" else yaml.safe_dump(state, sort_keys=False))
    phase = state.get("phase")
    if phase == "degraded":
        dead = ", ".join(state.get("deadComponents") or []) or state.get("failed_component") or "a component"
        click.echo(f"cluster '{name}' is degraded: {dead} not running", err=True)
        click.echo(
            f"  -> `kthena-conformance cluster restart-component --name {name} COMPONENT`, or down and up", err=True
        )
    elif phase != "ready":
        why = f" (it last said {state['recordedPhase']}; its supervisor is gone)" if phase == "dead" else ""
        click.echo(f"cluster '{name}' is not running: phase {phase}{why}", err=True)
        if phase in ("dead", "stopped"):
            click.echo(f"  -> `kthena-conformance cluster down --name {name}` removes what it left", err=True)
        sys.exit(3)


@cluster.command("images")
@click.option("--name", default="kthena", show_default=True, help="the kind cluster")
@click.option("--image", default="kthena-ref:ci", show_default=True, help="the reference controller's image tag")
@click.option("--fake-devices-image", default="kthena/fake-devices:dev", show_default=True,
              help="the fake DRA drivers' image tag")  # fmt: skip
def cluster_images(name: str, image: str, fake_devices_image: str) -> None:
    """kind: build the reference controller's and the fake DRA drivers' images from this checkout
    (no registry) and load them into the cluster's nodes."""
    from ..cluster.kindnode import load_app_images

    try:
        load_app_images(name, reference=image, fake_devices=fake_devices_image, progress=_progress_printer())
    except HarnessError as exc:
        _fail(exc)


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
    from ..cluster.local.provider import LocalProvider

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
    from ..cluster.local.provider import LocalProvider

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
    from ..cluster.local.provider import LocalProvider

    removed = LocalProvider().sweep(progress=lambda m: click.echo(m, err=True))
    click.echo(f"swept {len(removed)} stale cluster run director{'y' if len(removed) == 1 else 'ies'}", err=True)
