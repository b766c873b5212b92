"""``kthena-conformance coverage``: how much of the spec map the suite asserts."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click

from .base import main


@main.command("coverage")
@click.option("--profile", "profiles", multiple=True, help="only these profiles (repeatable; default: all)")
@click.option("--uncovered", "only_uncovered", is_flag=True, help="print only the uncovered MUST statements")
@click.option("--format", "output_format", type=click.Choice(["text", "json"]), default="text", show_default=True)
@click.option("--proofs", "show_proofs", is_flag=True, help="also print each covered statement's test and fault")
@click.option(
    "--spec-map",
    "spec_map",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="the spec map to read [default: the packaged conformance/specmap.yaml]",
)
def coverage_command(
    profiles: tuple[str, ...], only_uncovered: bool, output_format: str, show_proofs: bool, spec_map: Path | None
) -> None:
    """How much of the spec the suite asserts: per profile and overall, the in-scope (ModelServing,
    AutoscalingPolicy) MUST and SHOULD statements of the spec map asserted by a behaviour, explained (not asserted,
    with a reason) and gaps; then every uncovered MUST statement with its reason; then, per profile, the MUST
    statements a success can leave unasserted (asserted only by optional features or under requirements the
    profile does not guarantee) and those asserted only in part, with what is missing (--proofs: each covered
    statement's test and the fault that proves it).

    Exit 0; 2 on bad input (an unknown profile, a spec map that cannot be read or is invalid)."""
    from ..framework import catalog, coverage_view, specmap
    from ..framework.features import PROFILES, SelectionError, get_profile

    try:
        names = [get_profile(p).name for p in profiles] or list(PROFILES)
    except SelectionError as exc:
        click.secho(f"error: --profile: {exc}", fg="red", err=True)
        sys.exit(2)
    behaviours = catalog.collect()
    try:
        loaded = specmap.load(spec_map or specmap.SPECMAP_PATH, catalog=behaviours)
    except specmap.SpecMapError as exc:
        for line in exc.problems:
            click.secho(f"error: {line}", fg="red", err=True)
        sys.exit(2)
    cov = specmap.coverage(loaded.statements)
    rows = [p for p in cov.profiles if p.profile in names]
    uncovered = [s for s in cov.uncovered if s.profile in names]
    api_only = specmap.without_implementation_code(loaded.statements)
    named = loaded.named_behaviours()
    unmapped = sorted(b.id for b in behaviours if b.id not in named and b.profile.name in names)
    if output_format == "json":
        payload: dict[str, Any] = {"uncovered": [s.as_dict() for s in uncovered]}
        if not only_uncovered:
            payload = {
                "specMap": {"file": loaded.source, "digest": loaded.digest, "statements": len(loaded.statements)},
                "scope": specmap.SCOPE_TEXT,
                "profiles": [_coverage_json(p) for p in rows],
                "overall": _coverage_json(cov.overall),
                "overallWithoutImplementationCode": {"must": api_only.as_dict() | {"percent": _rounded(api_only)}},
                **payload,
                "unmappedBehaviours": unmapped,
                "success": coverage_view.per_profile(loaded, behaviours, names),
            }
        click.echo(json.dumps(payload, indent=2))
        return
    if not only_uncovered:
        click.echo(
            f"spec map {loaded.source} ({loaded.digest[:19]}..., {len(loaded.statements)} statements); "
            f"in scope: topics {specmap.SCOPE_TEXT}"
        )
        head = f"{'profile':20} {'MUST asserted':16} {'explained':>9} {'gaps':>5}  {'SHOULD asserted':16} {'gaps':>5}"
        click.echo(head)
        for p in [*rows, cov.overall]:
            label = "all profiles" if p.profile == specmap.OVERALL else p.profile
            click.echo(
                f"{label:20} {_fraction(p.must):16} {p.must.explained:>9} {p.must.gaps:>5}  "
                f"{_fraction(p.should):16} {p.should.gaps:>5}"
            )
        click.echo(
            f"MUST, all profiles, without the {cov.overall.must.total - api_only.total} statement(s) about one "
            f"implementation's own code (reason {specmap.NOT_MODELSERVING}): {_fraction(api_only)}"
        )
    gaps = sum(1 for s in uncovered if s.reason == specmap.GAP)
    click.echo(
        f"uncovered MUST statements: {len(uncovered)} ({gaps} {'gap' if gaps == 1 else 'gaps'}, "
        f"{len(uncovered) - gaps} explained){':' if uncovered else ''}"
    )
    for s in uncovered:
        click.echo(f"  {s.id} ({s.where}, {s.profile})\n      {s.reason}: {s.detail}")
    if unmapped and not only_uncovered:
        click.echo(
            f"{len(unmapped)} catalog behaviour(s) of these profiles assert no statement of the spec map "
            "(--format json lists them)"
        )
    if not only_uncovered:
        for line in coverage_view.text(coverage_view.per_profile(loaded, behaviours, names), proofs=show_proofs):
            click.echo(line)


def _fraction(f: Any) -> str:
    from ..framework.specmap import percent_text

    return f"{f.asserted}/{f.total} ({percent_text(f.percent)})"


def _rounded(f: Any) -> float | None:
    return None if f.percent is None else round(f.percent, 2)


def _coverage_json(p: Any) -> dict[str, Any]:
    data: dict[str, Any] = p.as_dict()
    for level, figures in (("must", p.must), ("should", p.should)):
        data[level]["percent"] = _rounded(figures)
    return data
