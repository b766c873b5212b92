"""AutoscalingPolicy admission (kthena_ref.admission.autoscaling_rules) and its AdmissionReview
handling: every rule has an accepted and a refused case, and every refusal names its field."""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Callable, Collection
from typing import Any

import pytest

from kthena_ref.admission.autoscaling_rules import lookup_target, validate_policy
from kthena_ref.admission.server import admission_response, is_policy, review_response

PROMETHEUS = {"prometheus": {"serverURL": "http://prometheus:9090", "query": "sum(rate(requests_total[1m]))"}}


def homogeneous() -> dict[str, Any]:
    return {
        "apiVersion": "workload.serving.volcano.sh/v1alpha1",
        "kind": "AutoscalingPolicy",
        "metadata": {"name": "policy", "namespace": "ns"},
        "spec": {
            "metrics": [{"name": "rps", "targetValue": "100m"}],
            "homogeneousTarget": {
                "minReplicas": 1,
                "maxReplicas": 6,
                "target": {"targetRef": {"kind": "ModelServing", "name": "ms"}, "metricSources": {"rps": PROMETHEUS}},
            },
        },
    }


def heterogeneous() -> dict[str, Any]:
    body = homogeneous()
    target = body["spec"].pop("homogeneousTarget")
    second = copy.deepcopy(target)
    second["target"]["targetRef"]["name"] = "ms-a100"
    body["spec"]["heterogeneousTarget"] = {"params": [target | {"cost": 100}, second | {"cost": 60}]}
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


Change = Callable[[dict[str, Any]], None]


def at(*path: str | int, value: Any) -> Change:
    """Set ``spec.<path>`` to ``value``."""

    def change(body: dict[str, Any]) -> None:
        node: Any = body["spec"]
        for step in path[:-1]:
            node = node[step]
        node[path[-1]] = value

    return change


def drop(*path: str | int) -> Change:
    """Remove ``spec.<path>``."""

    def change(body: dict[str, Any]) -> None:
        node: Any = body["spec"]
        for step in path[:-1]:
            node = node[step]
        del node[path[-1]]

    return change


def both(*changes: Change) -> Change:
    def change(body: dict[str, Any]) -> None:
        for one in changes:
            one(body)

    return change


H, HE, D = homogeneous, heterogeneous, disaggregated
HREF = ("homogeneousTarget", "target", "targetRef")
PREFILL = ("disaggregatedTarget", "roles", "prefill")
RATIO = ("disaggregatedTarget", "ratioConstraint")
GROUP_V = "workload.serving.volcano.sh/v1alpha1"

