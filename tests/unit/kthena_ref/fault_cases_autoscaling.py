"""Probes of the autoscaling faults (issue 15): the decision, the reconcile, the loop's status, the webhook and
the AutoscalingPolicy CRD.

Why this module exists: ``test_faults.py`` holds one probe per fault; these are kept apart so the table there
stays readable. Each row is ``(fault, probe, off, on, overlaps)`` as in :mod:`.fault_cases_plugins`.

The decision probes call :func:`~kthena_ref.autoscaler.decision.decide` once from a fresh memory; the reconcile
probes call :func:`~kthena_ref.autoscaler.plan.reconcile` on a disaggregated target built so that no other
decision fault moves the observable (no metric values where a missing one would count, a 100% tolerance where a
one-replica shift would); the CRD faults are probed on the generated CRD and, for the bounds, on the webhook too
(a variant lets a value through only when both halves do).
"""

from __future__ import annotations

import asyncio
from decimal import Decimal
from typing import Any

from kthena_ref.admission.autoscaling_rules import validate_policy
from kthena_ref.api.autoscaling import AutoscalingPolicySpec, PodMetricSource, StablePolicy
from kthena_ref.api.autoscaling_crd import UNCHECKED_FIELDS, UNSIZED_KEYWORDS, crd
from kthena_ref.autoscaler.decision import Memory, Policy, decide
from kthena_ref.autoscaler.heterogeneous import Param, distribute
from kthena_ref.autoscaler.loop import Autoscaler
from kthena_ref.autoscaler.metrics import metric_name, scrape_url
from kthena_ref.autoscaler.plan import Observed, Outcome, reconcile, units

MS_NAME = "ms"
LOAD = {"load": Decimal(1)}  # one metric, targetValue 1: a value of v asks for v replicas


def _decide(current: int, low: int, high: int, value: int | None, **policy: Any) -> tuple[int, int]:
    """(replicas, desired) of one decision from a fresh memory; ``value`` None: the metric is missing."""
    values = {} if value is None else {"load": Decimal(value)}
    decision = decide(current, Policy(low, high, LOAD, **policy), values, 0.0, Memory())
    return decision.replicas, decision.desired


def probe_exceeds_max() -> tuple[int, int]:
    """2 replicas in [1, 4] and a load of 10 (panic, whose step allows +1000%)."""
    return _decide(2, 1, 4, 10)


def probe_panics() -> str:
    """1 replica in [1, 10] and a load of 10 (10x what one replica serves, past the 200% threshold): the mode."""
    decision = decide(1, Policy(1, 10, LOAD), {"load": Decimal(10)}, 0.0, Memory())
    return str(decision.mode)


def probe_never_scales_down() -> int:
    """4 replicas in [1, 10] and a load of 1: the replicas written."""
    return _decide(4, 1, 10, 1)[0]


def probe_ignores_min() -> int:
    """4 replicas in [3, 10] and a load of 1: the replicas the metrics ask for (desiredReplicas)."""
    return _decide(4, 3, 10, 1)[1]


def probe_missing_metric() -> int:
    """4 replicas in [1, 10] and no value of the metric this loop."""
    return _decide(4, 1, 10, None)[0]


def probe_undersizes() -> tuple[tuple[int, int], tuple[int, int]]:
    """A load of 4 on 2 replicas (stable: exactly at the panic threshold), and of 10 on 2 (panic), in [1, 10]."""
    wide = StablePolicy(percent=1000)  # the step limit is not what the probe reads
    return _decide(2, 1, 10, 4, scale_up=wide), _decide(2, 1, 10, 10)


def _disaggregated(
    roles: dict[str, dict[str, Any]], ratio: dict[str, Any] | None = None, **spec: Any
) -> AutoscalingPolicySpec:
    target: dict[str, Any] = {"targetRef": {"kind": "ModelServing", "name": MS_NAME}, "roles": roles}
    if ratio is not None:
        target["ratioConstraint"] = ratio
    return AutoscalingPolicySpec.model_validate({**spec, "disaggregatedTarget": target})


