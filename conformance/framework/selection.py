"""Which behaviours a run covers: by profile, feature or id, and which pass runs them (pure).

``--profile``, ``--feature`` and ``--id`` narrow the catalog (each a union within its kind; the
kinds intersect); ``--id`` accepts shell-style patterns (``dns/*``). A behaviour outside the
selection is reported ``skipped-by-user``. Tests that must run alone (``serial``) run in a
second, non-parallel pass.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable
from dataclasses import dataclass, field

from .catalog import Behaviour
from .features import Feature, SelectionError, get_profile, parse_feature


@dataclass(frozen=True)
class Selection:
    profiles: tuple[str, ...] = ()
    features: tuple[Feature, ...] = ()
    ids: tuple[str, ...] = ()
    include_slow: bool = True
    _profile_features: frozenset[Feature] = field(default=frozenset(), repr=False)

    @classmethod
    def parse(
        cls,
        profiles: Iterable[str] = (),
        features: Iterable[str] = (),
        ids: Iterable[str] = (),
        include_slow: bool = True,
    ) -> Selection:
        """Validate the names (unknown ones raise :class:`SelectionError` naming them)."""
        canon_profiles = tuple(get_profile(p).name for p in _split(profiles))
        wanted: set[Feature] = set()
        for name in canon_profiles:
            wanted |= get_profile(name).features
        return cls(
            profiles=canon_profiles,
            features=tuple(parse_feature(f) for f in _split(features)),
            ids=tuple(_split(ids)),
            include_slow=include_slow,
            _profile_features=frozenset(wanted),
        )

    def check_ids(self, catalog: Iterable[Behaviour]) -> None:
        """Every ``--id`` must match some behaviour: a typo is an error, not an empty run."""
        known = [b.id for b in catalog]
        for pattern in self.ids:
            if not fnmatch.filter(known, pattern):
                raise SelectionError(
                    f"--id {pattern!r} matches no behaviour in the catalog (see `kthena-conformance catalog`)"
                )

    def selects(self, b: Behaviour) -> bool:
        if self.profiles and b.feature not in self._profile_features:
            return False
        if self.features and b.feature not in self.features:
            return False
        if self.ids and not any(fnmatch.fnmatchcase(b.id, p) for p in self.ids):
            return False
        return self.include_slow or not b.slow

    def as_report(self) -> dict[str, list[str]]:
        return {"profiles": list(self.profiles), "features": [str(f) for f in self.features], "ids": list(self.ids)}

    @property
    def narrowed(self) -> bool:
        """Did the user narrow the run below whole profiles (features, ids, no slow tests)?"""
        return bool(self.features or self.ids or not self.include_slow)


def in_pass(b: Behaviour, pass_name: str) -> bool:
    """``parallel`` runs what may share the cluster; ``serial`` the rest; ``all`` everything."""
    if pass_name == "parallel":
        return not b.serial
    if pass_name == "serial":
        return b.serial
    return True


def _split(values: Iterable[str]) -> list[str]:
    return [part.strip() for value in values for part in value.split(",") if part.strip()]
