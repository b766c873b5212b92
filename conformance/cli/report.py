"""``kthena-conformance report verify|merge``: check a report, merge shard reports."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from .base import main


@main.group("report")
def report_group() -> None:
    """Work with conformance reports."""


@report_group.command("verify")
@click.argument("path", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--any-suite", is_flag=True, help="do not require the report to come from this suite's code")
def report_verify(path: Path, any_suite: bool) -> None:
    """Check a report's integrity and consistency. Exit 0 valid, 1 problems found, 2 unreadable."""
    from ..framework import catalog, report

    try:
        problems = report.verify(path, digest=None if any_suite else catalog.suite_digest(), catalog=catalog.collect())
    except report.ReportError as exc:
        click.secho(f"error: {exc}", fg="red", err=True)
        sys.exit(2)
    for line in problems:
        click.echo(f"  - {line}", err=True)
    click.echo(f"{path}: {'valid' if not problems else f'{len(problems)} problem(s)'}", err=True)
    sys.exit(1 if problems else 0)


@report_group.command("merge")
@click.argument("shard_reports", nargs=-1, required=True, type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "--output",
    "-o",
    required=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="directory for the merged conformance-report.{yaml,json} and junit.xml",
)
def report_merge(shard_reports: tuple[Path, ...], output: Path) -> None:
    """Merge the reports of `run --shard 1/N` ... `N/N` (YAML or JSON) into one report.

    Each behaviour's outcome comes from the shard that ran it; counts and verdicts are recomputed
    as one run computes them. Refused (exit 2, every reason named): reports of different suites,
    selections or implementations, a missing, repeated or overlapping shard. Otherwise the exit
    code is the one the whole run would have had (0 success; 1 failure, partial or not-run; 3 a
    shard's cluster or preflight failed; 130 interrupted).
    """
    import secrets

    from ..framework import junit, merge, report

    problems: list[str] = []
    targets = {(output / name).resolve() for name in (report.YAML_NAME, report.JSON_NAME)}
    problems += [f"--output {output} would overwrite the shard report {p}" for p in shard_reports
                 if p.resolve() in targets]  # fmt: skip
    loaded = []
    for path in shard_reports:
        try:
            loaded.append(merge.ShardReport(str(path), report.load(path)))
        except report.ReportError as exc:
            problems += exc.problems
    if not problems:
        try:
            merged = merge.merge(loaded, run_id=secrets.token_hex(4), command=list(sys.argv))
        except merge.MergeError as exc:
            problems += exc.problems
    if problems:
        for line in problems:
            click.secho(f"error: {line}", fg="red", err=True)
        click.echo("  -> merge the reports of one sharded run: `run --shard 1/N` ... `--shard N/N`", err=True)
        sys.exit(2)
    data = merged.as_data()
    paths = report.write(merged, output)
    paths.append(junit.write(data, output / "junit.xml"))
    for profile in data["profiles"]:
        counts = ", ".join(f"{v} {k}" for k, v in profile["counts"].items() if v)
        click.echo(f"  profile {profile['profile']:20} {profile['verdict']:9} {counts}", err=True)
    if data.get("error"):
        click.secho(f"error: {data['error']['message']}", fg="red", err=True)
    click.echo(
        f"merged {len(loaded)} shard reports; verdict: {data['verdict']}; report: {', '.join(map(str, paths))}",
        err=True,
    )
    sys.exit(int(data.get("exitCode") or 0))
