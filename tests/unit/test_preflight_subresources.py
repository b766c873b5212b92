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


def test_converter_crds_are_informational_and_name_their_profile() -> None:
    from conformance.run.preflight import converter_crd_checks

    present = converter_crd_checks(
        {"modelboosters.workload.serving.volcano.sh": ["v1alpha1"], "leaderworkersets.leaderworkerset.x-k8s.io": ["v1"]}
    )
    assert [(c.name, c.as_dict()["result"]) for c in present] == [
        ("crd-modelboosters", "ok"),
        ("crd-leaderworkersets", "ok"),
    ]
    absent = converter_crd_checks({"leaderworkersets.leaderworkerset.x-k8s.io": ["v1beta1"]})
    assert [c.as_dict()["result"] for c in absent] == ["skipped", "skipped"]
    assert "is not installed: the ModelBooster profile's tests will be inconclusive" in absent[0].message
    assert "serves ['v1beta1'], not v1: the LWSConversion profile" in absent[1].message
