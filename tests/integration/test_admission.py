"""The reference controller's validating webhook, called by the real kube-apiserver over TLS.

Rules CEL cannot express are rejected at admission with the field path and the reason; an
invalid object that reaches the controller anyway (written while the webhook was down) is
reported as an Event and a status condition and does not stop other ModelServings.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from conformance.framework.waits import wait_for
from conformance.implementations import reference

GROUP, VERSION, PLURAL = "workload.serving.volcano.sh", "v1alpha1", "modelservings"


def valid(name: str = "adm") -> dict[str, Any]:
    pod = {"spec": {"containers": [{"name": "c", "image": "engine:v1"}]}}
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "ModelServing",
        "metadata": {"name": name},
        "spec": {
            "replicas": 1,
            "schedulerName": "default-scheduler",
            "template": {
                "roles": [
                    {
                        "name": "prefill",
                        "workerReplicas": 1,
                        "entryTemplate": pod,
                        "workerTemplate": copy.deepcopy(pod),
                    },
                    {"name": "decode", "workerReplicas": 0, "entryTemplate": copy.deepcopy(pod)},
                ]
            },
        },
    }


def mutate(fn: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    obj = valid()
    fn(obj)
    return obj


ROLES = "spec.template.roles"
CASES = [
    ("worker-template-missing", lambda o: o["spec"]["template"]["roles"][0].pop("workerTemplate"), f"{ROLES}[0].workerTemplate"),
    ("uppercase-role-name", lambda o: o["spec"]["template"]["roles"][1].update(name="Decode"), f"{ROLES}[1].name"),
    ("image-with-space", lambda o: o["spec"]["template"]["roles"][1]["entryTemplate"]["spec"]["containers"][0].update(image="a b"), f"{ROLES}[1].entryTemplate.spec.containers[0].image"),
    ("empty-containers", lambda o: o["spec"]["template"]["roles"][1]["entryTemplate"]["spec"].update(containers=[]), f"{ROLES}[1].entryTemplate.spec.containers"),
    ("gang-unknown-role", lambda o: o["spec"]["template"].update(gangPolicy={"minRoleReplicas": {"ghost": 1}}), "spec.template.gangPolicy.minRoleReplicas[ghost]"),
    ("role-rolling-with-configuration", lambda o: o["spec"].update(rolloutStrategy={"type": "RoleRollingUpdate", "rollingUpdateConfiguration": {"maxUnavailable": 1}}), "spec.rolloutStrategy.rollingUpdateConfiguration"),
    ("zero-unavailable-zero-surge", lambda o: o["spec"].update(rolloutStrategy={"rollingUpdateConfiguration": {"maxUnavailable": 0}}), "spec.rolloutStrategy.rollingUpdateConfiguration.maxUnavailable"),
    ("bad-percentage", lambda o: o["spec"].update(rolloutStrategy={"rollingUpdateConfiguration": {"maxUnavailable": "half"}}), "maxUnavailable"),
    ("role-partition-not-intstr", lambda o: o["spec"]["template"]["roles"][0].update(partition="half"), f"{ROLES}[0].partition"),
    ("coordination-with-sg-rolling", lambda o: o["spec"].update(rolloutStrategy={"roleCoordination": {"maxSkew": "10%"}}), "spec.rolloutStrategy.roleCoordination"),
    ("unknown-plugin", lambda o: o["spec"].update(plugins=[{"name": "no-such-plugin"}]), "spec.plugins[0].name"),
    ("eviction-unknown-role", lambda o: o["spec"].update(rolloutStrategy={"evictionStrategy": {"protectionLevel": "Role", "roleMinAvailable": {"ghost": 1}}}), "roleMinAvailable[ghost]"),
]  # fmt: skip


@pytest.fixture
def custom(api_client: Any, reference_controller: dict[str, Any], namespace: str) -> Any:
    if not reference_controller.get("webhook"):
        pytest.skip("the webhook is registered by the harness on the local provider only")
    return client.CustomObjectsApi(api_client)


@pytest.mark.cluster
@pytest.mark.parametrize(("mutation", "field"), [pytest.param(m, f, id=i) for i, m, f in CASES])
def test_webhook_rejects_with_field_and_reason(
    custom: Any, namespace: str, mutation: Callable[[dict[str, Any]], None], field: str
) -> None:
    with pytest.raises(ApiException) as err:
        custom.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, mutate(mutation))
    body = json.loads(err.value.body)
    assert err.value.status == 422, body
    assert "validation failed" in body["message"] and field in body["message"], body["message"]


@pytest.mark.cluster
def test_webhook_accepts_a_valid_modelserving(custom: Any, namespace: str) -> None:
    created = custom.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, valid())
    assert created["metadata"]["uid"]


@pytest.mark.serial
@pytest.mark.cluster
def test_invalid_object_that_got_past_admission_is_reported_and_blocks_nothing(
    api_client: Any, reference_controller: dict[str, Any], cluster: Any, namespace: str, tmp_path: Any
) -> None:
    admission = client.AdmissionregistrationV1Api(api_client)
    custom = client.CustomObjectsApi(api_client)
    core = client.CoreV1Api(api_client)
    saved = admission.read_validating_webhook_configuration(reference.WEBHOOK_NAME)
    admission.delete_validating_webhook_configuration(reference.WEBHOOK_NAME)
    try:
        bad = mutate(lambda o: o["spec"]["template"]["roles"][0].pop("workerTemplate"))
        bad["metadata"]["name"] = "bad"
        wait_for(
            "the webhook to be gone",
            lambda: custom.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, bad),
        )
    finally:
        saved.metadata.resource_version = None
        admission.create_validating_webhook_configuration(saved)
    custom.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, valid("good"))
    status = wait_for(
        "the InvalidSpec condition",
        lambda: custom.get_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, "bad").get("status") or {},
        until=lambda s: any(c.get("reason") == "InvalidSpec" for c in s.get("conditions") or []),
    )
    condition = next(c for c in status["conditions"] if c["reason"] == "InvalidSpec")
    assert "workerTemplate" in condition["message"]
    events = core.list_namespaced_event(namespace, field_selector="involvedObject.name=bad").items
    assert any(e.reason == "InvalidSpec" and "workerTemplate" in e.message for e in events)
    assert not core.list_namespaced_pod(namespace, label_selector="modelserving.volcano.sh/name=bad").items
    wait_for(
        "the valid ModelServing to be served anyway",
        lambda: (
            custom.get_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, "good").get("status") or {}
        ).get("availableReplicas"),
        until=lambda n: n == 1,
        timeout=60,
    )
