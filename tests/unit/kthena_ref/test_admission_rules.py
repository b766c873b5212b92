"""Admission rules and the webhook's AdmissionReview handling: every rejection names field and reason."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from kthena_ref.admission.rules import FieldError, message, validate
from kthena_ref.admission.server import review_response


def valid() -> dict[str, Any]:
    pod = {"spec": {"containers": [{"name": "c", "image": "engine:v1"}]}}
    return {
        "apiVersion": "workload.serving.volcano.sh/v1alpha1",
        "kind": "ModelServing",
        "metadata": {"name": "ms"},
        "spec": {
            "replicas": 2,
            "template": {
                "roles": [
                    {
                        "name": "prefill",
                        "replicas": 2,
                        "workerReplicas": 1,
                        "entryTemplate": pod,
                        "workerTemplate": copy.deepcopy(pod),
                    },
                    {"name": "decode", "workerReplicas": 0, "entryTemplate": copy.deepcopy(pod)},
                ]
            },
        },
    }


def role(o: dict[str, Any], i: int) -> dict[str, Any]:
    return dict(o["spec"]["template"]["roles"][i])


Mutation = Callable[[dict[str, Any]], None]


def _set_role(i: int, **fields: Any) -> Mutation:
    return lambda o: o["spec"]["template"]["roles"][i].update(fields)


def _set_spec(**fields: Any) -> Mutation:
    return lambda o: o["spec"].update(fields)


INVALID: list[tuple[str, Mutation, str, str]] = [
    ("worker-template-missing", lambda o: o["spec"]["template"]["roles"][0].pop("workerTemplate"), "spec.template.roles[0].workerTemplate", "required when workerReplicas"),
    ("uppercase-role", _set_role(1, name="Decode"), "spec.template.roles[1].name", "DNS-1035"),
    ("name-too-long", lambda o: o["metadata"].update(name="m" * 60), "spec.template.roles[0].name", "exceed 63"),
    ("image-space", lambda o: o["spec"]["template"]["roles"][1]["entryTemplate"]["spec"]["containers"][0].update(image="a b"), "containers[0].image", "not a valid image"),
    ("image-empty", lambda o: o["spec"]["template"]["roles"][1]["entryTemplate"]["spec"]["containers"][0].update(image=""), "containers[0].image", "not a valid image"),
    ("no-containers", lambda o: o["spec"]["template"]["roles"][1]["entryTemplate"]["spec"].update(containers=[]), "entryTemplate.spec.containers", "at least one container"),
    ("gang-ghost", lambda o: o["spec"]["template"].update(gangPolicy={"minRoleReplicas": {"ghost": 1}}), "gangPolicy.minRoleReplicas[ghost]", "not a Role"),
    ("role-rolling-with-config", _set_spec(rolloutStrategy={"type": "RoleRollingUpdate", "rollingUpdateConfiguration": {}}), "spec.rolloutStrategy.rollingUpdateConfiguration", "must not be set"),
    ("zero-zero", _set_spec(rolloutStrategy={"rollingUpdateConfiguration": {"maxUnavailable": 0}}), "rollingUpdateConfiguration.maxUnavailable", "may be 0 only when maxSurge"),
    ("zero-zero-role", lambda o: (o["spec"].update(rolloutStrategy={"type": "RoleRollingUpdate"}), o["spec"]["template"]["roles"][0].update(maxUnavailable=0)), "spec.template.roles[0].maxUnavailable", "may be 0 only when maxSurge"),
    ("role-unavailable-above-replicas", lambda o: (o["spec"].update(rolloutStrategy={"type": "RoleRollingUpdate"}), o["spec"]["template"]["roles"][0].update(maxUnavailable=3)), "spec.template.roles[0].maxUnavailable", "more than the Role's 2 replicas"),
    ("bad-percent", _set_spec(rolloutStrategy={"rollingUpdateConfiguration": {"maxSurge": "lots"}}), "maxSurge", "percentage"),
    ("string-int", _set_spec(rolloutStrategy={"rollingUpdateConfiguration": {"partition": "1"}}), "partition", "percentage"),
    ("role-partition-form", _set_role(0, partition="half"), "spec.template.roles[0].partition", "percentage"),
    ("coordination-sg-rolling", _set_spec(rolloutStrategy={"roleCoordination": {}}), "spec.rolloutStrategy.roleCoordination", "only when"),
    ("coordination-ghost-role", _set_spec(rolloutStrategy={"type": "RoleRollingUpdate", "roleCoordination": {"roles": ["ghost"]}}), "roleCoordination.roles[0]", "not a Role"),
    ("coordination-skew-int", _set_spec(rolloutStrategy={"type": "RoleRollingUpdate", "roleCoordination": {"maxSkew": 10}}), "roleCoordination.maxSkew", "percentage"),
    ("coordination-dependency-cycle", _set_spec(rolloutStrategy={"type": "RoleRollingUpdate", "roleCoordination": {"dependencies": [{"role": "prefill", "dependsOn": ["decode"]}, {"role": "decode", "dependsOn": ["prefill"]}]}}), "roleCoordination.dependencies", "cycle (decode -> prefill -> decode)"),
    ("coordination-dependency-self", _set_spec(rolloutStrategy={"type": "RoleRollingUpdate", "roleCoordination": {"dependencies": [{"role": "prefill", "dependsOn": ["prefill"]}]}}), "roleCoordination.dependencies", "cycle (prefill -> prefill)"),
    ("coordination-dependency-ghost", _set_spec(rolloutStrategy={"type": "RoleRollingUpdate", "roleCoordination": {"dependencies": [{"role": "prefill", "dependsOn": ["ghost"]}]}}), "dependencies[0].dependsOn[0]", "not a Role"),
    ("eviction-ghost", _set_spec(rolloutStrategy={"evictionStrategy": {"roleMinAvailable": {"ghost": 1}}}), "roleMinAvailable[ghost]", "not a Role"),
    ("eviction-bad-percent", _set_spec(rolloutStrategy={"evictionStrategy": {"minAvailable": "most"}}), "evictionStrategy.minAvailable", "percentage"),
    ("unknown-plugin", _set_spec(plugins=[{"name": "nope"}]), "spec.plugins[0].name", "not a registered plugin"),
    ("schema-type", _set_spec(replicas="two"), "spec.replicas", "integer"),
    ("schema-enum", _set_spec(recoveryPolicy="Reboot"), "spec.recoveryPolicy", "Input should be"),
]  # fmt: skip


@pytest.mark.parametrize(("mutation", "field", "reason"), [pytest.param(m, f, r, id=i) for i, m, f, r in INVALID])
def test_invalid_specs_name_field_and_reason(mutation: Mutation, field: str, reason: str) -> None:
    obj = valid()
    mutation(obj)
    errors = validate(obj)
    assert any(field in e.field and reason in e.reason for e in errors), errors


@pytest.mark.parametrize(
    "mutation",
    [
        pytest.param(lambda o: None, id="as-is"),
        pytest.param(_set_spec(rolloutStrategy={"type": "RoleRollingUpdate", "roleCoordination": {"maxSkew": "10%"}}), id="role-rolling-coordination"),
        pytest.param(_set_spec(rolloutStrategy={"rollingUpdateConfiguration": {"maxUnavailable": 0, "maxSurge": 1, "partition": "50%"}}), id="surge-only"),
        pytest.param(lambda o: o["spec"]["template"].update(gangPolicy={"minRoleReplicas": {"prefill": 1}}), id="gang"),
        pytest.param(_set_role(0, partition=1, maxUnavailable="100%", maxSurge=2), id="role-settings-under-sg-rolling"),
        pytest.param(_set_spec(rolloutStrategy={"evictionStrategy": {"protectionLevel": "Role", "roleMinAvailable": {"decode": "50%"}}}), id="eviction"),
    ],
)  # fmt: skip
def test_valid_specs_pass(mutation: Mutation) -> None:
    obj = valid()
    mutation(obj)
    assert validate(obj) == []


def test_message_uses_upstreams_format() -> None:
    text = message([FieldError("spec.a", "bad"), FieldError("spec.b", "worse")])
    assert text == "validation failed:\n  - spec.a: bad\n  - spec.b: worse"


def review(obj: object, operation: str = "CREATE") -> dict[str, Any]:
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {"uid": "u-1", "operation": operation, "object": obj},
    }


def test_review_allows_a_valid_object() -> None:
    answer = review_response(review(valid()))
    assert answer["response"] == {"uid": "u-1", "allowed": True}


def test_review_denies_with_422_and_every_problem() -> None:
    obj = valid()
    obj["spec"]["template"]["roles"][0].pop("workerTemplate")
    obj["spec"]["plugins"] = [{"name": "nope"}]
    response = review_response(review(obj))["response"]
    assert response["allowed"] is False and response["status"]["code"] == 422
    assert "workerTemplate" in response["status"]["message"] and "plugins[0].name" in response["status"]["message"]


def test_review_allows_deletes_without_looking() -> None:
    assert review_response(review(None, "DELETE"))["response"]["allowed"] is True


@pytest.mark.parametrize("body", [{}, {"request": None}, {"request": {"operation": "CREATE"}}])
def test_malformed_reviews_raise_value_error(body: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match="AdmissionReview"):
        review_response(body)