def _reconcile(spec: AutoscalingPolicySpec, roles: dict[str, int], values: dict[str, int] | None = None) -> Outcome:
    """One reconcile of ``spec`` against ModelServing ``ms`` (spec.replicas 1) whose Roles have ``roles`` replicas."""
    loads = {key: {"load": Decimal(v)} for key, v in (values or {}).items()}
    return reconcile(spec, 1, Observed({MS_NAME: 1}, {MS_NAME: roles}), loads, 0.0, {})


def _ratio_outcome() -> Outcome:
    """prefill and decode at 2 replicas each, loads of 2 (within a 100% tolerance, also one replica fewer), and
    a ratio prefill/decode of exactly 2: enforcing it raises prefill to 4."""
    role = {"minReplicas": 1, "maxReplicas": 10, "metrics": [{"name": "load", "targetValue": 1}]}
    ratio = {"numeratorRole": "prefill", "denominatorRole": "decode", "minRatio": 2, "maxRatio": 2}
    spec = _disaggregated({"prefill": role, "decode": role}, ratio, tolerancePercent=100)
    return _reconcile(spec, {"prefill": 2, "decode": 2}, {"prefill": 2, "decode": 2})


def probe_ratio_ignored() -> Any:
    return _ratio_outcome().status["disaggregatedStatus"]["ratioStatus"]


def probe_ratio_adjusted() -> Any:
    return _ratio_outcome().status["disaggregatedStatus"]["ratioAdjusted"]


def probe_desired() -> dict[str, int]:
    """The Roles' desiredReplicas in the status of the ratio outcome (the metrics ask for 2 and 2)."""
    roles = _ratio_outcome().status["disaggregatedStatus"]["roles"]
    return {r["name"]: r["desiredReplicas"] for r in roles}


def probe_fixed_role() -> list[str]:
    """A fixed Role (3 of 3) at 1 replica beside a scalable one, no metrics: the Roles the status reports."""
    spec = _disaggregated(
        {"prefill": {"minReplicas": 3, "maxReplicas": 3}, "decode": {"minReplicas": 1, "maxReplicas": 10}}
    )
    return [r["name"] for r in _reconcile(spec, {"prefill": 1, "decode": 5}).status["disaggregatedStatus"]["roles"]]


def probe_roles_scale_whole() -> list[tuple[str | None, int]]:
    """No metrics at all: decode (1 replica, at least 3) is brought to its minimum, prefill (5) kept. The writes."""
    spec = _disaggregated(
        {"prefill": {"minReplicas": 1, "maxReplicas": 10}, "decode": {"minReplicas": 3, "maxReplicas": 10}}
    )
    return [(w.role, w.replicas) for w in _reconcile(spec, {"prefill": 5, "decode": 1}).writes]


def probe_role_metrics() -> dict[str, Decimal]:
    """The targets Role decode is scaled on when it lists its own metric load (targetValue 5) and spec.metrics has
    load at 1."""
    own = {"minReplicas": 1, "maxReplicas": 10, "metrics": [{"name": "load", "targetValue": 5}]}
    spec = _disaggregated({"decode": own}, metrics=[{"name": "load", "targetValue": 1}])
    return dict(units(spec)[0].targets)


class _RecordingApi:
    """The CustomObjectsApi calls the loop's status write makes, recorded."""

    def __init__(self) -> None:
        self.patches: list[dict[str, Any]] = []

    async def patch_namespaced_custom_object_status(self, *args: Any, **kwargs: Any) -> None:
        self.patches.append(args[-1])


def probe_no_status() -> list[dict[str, Any]]:
    """The status patches the loop sends for a policy that has none yet."""
    autoscaler = Autoscaler(object(), targets=None)  # type: ignore[arg-type]
    recorder = _RecordingApi()
    autoscaler.custom = recorder
    policy = {"metadata": {"name": "p", "namespace": "default", "uid": "u"}, "spec": {}}
    status = {"observedGeneration": 1, "homogeneousStatus": {"name": MS_NAME, "currentReplicas": 1}}
    asyncio.run(autoscaler._status(policy, Outcome((), status, {}, ())))
    return recorder.patches


