"""``kthena-ref``: the reference controller's command line.

``crd`` prints the generated CustomResourceDefinition (``--refresh-podspec`` first refreshes the
embedded PodSpec schema from a cluster of the pinned Kubernetes version); ``render`` prints every
object the controller would create for a ModelServing from scratch.
"""

from __future__ import annotations

import contextlib
import json
import ssl
import sys
import urllib.request
from pathlib import Path
from typing import Any

import click
import yaml

from . import faults


def _fail(message: str, hint: str = "") -> None:
    click.secho(f"error: {message}", fg="red", err=True)
    if hint:
        click.echo(f"  -> {hint}", err=True)
    sys.exit(1)


def _fetch_openapi(kubeconfig: Path) -> tuple[dict[str, Any], str]:
    """``/openapi/v3/api/v1`` and ``/version`` of the cluster in ``kubeconfig`` (client-cert auth)."""
    config = yaml.safe_load(kubeconfig.read_text())
    current = config.get("current-context")
    context = next(c["context"] for c in config["contexts"] if c["name"] == current)
    cluster = next(c["cluster"] for c in config["clusters"] if c["name"] == context["cluster"])
    user = next(u["user"] for u in config["users"] if u["name"] == context["user"])
    ctx = ssl.create_default_context(cafile=cluster.get("certificate-authority"))
    if "client-certificate" in user:
        ctx.load_cert_chain(user["client-certificate"], user["client-key"])
    with urllib.request.urlopen(cluster["server"] + "/openapi/v3/api/v1", context=ctx, timeout=30) as resp:
        document = json.load(resp)
    with urllib.request.urlopen(cluster["server"] + "/version", context=ctx, timeout=30) as resp:
        version = json.load(resp)["gitVersion"]
    return document, str(version)


@click.group()
@click.version_option(package_name="kthena-conformance")
def main() -> None:
    """Kthena's reference ModelServing controller."""


@main.command("crd")
@click.option("--refresh-podspec", "kubeconfig", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="first refresh the embedded PodSpec schema from the cluster in this kubeconfig")  # fmt: skip
def crd_command(kubeconfig: Path | None) -> None:
    """Print the ModelServing CustomResourceDefinition as YAML."""
    from .api.crd import crd
    from .api.podspec import pod_spec_from_openapi, write_snapshot

    if kubeconfig is not None:
        try:
            document, version = _fetch_openapi(kubeconfig)
        except (OSError, KeyError, StopIteration, ValueError) as exc:
            _fail(f"cannot read the OpenAPI document through {kubeconfig}: {exc}", "check the kubeconfig and cluster")
            return
        write_snapshot(pod_spec_from_openapi(document), f"kube-apiserver {version} /openapi/v3/api/v1")
        click.echo(f"refreshed the PodSpec schema from kube-apiserver {version}", err=True)
    click.echo(yaml.safe_dump(crd(), sort_keys=False), nl=False)


def load_modelserving(path: Path) -> Any:
    """A ModelServing from a YAML file, or a clear error naming the fields that are wrong."""
    from pydantic import ValidationError

    from .api.types import ModelServing

    try:
        data = yaml.safe_load(path.read_text())
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        _fail(f"cannot read {path}: {exc}", "pass a ModelServing YAML file")
    if not isinstance(data, dict) or data.get("kind") != "ModelServing":
        _fail(f"{path} does not hold a ModelServing", "the file needs kind: ModelServing")
    try:
        return ModelServing.model_validate(data)
    except ValidationError as exc:
        problems = "\n".join(f"  {'.'.join(str(p) for p in err['loc'])}: {err['msg']}" for err in exc.errors())
        _fail(f"{path} is not a valid ModelServing:\n{problems}", "fix the fields named above")


