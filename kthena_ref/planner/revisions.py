"""Revisions in one reconcile: which Roles each revision is, which revision each group is built at.

Why this module exists: the update revision is the hash of the current roles (:func:`.pods.revision_of`);
older ones come from ControllerRevisions, so groups (or Role instances) at an old revision can still be
rebuilt from it. :class:`Revisions` answers the questions every other step asks (the Roles of a
revision, the revision a group's missing Pods are built at, the *current* revision of the groups not
yet updated), and :func:`plan_revisions` keeps the ControllerRevisions themselves (the history limit
counts only revisions no group runs).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection
from typing import Any

from .. import faults
from ..api.types import ModelServing, Role
from .model import InstanceKey, Plan
from .names import LABEL_REVISION
from .observe import Group
from .pods import controller_revision, group_settings, revision_of, role_template_hash


def roles_by_revision(ms: ModelServing, revisions: list[dict[str, Any]]) -> dict[str, list[Role]]:
    """The Roles of every known revision (the recorded ones and the update revision)."""
    known: dict[str, list[Role]] = {}
    for cr in revisions:
        rev = ((cr.get("metadata") or {}).get("labels") or {}).get(LABEL_REVISION)
        roles = (cr.get("data") or {}).get("roles")
        if rev and isinstance(roles, list):
            try:
                known[rev] = [Role.model_validate(r) for r in roles]
            except ValueError:
                continue  # a damaged revision cannot rebuild anything; the update revision still can
    known[revision_of(ms.spec.template.roles)] = ms.spec.template.roles
    # Role replicas only scale, they are not part of a revision: every revision takes them from
    # the current spec, so scaling a Role reaches groups still running an older template too.
    replicas = {r.name: r.replicas for r in ms.spec.template.roles}
    return {
        rev: [r.model_copy(update={"replicas": replicas[r.name]}) if r.name in replicas else r for r in roles]
        for rev, roles in known.items()
    }


def settings_by_revision(ms: ModelServing, revisions: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The ServingGroup settings (:func:`.pods.group_settings`) each revision was recorded with, and
    the current ones for the update revision. A ControllerRevision that recorded none (made before
    they were recorded) is left out: its settings are unknown."""
    known: dict[str, dict[str, Any]] = {}
    for cr in revisions:
        rev = ((cr.get("metadata") or {}).get("labels") or {}).get(LABEL_REVISION)
        settings = (cr.get("data") or {}).get("servingGroup")
        if rev and isinstance(settings, dict):
            known[rev] = settings
    known[revision_of(ms.spec.template.roles)] = group_settings(ms)
    return known


def template_changed(known: dict[str, list[Role]], old: str, new: str, role: str) -> bool:
    """Role ``role``'s template differs between revisions ``old`` and ``new`` (both known to have it)."""
    if old == new or old not in known or new not in known:
        return False
    before = next((r for r in known[old] if r.name == role), None)
    after = next((r for r in known[new] if r.name == role), None)
    return before is not None and after is not None and role_template_hash(before) != role_template_hash(after)


def current_revision(
    ms: ModelServing,
    groups: dict[int, Group],
    update_rev: str,
    known: dict[str, list[Role]],
    protected: set[int],
    role_protected: Collection[InstanceKey] = (),
) -> str:
    """The revision of the groups not (yet) updated.

    It stays what status recorded while an older revision is still running (in a whole group, or
    in some Role instances of a group under RoleRollingUpdate) or still protected by a partition:
    the ServingGroup partition (``protected`` ordinals), or a Role's partition (``role_protected``
    instances, when that Role's template changed since). So a protected group or Role instance
    rebuilt by recovery comes back at it. It becomes the update revision once nothing else runs.
    """
    previous = ms.status.current_revision if ms.status else None
    older = Counter(g.revision for g in groups.values() if g.pods and g.revision != update_rev)
    stale = Counter(p.revision for g in groups.values() for p in g.pods.values() if p.revision != update_rev)
    held = bool(previous) and any(template_changed(known, previous or "", update_rev, r) for _, r, _ in role_protected)
    if previous and previous != update_rev and previous in known and (older or stale or protected or held):
        return previous
    if older:
        return older.most_common(1)[0][0]
    if stale:
        return stale.most_common(1)[0][0]
    return update_rev


class Revisions:
    """The revisions of one reconcile.

    ``current`` and ``protected`` are the update revision and nothing until :meth:`settle` is
    called, once the groups to keep are known; :meth:`target` reads them when it is asked."""

    def __init__(self, ms: ModelServing, revisions: list[dict[str, Any]], groups: dict[int, Group]) -> None:
        self._ms = ms
        self._groups = groups
        self.update = revision_of(ms.spec.template.roles)
        self.roles_at = roles_by_revision(ms, revisions)
        self.settings_at = settings_by_revision(ms, revisions)
        self.current = self.update
        self.protected: set[int] = set()  # ordinals the partition protects
        self.role_protected: set[InstanceKey] = set()  # Role instances the Roles' partitions protect

    def roles_for(self, rev: str) -> list[Role]:
        """The Roles of revision ``rev`` (the current spec's when it is not known)."""
        return self.roles_at.get(rev, self._ms.spec.template.roles)

    def target(self, ordinal: int) -> str:
        """The revision a group's missing Pods are built at (and labelled with)."""
        group = self._groups.get(ordinal)
        if group is not None and group.pods:
            return group.revision if group.revision in self.roles_at else self.update
        if faults.active("group-partition-refilled-at-update"):
            return self.update
        return self.current if ordinal in self.protected else self.update

    def settle(self, protected: set[int], role_protected: set[InstanceKey] | None = None) -> None:
        """Fix the protected ordinals (and Role instances) and, from them, the current revision."""
        self.protected = protected
        self.role_protected = role_protected or set()
        self.current = current_revision(
            self._ms, self._groups, self.update, self.roles_at, protected, self.role_protected
        )

    def holds_back(self, key: InstanceKey) -> bool:
        """A Role instance its Role's partition protects from a change of its template: rebuilt, it
        comes back at the current revision, as it was."""
        return key in self.role_protected and template_changed(self.roles_at, self.current, self.update, key[1])


def plan_revisions(
    out: Plan, ms: ModelServing, observed: list[dict[str, Any]], revs: Revisions, used: set[str]
) -> None:
    """Create the update revision's ControllerRevision if missing; delete the oldest revisions no
    group runs (``used``) beyond ``revisionHistoryLimit``."""
    have = {((cr.get("metadata") or {}).get("labels") or {}).get(LABEL_REVISION): cr for cr in observed}
    numbers = [int(cr.get("revision") or 0) for cr in observed]
    if revs.update not in have:
        out.create_revisions.append(
            controller_revision(ms, revs.update, ms.spec.template.roles, max(numbers, default=0) + 1)
        )
    live = {revs.update, revs.current} | used
    if faults.active("live-revision-pruned"):
        live = {revs.update}
    dead = sorted(
        (cr for rev, cr in have.items() if rev not in live),
        key=lambda cr: int(cr.get("revision") or 0),
    )
    excess = len(dead) - ms.spec.revision_history_limit
    if faults.active("revision-history-unbounded"):
        excess = 0
    for cr in dead[: max(0, excess)]:
        out.delete_revisions.append(cr["metadata"]["name"])