# (id, base, change, the field named or None when accepted, a word of the reason)
CASES: list[tuple[str, Callable[[], dict[str, Any]], Change, str | None, str]] = [
    # R1 exactly one target
    ("R1-one-target", H, lambda b: None, None, ""),
    ("R1-no-target", H, drop("homogeneousTarget"), "spec", "exactly one of"),
    ("R1-two-targets", D, at("homogeneousTarget", value=H()["spec"]["homogeneousTarget"]), "spec", "exactly one of"),
    # R2 targetRef.kind
    ("R2-kind-empty", H, at(*HREF, "kind", value=""), None, ""),
    ("R2-kind-omitted", D, lambda b: None, None, ""),
    ("R2-kind-deployment", H, at(*HREF, "kind", value="Deployment"),
     "spec.homogeneousTarget.target.targetRef.kind", "Currently supported kinds: ModelServing"),
    ("R2-kind-disaggregated", D, at("disaggregatedTarget", "targetRef", "kind", value="StatefulSet"),
     "spec.disaggregatedTarget.targetRef.kind", "supported kinds"),
    ("R2-kind-heterogeneous", HE, at("heterogeneousTarget", "params", 1, "target", "targetRef", "kind", value="Pod"),
     "spec.heterogeneousTarget.params[1].target.targetRef.kind", "supported kinds"),
    # R3 targetRef.name
    ("R3-name-missing", H, drop(*HREF, "name"), "spec.homogeneousTarget.target.targetRef.name", "required"),
    ("R3-name-empty", D, at("disaggregatedTarget", "targetRef", "name", value=""),
     "spec.disaggregatedTarget.targetRef.name", "required"),
    # R4 targetRef.apiVersion
    ("R4-api-version-group", H, at(*HREF, "apiVersion", value=GROUP_V), None, ""),
    ("R4-api-version-apps", H, at(*HREF, "apiVersion", value="apps/v1"),
     "spec.homogeneousTarget.target.targetRef.apiVersion", "workload.serving.volcano.sh"),
    ("R4-api-version-core", D, at("disaggregatedTarget", "targetRef", "apiVersion", value="v1"),
     "spec.disaggregatedTarget.targetRef.apiVersion", "API group"),
    # R5 metric names unique
    ("R5-two-metrics", H, at("metrics", value=[{"name": "rps", "targetValue": 1}, {"name": "kv", "targetValue": 1}]),
     None, ""),
    ("R5-duplicate-metric", H, at("metrics", value=[{"name": "rps", "targetValue": 1}, {"name": "rps", "targetValue": 2}]),
     "spec.metrics[1].name", "duplicate metric name"),
    ("R5-duplicate-role-metric", D,
     at(*PREFILL, "metrics", value=[{"name": "rps", "targetValue": 1}, {"name": "rps", "targetValue": 2}]),
     "spec.disaggregatedTarget.roles[prefill].metrics[1].name", "duplicate"),
    # R6 targetValue > 0
    ("R6-target-small", H, at("metrics", 0, "targetValue", value="1n"), None, ""),
    ("R6-target-zero", H, at("metrics", 0, "targetValue", value=0), "spec.metrics[0].targetValue", "greater than 0"),
    ("R6-target-negative", H, at("metrics", 0, "targetValue", value="-1"), "spec.metrics[0].targetValue", "greater than 0"),
    ("R6-role-target-zero", D, at(*PREFILL, "metrics", value=[{"name": "rps", "targetValue": "0m"}]),
     "spec.disaggregatedTarget.roles[prefill].metrics[0].targetValue", "greater than 0"),
    # R7 minReplicas <= maxReplicas
    ("R7-equal-bounds", H, at("homogeneousTarget", "minReplicas", value=6), None, ""),
    ("R7-homogeneous", H, at("homogeneousTarget", "minReplicas", value=7), "spec.homogeneousTarget.minReplicas",
     "must not exceed maxReplicas"),
    ("R7-heterogeneous", HE, at("heterogeneousTarget", "params", 0, "minReplicas", value=9),
     "spec.heterogeneousTarget.params[0].minReplicas", "maxReplicas"),
    ("R7-role", D, at(*PREFILL, "minReplicas", value=5), "spec.disaggregatedTarget.roles[prefill].minReplicas",
     "maxReplicas"),
    # R8 Target.metricSources keys are spec.metrics names
    ("R8-no-sources", H, drop(*HREF[:2], "metricSources"), None, ""),
    ("R8-unknown-source", H, at("homogeneousTarget", "target", "metricSources", "foo", value=PROMETHEUS),
     "spec.homogeneousTarget.target.metricSources[foo]", "not the name of a metric of spec.metrics (rps)"),
    ("R8-unknown-source-heterogeneous", HE,
     at("heterogeneousTarget", "params", 1, "target", "metricSources", "foo", value=PROMETHEUS),
     "spec.heterogeneousTarget.params[1].target.metricSources[foo]", "not the name of a metric"),
    # R9 a Role's metricSources keys: its own metrics when present, else spec.metrics
    ("R9-role-own-metrics", D,
     both(at(*PREFILL, "metrics", value=[{"name": "queue", "targetValue": 5}]),
          at(*PREFILL, "metricSources", value={"queue": PROMETHEUS})), None, ""),
    ("R9-role-unknown-source", D, at(*PREFILL, "metricSources", "foo", value=PROMETHEUS),
     "spec.disaggregatedTarget.roles[prefill].metricSources[foo]", "spec.metrics (rps)"),
    ("R9-role-source-of-spec-metric-overridden", D, at(*PREFILL, "metrics", value=[{"name": "queue", "targetValue": 5}]),
     "spec.disaggregatedTarget.roles[prefill].metricSources[rps]", "the Role's metrics (queue)"),
    # R10 homogeneous and heterogeneous need spec.metrics
    ("R10-homogeneous-no-metrics", H, both(drop("metrics"), drop(*HREF[:2], "metricSources")), "spec.metrics",
     "at least one metric"),
    ("R10-homogeneous-empty-metrics", H, both(at("metrics", value=[]), drop(*HREF[:2], "metricSources")),
     "spec.metrics", "homogeneousTarget"),
    ("R10-heterogeneous-no-metrics", HE, drop("metrics"), "spec.metrics", "heterogeneousTarget"),
    # R11 a non-fixed Role needs effective metrics; a fixed one may have none
    ("R11-fixed-role-without-metrics", D,
     both(drop("metrics"), drop("disaggregatedTarget", "ratioConstraint"),
          at("disaggregatedTarget", "roles", value={"prefill": {"minReplicas": 2, "maxReplicas": 2}})), None, ""),
    ("R11-role-own-metrics-only", D,
     both(drop("metrics"), drop(*PREFILL, "metricSources"),
          at("disaggregatedTarget", "roles", "decode", value={"minReplicas": 3, "maxReplicas": 3}),
          at(*PREFILL, "metrics", value=[{"name": "queue", "targetValue": 5}])), None, ""),
    ("R11-non-fixed-role-without-metrics", D,
     both(drop("metrics"), drop(*PREFILL, "metricSources"),
          at("disaggregatedTarget", "roles", "decode", value={"minReplicas": 3, "maxReplicas": 3})),
     "spec.disaggregatedTarget.roles[prefill].metrics", "required"),
    # R12 role keys not empty
    ("R12-empty-role-key", D,
     both(drop("disaggregatedTarget", "ratioConstraint"),
          at("disaggregatedTarget", "roles", value={"": {"minReplicas": 1, "maxReplicas": 1}})),
     'spec.disaggregatedTarget.roles[""]', "must not be empty"),
    # R13 ratio bounds
    ("R13-zero-min-ratio", D, at(*RATIO, "minRatio", value=0), None, ""),
    ("R13-equal-ratios", D, at(*RATIO, "minRatio", value="1"), None, ""),
    ("R13-negative-min", D, at(*RATIO, "minRatio", value="-250m"), "spec.disaggregatedTarget.ratioConstraint.minRatio",
     "at least 0"),
    ("R13-zero-max", D, both(at(*RATIO, "minRatio", value=0), at(*RATIO, "maxRatio", value=0)),
     "spec.disaggregatedTarget.ratioConstraint.maxRatio", "greater than 0"),
    ("R13-min-above-max", D, at(*RATIO, "minRatio", value="1500m"),
     "spec.disaggregatedTarget.ratioConstraint.minRatio", "must not exceed maxRatio"),
    # R14 heterogeneous params name distinct ModelServings
    ("R14-same-name-other-namespace", HE,
     both(at("heterogeneousTarget", "params", 1, "target", "targetRef", "name", value="ms"),
          at("heterogeneousTarget", "params", 1, "target", "targetRef", "namespace", value="other")), None, ""),
    ("R14-same-target-twice", HE, at("heterogeneousTarget", "params", 1, "target", "targetRef", "name", value="ms"),
     "spec.heterogeneousTarget.params[1].target.targetRef.name", "already the target of params[0]"),
]  # fmt: skip