def probe_no_target() -> list[str]:
    body = {
        "apiVersion": "workload.serving.volcano.sh/v1alpha1",
        "kind": "AutoscalingPolicy",
        "metadata": {"name": "p"},
        "spec": {"metrics": [{"name": "load", "targetValue": 1}]},
    }
    return [e.field for e in validate_policy(body)]


def probe_target_kind() -> tuple[list[str], list[tuple[str, int]]]:
    """A homogeneous policy whose targetRef is a Deployment named like ModelServing ``ms`` (1 replica) with a load
    asking for 3: what the webhook refuses, and the replicas the autoscaler writes."""
    source = {"load": {"prometheus": {"serverURL": "http://p:9090", "query": "q"}}}
    target = {"targetRef": {"kind": "Deployment", "name": MS_NAME}, "metricSources": source}
    spec = {"metrics": [{"name": "load", "targetValue": 1}],
            "homogeneousTarget": {"target": target, "minReplicas": 1, "maxReplicas": 5}}  # fmt: skip
    body = {"apiVersion": "workload.serving.volcano.sh/v1alpha1", "kind": "AutoscalingPolicy",
            "metadata": {"name": "p"}, "spec": spec}  # fmt: skip
    refused = [e.field for e in validate_policy(body)]
    outcome = reconcile(AutoscalingPolicySpec.model_validate(spec), 1, Observed({MS_NAME: 1}, {}),
                        {"": {"load": Decimal(3)}}, 0.0, {})  # fmt: skip
    return refused, [(w.target, w.replicas) for w in outcome.writes]


_GROUPS = [Param("h100", 100, 1, 4), Param("a100", 60, 1, 4)]  # listed dearer first, each in [1, 4]


def probe_heterogeneous_order() -> tuple[int, ...]:
    """The split of 3 replicas over :data:`_GROUPS`."""
    return distribute(3, _GROUPS, 200)


def probe_heterogeneous_bounds() -> tuple[int, ...]:
    """The split of 8 replicas (every group's maximum) over :data:`_GROUPS`."""
    return distribute(8, _GROUPS, 200)


def probe_pod_endpoint() -> str:
    """The scrape URL of a pod source with uri /stats and port 8101 for Pod IP 10.0.0.7."""
    return scrape_url("10.0.0.7", PodMetricSource(uri="/stats", port=8101))


def probe_pod_named() -> str:
    """The family read for metric key ``load`` by a pod source named ``engine_queue``."""
    return metric_name(PodMetricSource(name="engine_queue"), "load")


def probe_pod_unnamed() -> str:
    """The family read for metric key ``load`` by a pod source without a name."""
    return metric_name(PodMetricSource(), "load")


def _spec_schema() -> dict[str, Any]:
    schema: dict[str, Any] = crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    return schema


def _keywords(schema: dict[str, Any], keywords: tuple[str, ...]) -> list[str]:
    """The dotted paths of the properties below ``schema`` that carry one of ``keywords``, with the keyword."""
    found: list[str] = []

    def walk(node: dict[str, Any], at: str) -> None:
        for name, prop in node.get("properties", {}).items():
            found.extend(f"{at}{name}:{k}" for k in keywords if k in prop)
            walk(prop, f"{at}{name}.")
        for key, step in (("items", "[]."), ("additionalProperties", "{}.")):
            if isinstance(node.get(key), dict):
                walk(node[key], at + step)

    walk(schema, "")
    return sorted(found)


