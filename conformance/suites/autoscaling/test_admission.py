"""AutoscalingAdmission: the AutoscalingPolicy API's documented defaults, bounds and target rule.

The API reference gives each field's default and validation (minimum, maximum, enum, pattern);
AutoscalingPolicySpec says "exactly one target must be set; this is enforced by the
autoscalingpolicy validating webhook". Whether the schema, CEL or a webhook refuses is the
implementation's business: only the refusal (HTTP 400/403/422) and that nothing is stored are
asserted. Creates are dry runs (``dryRun=All``, which runs every admission step and stores
nothing), so no policy ever reaches an autoscaler.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from conformance.framework.catalog import behaviour
from conformance.framework.features import Feature
from conformance.framework.modelserving import ModelServings, Rejection, expect_refused, rejection_of
from conformance.framework.outcomes import Inconclusive

from . import API, GROUP, POLICIES, VERSION

PROM = {"prometheus": {"serverURL": "http://prometheus.example:9090", "query": "sum(load)"}}


def valid() -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "AutoscalingPolicy",
        "metadata": {"name": "policy"},
        "spec": {
            "metrics": [{"name": "load", "targetValue": 10}],
            "behavior": {"scaleUp": {"stablePolicy": {}, "panicPolicy": {}}, "scaleDown": {}},
            "homogeneousTarget": {
                "minReplicas": 1,
                "maxReplicas": 4,
                "target": {"targetRef": {"kind": "ModelServing", "name": "ms"}, "metricSources": {"load": PROM}},
            },
        },
    }


def dry_create(ms: ModelServings, body: dict[str, Any]) -> tuple[dict[str, Any] | None, Rejection | None]:
    """(the object as it would be stored, None) or (None, the refusal)."""
    from kubernetes.client.exceptions import ApiException

    try:
        got = ms.kube.custom.create_namespaced_custom_object(GROUP, VERSION, ms.ns, POLICIES, body, dry_run="All")
    except ApiException as exc:
        if exc.status == 404 and "autoscalingpolicies" in str(exc.body or "") + str(exc.reason or ""):
            raise Inconclusive("the cluster does not serve AutoscalingPolicy (its CRD is not installed)") from None
        return None, rejection_of(exc)
    return dict(got), None


def accepted(ms: ModelServings, body: dict[str, Any], what: str) -> dict[str, Any]:
    stored, rejection = dry_create(ms, body)
    assert stored is not None, f"{what} must be accepted; refused: HTTP {rejection and rejection.status}: " + (
        rejection.message if rejection else ""
    )
    return stored


def _set(path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    """A change setting ``path`` (dot-separated, under the policy) to ``value``."""

    def change(body: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        node = body
        for key in parents:
            node = node.setdefault(key, {})
        node[last] = value

    return change


def _drop_targets(body: dict[str, Any]) -> None:
    del body["spec"]["homogeneousTarget"]


def _two_targets(body: dict[str, Any]) -> None:
    target = copy.deepcopy(body["spec"]["homogeneousTarget"])
    body["spec"]["heterogeneousTarget"] = {"params": [target | {"cost": 1}]}


TARGETS = {"no-target": _drop_targets, "two-targets": _two_targets}


@behaviour(
    "autoscaling/admission/exactly-one-target",
    "An AutoscalingPolicy with no target, or with more than one of homogeneousTarget, heterogeneousTarget and "
    "disaggregatedTarget, MUST be refused at admission and not stored.",
    f"{API}#AutoscalingPolicySpec",
    Feature.AUTOSCALING_ADMISSION,
)
@pytest.mark.parametrize("case", TARGETS, ids=TARGETS.keys())
def test_exactly_one_target(ms: ModelServings, case: str) -> None:
    accepted(ms, valid(), "a policy with one homogeneousTarget")
    body = valid()
    TARGETS[case](body)
    _, rejection = dry_create(ms, body)
    expect_refused(rejection, f"a policy with {case.replace('-', ' ')}")


BOUNDS = {
    "tolerancePercent-above-100": _set("spec.tolerancePercent", 101),
    "tolerancePercent-negative": _set("spec.tolerancePercent", -1),
    "panicThresholdPercent-below-110": _set("spec.behavior.scaleUp.panicPolicy.panicThresholdPercent", 109),
    "panicThresholdPercent-above-1000": _set("spec.behavior.scaleUp.panicPolicy.panicThresholdPercent", 1001),
    "panic-percent-above-1000": _set("spec.behavior.scaleUp.panicPolicy.percent", 1001),
    "stable-percent-above-1000": _set("spec.behavior.scaleDown.percent", 1001),
    "stable-instances-negative": _set("spec.behavior.scaleDown.instances", -1),
    "selectPolicy-unknown": _set("spec.behavior.scaleDown.selectPolicy", "Xor"),
    "minReplicas-negative": _set("spec.homogeneousTarget.minReplicas", -1),
    "maxReplicas-zero": _set("spec.homogeneousTarget.maxReplicas", 0),
    "maxReplicas-above-1e6": _set("spec.homogeneousTarget.maxReplicas", 1_000_001),
    "metric-name-empty": _set("spec.metrics", [{"name": "", "targetValue": 10}]),
    "pod-port-zero": _set("spec.homogeneousTarget.target.metricSources", {"load": {"pod": {"port": 0}}}),
    "pod-uri-relative": _set("spec.homogeneousTarget.target.metricSources", {"load": {"pod": {"uri": "metrics"}}}),
}


@behaviour(
    "autoscaling/admission/documented-bounds",
    "An AutoscalingPolicy outside a documented minimum, maximum, enum or pattern (tolerancePercent 0..100, "
    "panicThresholdPercent 110..1000, percent up to 1000, instances from 0, selectPolicy Or or And, minReplicas "
    "0..1e6, maxReplicas 1..1e6, a non-empty metric name, port 1..65535, a uri starting with /) MUST be refused at "
    "admission and not stored.",
    f"{API}#AutoscalingPolicyStablePolicy",
    Feature.AUTOSCALING_ADMISSION,
)
@pytest.mark.parametrize("case", BOUNDS, ids=BOUNDS.keys())
def test_documented_bounds(ms: ModelServings, case: str) -> None:
    body = valid()
    BOUNDS[case](body)
    _, rejection = dry_create(ms, body)
    expect_refused(rejection, f"a policy with {case}")


DEFAULTS = {
    "tolerancePercent": (("spec", "tolerancePercent"), 10),
    "panic-percent": (("spec", "behavior", "scaleUp", "panicPolicy", "percent"), 1000),
    "panicThresholdPercent": (("spec", "behavior", "scaleUp", "panicPolicy", "panicThresholdPercent"), 200),
    "scaleUp-instances": (("spec", "behavior", "scaleUp", "stablePolicy", "instances"), 1),
    "scaleUp-percent": (("spec", "behavior", "scaleUp", "stablePolicy", "percent"), 100),
    "scaleUp-selectPolicy": (("spec", "behavior", "scaleUp", "stablePolicy", "selectPolicy"), "Or"),
    "scaleDown-instances": (("spec", "behavior", "scaleDown", "instances"), 1),
    "scaleDown-percent": (("spec", "behavior", "scaleDown", "percent"), 100),
    "scaleDown-selectPolicy": (("spec", "behavior", "scaleDown", "selectPolicy"), "Or"),
    "pod-uri": (("spec", "homogeneousTarget", "target", "metricSources", "pod-load", "pod", "uri"), "/metrics"),
    "pod-port": (("spec", "homogeneousTarget", "target", "metricSources", "pod-load", "pod", "port"), 8100),
}


@behaviour(
    "autoscaling/admission/documented-defaults",
    "An AutoscalingPolicy that omits a field with a documented default MUST read back with that default: "
    "tolerancePercent 10, panicPolicy percent 1000 and panicThresholdPercent 200, a stable policy's instances 1, "
    "percent 100 and selectPolicy Or, a pod metric source's uri /metrics and port 8100.",
    f"{API}#AutoscalingPolicySpec",
    Feature.AUTOSCALING_ADMISSION,
)
def test_documented_defaults(ms: ModelServings) -> None:
    body = valid()
    body["spec"]["metrics"].append({"name": "pod-load", "targetValue": 10})
    body["spec"]["homogeneousTarget"]["target"]["metricSources"]["pod-load"] = {"pod": {}}
    stored = accepted(ms, body, "a policy that omits every defaulted field")
    wrong = {}
    for name, (path, want) in DEFAULTS.items():
        node: Any = stored
        for key in path:
            node = node.get(key) if isinstance(node, dict) else None
        if node != want:
            wrong[name] = f"{'.'.join(path)}: expected {want!r}, read back {node!r}"
    assert not wrong, "documented defaults not applied: " + "; ".join(wrong.values())
