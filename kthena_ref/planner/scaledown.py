"""Scale-down order: which ServingGroups, or which instances of a Role, a scale-down removes (pure).

Why this module exists: the spec does not say which replica a scale-down removes. The reference
follows upstream Kthena, whose convention is Kubernetes' ReplicaSet one for
``controller.kubernetes.io/pod-deletion-cost``: not-ready units go first, then the lowest summed
pod-deletion-cost, then the highest ordinal (or index). ServingGroups (:mod:`.scale`) and the
instances of one Role inside one ServingGroup (:mod:`.layout` under ServingGroupRollingUpdate,
:mod:`.role_rollout` under RoleRollingUpdate) are ranked by the one :func:`order` here, so the
two levels cannot drift apart. The ids kept are the others, plus the lowest free ids up to the
desired count (a unit that went missing is refilled at the lowest free id).

The partition comes before that order. "Partition protects the first N existing replicas in
ascending ordinal order from updates" (RollingUpdateConfiguration, Role): after a scale-down the
first N kept units are the protected ones, so removing a protected unit while an updated unit
outside the partition is kept would hand the protection to a unit that runs the update. So the
units outside the partition (the first ``partition`` ids in ascending order) that run another
template than every protected unit go first, in the order above; then all the others, in that
order (removing a protected unit then only brings a unit on a protected template into the
partition). Upstream Kthena's e2e ``TestModelServingRolePartitionScaleDown`` expects the same.
Without an update past the partition every unit runs one template and the order is the plain one.
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
    template: str = ""  # what it runs (a revision, or a Role template hash): told apart by equality only


Key = Callable[[Candidate], tuple[int, ...]]


def order(unit: Candidate) -> tuple[int, int, int]:
    """Sort key, first to go first: not-ready, then the lowest summed deletion cost, then the highest id."""
    return (1 if unit.ready else 0, unit.cost, -unit.id)


def choose(
    candidates: Iterable[Candidate], replicas: int, key: Key = order, partition: int = 0
) -> tuple[list[int], list[int]]:
    """(ids to keep or create, ascending; ids to remove, first to go first) for ``replicas`` units:
    the units outside the ``partition`` on a template no protected unit runs first, each part in
    ``key``'s order."""
    units = list(candidates)
    shielded = rollout.protected_ids({unit.id for unit in units}, partition)
    kept_templates = {unit.template for unit in units if unit.id in shielded}

    def updated_outside(unit: Candidate) -> bool:
        return unit.id not in shielded and unit.template not in kept_templates

    ranked = sorted(units, key=lambda unit: (0 if updated_outside(unit) else 1, *key(unit)))
    excess = max(0, len(ranked) - max(0, replicas))
    victims = [unit.id for unit in ranked[:excess]]
    kept = rollout.slots({unit.id for unit in ranked[excess:]}, replicas)
    return sorted(kept), victims


def instance(index: int, pods: list[ObservedPod], size: int) -> Candidate:
    """A Role instance of ``size`` Pods (entry and workers) as a candidate."""
    ready = {p.pid.k for p in pods if p.running_ready} >= set(range(size))
    return Candidate(index, ready, sum(p.deletion_cost for p in pods), template_of(pods))


def template_of(pods: Iterable[ObservedPod]) -> str:
    """What a Role instance runs: its Pods' Role template hashes (their revision label moves with
    an unchanged Role under RoleRollingUpdate; the template hash does not)."""
    return ",".join(sorted({p.role_hash for p in pods}))


def instance_ids(candidates: Iterable[Candidate], replicas: int, partition: int = 0) -> list[int]:
    """The instance indices one Role keeps in one ServingGroup (its Role-level scale-down; the Role's
    ``partition`` under RoleRollingUpdate, else 0)."""
    if faults.active("role-scale-down-ignores-partition"):
        partition = 0  # the fault: the lowest-cost instances go even when the partition protects them
    if faults.active("role-scale-down-highest-index"):
        return choose(candidates, replicas, key=lambda unit: (-unit.id,), partition=partition)[0]
    return choose(candidates, replicas, partition=partition)[0]
