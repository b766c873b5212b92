"""What ``kthena-conformance coverage`` says beyond the figures: per profile, what a success proves.

The figures (:func:`.specmap.coverage`) count statements some behaviour asserts. That is not yet
what a profile's ``success`` means: a behaviour of an optional feature, or one that also requires a
feature the profile does not guarantee, may come out not-supported in a run that still succeeds.
This module lays out, per profile (pure, from the loaded spec map and the catalog):

- the MUST statements a success can leave unasserted (:func:`.specmap.success_gaps`, each with why;
  the target is none);
- the MUST statements asserted only in part (``partial``), each with what is missing;
- for every statement claimed covered, the proof: the asserting test and the fault that breaks it.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from .catalog import Behaviour
from .features import PROFILES
from .specmap import SpecMap, partly_asserted, success_gaps


def per_profile(loaded: SpecMap, catalog: Iterable[Behaviour], names: Iterable[str]) -> list[dict[str, Any]]:
    """For each profile in ``names``: ``successGaps`` and ``partial`` (lists of dicts) and ``proofs``
    (statement id -> its proofs), the JSON shape of ``coverage --format json``'s ``success`` block."""
    behaviours = list(catalog)
    out: list[dict[str, Any]] = []
    for name in names:
        profile = PROFILES[name]
        claimed = [
            s for s in loaded.statements if s.in_scope and s.level == "MUST" and s.profile == name and s.asserted
        ]
        out.append(
            {
                "profile": name,
                "successGaps": [g.as_dict() for g in success_gaps(loaded.statements, behaviours, profile)],
                "partial": [
                    {"id": s.id, "where": s.where, "partly": list(s.partial), "missing": s.detail}
                    for s in partly_asserted(loaded.statements, name)
                ],
                "proofs": {s.id: [p.as_dict() for p in s.proofs] for s in claimed},
            }
        )
    return out


def text(blocks: list[dict[str, Any]], *, proofs: bool) -> list[str]:
    """The lines ``coverage`` prints for :func:`per_profile`'s blocks (the proofs only when asked)."""
    lines = [
        "what a success proves, per profile (MUST statements a success can leave unasserted: target none; "
        "statements asserted only in part):"
    ]
    for block in blocks:
        gaps, partial = block["successGaps"], block["partial"]
        lines.append(
            f"  {block['profile']}: {len(gaps)} a success can leave unasserted, {len(partial)} asserted in part, "
            f"{len(block['proofs'])} claimed with a proof"
        )
        for g in gaps:
            lines.append(f"    unasserted by a success: {g['id']} ({g['where']})\n        {g['why']}")
        for p in partial:
            lines.append(f"    in part: {p['id']} by {', '.join(p['partly'])}\n        missing: {p['missing']}")
        if proofs:
            for sid, entries in block["proofs"].items():
                for e in entries:
                    lines.append(f"    proof: {sid}: {e['behaviour']}: {e['test']}, fault {e['fault']}")
    return lines