@pytest.mark.parametrize(("base", "change", "field", "reason"), [pytest.param(*c[1:], id=c[0]) for c in CASES])
def test_each_rule_accepts_and_refuses_naming_the_field(
    base: Callable[[], dict[str, Any]], change: Change, field: str | None, reason: str
) -> None:
    body = base()
    change(body)
    errors = validate_policy(body)
    if field is None:
        assert errors == []
        return
    named = [e for e in errors if e.field == field]
    assert named, f"no error names {field}: {errors}"
    assert any(reason in e.reason for e in named), named


def test_every_rule_has_a_refused_case_and_an_accepted_case() -> None:
    rules = {c[0].split("-")[0] for c in CASES}
    refused = {c[0].split("-")[0] for c in CASES if c[3] is not None}
    accepted = {c[0].split("-")[0] for c in CASES if c[3] is None}
    assert rules == refused == {f"R{i}" for i in range(1, 15)}
    assert accepted >= rules - {"R3", "R10", "R12"}  # these three hold in every valid base policy


@pytest.mark.parametrize("base", [homogeneous, heterogeneous, disaggregated])
def test_the_base_policies_are_valid(base: Callable[[], dict[str, Any]]) -> None:
    assert validate_policy(base()) == []


def test_the_target_failing_skips_the_target_rules_but_not_the_metric_rules() -> None:
    body = homogeneous()
    body["spec"]["metrics"].append({"name": "rps", "targetValue": 1})
    body["spec"]["disaggregatedTarget"] = disaggregated()["spec"]["disaggregatedTarget"]
    body["spec"]["homogeneousTarget"]["minReplicas"] = 99
    assert [e.field for e in validate_policy(body)] == ["spec.metrics[1].name", "spec"]


