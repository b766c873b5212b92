"""Sharding: which behaviours of a selection one machine of a CI fleet runs (``--shard I/N``), pure.

The rule, deterministic and machine-independent (it reads only the catalog's ids and ``serial``
flags, never the cluster, the clock or the implementation's support):

1. take the selected behaviours (after ``--profile``/``--feature``/``--id``/``--skip-slow``;
   not-supported ones included, so every shard agrees whatever it runs against);
2. order them by pass, then by id: the parallel pass's ids sorted, then the serial pass's;
3. deal them round-robin to shards 1..N, the count continuing from one pass into the next.

Each pass's behaviours are then split as evenly as they can be (shard sizes differ by at most one
within a pass, and in total), so the slow serial behaviours do not pile up on one shard. A shard
may be empty (more shards than behaviours): it runs nothing.

A behaviour of the selection that another shard runs is reported ``skipped-by-user`` by this one
(:meth:`Shard.skip_reason`); ``kthena-conformance report merge`` takes each behaviour's real
outcome from the shard that ran it. A shard's report alone is therefore partial;
:func:`own_verdict` judges only the behaviours the shard itself was given (its exit code).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from .features import Profile, SelectionError
from .outcomes import TestResult, Verdict, overall_verdict, profile_verdict
from .support import Support

_SHAPE = re.compile(r"^\s*(?P<index>[+-]?\d+)\s*/\s*(?P<total>[+-]?\d+)\s*$")


class ShardError(SelectionError):
    """A bad ``--shard`` value (a selection error: the run refuses it with exit code 2)."""


class Shardable(Protocol):
    """What the assignment reads of a behaviour (:class:`.catalog.Behaviour` has both)."""

    @property
    def id(self) -> str: ...

    @property
    def serial(self) -> bool: ...


def assign(selected: Iterable[Shardable], total: int) -> dict[str, int]:
    """Behaviour id -> the 1-based shard (of ``total``) that runs it (see the module docstring)."""
    if total < 1:
        raise ValueError(f"the number of shards must be at least 1, got {total}")
    items = list(selected)
    ordered = sorted(b.id for b in items if not b.serial) + sorted(b.id for b in items if b.serial)
    if len(set(ordered)) != len(ordered):
        duplicates = sorted({i for i in ordered if ordered.count(i) > 1})
        raise ValueError(f"duplicate behaviour ids in the selection: {', '.join(duplicates)}")
    return {id_: k % total + 1 for k, id_ in enumerate(ordered)}


@dataclass(frozen=True)
class Shard:
    """The ``index``-th (1-based) of ``total`` shards."""

    index: int
    total: int

    def __post_init__(self) -> None:
        if self.total < 1:
            raise ShardError(f"--shard {self}: N (the number of shards) must be at least 1")
        if not 1 <= self.index <= self.total:
            raise ShardError(f"--shard {self}: I must be between 1 and N ({self.total}), got {self.index}")

    @classmethod
    def parse(cls, text: str) -> Shard:
        """``"I/N"`` (1 <= I <= N); :class:`ShardError` naming ``--shard`` and the reason."""
        match = _SHAPE.match(text)
        if match is None:
            raise ShardError(
                f"--shard {text!r}: expected I/N, the I-th of N shards counted from 1 (for example --shard 2/4)"
            )
        return cls(int(match["index"]), int(match["total"]))

    def __str__(self) -> str:
        return f"{self.index}/{self.total}"

    def owner(self, behaviour_id: str, selected: Iterable[Shardable]) -> int | None:
        """The shard that runs ``behaviour_id`` (``None``: it is not in the selection)."""
        return assign(selected, self.total).get(behaviour_id)

    def selects(self, behaviour_id: str, selected: Iterable[Shardable]) -> bool:
        """Does this shard run ``behaviour_id``, one of ``selected``?"""
        return self.owner(behaviour_id, selected) == self.index

    def mine(self, selected: Iterable[Shardable]) -> list[str]:
        """The ids this shard runs, sorted."""
        return sorted(id_ for id_, owner in assign(selected, self.total).items() if owner == self.index)

    def skip_reason(self, owner: int) -> str:
        """Why this shard does not run a behaviour shard ``owner`` runs (a skipped-by-user message)."""
        return f"in shard {owner}/{self.total}, not this one ({self})"

    def as_report(self, behaviours: Iterable[str]) -> dict[str, Any]:
        """The report's ``run.shard``: which shard, and the behaviours it was given."""
        return {"index": self.index, "total": self.total, "behaviours": sorted(behaviours)}


def own_verdict(
    profiles: Iterable[Profile],
    tests: Iterable[TestResult],
    others: Iterable[str],
    support: Support,
    *,
    preflight_ok: bool,
    interrupted: bool,
) -> Verdict:
    """A shard's verdict on its own behaviours: the run's rules (:func:`.outcomes.profile_verdict`,
    :func:`.outcomes.overall_verdict`) applied to ``tests`` without those of ``others`` (the ids
    other shards run). Profiles with no test left are not judged; a shard with nothing of its own
    (more shards than behaviours) succeeds, unless its preflight failed or it was interrupted."""
    skipped = set(others)
    mine = [t for t in tests if t.id not in skipped]
    judged = [
        profile_verdict(p, [t for t in mine if t.feature in p.features], support)
        for p in profiles
        if any(t.feature in p.features for t in mine)
    ]
    if not judged and preflight_ok and not interrupted:
        return Verdict.SUCCESS
    return overall_verdict(judged, preflight_ok, interrupted)


def other_shard_ids(assignment: Mapping[str, int], shard: Shard) -> set[str]:
    """The ids of ``assignment`` that shards other than ``shard`` run."""
    return {id_ for id_, owner in assignment.items() if owner != shard.index}
