"""``kthena-conformance webhook serve-cert|register``: an admission webhook an implementation
serves on this machine.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click
import yaml

from ..cluster.errors import HarnessError
from ..cluster.registry import get_provider
from .base import _fail, main, provider_options


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
    from ..run.webhooks import serve_cert

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
@click.option("--modelbooster-url", default=None,
              help="https URL (with path) that validates ModelBooster CREATE/UPDATE (optional)")  # fmt: skip
@click.option("--mutating-url", default=None,
              help="https URL (with path) of a mutating webhook for ModelServing CREATE/UPDATE (optional: a "
              "MutatingWebhookConfiguration of the same name is written too)")  # fmt: skip
@click.option("--mutating-modelbooster-url", default=None,
              help="https URL (with path) of a mutating webhook for ModelBooster CREATE/UPDATE (optional)")  # fmt: skip
@click.option("--ca-file", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None,
              help="the CA that signed the serving certificate (serve-cert's ca.crt); without it, --print writes "
              "the {webhook_ca_bundle} placeholder that run --implementation-webhook fills in")  # fmt: skip
@click.option("--webhook-name", default="my-implementation", show_default=True,
              help="the ValidatingWebhookConfiguration's name")  # fmt: skip
@click.option("--print", "print_only", is_flag=True, help="print the configuration as YAML; apply nothing")
def webhook_register(
    provider_name: str, name: str, kubeconfig: str | None, context: str | None, url: str, eviction_url: str | None,
    autoscaling_url: str | None, modelbooster_url: str | None, mutating_url: str | None,
    mutating_modelbooster_url: str | None, ca_file: Path | None, webhook_name: str, print_only: bool,
) -> None:  # fmt: skip
    """Point a cluster's API server at your webhook: a ValidatingWebhookConfiguration for
    ModelServings (AutoscalingPolicies with --autoscaling-url, ModelBoosters with --modelbooster-url,
    Pod evictions with --eviction-url) and, with --mutating-url / --mutating-modelbooster-url, a
    MutatingWebhookConfiguration of the same name, trusting --ca-file, applied to a local cluster by
    --name or any by --provider existing --kubeconfig/--context, or printed (--print) for
    --implementation-manifest."""
    from ..run.deploy import apply_manifests
    from ..run.webhooks import (
        PLACEHOLDER_CA_BUNDLE,
        WebhookInputError,
        ca_bundle_of,
        check_url,
        configuration,
        mutating_configuration,
    )

    try:
        check_url("--url", url)
        if eviction_url is not None:
            check_url("--eviction-url", eviction_url)
        for option, given in (
            ("--modelbooster-url", modelbooster_url),
            ("--mutating-url", mutating_url),
            ("--mutating-modelbooster-url", mutating_modelbooster_url),
        ):
            if given is not None:
                check_url(option, given)
        if autoscaling_url is not None:
            check_url("--autoscaling-url", autoscaling_url)
        if ca_file is None and not print_only:
            raise WebhookInputError("--ca-file: needed to apply the configuration (the API server must trust the CA)")
        bundle = ca_bundle_of(ca_file) if ca_file is not None else PLACEHOLDER_CA_BUNDLE
    except WebhookInputError as exc:
        click.secho(f"error: {exc}", fg="red", err=True)
        click.echo("  -> see `kthena-conformance webhook register --help`", err=True)
        sys.exit(2)
    body = configuration(
        webhook_name, url, bundle, eviction_url, autoscaling_url=autoscaling_url, modelbooster_url=modelbooster_url
    )
    mutating_urls = {
        resource: given
        for resource, given in (("modelservings", mutating_url), ("modelboosters", mutating_modelbooster_url))
        if given is not None
    }
    bodies = [body, *([mutating_configuration(webhook_name, bundle, mutating_urls)] if mutating_urls else [])]
    if print_only:
        click.echo(yaml.safe_dump_all(bodies, sort_keys=False), nl=False)
        return
    try:
        info = get_provider(provider_name, kubeconfig=kubeconfig, context=context).info(name)
        apply_manifests(info, [(f"{b['kind']} {webhook_name}", b) for b in bodies], set(),
                        lambda line: click.echo(line, err=True))  # fmt: skip
    except HarnessError as exc:
        _fail(exc)
        return
    kinds = " and ".join(b["kind"] for b in bodies)
    click.echo(f"registered {kinds} {webhook_name} -> {url}", err=True)
