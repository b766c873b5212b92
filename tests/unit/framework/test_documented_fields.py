"""The documented-fields preflight: paths through an OpenAPI schema (lists, unknown fields kept),
the reference's CRD keeps every documented field, a CRD without some names them and the
features they break, and failed behaviours of those features are pointed at the finding."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from conformance.framework.documented_fields import (
    DOCUMENTED,
    affected_features,
    blame,
    finding,
    has_path,
    missing_fields,
)
from conformance.framework.features import FEATURES, Feature
from conformance.implementations import reference
from conformance.run.preflight import documented_fields_check

MAX_SURGE = "spec.rolloutStrategy.rollingUpdateConfiguration.maxSurge"
SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "spec": {
            "type": "object",
            "properties": {
                "replicas": {"type": "integer"},
                "plugins": {"type": "array", "items": {"type": "object", "properties": {"name": {"type": "string"}}}},
                "loose": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
                "anyList": {"type": "array", "x-kubernetes-preserve-unknown-fields": True},
            },
        }
    },
}


@pytest.mark.parametrize(
    ("path", "kept"),
    [
        ("spec.replicas", True),
        ("spec.schedulerName", False),
        ("spec.plugins[].name", True),
        ("spec.plugins[].type", False),
        ("spec.replicas[].x", False),  # not a list
        ("spec.loose.anything.below", True),
        ("spec.anyList[].whatever", True),
        ("status.replicas", False),
    ],
)
def test_has_path(path: str, kept: bool) -> None:
    assert has_path(SCHEMA, path) is kept


def _reference_schema() -> dict[str, Any]:
    crd = next(c for c in reference.crds() if c["metadata"]["name"] == "modelservings.workload.serving.volcano.sh")
    version = next(v for v in crd["spec"]["versions"] if v["name"] == "v1alpha1")
    return copy.deepcopy(version["schema"]["openAPIV3Schema"])


def test_the_reference_crd_keeps_every_documented_field() -> None:
    assert missing_fields(_reference_schema()) == []
    assert set(DOCUMENTED.values()) <= set(FEATURES)


def test_a_crd_without_max_surge_is_named_once_with_the_feature_it_breaks() -> None:
    schema = _reference_schema()
    rolling = schema["properties"]["spec"]["properties"]["rolloutStrategy"]["properties"]["rollingUpdateConfiguration"]
    del rolling["properties"]["maxSurge"]
    missing = missing_fields(schema)
    assert missing == [MAX_SURGE]
    assert affected_features(missing) == {Feature.MAX_SURGE: missing}
    check = documented_fields_check({"openAPIV3Schema": schema})
    assert not check.ok and not check.required and check.detail == tuple(missing)
    assert check.message == finding(missing)
    assert f"MaxSurge: {MAX_SURGE}" in check.message


def test_a_complete_crd_passes_and_a_schemaless_one_is_said() -> None:
    assert documented_fields_check({"openAPIV3Schema": _reference_schema()}).ok
    assert "without a schema" in documented_fields_check(None).message


@pytest.mark.parametrize(
    ("features", "text", "expected"),
    [
        pytest.param(
            [Feature.MAX_SURGE, Feature.ROLLING_UPDATE],
            "rollingUpdateConfiguration: {maxSurge: 1}",
            f"the installed CRD lacks {MAX_SURGE}",
            id="theirs-and-set",
        ),
        # issue 31: a Role's maxSurge was blamed for every RoleRollingUpdate failure, set or not
        pytest.param([Feature.MAX_SURGE, Feature.ROLLING_UPDATE], "maxUnavailable: 1", "", id="theirs-not-set"),
        pytest.param([Feature.MAX_SURGE], "maxSurgeLimit: 1", "", id="a-longer-word-is-not-the-field"),
        pytest.param([Feature.CORE], "maxSurge: 1", "", id="not-theirs"),
    ],
)
def test_blame_points_a_failed_behaviour_that_sets_the_field_at_the_finding(
    features: list[Feature], text: str, expected: str
) -> None:
    prefix = blame(features, [MAX_SURGE], text)
    assert prefix.startswith(expected) and (prefix == "") == (expected == "")


def test_the_text_of_a_test_includes_the_manifests_it_names() -> None:
    from conformance.framework.catalog import collect, source_text

    b = next(b for b in collect() if b.id == "plugins/immutability/remove-plugin")
    text = source_text(b)
    assert "def test_removing_a_plugin_is_rejected" in text
    b = next(b for b in collect() if b.id == "rollout/sg/max-surge")
    assert "maxSurge" in source_text(b)