def probe_crd_bounds() -> tuple[list[str], list[str]]:
    """The CRD's bounds and enums of the documented fields, and what the webhook refuses in a policy that breaks
    each of them once."""
    bounds = _keywords(_spec_schema(), ("minimum", "maximum", "enum"))
    checked = [p for p in bounds if p.split(":")[0].rsplit(".", 1)[-1] in UNCHECKED_FIELDS]
    source = {"load": {"pod": {"port": 0}}}
    spec = {
        "tolerancePercent": 101,
        "metrics": [{"name": "load", "targetValue": 1}],
        "behavior": {
            "scaleUp": {
                "stablePolicy": {"percent": 1001, "selectPolicy": "Xor"},
                "panicPolicy": {"percent": -1, "panicThresholdPercent": 100},
            },
            "scaleDown": {"percent": -1},
        },
        "homogeneousTarget": {
            "target": {"targetRef": {"kind": "ModelServing", "name": MS_NAME}, "metricSources": source},
            "minReplicas": -1,
            "maxReplicas": 0,
        },
    }
    body = {
        "apiVersion": "workload.serving.volcano.sh/v1alpha1",
        "kind": "AutoscalingPolicy",
        "metadata": {"name": "p"},
        "spec": spec,
    }
    return checked, sorted(e.field for e in validate_policy(body))


def probe_crd_sizes() -> tuple[list[str], list[str]]:
    """The CRD's MinLength/MinItems/MinProperties/MaxProperties, and what the webhook refuses in a policy that
    breaks each size once (an empty metric name, serverURL and query, no params)."""
    sizes = _keywords(_spec_schema(), UNSIZED_KEYWORDS)
    source = {"load": {"prometheus": {"serverURL": "", "query": ""}}}
    target = {"targetRef": {"kind": "ModelServing", "name": MS_NAME}, "metricSources": source}
    body = {
        "apiVersion": "workload.serving.volcano.sh/v1alpha1",
        "kind": "AutoscalingPolicy",
        "metadata": {"name": "p"},
        "spec": {"metrics": [{"name": "", "targetValue": 1}], "heterogeneousTarget": {"params": []}},
    }
    refused = [e.field for e in validate_policy(body)]
    body["spec"] = {"metrics": [{"name": "load", "targetValue": 1}], "homogeneousTarget": {
        "target": target, "minReplicas": 1, "maxReplicas": 2}}  # fmt: skip
    return sizes, sorted(refused + [e.field for e in validate_policy(body)])


def probe_crd_backends() -> list[str]:
    """The targets whose metric sources (the metricSources map's values) carry the CRD's one-backend rule."""
    spec = _spec_schema()
    values = {
        "disaggregatedTarget": spec["properties"]["disaggregatedTarget"]["properties"]["roles"]["additionalProperties"],
        "heterogeneousTarget": spec["properties"]["heterogeneousTarget"]["properties"]["params"]["items"],
        "homogeneousTarget": spec["properties"]["homogeneousTarget"],
    }
    for name in ("heterogeneousTarget", "homogeneousTarget"):
        values[name] = values[name]["properties"]["target"]
    return sorted(
        name
        for name, node in values.items()
        if "x-kubernetes-validations" in node["properties"]["metricSources"]["additionalProperties"]
    )


def probe_crd_defaults() -> list[str]:
    return _keywords(_spec_schema(), ("default",))