# R15: role keys name Roles of the target, when its Roles are known


def test_role_keys_must_name_roles_of_the_target_when_known() -> None:
    assert validate_policy(disaggregated(), target_roles=["prefill", "decode", "router"]) == []
    errors = validate_policy(disaggregated(), target_roles=["prefill", "router"])
    assert [e.field for e in errors] == ["spec.disaggregatedTarget.roles[decode]"]
    assert "'decode' is not a Role of ModelServing 'ms' (its Roles: prefill, router)" in errors[0].reason


def test_role_keys_are_accepted_when_the_target_is_unknown() -> None:
    assert validate_policy(disaggregated(), target_roles=None) == []


def test_target_roles_do_not_apply_to_other_targets() -> None:
    assert validate_policy(homogeneous(), target_roles=[]) == []


@pytest.mark.parametrize(
    ("ref", "expected"),
    [
        ({"name": "ms"}, (None, "ms")),
        ({"kind": "ModelServing", "name": "ms", "namespace": "ns"}, ("ns", "ms")),
        ({"kind": "Deployment", "name": "ms"}, None),
        ({"kind": "ModelServing"}, None),
        ({"name": ""}, None),
    ],
)
def test_lookup_target(ref: dict[str, Any], expected: tuple[str | None, str] | None) -> None:
    body = disaggregated()
    body["spec"]["disaggregatedTarget"]["targetRef"] = ref
    assert lookup_target(body) == expected


def test_lookup_target_of_other_targets_and_junk_is_none() -> None:
    assert lookup_target(homogeneous()) is None
    assert lookup_target({"spec": "junk"}) is None


def test_schema_problems_are_reported_not_raised() -> None:
    body = homogeneous()
    body["spec"]["homogeneousTarget"]["maxReplicas"] = "six"
    errors = validate_policy(body)
    assert errors and errors[0].field == "spec.homogeneousTarget.maxReplicas"


# The AdmissionReview


def review(obj: dict[str, Any] | None, operation: str = "CREATE", namespace: str = "ns") -> dict[str, Any]:
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "u1",
            "kind": {"group": "workload.serving.volcano.sh", "version": "v1alpha1", "kind": "AutoscalingPolicy"},
            "resource": {
                "group": "workload.serving.volcano.sh",
                "version": "v1alpha1",
                "resource": "autoscalingpolicies",
            },
            "namespace": namespace,
            "operation": operation,
            "object": obj,
            "oldObject": homogeneous() if operation == "UPDATE" else None,
        },
    }


def test_a_policy_review_is_recognised_by_kind_or_resource() -> None:
    request = review(homogeneous())["request"]
    assert is_policy(request)
    assert is_policy({"resource": request["resource"]}) and is_policy({"kind": request["kind"]})
    assert not is_policy({"kind": {"kind": "ModelServing"}, "resource": {"resource": "modelservings"}})


@pytest.mark.parametrize("operation", ["CREATE", "UPDATE"])
def test_review_denies_an_invalid_policy_with_422_and_the_field(operation: str) -> None:
    body = homogeneous()
    del body["spec"]["homogeneousTarget"]
    response = review_response(review(body, operation))["response"]
    assert response["allowed"] is False and response["uid"] == "u1"
    assert response["status"]["code"] == 422
    assert response["status"]["message"].startswith("validation failed:\n  - spec: exactly one of")


def test_review_allows_a_valid_policy_and_deletes() -> None:
    assert review_response(review(homogeneous()))["response"]["allowed"] is True
    assert review_response(review(None, "DELETE"))["response"]["allowed"] is True


def _answer(body: dict[str, Any], lookup: Any, namespace: str = "ns") -> dict[str, Any]:
    response: dict[str, Any] = asyncio.run(admission_response(review(body, namespace=namespace), lookup))["response"]
    return response


class Lookup:
    def __init__(self, roles: Collection[str] | None = None, error: Exception | None = None, delay: float = 0) -> None:
        self.roles, self.error, self.delay = roles, error, delay
        self.calls: list[tuple[str, str]] = []

    async def __call__(self, namespace: str, name: str) -> Collection[str] | None:
        self.calls.append((namespace, name))
        if self.delay:
            await asyncio.sleep(self.delay)
        if self.error is not None:
            raise self.error
        return self.roles


