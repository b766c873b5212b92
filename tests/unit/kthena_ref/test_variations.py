"""Conformant variations of the reference (issue 31): switched only on request, each changing one
choice the spec leaves open (``sidecar-first``: the implementation's own container first in every
Pod; ``intermediate-owner``: Pods owned through a Lease, found by their labels)."""

from __future__ import annotations

import pytest

from kthena_ref import variations
from kthena_ref.planner.eviction import owner_of

from .builders import MS, fresh_pods


def test_off_by_default_and_unknown_names_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(variations.ENV, raising=False)
    assert variations.configure(None) == frozenset()
    with pytest.raises(ValueError, match="unknown variation"):
        variations.configure(["sidecar-last"])
    monkeypatch.setenv(variations.ENV, "sidecar-first, intermediate-owner")
    assert variations.configure(None) == {"sidecar-first", "intermediate-owner"}
    variations.configure(None)


def test_sidecar_first_puts_its_container_first_and_keeps_the_template_ones() -> None:
    ms = MS().role("r", 1, 1).build()
    plain = fresh_pods(ms)
    with variations.varied("sidecar-first"):
        varied = fresh_pods(ms)
    assert [c["name"] for c in varied[0]["spec"]["containers"]] == [
        variations.SIDECAR_NAME,
        *(c["name"] for c in plain[0]["spec"]["containers"]),
    ]
    for before, after in zip(plain, varied, strict=True):
        assert after["spec"]["containers"][1:] == before["spec"]["containers"]
        assert after["metadata"] == before["metadata"]


def test_intermediate_owner_pods_are_told_by_their_name_label() -> None:
    pod = fresh_pods(MS().role("r", 1, 0).build())[0]
    pod["metadata"]["ownerReferences"] = [{"kind": "Lease", "name": "ms-pods", "uid": "l1", "controller": True}]
    assert owner_of(pod) is None
    with variations.varied("intermediate-owner"):
        assert owner_of(pod) == "ms"
