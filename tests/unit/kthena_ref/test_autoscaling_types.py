"""kthena_ref.api.autoscaling and its CRD: the spec's defaults, bounds and enums, without a cluster
(the API server's judgement of the same CRD is tests/integration/test_autoscaling_crd.py)."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from pydantic import ValidationError

from kthena_ref.api.autoscaling import AutoscalingPolicySpec, PanicPolicy, PodMetricSource, StablePolicy, quantity
from kthena_ref.api.autoscaling_crd import crd

SPEC = {"homogeneousTarget": {"target": {"targetRef": {"name": "ms"}}, "minReplicas": 0, "maxReplicas": 3}}


def test_defaults() -> None:
    spec = AutoscalingPolicySpec.model_validate(SPEC)
    assert spec.tolerance_percent == 10
    assert StablePolicy().model_dump(by_alias=True) == {"instances": 1, "percent": 100, "selectPolicy": "Or"}
    assert PanicPolicy().model_dump(by_alias=True) == {"percent": 1000, "panicThresholdPercent": 200}
    assert (PodMetricSource().uri, PodMetricSource().port) == ("/metrics", 8100)


@pytest.mark.parametrize(
    ("change", "field"),
    [
        pytest.param({"tolerancePercent": 101}, "tolerancePercent", id="tolerance"),
        pytest.param({"metrics": [{"name": "rps", "targetValue": "many"}]}, "targetValue", id="quantity"),
        pytest.param({"metrics": [{"name": "", "targetValue": 1}]}, "name", id="metric-name"),
        pytest.param({"behavior": {"scaleDown": {"selectPolicy": "Xor"}}}, "selectPolicy", id="select-policy"),
        pytest.param(
            {"behavior": {"scaleUp": {"panicPolicy": {"panicThresholdPercent": 100}}}},
            "panicThresholdPercent",
            id="panic-threshold",
        ),
    ],
)
def test_refusals_name_the_field(change: dict[str, Any], field: str) -> None:
    with pytest.raises(ValidationError) as refused:
        AutoscalingPolicySpec.model_validate(SPEC | change)
    assert field in str(refused.value)


@pytest.mark.parametrize(
    ("value", "expected"),
    [("100m", Decimal("0.1")), (3, Decimal(3)), ("1e15", Decimal("1e15")), ("2Ki", Decimal(2048))],
)
def test_quantity(value: int | str, expected: Decimal) -> None:
    assert quantity(value) == expected


def test_the_crd_carries_the_bounds_and_rules() -> None:
    schema = crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    assert schema["properties"]["tolerancePercent"] == {
        "type": "integer", "format": "int32", "minimum": 0, "maximum": 100, "default": 10
    }  # fmt: skip
    roles = schema["properties"]["disaggregatedTarget"]["properties"]["roles"]
    assert (roles["minProperties"], roles["maxProperties"]) == (1, 2)
    assert len(schema["x-kubernetes-validations"]) == 1  # at most one target
