"""The checked-in behaviour catalog (conformance/catalog.yaml) is exactly what the suite declares.

A change to what conformance means (a new, removed or reworded behaviour) must come with the
regenerated catalog (`make catalog`), so it shows up as a reviewed diff.
"""

from __future__ import annotations

from conformance.framework import catalog
from conformance.framework.features import PROFILES


def test_the_checked_in_catalog_matches_the_suite() -> None:
    behaviours = catalog.collect()
    problems = catalog.drift(behaviours, catalog.CATALOG_PATH.read_text())
    assert not problems, "conformance/catalog.yaml is out of date (run `make catalog`):\n" + "\n".join(problems)


def test_every_profile_has_tests_for_its_required_features() -> None:
    covered = {b.feature for b in catalog.collect()}
    missing = {p.name: sorted(str(f) for f in p.required - covered) for p in PROFILES.values()}
    assert not any(missing.values()), f"required features without a single test: {missing}"
