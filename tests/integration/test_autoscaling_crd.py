"""The generated AutoscalingPolicy CRD, judged by the real kube-apiserver (issue 15, first slice).

Installing it checks that the schema is structural and its CEL rules compile; the tests then check
what the spec promises the schema does: every documented default read back, every documented
range, enum and pattern refused with the field named, and the CEL rules (one backend per metric
source, at most one target, a ratio constraint naming two distinct Roles of ``roles``). Creates are
dry runs: nothing is stored, so no controller is needed.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from conformance.cluster.testing import shared_dir
from kthena_ref.api.autoscaling import KIND, PLURAL
from kthena_ref.api.autoscaling_crd import crd
from kthena_ref.api.types import GROUP, VERSION
from tests.integration.crds import install_crd

pytestmark = pytest.mark.cluster

PROMETHEUS = {"prometheus": {"serverURL": "http://prometheus:9090", "query": "sum(rate(requests_total[1m]))"}}


@pytest.fixture(scope="session")
def autoscaling_crd(api_client: Any, tmp_path_factory: pytest.TempPathFactory) -> None:
    install_crd(api_client, crd(), shared_dir(tmp_path_factory) / "autoscalingpolicy-crd.lock")


@pytest.fixture
def dry_create(api_client: Any, autoscaling_crd: None, namespace: str) -> Callable[[dict[str, Any]], Any]:
    api = client.CustomObjectsApi(api_client)
    return lambda body: api.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, body, dry_run="All")


def homogeneous() -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": KIND,
        "metadata": {"name": "policy"},
        "spec": {
            "metrics": [{"name": "rps", "targetValue": "100m"}],
            "behavior": {"scaleUp": {"stablePolicy": {}, "panicPolicy": {}}, "scaleDown": {}},
            "homogeneousTarget": {
                "minReplicas": 1,
                "maxReplicas": 6,
                "target": {
                    "targetRef": {"kind": "ModelServing", "name": "ms"},
                    "metricSources": {"rps": {"pod": {}}},
                },
            },
        },
    }


def heterogeneous() -> dict[str, Any]:
    body = homogeneous()
    target = body["spec"].pop("homogeneousTarget")
    body["spec"]["heterogeneousTarget"] = {"params": [target | {"cost": 100}]}
    return body


def disaggregated() -> dict[str, Any]:
    body = homogeneous()
    del body["spec"]["homogeneousTarget"]
    body["spec"]["disaggregatedTarget"] = {
        "targetRef": {"name": "ms"},
        "roles": {
            "prefill": {"minReplicas": 1, "maxReplicas": 4, "metricSources": {"rps": PROMETHEUS}},
            "decode": {"minReplicas": 1, "maxReplicas": 8, "metricSources": {"rps": PROMETHEUS}},
        },
        "ratioConstraint": {"numeratorRole": "prefill", "denominatorRole": "decode", "minRatio": "250m", "maxRatio": 1},
    }
    return body


def test_defaults_are_applied(dry_create: Callable[[dict[str, Any]], Any]) -> None:
    spec = dry_create(homogeneous())["spec"]
    assert spec["tolerancePercent"] == 10
    stable = {"instances": 1, "percent": 100, "selectPolicy": "Or"}
    assert spec["behavior"]["scaleUp"]["stablePolicy"] == stable and spec["behavior"]["scaleDown"] == stable
    assert spec["behavior"]["scaleUp"]["panicPolicy"] == {"percent": 1000, "panicThresholdPercent": 200}
    assert spec["homogeneousTarget"]["target"]["metricSources"]["rps"]["pod"] == {"uri": "/metrics", "port": 8100}
    assert dry_create(heterogeneous())["spec"]["heterogeneousTarget"]["costExpansionRatePercent"] == 200


def test_a_disaggregated_policy_with_a_ratio_is_accepted(dry_create: Callable[[dict[str, Any]], Any]) -> None:
    assert dry_create(disaggregated())["spec"]["disaggregatedTarget"]["ratioConstraint"]["minRatio"] == "250m"


def _edit(base: Callable[[], dict[str, Any]], change: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    body = copy.deepcopy(base())
    change(body)
    return body


def _at(*path: str | int, value: Any) -> Callable[[dict[str, Any]], None]:
    def change(body: dict[str, Any]) -> None:
        node: Any = body["spec"]
        for step in path[:-1]:
            node = node[step]
        node[path[-1]] = value

    return change


H, D = homogeneous, disaggregated
SOURCE = ("homogeneousTarget", "target", "metricSources", "rps")
INVALID = {
    "tolerance-above-100": (H, _at("tolerancePercent", value=101), "tolerancePercent"),
    "tolerance-negative": (H, _at("tolerancePercent", value=-1), "tolerancePercent"),
    "stable-percent-above-1000": (H, _at("behavior", "scaleDown", value={"percent": 1001}), "percent"),
    "stable-instances-negative": (H, _at("behavior", "scaleDown", value={"instances": -1}), "instances"),
    "select-policy-enum": (H, _at("behavior", "scaleDown", value={"selectPolicy": "Xor"}), "selectPolicy"),
    "panic-threshold-below-110": (
        H, _at("behavior", "scaleUp", "panicPolicy", value={"panicThresholdPercent": 109}), "panicThresholdPercent"
    ),
    "panic-percent-above-1000": (H, _at("behavior", "scaleUp", "panicPolicy", value={"percent": 1001}), "percent"),
    "metric-name-empty": (H, _at("metrics", 0, "name", value=""), "name"),
    "target-value-not-a-quantity": (H, _at("metrics", 0, "targetValue", value="lots"), "targetValue"),
    "min-replicas-negative": (H, _at("homogeneousTarget", "minReplicas", value=-1), "minReplicas"),
    "max-replicas-zero": (H, _at("homogeneousTarget", "maxReplicas", value=0), "maxReplicas"),
    "max-replicas-above-1e6": (H, _at("homogeneousTarget", "maxReplicas", value=1_000_001), "maxReplicas"),
    "port-zero": (H, _at(*SOURCE, value={"pod": {"port": 0}}), "port"),
    "port-above-65535": (H, _at(*SOURCE, value={"pod": {"port": 65536}}), "port"),
    "uri-without-slash": (H, _at(*SOURCE, value={"pod": {"uri": "metrics"}}), "uri"),
    "two-backends": (H, _at(*SOURCE, value={"pod": {}, **PROMETHEUS}), "metricSources"),
    "no-backend": (H, _at(*SOURCE, value={}), "metricSources"),
    "prometheus-empty-query": (
        H, _at(*SOURCE, value={"prometheus": {"serverURL": "http://p:9090", "query": ""}}), "query"
    ),
    "two-targets": (D, _at("homogeneousTarget", value=homogeneous()["spec"]["homogeneousTarget"]), "spec"),
    "no-roles": (D, _at("disaggregatedTarget", "roles", value={}), "roles"),
    "three-roles": (
        D, _at("disaggregatedTarget", "roles", "extra", value={"minReplicas": 1, "maxReplicas": 1}), "roles"
    ),
    "ratio-same-roles": (D, _at("disaggregatedTarget", "ratioConstraint", "denominatorRole", value="prefill"),
                         "ratioConstraint"),
    "ratio-unknown-role": (D, _at("disaggregatedTarget", "ratioConstraint", "numeratorRole", value="router"),
                           "ratioConstraint"),
    "ratio-not-a-quantity": (D, _at("disaggregatedTarget", "ratioConstraint", "minRatio", value="half"), "minRatio"),
    "heterogeneous-no-params": (heterogeneous, _at("heterogeneousTarget", "params", value=[]), "params"),
    "role-metrics-empty-list": (D, _at("disaggregatedTarget", "roles", "prefill", "metrics", value=[]), "metrics"),
}  # fmt: skip


@pytest.mark.parametrize(("base", "change", "field"), INVALID.values(), ids=INVALID.keys())
def test_invalid_policies_are_refused_naming_the_field(
    dry_create: Callable[[dict[str, Any]], Any],
    base: Callable[[], dict[str, Any]],
    change: Callable[[dict[str, Any]], None],
    field: str,
) -> None:
    with pytest.raises(ApiException) as refused:
        dry_create(_edit(base, change))
    assert refused.value.status == 422, refused.value.body
    message = str(json.loads(refused.value.body)["message"])
    assert field in message, f"the refusal does not name {field!r}: {message}"