_HOM = "homogeneousTarget"
_BOUNDS = [f"behavior.scaleDown.percent:{k}" for k in ("maximum", "minimum")] + [
    "behavior.scaleDown.selectPolicy:enum",
    *(
        f"behavior.scaleUp.panicPolicy.{f}:{k}"
        for f in ("panicThresholdPercent", "percent")
        for k in ("maximum", "minimum")
    ),
    *(f"behavior.scaleUp.stablePolicy.percent:{k}" for k in ("maximum", "minimum")),
    "behavior.scaleUp.stablePolicy.selectPolicy:enum",
    *(
        f"disaggregatedTarget.roles.{{}}.{f}:{k}"
        for f in ("maxReplicas", "minReplicas")
        for k in ("maximum", "minimum")
    ),
    *(f"disaggregatedTarget.roles.{{}}.metricSources.{{}}.pod.port:{k}" for k in ("maximum", "minimum")),
    *(f"heterogeneousTarget.params.[].{f}:{k}" for f in ("maxReplicas", "minReplicas") for k in ("maximum", "minimum")),
    *(f"heterogeneousTarget.params.[].target.metricSources.{{}}.pod.port:{k}" for k in ("maximum", "minimum")),
    *(f"{_HOM}.{f}:{k}" for f in ("maxReplicas", "minReplicas") for k in ("maximum", "minimum")),
    *(f"{_HOM}.target.metricSources.{{}}.pod.port:{k}" for k in ("maximum", "minimum")),
    *(f"tolerancePercent:{k}" for k in ("maximum", "minimum")),
    "heterogeneousTarget.costExpansionRatePercent:minimum",
    "heterogeneousTarget.params.[].cost:minimum",
]
_REFUSED = sorted(
    [
        "spec.tolerancePercent",
        "spec.behavior.scaleUp.stablePolicy.percent",
        "spec.behavior.scaleUp.stablePolicy.selectPolicy",
        "spec.behavior.scaleUp.panicPolicy.percent",
        "spec.behavior.scaleUp.panicPolicy.panicThresholdPercent",
        "spec.behavior.scaleDown.percent",
        f"spec.{_HOM}.target.metricSources.load.pod.port",
        f"spec.{_HOM}.minReplicas",
        f"spec.{_HOM}.maxReplicas",
    ]
)
_DEFAULTS = [
    "behavior.scaleDown.instances:default",
    "behavior.scaleDown.percent:default",
    "behavior.scaleDown.selectPolicy:default",
    "behavior.scaleUp.panicPolicy.panicThresholdPercent:default",
    "behavior.scaleUp.panicPolicy.percent:default",
    "behavior.scaleUp.stablePolicy.instances:default",
    "behavior.scaleUp.stablePolicy.percent:default",
    "behavior.scaleUp.stablePolicy.selectPolicy:default",
    "disaggregatedTarget.roles.{}.metricSources.{}.pod.port:default",
    "disaggregatedTarget.roles.{}.metricSources.{}.pod.uri:default",
    "heterogeneousTarget.costExpansionRatePercent:default",
    "heterogeneousTarget.params.[].target.metricSources.{}.pod.port:default",
    "heterogeneousTarget.params.[].target.metricSources.{}.pod.uri:default",
    "homogeneousTarget.target.metricSources.{}.pod.port:default",
    "homogeneousTarget.target.metricSources.{}.pod.uri:default",
    "tolerancePercent:default",
]

_SIZES = sorted(
    [
        "disaggregatedTarget.roles:maxProperties",
        "disaggregatedTarget.roles:minProperties",
        "disaggregatedTarget.roles.{}.metrics:minItems",
        "disaggregatedTarget.roles.{}.metrics.[].name:minLength",
        "disaggregatedTarget.roles.{}.metricSources.{}.prometheus.query:minLength",
        "disaggregatedTarget.roles.{}.metricSources.{}.prometheus.serverURL:minLength",
        "heterogeneousTarget.params:minItems",
        "heterogeneousTarget.params.[].target.metricSources.{}.prometheus.query:minLength",
        "heterogeneousTarget.params.[].target.metricSources.{}.prometheus.serverURL:minLength",
        "homogeneousTarget.target.metricSources.{}.prometheus.query:minLength",
        "homogeneousTarget.target.metricSources.{}.prometheus.serverURL:minLength",
        "metrics.[].name:minLength",
    ]
)
_SIZES_REFUSED = sorted(
    [
        "spec.metrics[0].name",
        "spec.heterogeneousTarget.params",
        f"spec.{_HOM}.target.metricSources.load.prometheus.serverURL",
        f"spec.{_HOM}.target.metricSources.load.prometheus.query",
    ]
)
_BACKENDS = ["disaggregatedTarget", "heterogeneousTarget", "homogeneousTarget"]

