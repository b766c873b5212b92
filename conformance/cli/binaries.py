"""``kthena-conformance binaries build|path``: the control-plane binary cache."""

from __future__ import annotations

import sys

import click

from ..cluster.errors import HarnessError
from .base import _fail, _progress_printer, main


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
    from ..cluster.binaries import BinaryCache

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
    from ..cluster.binaries import BinaryCache
    from ..cluster.versions import PINNED

    try:
        found = BinaryCache().load(PINNED)
    except HarnessError as exc:
        _fail(exc)
        return
    if found is None:
        click.echo("the binaries are not built yet: run `make binaries`", err=True)
        sys.exit(3)
    click.echo(str(found.directory))
