"""``kthena-conformance catalog``: the behaviour catalog generated from the suite's tests."""

from __future__ import annotations

import sys

import click

from .base import main


@main.command("catalog")
@click.option("--write", "write_file", is_flag=True, help="regenerate conformance/catalog.yaml")
@click.option("--check", is_flag=True, help="exit 1 if the checked-in catalog differs from the tests")
def catalog_command(write_file: bool, check: bool) -> None:
    """Print the behaviour catalog generated from the suite's tests."""
    from ..framework import catalog

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