CASES: list[tuple[Any, ...]] = [
    ("autoscaler-exceeds-max", probe_exceeds_max, (4, 4), (10, 10), ()),
    ("autoscaler-never-scales-down", probe_never_scales_down, 1, 4, ()),
    ("autoscaler-ignores-min", probe_ignores_min, 3, 1, ()),
    ("autoscaler-missing-metric-as-zero", probe_missing_metric, 4, 1, ()),
    # never-panics takes the second load in stable steps
    ("autoscaler-undersizes", probe_undersizes, ((4, 4), (10, 10)), ((3, 3), (9, 9)), ("autoscaler-never-panics",)),
    (
        "autoscaler-no-status",
        probe_no_status,
        [
            {
                "status": {
                    "homogeneousStatus": {"name": MS_NAME, "currentReplicas": 1},
                    "heterogeneousStatus": None,
                    "disaggregatedStatus": None,
                    "observedGeneration": 1,
                }
            }
        ],
        [],
        (),
    ),
    (
        "autoscaler-ratio-ignored",
        probe_ratio_ignored,
        {"numeratorRole": "prefill", "denominatorRole": "decode", "currentRatio": "2"},
        {"numeratorRole": "prefill", "denominatorRole": "decode", "currentRatio": "1"},
        (),
    ),
    # ratio-ignored reports ratioAdjusted false too: it overrides nothing
    ("autoscaler-ratio-adjusted-unreported", probe_ratio_adjusted, True, False, ("autoscaler-ratio-ignored",)),
    ("autoscaler-fixed-role-ignored", probe_fixed_role, ["decode", "prefill"], ["decode"], ()),
    ("autoscaler-roles-scale-whole", probe_roles_scale_whole, [("decode", 3)], [(None, 5)], ()),
    ("autoscaler-role-metrics-ignored", probe_role_metrics, {"load": Decimal(5)}, {"load": Decimal(1)}, ()),
    (
        "autoscaling-ignores-target-kind",
        probe_target_kind,
        (["spec.homogeneousTarget.target.targetRef.kind"], []),
        ([], [(MS_NAME, 3)]),
        (),
    ),
    ("autoscaler-heterogeneous-listed-order", probe_heterogeneous_order, (1, 2), (2, 1), ()),
    ("autoscaler-heterogeneous-unbounded", probe_heterogeneous_bounds, (4, 4), (1, 7), ()),
    (
        "autoscaler-pod-fixed-endpoint",
        probe_pod_endpoint,
        "http://10.0.0.7:8101/stats",
        "http://10.0.0.7:8100/metrics",
        (),
    ),
    ("autoscaler-pod-name-ignored", probe_pod_named, "engine_queue", "load", ()),
    ("autoscaler-pod-name-not-defaulted", probe_pod_unnamed, "load", "", ()),
    # undersizes changes what the metrics ask for, so the desiredReplicas too
    (
        "autoscaler-desired-after-ratio",
        probe_desired,
        {"prefill": 2, "decode": 2},
        {"prefill": 4, "decode": 2},
        ("autoscaler-undersizes",),
    ),
    ("autoscaler-never-panics", probe_panics, "Panic", "Stable", ()),
    ("autoscaling-webhook-allows-no-target", probe_no_target, ["spec"], [], ()),
    # the enums are also enums-not-validated's (every enum, of both CRDs)
    ("autoscaling-crd-no-bounds", probe_crd_bounds, (sorted(_BOUNDS), _REFUSED), ([], []), ("enums-not-validated",)),
    ("autoscaling-crd-no-sizes", probe_crd_sizes, (_SIZES, _SIZES_REFUSED), ([], []), ()),
    ("autoscaling-crd-any-backends", probe_crd_backends, _BACKENDS, [], ()),
    # no-schema-defaults drops every default of both CRDs (the generator is shared)
    ("autoscaling-crd-no-defaults", probe_crd_defaults, _DEFAULTS, [], ("no-schema-defaults",)),
]
