"""RoleCoordination: which Role instances may start their update now (pure).

Under ``RoleRollingUpdate`` each Role of a ServingGroup rolls within its own budget
(:mod:`.rollout`); ``rolloutStrategy.roleCoordination`` then holds some of those starts back. A
*start* is anything that puts an instance on its way to the update revision: recreating or
patching an outdated instance, or creating a new one. Why this module exists: the rules below
are subtle enough to be one pure, table-tested function; :func:`.role_rollout.coordinate` feeds
it each group's progress and applies its answer to the Roles' steps.

``maxSkew``: the target-version Ready ratio of a participating Role is its Ready instances at
the update revision over its formal replica count (partition-protected capacity included, as the
spec says). Instances already on their way may become Ready at any moment, so a Role may have
at most ``(lowest Ready ratio + maxSkew) x replicas`` instances at or headed for the update
revision: then no moment exists where the Ready ratios differ by more than ``maxSkew``. When the
skew is smaller than one instance of a Role and nothing is in flight, the laggards take one step
anyway (there is no other way forward).

``dependencies`` (``role`` depends on ``dependsOn``): a graph root (a Role that depends on others
and that no Role depends on) waits for target-version Ready capacity in every Role of its
dependency closure before its first start; internal Roles start freely; and a dependency keeps
at least one Ready old instance while any of its callers still has old instances (unless it has
no room for that: a single instance and no surge).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .. import faults
from ..api.types import RoleCoordination
from . import intstr


@dataclass(frozen=True)
class RoleProgress:
    """Where one Role of one ServingGroup stands in the rollout."""

    replicas: int  # formal replica count
    target_ready: int  # instances at the update revision and Ready
    headed: int  # instances at, or being recreated towards, the update revision
    old_ready: int  # outdated instances still Ready
    outdated: int  # outdated instances left (not going away)
    spare: bool  # replicas + maxSurge > 1: one old instance can be kept while another updates

    @property
    def ratio(self) -> float:
        return self.target_ready / self.replicas if self.replicas else 1.0


@dataclass(frozen=True)
class Start:
    id: int
    takes_ready_old: bool  # starting it takes a Ready old instance down


def participants(coordination: RoleCoordination, roles: list[str]) -> list[str]:
    """The Roles taking part: the listed ones (that exist), or every Role for an empty list."""
    chosen = coordination.roles or (roles[:-1] if faults.active("coordination-participants-miss-last-role") else roles)
    if faults.active("coordination-roles-list-ignored"):
        chosen = roles  # every Role takes part, listed or not
    return [r for r in roles if r in chosen]


def _closure(role: str, edges: dict[str, set[str]]) -> set[str]:
    seen: set[str] = set()
    todo = list(edges.get(role, ()))
    while todo:
        current = todo.pop()
        if current not in seen:
            seen.add(current)
            todo.extend(edges.get(current, ()))
    return seen


def allowed(
    coordination: RoleCoordination,
    progress: dict[str, RoleProgress],
    starts: dict[str, list[Start]],
) -> dict[str, list[int]]:
    """The starts (ids, per Role, in the order given) that may happen now."""
    roles = list(progress)
    budget: dict[str, int] = {r: len(starts.get(r, [])) for r in roles}

    skew = coordination.max_skew
    if skew is not None:
        fraction = intstr.resolve(skew, 100, round_up=False, field="roleCoordination.maxSkew") / 100
        taking_part = participants(coordination, roles)
        if taking_part:
            floor_ratio = min(progress[r].ratio for r in taking_part)
            for r in taking_part:
                p = progress[r]
                cap = math.floor((floor_ratio + fraction) * p.replicas + 1e-9)
                budget[r] = min(budget[r], max(0, cap - p.headed))
            in_flight = any(progress[r].headed > progress[r].target_ready for r in taking_part)
            waiting = [r for r in taking_part if starts.get(r)]
            if waiting and not in_flight and not any(budget[r] for r in waiting):
                lowest = min(progress[r].ratio for r in waiting)
                for r in waiting:
                    if progress[r].ratio == lowest:
                        budget[r] = 1  # a skew below one instance: the laggards step anyway

    edges: dict[str, set[str]] = {}
    for dep in coordination.dependencies or []:
        edges.setdefault(dep.role, set()).update(d for d in dep.depends_on or [] if d in progress)
    called = set().union(*edges.values()) if edges else set()
    for root in (r for r in edges if r not in called and r in progress):
        closure = edges.get(root, set()) if faults.active("dependency-closure-direct-only") else _closure(root, edges)
        if progress[root].headed == 0 and any(
            progress[d].replicas > 0 and progress[d].target_ready == 0 for d in closure
        ):
            budget[root] = 0

    out: dict[str, list[int]] = {}
    for r in roles:
        chosen = starts.get(r, [])[: budget[r]]
        callers_old = any(r in deps and progress[c].outdated for c, deps in edges.items() if c in progress)
        if callers_old and progress[r].spare and not faults.active("dependency-capacity-dropped"):
            keep = progress[r].old_ready - 1  # Ready old instances that may go
            kept: list[Start] = []
            for s in chosen:
                if s.takes_ready_old:
                    if keep <= 0:
                        continue
                    keep -= 1
                kept.append(s)
            chosen = kept
        out[r] = [s.id for s in chosen]
    return out
