"""Scale-down order: which ServingGroups, or which instances of a Role, a scale-down removes (pure).

Why this module exists: the spec does not say which replica a scale-down removes. The reference
follows upstream Kthena, whose convention is Kubernetes' ReplicaSet one for
``controller.kubernetes.io/pod-deletion-cost``: not-ready units go first, then the lowest summed
pod-deletion-cost, then the highest ordinal (or index). ServingGroups (:mod:`.scale`) and the
instances of one Role inside one ServingGroup (:mod:`.layout` under ServingGroupRollingUpdate,
:mod:`.role_rollout` under RoleRollingUpdate) are ranked by the one :func:`order` here, so the
two levels cannot drift apart. The ids kept are the others, plus the lowest free ids up to the
desired count (a unit that went missing is refilled at the lowest free id).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from .. import faults
from . import rollout
from .observe import ObservedPod


@dataclass(frozen=True)
class Candidate:
    """A ServingGroup (by ordinal) or a Role instance (by index), as a scale-down ranks it."""

    id: int
    ready: bool  # every Pod it should have is Running and Ready
    cost: int = 0  # the summed pod-deletion-cost of its Pods


Key = Callable[[Candidate], tuple[int, ...]]


def order(unit: Candidate) -> tuple[int, int, int]:
    """Sort key, first to go first: not-ready, then the lowest summed deletion cost, then the highest id."""
    return (1 if unit.ready else 0, unit.cost, -unit.id)


def choose(candidates: Iterable[Candidate], replicas: int, key: Key = order) -> tuple[list[int], list[int]]:
    """(ids to keep or create, ascending; ids to remove, first to go first) for ``replicas`` units."""
    ranked = sorted(candidates, key=key)
    excess = max(0, len(ranked) - max(0, replicas))
    victims = [unit.id for unit in ranked[:excess]]
    kept = rollout.slots({unit.id for unit in ranked[excess:]}, replicas)
    return sorted(kept), victims


def instance(index: int, pods: list[ObservedPod], size: int) -> Candidate:
    """A Role instance of ``size`` Pods (entry and workers) as a candidate."""
    ready = {p.pid.k for p in pods if p.running_ready} >= set(range(size))
    return Candidate(index, ready, sum(p.deletion_cost for p in pods))


def instance_ids(candidates: Iterable[Candidate], replicas: int) -> list[int]:
    """The instance indices one Role keeps in one ServingGroup (its Role-level scale-down)."""
    if faults.active("role-scale-down-highest-index"):
        return choose(candidates, replicas, key=lambda unit: (-unit.id,))[0]
    return choose(candidates, replicas)[0]
