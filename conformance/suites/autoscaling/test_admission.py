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
                "target": {
                    "targetRef": {"kind": "ModelServing", "name": "ms"},
                    "metricSources": {"load": copy.deepcopy(PROM)},
                },
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


def _heterogeneous(change: Callable[[dict[str, Any]], None] | None = None) -> Callable[[dict[str, Any]], None]:
    """A change making the policy's target a heterogeneousTarget of the same ModelServing (then ``change``)."""

    def apply(body: dict[str, Any]) -> None:
        homogeneous = body["spec"].pop("homogeneousTarget")
        body["spec"]["heterogeneousTarget"] = {"params": [homogeneous | {"cost": 1}]}
        if change is not None:
            change(body)

    return apply


def _disaggregated(change: Callable[[dict[str, Any]], None] | None = None) -> Callable[[dict[str, Any]], None]:
    """A change making the policy's target a disaggregatedTarget of Role ``decode`` (then ``change``)."""

    def apply(body: dict[str, Any]) -> None:
        homogeneous = body["spec"].pop("homogeneousTarget")
        role = {"minReplicas": 1, "maxReplicas": 4, "metricSources": homogeneous["target"]["metricSources"]}
        body["spec"]["disaggregatedTarget"] = {
            "targetRef": homogeneous["target"]["targetRef"],
            "roles": {"decode": role},
        }
        if change is not None:
            change(body)

    return apply


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


SHAPES: dict[str, Callable[[dict[str, Any]], None]] = {
    "homogeneous": lambda body: None,
    "heterogeneous": _heterogeneous(),
    "disaggregated": _disaggregated(),
}
_HOM, _HET, _DIS = "spec.homogeneousTarget", "spec.heterogeneousTarget", "spec.disaggregatedTarget"
_ROLE = f"{_DIS}.roles.decode"
Change = tuple[str, Callable[[dict[str, Any]], None]]  # (the shape of the valid policy changed, the change)


def _param(**fields: Any) -> Callable[[dict[str, Any]], None]:
    return lambda body: body["spec"]["heterogeneousTarget"]["params"][0].update(fields)


def _param_source(body: dict[str, Any]) -> dict[str, Any]:
    """The metric source ``load`` of a heterogeneous policy's first param."""
    source: dict[str, Any] = body["spec"]["heterogeneousTarget"]["params"][0]["target"]["metricSources"]["load"]
    return source


BOUNDS: dict[str, Change] = {
    "tolerancePercent-above-100": ("homogeneous", _set("spec.tolerancePercent", 101)),
    "tolerancePercent-negative": ("homogeneous", _set("spec.tolerancePercent", -1)),
    "panicThresholdPercent-below-110": (
        "homogeneous",
        _set("spec.behavior.scaleUp.panicPolicy.panicThresholdPercent", 109),
    ),
    "panicThresholdPercent-above-1000": (
        "homogeneous",
        _set("spec.behavior.scaleUp.panicPolicy.panicThresholdPercent", 1001),
    ),
    "panic-percent-above-1000": ("homogeneous", _set("spec.behavior.scaleUp.panicPolicy.percent", 1001)),
    "stable-percent-above-1000": ("homogeneous", _set("spec.behavior.scaleDown.percent", 1001)),
    "stable-instances-negative": ("homogeneous", _set("spec.behavior.scaleDown.instances", -1)),
    "selectPolicy-unknown": ("homogeneous", _set("spec.behavior.scaleDown.selectPolicy", "Xor")),
    "minReplicas-negative": ("homogeneous", _set(f"{_HOM}.minReplicas", -1)),
    "maxReplicas-zero": ("homogeneous", _set(f"{_HOM}.maxReplicas", 0)),
    "maxReplicas-above-1e6": ("homogeneous", _set(f"{_HOM}.maxReplicas", 1_000_001)),
    "pod-port-zero": ("homogeneous", _set(f"{_HOM}.target.metricSources", {"load": {"pod": {"port": 0}}})),
    "pod-uri-relative": ("homogeneous", _set(f"{_HOM}.target.metricSources", {"load": {"pod": {"uri": "metrics"}}})),
    "param-cost-negative": ("heterogeneous", _param(cost=-1)),
    "param-minReplicas-negative": ("heterogeneous", _param(minReplicas=-1)),
    "param-maxReplicas-zero": ("heterogeneous", _param(maxReplicas=0)),
    "costExpansionRatePercent-negative": ("heterogeneous", _set(f"{_HET}.costExpansionRatePercent", -1)),
    "role-minReplicas-negative": ("disaggregated", _set(f"{_ROLE}.minReplicas", -1)),
    "role-maxReplicas-above-1e6": ("disaggregated", _set(f"{_ROLE}.maxReplicas", 1_000_001)),
}


def refused_after(ms: ModelServings, case: str, change: Change) -> None:
    """The valid policy of the change's shape is accepted, and refused once changed (so the refusal is the
    change's, not the shape's)."""
    shape, apply = change
    body = valid()
    SHAPES[shape](body)
    accepted(ms, copy.deepcopy(body), f"the valid {shape} policy that case {case} changes")
    apply(body)
    _, rejection = dry_create(ms, body)
    expect_refused(rejection, f"a {shape} policy with {case}")


