"""``kthena-conformance support init|check``: write and validate support files (what an
implementation declares it supports).
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from .base import main


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
    from ..framework.scaffold import support_scaffold

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
    from ..framework.features import PROFILES
    from ..framework.support import SupportFileError, load_support

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
