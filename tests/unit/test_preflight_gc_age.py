"""The garbage-collection preflight probe is skipped for a CRD old enough that a running garbage
collector already tracks it (kube-controller-manager re-reads discovery every 30 s)."""

from __future__ import annotations

import datetime as dt

import pytest

from conformance.run.preflight import GC_DISCOVERY_SETTLED, crd_age, gc_probe_needed

NOW = dt.datetime(2026, 12, 3, 9, 0, 0, tzinfo=dt.UTC)


@pytest.mark.parametrize(
    ("created", "age", "probed"),
    [
        (None, None, True),
        (NOW, 0.0, True),
        (NOW - dt.timedelta(seconds=5), 5.0, True),
        (NOW - dt.timedelta(seconds=GC_DISCOVERY_SETTLED), GC_DISCOVERY_SETTLED, True),
        (NOW - dt.timedelta(seconds=GC_DISCOVERY_SETTLED + 1), GC_DISCOVERY_SETTLED + 1, False),
        (NOW - dt.timedelta(days=3), 3 * 86400.0, False),
    ],
)
def test_crd_age_decides_whether_to_probe(created: dt.datetime | None, age: float | None, probed: bool) -> None:
    assert crd_age(created, NOW) == age
    assert gc_probe_needed(age) is probed