@behaviour(
    "autoscaling/admission/documented-bounds",
    "An AutoscalingPolicy outside a documented minimum, maximum, enum or pattern (tolerancePercent 0..100, "
    "panicThresholdPercent 110..1000, percent up to 1000, instances from 0, selectPolicy Or or And, minReplicas "
    "0..1e6 and maxReplicas 1..1e6 of a homogeneous target, a heterogeneous param and a Role, a param's cost and "
    "costExpansionRatePercent from 0, port 1..65535, a uri starting with /) MUST be refused at admission and not "
    "stored.",
    f"{API}#AutoscalingPolicyStablePolicy",
    Feature.AUTOSCALING_ADMISSION,
)
@pytest.mark.parametrize("case", BOUNDS, ids=BOUNDS.keys())
def test_documented_bounds(ms: ModelServings, case: str) -> None:
    refused_after(ms, case, BOUNDS[case])


SIZES: dict[str, Change] = {
    "metric-name-empty": ("homogeneous", _set("spec.metrics", [{"name": "", "targetValue": 10}])),
    "serverURL-empty": ("homogeneous", _set(f"{_HOM}.target.metricSources.load.prometheus.serverURL", "")),
    "query-empty": ("homogeneous", _set(f"{_HOM}.target.metricSources.load.prometheus.query", "")),
    "params-empty": ("heterogeneous", _set(f"{_HET}.params", [])),
    "roles-empty": ("disaggregated", _set(f"{_DIS}.roles", {})),
    "roles-three": (
        "disaggregated",
        lambda body: body["spec"]["disaggregatedTarget"]["roles"].update(
            {name: {"minReplicas": 1, "maxReplicas": 1} for name in ("prefill", "router")}
        ),
    ),
    "role-metrics-empty": ("disaggregated", _set(f"{_ROLE}.metrics", [])),
}


@behaviour(
    "autoscaling/admission/documented-sizes",
    "An AutoscalingPolicy breaking a documented MinLength, MinItems, MinProperties or MaxProperties (an empty "
    "metric name, serverURL or query; no heterogeneous params; no Role, or more than two, in a disaggregatedTarget; "
    "a Role's empty metrics list) MUST be refused at admission and not stored.",
    f"{API}#PrometheusMetricSource",
    Feature.AUTOSCALING_ADMISSION,
)
@pytest.mark.parametrize("case", SIZES, ids=SIZES.keys())
def test_documented_sizes(ms: ModelServings, case: str) -> None:
    refused_after(ms, case, SIZES[case])


BACKENDS: dict[str, Change] = {
    "both": ("homogeneous", _set(f"{_HOM}.target.metricSources.load.pod", {})),
    "neither": ("homogeneous", _set(f"{_HOM}.target.metricSources.load", {})),
    "both-in-a-param": ("heterogeneous", lambda body: _param_source(body).update(pod={})),
    "neither-in-a-role": ("disaggregated", _set(f"{_ROLE}.metricSources.load", {})),
}


@behaviour(
    "autoscaling/admission/one-metric-backend",
    "A metric source that sets both pod and prometheus, or neither, MUST be refused at admission and not stored "
    "(a homogeneous target's, a heterogeneous param's and a Role's alike).",
    f"{API}#MetricSource",
    Feature.AUTOSCALING_ADMISSION,
)
@pytest.mark.parametrize("case", BACKENDS, ids=BACKENDS.keys())
def test_one_metric_backend(ms: ModelServings, case: str) -> None:
    refused_after(ms, f"a metric source with {case.replace('-', ' ')} backend(s)", BACKENDS[case])


DEFAULTS: dict[str, tuple[tuple[str, ...], Any]] = {
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
HETEROGENEOUS_DEFAULTS: dict[str, tuple[tuple[str, ...], Any]] = {
    "costExpansionRatePercent": (("spec", "heterogeneousTarget", "costExpansionRatePercent"), 200)
}


@behaviour(
    "autoscaling/admission/documented-defaults",
    "An AutoscalingPolicy that omits a field with a documented default MUST read back with that default: "
    "tolerancePercent 10, panicPolicy percent 1000 and panicThresholdPercent 200, a stable policy's instances 1, "
    "percent 100 and selectPolicy Or, a pod metric source's uri /metrics and port 8100, a heterogeneousTarget's "
    "costExpansionRatePercent 200.",
    f"{API}#AutoscalingPolicySpec",
    Feature.AUTOSCALING_ADMISSION,
)
def test_documented_defaults(ms: ModelServings) -> None:
    body = valid()
    body["spec"]["metrics"].append({"name": "pod-load", "targetValue": 10})
    body["spec"]["homogeneousTarget"]["target"]["metricSources"]["pod-load"] = {"pod": {}}
    wrong = _defaults_missed(accepted(ms, body, "a policy that omits every defaulted field"), DEFAULTS)
    heterogeneous = valid()
    SHAPES["heterogeneous"](heterogeneous)
    stored = accepted(ms, heterogeneous, "a heterogeneous policy that omits costExpansionRatePercent")
    wrong += _defaults_missed(stored, HETEROGENEOUS_DEFAULTS)
    assert not wrong, "documented defaults not applied: " + "; ".join(wrong)


def _defaults_missed(stored: dict[str, Any], defaults: dict[str, tuple[tuple[str, ...], Any]]) -> list[str]:
    wrong = []
    for path, want in defaults.values():
        node: Any = stored
        for key in path:
            node = node.get(key) if isinstance(node, dict) else None
        if node != want:
            wrong.append(f"{'.'.join(path)}: expected {want!r}, read back {node!r}")
    return wrong
