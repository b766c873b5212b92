"""``kthena-conformance install prerequisites``: what the selected profiles need in a cluster
besides the implementation.
"""

from __future__ import annotations

import sys

import click

from ..cluster.errors import HarnessError
from ..cluster.registry import get_provider
from .base import _fail, main, provider_options


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
    from ..framework.features import SelectionError, get_profile
    from ..run.deploy import apply_manifests
    from ..run.prerequisites import for_profiles, installable

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
