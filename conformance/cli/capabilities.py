"""``kthena-conformance capabilities check``: validate accelerator capability files."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from .base import main


@main.group("capabilities")
def capabilities_group() -> None:
    """Accelerator capability files (what a DRA driver's vendor declares)."""


@capabilities_group.command("check")
@click.argument("files", nargs=-1, required=True, type=click.Path(dir_okay=False, path_type=Path))
def capabilities_check(files: tuple[Path, ...]) -> None:
    """Validate capability files. Exit 0 valid, 1 with one line per problem (file:line: field: reason)."""
    from ..framework.capabilities import CapabilityFileError, load_all

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
