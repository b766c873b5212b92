"""The reference's AutoscalingPolicy webhook, called by the real kube-apiserver over TLS.

The harness installs the AutoscalingPolicy CRD with the reference and routes AutoscalingPolicy
CREATE and UPDATE to the webhook (``conformance/implementations/reference.py``); the rules CEL
cannot say are refused with the field named (``kthena_ref/admission/autoscaling_rules.py``), a
valid policy is stored, and a disaggregated policy's Role keys are checked against its target
ModelServing when that exists (and accepted when it does not yet).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from kthena_ref.api.autoscaling import PLURAL
from kthena_ref.api.types import GROUP, VERSION
from tests.integration.test_admission import valid as valid_modelserving

pytestmark = pytest.mark.cluster

PROMETHEUS = {"prometheus": {"serverURL": "http://prometheus:9090", "query": "sum(rate(requests_total[1m]))"}}


def homogeneous(name: str = "policy") -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "AutoscalingPolicy",
        "metadata": {"name": name},
        "spec": {
            "metrics": [{"name": "rps", "targetValue": "100m"}],
            "homogeneousTarget": {
                "minReplicas": 1,
                "maxReplicas": 6,
                "target": {"targetRef": {"kind": "ModelServing", "name": "ms"}, "metricSources": {"rps": PROMETHEUS}},
            },
        },
    }


def disaggregated(name: str = "pd", target: str = "adm") -> dict[str, Any]:
    body = homogeneous(name)
    del body["spec"]["homogeneousTarget"]
    body["spec"]["disaggregatedTarget"] = {
        "targetRef": {"name": target},
        "roles": {
            "prefill": {"minReplicas": 1, "maxReplicas": 4, "metricSources": {"rps": PROMETHEUS}},
            "decode": {"minReplicas": 1, "maxReplicas": 8, "metricSources": {"rps": PROMETHEUS}},
        },
        "ratioConstraint": {"numeratorRole": "prefill", "denominatorRole": "decode", "minRatio": "250m", "maxRatio": 1},
    }
    return body


def edit(base: Callable[[], dict[str, Any]], change: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    body = copy.deepcopy(base())
    change(body)
    return body


CASES = {
    "no-target": (homogeneous, lambda b: b["spec"].pop("homogeneousTarget"), "spec: exactly one of"),
    "kind-deployment": (
        homogeneous,
        lambda b: b["spec"]["homogeneousTarget"]["target"]["targetRef"].update(kind="Deployment"),
        "spec.homogeneousTarget.target.targetRef.kind",
    ),
    "unknown-metric-source": (
        homogeneous,
        lambda b: b["spec"]["homogeneousTarget"]["target"]["metricSources"].update(foo=PROMETHEUS),
        "spec.homogeneousTarget.target.metricSources[foo]",
    ),
    "min-above-max": (
        disaggregated,
        lambda b: b["spec"]["disaggregatedTarget"]["roles"]["prefill"].update(minReplicas=5),
        "spec.disaggregatedTarget.roles[prefill].minReplicas",
    ),
    "ratio-min-above-max": (
        disaggregated,
        lambda b: b["spec"]["disaggregatedTarget"]["ratioConstraint"].update(minRatio="2"),
        "spec.disaggregatedTarget.ratioConstraint.minRatio",
    ),
}


@pytest.fixture
def policies(api_client: Any, reference_controller: dict[str, Any]) -> Any:
    if not reference_controller.get("webhook"):
        pytest.skip("the webhook is registered by the harness on the local provider only")
    return client.CustomObjectsApi(api_client)


def refusal(create: Callable[[], object]) -> str:
    with pytest.raises(ApiException) as refused:
        create()
    body = json.loads(str(refused.value.body))
    assert refused.value.status == 422, body
    return str(body["message"])


@pytest.mark.parametrize(("base", "change", "field"), CASES.values(), ids=CASES.keys())
def test_the_webhook_refuses_naming_the_field(
    policies: Any,
    namespace: str,
    base: Callable[[], dict[str, Any]],
    change: Callable[[dict[str, Any]], None],
    field: str,
) -> None:
    message = refusal(
        lambda: policies.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, edit(base, change))
    )
    assert "validation failed" in message and field in message, message


def test_a_valid_policy_is_stored_and_an_invalid_update_refused(policies: Any, namespace: str) -> None:
    created = policies.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, homogeneous())
    assert created["metadata"]["uid"]
    created["spec"]["homogeneousTarget"]["minReplicas"] = 7
    message = refusal(
        lambda: policies.replace_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, "policy", created)
    )
    assert "spec.homogeneousTarget.minReplicas" in message, message


def test_role_keys_are_checked_against_the_target_once_it_exists(policies: Any, namespace: str) -> None:
    # No ModelServing "later" yet: any Role keys are accepted (policies may be applied first).
    early = disaggregated("early", target="later")
    early["spec"]["disaggregatedTarget"]["roles"]["router"] = early["spec"]["disaggregatedTarget"]["roles"].pop(
        "decode"
    )
    early["spec"]["disaggregatedTarget"]["ratioConstraint"]["denominatorRole"] = "router"
    policies.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, early)

    target = valid_modelserving("adm")  # Roles prefill and decode
    target["spec"]["replicas"] = 0  # no Pods needed
    policies.create_namespaced_custom_object(GROUP, VERSION, namespace, "modelservings", target)
    policies.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, disaggregated("pd", target="adm"))
    wrong = disaggregated("wrong", target="adm")
    wrong["spec"]["disaggregatedTarget"]["roles"]["router"] = wrong["spec"]["disaggregatedTarget"]["roles"].pop(
        "decode"
    )
    wrong["spec"]["disaggregatedTarget"]["ratioConstraint"]["denominatorRole"] = "router"
    message = refusal(lambda: policies.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, wrong))
    assert "spec.disaggregatedTarget.roles[router]" in message and "not a Role of ModelServing 'adm'" in message
