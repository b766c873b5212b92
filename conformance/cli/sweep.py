"""``kthena-conformance sweep``: delete test namespaces left behind by interrupted or kept runs."""

from __future__ import annotations

import click

from ..cluster.errors import HarnessError
from ..cluster.registry import get_provider
from .base import _fail, main, provider_options


@main.command("sweep")
@provider_options
@click.option("--run-id", default=None, help="only this run's namespaces (default: every suite namespace)")
def sweep_command(
    provider_name: str, name: str, kubeconfig: str | None, context: str | None, run_id: str | None
) -> None:
    """Delete test namespaces left by interrupted or --keep runs."""
    from ..framework import namespaces
    from ..framework.kube import Kube

    try:
        provider = get_provider(provider_name, kubeconfig=kubeconfig, context=context)
        info = provider.info(name)
        swept = namespaces.sweep(Kube.connect(info.kubeconfig, info.context), run_id, wait=120)
    except HarnessError as exc:
        _fail(exc)
        return
    click.echo(f"swept {len(swept)} namespace(s){': ' + ', '.join(swept) if swept else ''}", err=True)
