"""Preflight: the status subresource is required; the scale subresource, which the spec never
names, is informational (its tests are the optional ScaleSubresource feature)."""

from __future__ import annotations

import pytest

from conformance.run.preflight import subresource_checks


@pytest.mark.parametrize(
    ("served", "results"),
    [
        (["status", "scale"], {"crd-subresources": "ok", "crd-scale-subresource": "ok"}),
        (["status"], {"crd-subresources": "ok", "crd-scale-subresource": "skipped"}),  # never "missing"
        ([], {"crd-subresources": "missing", "crd-scale-subresource": "skipped"}),
        (["scale"], {"crd-subresources": "missing", "crd-scale-subresource": "ok"}),
    ],
)
def test_only_the_status_subresource_is_required(served: list[str], results: dict[str, str]) -> None:
    checks = {c.name: c.as_dict() for c in subresource_checks(served)}
    assert {name: d["result"] for name, d in checks.items()} == results


def test_a_missing_scale_subresource_says_what_to_declare() -> None:
    (_, scale) = subresource_checks(["status"])
    assert not scale.required and "declare the ScaleSubresource feature unsupported" in scale.message
