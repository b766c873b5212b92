"""In place or recreate: the eligibility of each outdated unit, and the fallback Event.

Why this module exists: under ``updateMethod: InPlace`` both rollouts (ServingGroups and Role
instances) ask, for every outdated unit, whether an image patch can bring it to the update
revision (:mod:`.eligibility`), and when it cannot they recreate it and say why in an
``InPlaceUpdateFallback`` Event. :class:`InPlaceFindings` asks once per revision (and Role) per
reconcile, and adds what is not part of a revision: what only a unit's Pods can show (a
ModelServing ``schedulerName`` change: an image patch cannot move a Pod to another scheduler) and
the ``gangPolicy`` and ``networkTopology`` the unit's ControllerRevision was made under;
:func:`fallback_event` words the answer.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from .. import faults
from ..api.types import ModelServing, Role, RolloutStrategyType, UpdateMethod
from . import eligibility
from .model import Event
from .observe import ObservedPod


class InPlaceFindings:
    """Why a unit at some revision cannot be updated in place (empty: it can), per revision."""

    def __init__(
        self, ms: ModelServing, roles_at: dict[str, list[Role]], settings_at: dict[str, dict[str, Any]] | None = None
    ) -> None:
        strategy = ms.spec.rollout_strategy
        self.enabled = strategy is not None and strategy.update_method is UpdateMethod.IN_PLACE
        if faults.active("in-place-recreates"):
            self.enabled = False  # every outdated unit is recreated, as under Recreate
        if faults.active("recreate-updates-in-place") and strategy is not None:
            self.enabled |= strategy.type is RolloutStrategyType.SERVING_GROUP_ROLLING_UPDATE  # Recreate as InPlace
        if faults.active("update-method-default-in-place") and strategy is None:
            self.enabled = True  # with no rolloutStrategy, images are patched in place
        self._ms = ms
        self._roles_at = roles_at
        self._settings_at = settings_at or {}  # the gangPolicy and networkTopology each revision was made under
        self._blockers = eligibility.plugin_blockers(ms) if self.enabled else []
        self._cache: dict[tuple[str, str | None], list[eligibility.Finding]] = {}

    def group(
        self, revision: str, role: str | None = None, pods: Iterable[ObservedPod] = ()
    ) -> list[eligibility.Finding]:
        """The findings against patching a unit at ``revision`` (one Role of it, when ``role``)
        whose Pods are ``pods``."""
        key = (revision, role)
        if key not in self._cache:
            old = self._roles_at.get(revision)
            if old is None:
                found = [eligibility.Finding("spec.template.roles", f"revision {revision} is not recorded")]
            elif faults.active("in-place-ineligible-patched"):
                found = list(self._blockers)  # Pod template changes are not looked at
            else:
                if faults.active("role-eligibility-whole-group"):
                    role = None  # under RoleRollingUpdate, every Role's changes count against each Role
                found = self._blockers + self._settings(revision)
                found += eligibility.check_roles(old, self._ms.spec.template.roles, role=role)
            self._cache[key] = found
        return self._cache[key] + self._scheduler(pods)

    def _settings(self, revision: str) -> list[eligibility.Finding]:
        """Changes of gangPolicy and networkTopology since ``revision`` was made (none when it
        recorded no settings)."""
        recorded = self._settings_at.get(revision)
        return [] if recorded is None else eligibility.check_group_settings(recorded, self._ms)

    def _scheduler(self, pods: Iterable[ObservedPod]) -> list[eligibility.Finding]:
        """A finding when Pods of the unit run under another scheduler than the ModelServing names."""
        if faults.active("eligibility-ignores-scheduler-name"):
            return []
        want = self._ms.spec.scheduler_name
        running = sorted({p.scheduler_name for p in pods if p.scheduler_name and p.scheduler_name != want})
        if not running:
            return []
        reason = f"{eligibility.ONLY_IMAGES}; schedulerName changed from {', '.join(running)} to {want}"
        return [eligibility.Finding("spec.schedulerName", reason)]

    @property
    def blocked_by_plugins(self) -> bool:
        """In-place updates are on, but a plugin without in-place support makes every unit fall back."""
        return self.enabled and bool(self._blockers)

    def in_place(self, revision: str, role: str | None = None, pods: Iterable[ObservedPod] = ()) -> bool:
        """In-place updates are on and a unit at ``revision`` (with ``pods``) is eligible."""
        return self.enabled and not self.group(revision, role, pods)


def fallback_event(where: str, findings: list[eligibility.Finding]) -> Event:
    """``InPlaceUpdateFallback`` for the unit named ``where``, with its first three findings."""
    shown = "; ".join(f"{f.field}: {f.reason}" for f in findings[:3])
    more = f" (and {len(findings) - 3} more)" if len(findings) > 3 else ""
    return Event(
        "Normal",
        "InPlaceUpdateFallback",
        f"{where} is recreated instead of updated in place: {shown}{more}",
    )
