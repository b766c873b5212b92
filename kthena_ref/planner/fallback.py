"""In place or recreate: the eligibility of each outdated unit, and the fallback Event.

Why this module exists: under ``updateMethod: InPlace`` both rollouts (ServingGroups and Role
instances) ask, for every outdated unit, whether an image patch can bring it to the update
revision (:mod:`.eligibility`), and when it cannot they recreate it and say why in an
``InPlaceUpdateFallback`` Event. :class:`InPlaceFindings` asks once per revision (and Role) per
reconcile; :func:`fallback_event` words the answer.
"""

from __future__ import annotations

from .. import faults
from ..api.types import ModelServing, Role, UpdateMethod
from . import eligibility
from .model import Event


class InPlaceFindings:
    """Why a unit at some revision cannot be updated in place (empty: it can), per revision."""

    def __init__(self, ms: ModelServing, roles_at: dict[str, list[Role]]) -> None:
        strategy = ms.spec.rollout_strategy
        self.enabled = strategy is not None and strategy.update_method is UpdateMethod.IN_PLACE
        if faults.active("recreate-updates-in-place") and strategy is not None:
            self.enabled = True  # updateMethod Recreate patches images like InPlace
        if faults.active("update-method-default-in-place") and strategy is None:
            self.enabled = True  # with no rolloutStrategy, images are patched in place
        self._ms = ms
        self._roles_at = roles_at
        self._blockers = eligibility.plugin_blockers(ms) if self.enabled else []
        self._cache: dict[tuple[str, str | None], list[eligibility.Finding]] = {}

    def group(self, revision: str, role: str | None = None) -> list[eligibility.Finding]:
        """The findings against patching a unit at ``revision`` (one Role of it, when ``role``)."""
        key = (revision, role)
        if key not in self._cache:
            old = self._roles_at.get(revision)
            if old is None:
                found = [eligibility.Finding("spec.template.roles", f"revision {revision} is not recorded")]
            elif faults.active("in-place-ineligible-patched"):
                found = list(self._blockers)  # Pod template changes are not looked at
            else:
                found = self._blockers + eligibility.check_roles(old, self._ms.spec.template.roles, role=role)
            self._cache[key] = found
        return self._cache[key]

    def in_place(self, revision: str, role: str | None = None) -> bool:
        """In-place updates are on and a unit at ``revision`` is eligible."""
        return self.enabled and not self.group(revision, role)


def fallback_event(where: str, findings: list[eligibility.Finding]) -> Event:
    """``InPlaceUpdateFallback`` for the unit named ``where``, with its first three findings."""
    shown = "; ".join(f"{f.field}: {f.reason}" for f in findings[:3])
    more = f" (and {len(findings) - 3} more)" if len(findings) > 3 else ""
    return Event(
        "Normal",
        "InPlaceUpdateFallback",
        f"{where} is recreated instead of updated in place: {shown}{more}",
    )
