"""A heterogeneous target's split of replicas across its ModelServing groups: pure.

The spec: a HeterogeneousTarget "distributes replicas across several ModelServing groups with
different hardware (and therefore different Cost) to satisfy the overall demand at the lowest
cost"; ``cost`` is a "relative cost factor" (100 for H100 and 60 for A100 "makes the optimizer
prefer A100 replicas when adequate"); ``costExpansionRatePercent`` (default 200, minimum 0) is "the
percentage rate at which the cost expands during optimization calculations. For example, 200
allows the optimizer to spend up to 2x the minimal cost to meet performance targets before
refusing to scale further".

The shell sizes the whole target with :func:`.decision.decide` on the :func:`aggregate` of its
groups (current = the sum of their replicas, bounds = the sums of their bounds), then splits the
total with :func:`distribute`. Readings (docs/autoscaling-readings.md), following upstream's
optimizer (docs/autoscaling-upstream.md section 2), which contradicts no spec sentence:

- "Cost expands": each group's range ``maxReplicas - minReplicas`` is cut into blocks of
  geometrically growing size ``1, r, r^2, ...`` replicas (``r = rate / 100``, each size rounded
  down, the last one cut to what remains of the range); a block costs ``cost * size``. Blocks of
  all groups are filled cheapest first, so a group's next replicas come in a block ``r`` times as
  large and as expensive as its last, and a dearer group takes the next block as soon as its own
  block is cheaper. With 200 a cheap group's replicas are taken in blocks of 1, 2, 4, ... and an
  H100 block of cost 200 goes before an A100 block of cost 240: each block of a group costs up to
  2x its last, and a cheaper group stays preferred only while its next block costs less than the
  others' (the spec's "refusing to scale further" is that group's, not the target's). Nothing is
  ever refused below the sum of the ``maxReplicas``: the total was already decided, the split only
  places it.
- The cut last block of a range costs less than the block before it (range 4 at 200: 1, 2, 1);
  blocks are filled in cost order, so a group's blocks are still taken at non-decreasing cost.
- Sizes are ``floor(r^k)`` in exact integer arithmetic (upstream multiplies a float64; for every
  integer rate up to 200000 and sizes up to 2e6 the two agree).
- Rate 0 to 100: the cost does not expand; every replica of a group costs its ``cost`` and the
  cheapest group fills to its ``maxReplicas`` before the next takes any. A rate below 100 would
  shrink blocks below one replica (upstream rounds them up to 1, the same split), and refusing to
  scale would contradict ``minReplicas``/``maxReplicas`` being the only bounds of the total. Each
  group is then one block (the same split as blocks of 1, without a block per replica).
- Ties (equal block costs, equal costs of groups) go to the group listed first in ``params``.
- A group with ``minReplicas == maxReplicas`` has no block: it stays at that count. A group whose
  ``minReplicas`` exceeds its ``maxReplicas`` (the schema does not forbid it) stays at its
  ``minReplicas``: the floor wins (its effective maximum, here and in :func:`aggregate`, is its
  ``minReplicas``; upstream keeps the raw sum of ``maxReplicas`` as the cap).
- Every group starts at its ``minReplicas``; the total is first brought into
  ``[sum of minReplicas, sum of maxReplicas]``, and what exceeds the sum of minimums is poured into
  the blocks in order.

Blocks grow geometrically, so a group has ``O(log(range) / log(r))`` of them (926 for a
rate of 101 and a range of 1e6), never one per replica.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace

from .. import faults
from ..api.autoscaling import HeterogeneousTargetParam
from .decision import Policy


@dataclass(frozen=True)
class Param:
    """One group of a heterogeneous target: what the split needs of a HeterogeneousTargetParam."""

    name: str
    cost: int
    min_replicas: int
    max_replicas: int

    @classmethod
    def of(cls, param: HeterogeneousTargetParam) -> Param:
        name = param.target.target_ref.name or ""
        return cls(name, param.cost, param.min_replicas, param.max_replicas)

    @property
    def high(self) -> int:
        """The effective maximum: ``maxReplicas``, or ``minReplicas`` when that is larger."""
        return max(self.min_replicas, self.max_replicas)


@dataclass(frozen=True)
class Aggregate:
    """A heterogeneous target seen as one unit by :func:`.decision.decide`."""

    current: int
    min_replicas: int
    max_replicas: int

    def bound(self, policy: Policy) -> Policy:
        """``policy`` with the target's summed bounds."""
        return replace(policy, min_replicas=self.min_replicas, max_replicas=self.max_replicas)


def aggregate(params: Sequence[Param], current: Sequence[int]) -> Aggregate:
    """The unit of the whole target: its groups' replicas now (in ``params``' order) and bounds, summed."""
    if len(current) != len(params):
        raise ValueError(f"{len(current)} current replica counts for {len(params)} params")
    return Aggregate(sum(current), sum(p.min_replicas for p in params), sum(p.high for p in params))


def distribute(total: int, params: Sequence[Param], cost_expansion_rate_percent: int) -> tuple[int, ...]:
    """The replicas of each group, in ``params``' order, for ``total`` brought into the summed bounds."""
    replicas = [p.min_replicas for p in params]
    low, high = sum(replicas), sum(p.high for p in params)
    left = min(max(total, low), high) - low
    if faults.active("autoscaler-heterogeneous-unbounded"):  # the fault: the cheapest group takes it all
        cheapest = min(range(len(params)), key=lambda i: (params[i].cost, i))
        replicas[cheapest] += left
        return tuple(replicas)
    cut = [
        (cost, index, size) for index, p in enumerate(params) for cost, size in blocks(p, cost_expansion_rate_percent)
    ]
    # Cheapest block first; the fault: the groups as listed (stable: each group's blocks in the order they were cut).
    order = sorted(cut, key=lambda b: b[1]) if faults.active("autoscaler-heterogeneous-listed-order") else sorted(cut)
    for _, index, size in order:
        if left <= 0:
            break
        taken = min(left, size)
        replicas[index] += taken
        left -= taken
    return tuple(replicas)


def blocks(param: Param, rate: int) -> Iterator[tuple[int, int]]:
    """(cost, size) of each block of ``param``'s range above its minimum, in the order they are cut."""
    left = param.high - param.min_replicas
    if left <= 0:
        return
    if rate <= 100:
        yield param.cost, left
        return
    num = den = 1  # the next size is floor(num / den) = floor((rate / 100) ** k)
    while left > 0:
        size = min(left, max(num // den, 1))
        yield param.cost * size, size
        left -= size
        num, den = num * rate, den * 100
