"""One step of a rolling update over numbered units (pure).

The same arithmetic paces both rollout granularities: ServingGroups by ordinal under
``ServingGroupRollingUpdate``, and the instances of one Role inside one ServingGroup by index under
``RoleRollingUpdate`` (every ServingGroup rolls its Role instances at the same time). A *unit* is
one of those, seen as plain data (:class:`Unit`); :func:`step` says which units to recreate,
which to update in place, which new ids to create and which to remove, for one reconcile. It is
called again on the next reconcile with what is then observed, so it keeps no state: everything
it needs is in the units (a unit's revision lives in its Pods' labels). :mod:`.group_rollout` and
:mod:`.role_rollout` turn groups and Role instances into units and act on the step.

The budget, as the spec defines it (RollingUpdateConfiguration, Role):

* never fewer than ``replicas - maxUnavailable`` ready units;
* never more than ``replicas + maxSurge`` units (terminating units count: their Pods still hold
  their resources, so a replacement under the same name waits for them to go);
* the first ``partition`` units in ascending id order are never updated.

It is Deployment's algorithm with units for Pods: outdated units are recreated (or patched in
place) while enough units stay ready, not-ready outdated units first (they cost no availability);
new units are created at the lowest free ids while the total stays under the surge ceiling and
fewer than ``replicas`` units are at (or headed for) the update revision. With ``maxSurge`` 0 a
recreated unit comes back under its own id, so this is upstream's delete-then-recreate; with a
surge the set of ids can become non-contiguous, which the spec's partition wording ("the first N
existing replicas in ascending ordinal order") anticipates.

In-place updates do not need spare capacity: when every outdated unit can be patched in place and
``maxUnavailable`` is above 0, no surge unit is created (it would only be created and removed
again, reloading a model twice for nothing).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .. import faults


@dataclass(frozen=True)
class Unit:
    """A ServingGroup (by ordinal) or a Role instance (by index), as the rollout sees it."""

    id: int
    outdated: bool  # not at the update revision
    ready: bool  # every expected Pod Running and Ready, none being deleted
    terminating: bool = False  # every Pod is being deleted: the unit is going away
    in_place: bool = False  # an image patch can take it to the update revision


@dataclass(frozen=True)
class Pace:
    """The resolved budget (absolute numbers; see :mod:`kthena_ref.planner.intstr`)."""

    replicas: int
    max_unavailable: int
    max_surge: int = 0
    partition: int = 0


@dataclass
class Step:
    """What one reconcile does to the units."""

    protected: frozenset[int]
    remove: list[int] = field(default_factory=list)  # above the surge ceiling (a scale-down mid-rollout)
    recreate: list[int] = field(default_factory=list)  # delete; rebuilt at the update revision
    patch: list[int] = field(default_factory=list)  # update in place
    create: list[int] = field(default_factory=list)  # new ids, built at the update revision (or the
    # current one when the partition protects them: refilling a protected unit that was lost)


def protected_ids(ids: set[int], partition: int) -> frozenset[int]:
    """The first ``partition`` ids in ascending order."""
    return frozenset(sorted(ids)[: max(0, partition)])


def slots(present: set[int], replicas: int) -> set[int]:
    """``present`` plus the lowest free ids, until there are ``replicas`` of them."""
    out = set(present)
    candidate = 0
    while len(out) < replicas:
        if candidate not in out:
            out.add(candidate)
        candidate += 1
    return out


def _free_ids(taken: set[int], count: int) -> list[int]:
    out: list[int] = []
    candidate = 0
    while len(out) < count:
        if candidate not in taken:
            out.append(candidate)
        candidate += 1
    return out


def step(units: list[Unit], pace: Pace) -> Step | None:
    """The rollout's next step, or None when no unit outside the partition is outdated (then
    there is no rollout: plain scaling applies)."""
    ids = {u.id for u in units}
    protected = protected_ids(slots(ids, pace.replicas), pace.partition)
    outdated = [u for u in units if u.outdated and not u.terminating and u.id not in protected]
    if not outdated:
        return None
    surge = pace.max_surge
    if pace.max_unavailable > 0 and all(u.in_place for u in outdated):
        surge = 0
    ceiling = pace.replicas + surge
    out = Step(protected=protected)

    # A scale-down that arrives mid-rollout: outdated units first, then not-ready, then the highest id.
    excess = len(units) - ceiling
    if excess > 0:
        candidates = sorted(
            (u for u in units if not u.terminating and u.id not in protected),
            key=lambda u: (not u.outdated, u.ready, -u.id),
        )
        out.remove = [u.id for u in candidates[:excess]]
    kept = [u for u in units if u.id not in out.remove]

    ready = sum(1 for u in kept if u.ready and not u.terminating)
    if faults.active("unready-not-counted"):  # only the units this rollout took down count as unavailable
        ready = sum(1 for u in kept if (u.ready or u.outdated) and not u.terminating)
    floor = pace.replicas - pace.max_unavailable
    headed_for_update = sum(1 for u in kept if not u.outdated or u.id in protected)
    candidates = sorted(
        (u for u in kept if u.outdated and not u.terminating and u.id not in protected),
        key=lambda u: (u.ready, -u.id),  # not-ready first: replacing them costs no availability
    )
    for u in candidates:
        if u.ready:
            if ready - 1 < floor:
                break
            ready -= 1
        if u.in_place:
            out.patch.append(u.id)
            headed_for_update += 1
        else:
            out.recreate.append(u.id)

    room = min(ceiling - len(kept), pace.replicas - headed_for_update)
    if room > 0:
        out.create = _free_ids({u.id for u in kept} | set(out.remove), room)
    return out
