"""The Layout: which Role instances each ServingGroup should have, and which revision builds each.

Why this module exists: recovery, scale, the rollouts, Pod creation, status and the plugins all ask
"what should this group contain?", and the answer depends on the rollout strategy. Under
ServingGroupRollingUpdate a group is one revision: its instances are that revision's Roles. Under
RoleRollingUpdate every instance has its own revision (its Pods' revision label), and the Role
rollout (:mod:`.role_rollout`) decides which instances stay, go or come (:meth:`Layout.set`).
Either way a group keeps the Role instances it has, and a Role scaled down loses its instances in
:mod:`.scaledown`'s order (not-ready first, then the lowest summed pod-deletion-cost, then the
highest index), as ServingGroups do.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from ..api.types import Role
from . import scaledown
from .names import PodId
from .observe import Group

Instance = tuple[Role, int, str]  # (the Role as built, instance index, revision it is built from)


class Layout:
    """The Role instances each ServingGroup should have: the ones :meth:`set` gave it, else the
    Roles of its target revision, each with the instances the group has (:func:`.scaledown.instance_ids`:
    ``role.replicas`` of them, a new group's from 0)."""

    def __init__(
        self,
        roles_for: Callable[[str], list[Role]],
        target_revision: Callable[[int], str],
        groups: Mapping[int, Group] | None = None,
    ) -> None:
        self.roles_for = roles_for
        self.target_revision = target_revision
        self.groups: Mapping[int, Group] = groups if groups is not None else {}
        self._set: dict[int, list[Instance]] = {}
        self._chosen: dict[tuple[int, str], list[Instance]] = {}  # (ordinal, revision) -> instances

    def set(self, ordinal: int, instances: list[Instance]) -> None:
        self._set[ordinal] = instances

    def instances(self, ordinal: int) -> list[Instance]:
        if ordinal in self._set:
            return self._set[ordinal]
        rev = self.target_revision(ordinal)
        if (ordinal, rev) in self._chosen:
            return self._chosen[(ordinal, rev)]
        group = self.groups.get(ordinal)
        by_instance = group.by_instance() if group is not None else {}
        out: list[Instance] = []
        for role in self.roles_for(rev):
            candidates = [
                scaledown.instance(index, pods, role.worker_replicas + 1)
                for (name, index), pods in by_instance.items()
                if name == role.name
            ]
            out.extend((role, index, rev) for index in scaledown.instance_ids(candidates, role.replicas))
        self._chosen[(ordinal, rev)] = out
        return out

    def expected(self, ordinal: int) -> list[PodId]:
        return [
            PodId(ordinal, r.name, i, k) for r, i, _ in self.instances(ordinal) for k in range(r.worker_replicas + 1)
        ]

    def role_of(self, ordinal: int, role: str, index: int) -> Role | None:
        return next((r for r, i, _ in self.instances(ordinal) if r.name == role and i == index), None)

    def pods(self, ordinal: int) -> list[tuple[PodId, list[Role], str]]:
        """Every Pod the group should have, with the Roles and revision it is built from."""
        return [
            (PodId(ordinal, role.name, index, k), self.roles_for(rev), rev)
            for role, index, rev in self.instances(ordinal)
            for k in range(role.worker_replicas + 1)
        ]


def defined(roles_for: Callable[[str], list[Role]], rev: str, role: Role) -> Role:
    """``role`` as revision ``rev`` defines it (itself when that revision does not have it)."""
    return next((r for r in roles_for(rev) if r.name == role.name), role)