def test_the_review_reads_the_target_roles_and_refuses_an_unknown_role() -> None:
    lookup = Lookup(["prefill", "router"])
    response = _answer(disaggregated(), lookup)
    assert lookup.calls == [("ns", "ms")]
    assert response["allowed"] is False and "spec.disaggregatedTarget.roles[decode]" in response["status"]["message"]


@pytest.mark.parametrize(
    "lookup",
    [
        pytest.param(Lookup(None), id="target-not-found"),
        pytest.param(Lookup(error=RuntimeError("connection refused")), id="lookup-fails"),
    ],
)
def test_an_unknown_target_is_accepted(lookup: Lookup) -> None:
    assert _answer(disaggregated(), lookup)["allowed"] is True


def test_a_slow_lookup_is_abandoned_and_accepted(monkeypatch: pytest.MonkeyPatch) -> None:
    from kthena_ref.admission import server

    monkeypatch.setattr(server, "LOOKUP_TIMEOUT_SECONDS", 0.05)
    assert _answer(disaggregated(), Lookup(["other"], delay=5))["allowed"] is True


def test_no_lookup_for_other_targets_or_another_namespace() -> None:
    lookup = Lookup(["other"])
    assert _answer(homogeneous(), lookup)["allowed"] is True
    body = disaggregated()
    body["spec"]["disaggregatedTarget"]["targetRef"]["namespace"] = "elsewhere"
    assert _answer(body, lookup)["allowed"] is True
    assert lookup.calls == []


def test_a_modelserving_review_is_still_judged_as_a_modelserving() -> None:
    request = review(homogeneous())
    request["request"]["kind"] = {"kind": "ModelServing"}
    request["request"]["resource"] = {"resource": "modelservings"}
    response = review_response(request)["response"]
    assert response["allowed"] is False and "spec.template" in response["status"]["message"]


# Registration


def test_the_harness_routes_autoscalingpolicies_to_the_policy_path() -> None:
    from conformance.implementations import reference
    from kthena_ref.admission.server import AUTOSCALING_PATH

    hooks = reference.webhook_configuration("https://127.0.0.1:9443", "Q0E=")["webhooks"]
    policy = next(w for w in hooks if w["rules"][0]["resources"] == ["autoscalingpolicies"])
    assert policy["clientConfig"]["url"] == f"https://127.0.0.1:9443{AUTOSCALING_PATH}"
    assert policy["rules"][0]["operations"] == ["CREATE", "UPDATE"] and policy["failurePolicy"] == "Fail"


def test_an_implementation_may_register_an_autoscaling_webhook() -> None:
    from conformance.run.webhooks import configuration

    assert len(configuration("mine", "https://h/v", "Q0E=")["webhooks"]) == 1
    hooks = configuration("mine", "https://h/v", "Q0E=", eviction_url="https://h/e", autoscaling_url="https://h/a")
    assert [w["rules"][0]["resources"] for w in hooks["webhooks"]] == [
        ["modelservings"], ["autoscalingpolicies"], ["pods/eviction"]
    ]  # fmt: skip
    assert hooks["webhooks"][1]["clientConfig"]["url"] == "https://h/a"
    assert len({w["name"] for w in hooks["webhooks"]}) == 3


class FakeCustom:
    def __init__(self, answer: Any) -> None:
        self.answer = answer
        self.asked: list[tuple[Any, ...]] = []

    async def get_namespaced_custom_object(self, *args: Any, **kwargs: Any) -> Any:
        self.asked.append((*args, kwargs.get("_request_timeout")))
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer


def test_model_serving_roles_reads_the_role_names() -> None:
    from kthena_ref.admission.server import ModelServingRoles

    custom = FakeCustom({"spec": {"template": {"roles": [{"name": "prefill"}, {"name": "decode"}]}}})
    assert asyncio.run(ModelServingRoles(custom, timeout=1.5)("ns", "ms")) == ["prefill", "decode"]
    assert custom.asked == [("workload.serving.volcano.sh", "v1alpha1", "ns", "modelservings", "ms", 1.5)]


@pytest.mark.parametrize("status", [404, 403, 500])
def test_model_serving_roles_is_none_when_the_target_cannot_be_read(status: int) -> None:
    from kubernetes_asyncio.client.exceptions import ApiException

    from kthena_ref.admission.server import ModelServingRoles

    assert asyncio.run(ModelServingRoles(FakeCustom(ApiException(status=status)))("ns", "ms")) is None