@main.command("render")
@click.argument("path", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--gang", is_flag=True, help="as if the Volcano PodGroup CRD were installed (adds PodGroups)")
def render_command(path: Path, gang: bool) -> None:
    """Print, as YAML, every object the controller would create for PATH from scratch."""
    from .planner.plan import Observed, plan
    from .plugins.base import PluginConfigError

    ms = load_modelserving(path)
    try:
        result = plan(Observed(ms=ms, pods=[], podgroups=[] if gang else None, services=[]))
    except PluginConfigError as exc:
        _fail(f"{path}: {exc}", "fix the plugin named above")
        return
    docs = [*result.create_revisions, *result.apply_podgroups, *result.create_services, *result.create_pods]
    click.echo(yaml.safe_dump_all(docs, sort_keys=False), nl=False)


MANIFESTS = ("crd", "rbac", "podgroup-crd", "controller")


@main.command("manifests")
@click.argument("which", type=click.Choice(MANIFESTS), nargs=-1)
@click.option("--image", default="kthena-ref:dev", show_default=True, help="controller image (controller manifest)")
@click.option("--ca-bundle-file", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None,
              help="PEM CA that signed the webhook's serving certificate (controller manifest)")  # fmt: skip
def manifests_command(which: tuple[str, ...], image: str, ca_bundle_file: Path | None) -> None:
    """Print deployment manifests as YAML: the CRD, the ClusterRole, a minimal PodGroup CRD and the
    in-cluster controller (Deployment, Service, webhook configuration). Default: the first three."""
    import base64

    from .api.crd import crd

    docs: list[Any] = []
    deploy = Path(__file__).with_name("deploy")
    for name in which or MANIFESTS[:3]:
        if name == "crd":
            docs.append(crd())
            continue
        text = (deploy / f"{name}.yaml").read_text()
        if name == "controller":
            if ca_bundle_file is None:
                _fail(
                    "the controller manifest needs --ca-bundle-file", "pass the CA that signed the webhook certificate"
                )
                return
            text = text.replace("image: IMAGE", f"image: {image}").replace(
                "caBundle: CA_BUNDLE", f"caBundle: {base64.b64encode(ca_bundle_file.read_bytes()).decode()}"
            )
        docs.extend(d for d in yaml.safe_load_all(text) if d)
    click.echo(yaml.safe_dump_all(docs, sort_keys=False), nl=False)


@main.command("run")
@click.option(
    "--kubeconfig", type=click.Path(exists=True, dir_okay=False, path_type=Path), help="default: in-cluster config"
)
@click.option("--namespace", default=None, help="watch one namespace only (default: all)")
@click.option("--workers", type=click.IntRange(1, 64), default=4, show_default=True)
@click.option("--leader-elect/--no-leader-elect", default=False, show_default=True, help="hold a Lease before acting")
@click.option("--lease-namespace", default="kube-system", show_default=True)
@click.option("--log-level", type=click.Choice(["DEBUG", "INFO", "WARNING"]), default="INFO", show_default=True)
@click.option("--owner-pid", type=int, default=None, hidden=True, help="stop when this process exits (test harness)")
@click.option("--webhook-port", type=click.IntRange(1, 65535), default=None, help="serve the validating webhook here")
@click.option("--webhook-host", default="0.0.0.0", show_default=True)
@click.option("--webhook-cert", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None)
@click.option("--webhook-key", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None)
@click.option("--fault", "fault_names", multiple=True, metavar="NAME", type=click.Choice(sorted(faults.FAULTS)),
              help=f"self-validation only: break one documented behaviour (repeatable; default: ${faults.ENV}, "
              f"comma-separated). One of: {', '.join(sorted(faults.FAULTS))}")  # fmt: skip
def run_command(
    kubeconfig: Path | None,
    namespace: str | None,
    workers: int,
    leader_elect: bool,
    lease_namespace: str,
    log_level: str,
    owner_pid: int | None,
    webhook_port: int | None,
    webhook_host: str,
    webhook_cert: Path | None,
    webhook_key: Path | None,
    fault_names: tuple[str, ...],
) -> None:
    """Run the controller (and, with --webhook-port, its admission webhook) until SIGTERM or SIGINT."""
    if webhook_port is not None and (webhook_cert is None or webhook_key is None):
        _fail("--webhook-port needs --webhook-cert and --webhook-key", "pass the webhook's TLS certificate and key")
    try:
        active = faults.configure(fault_names or faults.from_env())
    except ValueError as exc:
        _fail(str(exc), f"fix --fault or ${faults.ENV}")
        return
    import asyncio
    import logging

    from .runtime.main import run_controller

    logging.basicConfig(level=log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if active:
        logging.getLogger("kthena_ref.faults").warning(
            "FAULTS INJECTED (self-validation only, this controller is deliberately broken): %s",
            ", ".join(sorted(active)),
        )
    from kubernetes_asyncio.config import ConfigException

    with contextlib.suppress(KeyboardInterrupt):
        webhook = (webhook_host, webhook_port, webhook_cert, webhook_key) if webhook_port else None
        try:
            asyncio.run(
                run_controller(kubeconfig, namespace, workers, leader_elect, lease_namespace, owner_pid, webhook)
            )
        except ConfigException as exc:
            _fail(
                f"no cluster to connect to: {exc}",
                "pass --kubeconfig, or run inside a Pod with a ServiceAccount token mounted",
            )


if __name__ == "__main__":
    main()
