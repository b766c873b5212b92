"""``kthena-ref``: the reference controller's command line.

``crd`` prints the generated CustomResourceDefinition (``--refresh-podspec`` first refreshes the
embedded PodSpec schema from a cluster of the pinned Kubernetes version); ``render`` prints every
object the controller would create for a ModelServing from scratch; ``check-update`` says whether
an image patch can apply the change from one ModelServing to another (rolloutStrategy.updateMethod
InPlace), or why the controller would recreate Pods instead.
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

from . import faults, variations

# libyaml where PyYAML has it: the manifests are large (the CRDs are 0.6 MB), and the harness renders
# them for every run it deploys the reference in.
_YAML_LOADER: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_YAML_DUMPER: type[yaml.SafeDumper] = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


def _fail(message: str, hint: str = "", code: int = 1) -> None:
    click.secho(f"error: {message}", fg="red", err=True)
    if hint:
        click.echo(f"  -> {hint}", err=True)
    sys.exit(code)


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
    click.echo(yaml.dump(crd(), Dumper=_YAML_DUMPER, sort_keys=False), nl=False)


def load_modelserving(path: Path, *, code: int = 1) -> Any:
    """A ModelServing from a YAML file (``-``: standard input), or a clear error naming the fields
    that are wrong (exit status ``code``)."""
    from pydantic import ValidationError

    from .api.types import ModelServing

    source = "<stdin>" if str(path) == "-" else str(path)
    try:
        text = sys.stdin.read() if str(path) == "-" else path.read_text()
        data = yaml.safe_load(text)
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        _fail(f"cannot read {source}: {exc}", "pass a ModelServing YAML file", code)
    if not isinstance(data, dict) or data.get("kind") != "ModelServing":
        found = _what(data)
        _fail(f"{source} does not hold a ModelServing ({found})", "the file needs kind: ModelServing", code)
    try:
        return ModelServing.model_validate(data)
    except ValidationError as exc:
        problems = "\n".join(f"  {_location(err['loc'])}: {err['msg']}" for err in exc.errors())
        _fail(f"{source} is not a valid ModelServing:\n{problems}", "fix the fields named above", code)


def _what(data: Any) -> str:
    """What a YAML document holds instead of a ModelServing."""
    if isinstance(data, dict):
        return f"kind: {data['kind']}" if data.get("kind") else "no kind"
    if data is None:
        return "it is empty"
    names = {list: "a list", str: "a string", int: "a number", float: "a number", bool: "a boolean"}
    return f"it holds {names.get(type(data), type(data).__name__)}"


def _location(loc: tuple[int | str, ...]) -> str:
    """A pydantic error location as a field path: ``spec.template.roles[0].name``."""
    return "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in loc).lstrip(".")


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


@main.command("check-update")
@click.argument("old_path", metavar="OLD.yaml", type=click.Path(allow_dash=True, path_type=Path))
@click.argument("new_path", metavar="NEW.yaml", type=click.Path(allow_dash=True, path_type=Path))
@click.option("--role", default=None, metavar="NAME", help="check only this Role (the RoleRollingUpdate unit)")
@click.option("--output", type=click.Choice(["text", "json"]), default="text", show_default=True)
def check_update_command(old_path: Path, new_path: Path, role: str | None, output: str) -> None:
    """Say whether an image patch can apply the update from OLD.yaml to NEW.yaml (updateMethod
    InPlace), or list every change that makes the controller recreate Pods instead. Either file may
    be - (standard input). Exit 0 either way; 2 when an input is invalid."""
    from .planner.eligibility import check_eligibility, check_role_eligibility, image_changes

    if str(old_path) == "-" and str(new_path) == "-":
        _fail("OLD.yaml and NEW.yaml cannot both be - (standard input)", "pass at least one of them as a file", 2)
    old = load_modelserving(old_path, code=2)
    new = load_modelserving(new_path, code=2)
    old_roles, new_roles = old.spec.template.roles, new.spec.template.roles
    if role is not None and role not in {r.name for r in [*old_roles, *new_roles]}:
        known = ", ".join(dict.fromkeys(r.name for r in [*old_roles, *new_roles]))
        _fail(f"--role {role}: no such Role in {old_path} or {new_path} (roles: {known})", "pass a Role name", 2)
    findings = check_eligibility(old, new) if role is None else check_role_eligibility(old, new, role)
    images = image_changes(old_roles, new_roles, role=role)
    if output == "json":
        document = {
            "eligible": not findings,
            "findings": [{"field": f.field, "reason": f.reason} for f in findings],
            "imageChanges": [
                {"role": c.role, "template": c.template, "container": c.container, "old": c.old, "new": c.new}
                for c in images
            ],
        }
        click.echo(json.dumps(document, indent=2))
        return
    unit = "the ServingGroups" if role is None else f"the instances of Role {role}"
    if findings:
        click.echo(f"an image patch cannot apply this update; the controller recreates {unit} because:")
        for finding in findings:
            click.echo(f"{finding.field}: {finding.reason}")
    else:
        click.echo(f"an image patch can apply this update: {unit} are updated in place")
    if images:
        click.echo("image changes:")
        for c in images:
            click.echo(f"  role {c.role} {c.template} container {c.container}: {c.old} -> {c.new}")
    else:
        click.echo("no image changes")


def _fault_specs(ctx: click.Context, param: click.Parameter, value: tuple[str, ...]) -> tuple[str, ...]:
    """``--fault`` values checked (a known NAME, a non-empty PATTERN after '@'), as a usage error."""
    try:
        faults.plan(value, "--fault")
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None
    return value


MANIFESTS = ("crd", "autoscaling-crd", "modelbooster-crd", "rbac", "podgroup-crd", "controller")
DEFAULT_MANIFESTS = ("crd", "autoscaling-crd", "modelbooster-crd", "rbac", "podgroup-crd")
_GENERATED = ("crd", "autoscaling-crd", "modelbooster-crd")  # from the pydantic types, not deploy/*.yaml


@main.command("manifests")
@click.argument("which", type=click.Choice(MANIFESTS), nargs=-1)
@click.option("--image", default="kthena-ref:dev", show_default=True, help="controller image (controller manifest)")
@click.option("--ca-bundle-file", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None,
              help="PEM CA that signed the webhook's serving certificate (controller manifest)")  # fmt: skip
@click.option("--fault", "fault_names", multiple=True, metavar="NAME[@PATTERN]", callback=_fault_specs,
              help=f"self-validation only: a fault the CRD schema carries (no-schema-defaults, ...); default: "
              f"${faults.ENV}. A scoped fault (NAME@PATTERN) never reaches the schema; it adds the right to read "
              "namespaces (their labels scope it) to the ClusterRole")  # fmt: skip
def manifests_command(
    which: tuple[str, ...], image: str, ca_bundle_file: Path | None, fault_names: tuple[str, ...]
) -> None:
    """Print deployment manifests as YAML: the ModelServing, AutoscalingPolicy and ModelBooster CRDs,
    the ClusterRole, a minimal PodGroup CRD and the in-cluster controller (Deployment, Service, webhook
    configuration). Default: all but the controller."""
    import base64

    try:
        faults.configure(fault_names or faults.from_env())
    except ValueError as exc:
        _fail(str(exc), f"fix --fault or ${faults.ENV}")
        return
    from .api.autoscaling_crd import crd as autoscaling_crd
    from .api.crd import crd
    from .api.modelbooster_crd import crd as modelbooster_crd

    generated = {"crd": crd, "autoscaling-crd": autoscaling_crd, "modelbooster-crd": modelbooster_crd}
    docs: list[Any] = []
    deploy = Path(__file__).with_name("deploy")
    for name in which or DEFAULT_MANIFESTS:
        if name in _GENERATED:
            docs.append(generated[name]())
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
        loaded = [d for d in yaml.load_all(text, Loader=_YAML_LOADER) if d]
        if name == "rbac" and faults.scoped():  # scoped faults read their namespace's label
            for doc in loaded:
                if doc.get("kind") == "ClusterRole":
                    doc["rules"].append({"apiGroups": [""], "resources": ["namespaces"], "verbs": ["get"]})
        docs.extend(loaded)
    click.echo(yaml.dump_all(docs, Dumper=_YAML_DUMPER, sort_keys=False), nl=False)


@main.command("run")
@click.option(
    "--kubeconfig",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    envvar="KUBECONFIG",
    help="default: $KUBECONFIG, else the in-cluster config",
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
@click.option("--fault", "fault_names", multiple=True, metavar="NAME[@PATTERN]", callback=_fault_specs,
              help=f"self-validation only: break one documented behaviour (repeatable; default: ${faults.ENV}, "
              f"comma-separated); NAME@PATTERN breaks it only in namespaces whose label {faults.SCOPE_LABEL} "
              f"matches the fnmatch PATTERN (repeat for more patterns). NAME is one of: "
              f"{', '.join(sorted(faults.FAULTS))}")  # fmt: skip
@click.option("--variation", "variation_names", multiple=True, metavar="NAME",
              type=click.Choice(sorted(variations.VARIATIONS)),
              help=f"a conformant variation: another choice the spec leaves open (repeatable; default: "
              f"${variations.ENV}, comma-separated). One of: {', '.join(sorted(variations.VARIATIONS))}")  # fmt: skip
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
    variation_names: tuple[str, ...],
) -> None:
    """Run the controller (and, with --webhook-port, its admission webhook) until SIGTERM or SIGINT."""
    if webhook_port is not None and (webhook_cert is None or webhook_key is None):
        _fail("--webhook-port needs --webhook-cert and --webhook-key", "pass the webhook's TLS certificate and key")
    try:
        active = faults.configure(fault_names or faults.from_env())
    except ValueError as exc:
        _fail(str(exc), f"fix --fault or ${faults.ENV}")
        return
    try:
        varied = variations.configure(variation_names or variations.from_env())
    except ValueError as exc:
        _fail(str(exc), f"fix --variation or ${variations.ENV}")
        return
    import asyncio
    import logging

    from .runtime.main import run_controller

    logging.basicConfig(level=log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if active:
        scoped = faults.scoped()
        logging.getLogger("kthena_ref.faults").warning(
            "FAULTS INJECTED (self-validation only, this controller is deliberately broken): %s",
            ", ".join(
                f"{n} (in namespaces labelled {'|'.join(scoped[n])})" if n in scoped else n for n in sorted(active)
            ),
        )
    if varied:
        logging.getLogger("kthena_ref.variations").warning(
            "conformant variations on (another choice the spec leaves open): %s", ", ".join(sorted(varied))
        )
    from kubernetes_asyncio.config import ConfigException

    from .admission.server import WebhookListenError

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
        except WebhookListenError as exc:
            _fail(str(exc), "pick a free --webhook-port, and a --webhook-host of this machine")


if __name__ == "__main__":
    main()
