"""The reference controller rides through a kube-apiserver restart without a manual step."""

from __future__ import annotations

import os
from typing import Any

import pytest
from kubernetes import client

from conformance.cluster.local.provider import LocalProvider
from conformance.cluster.provider import ClusterInfo
from conformance.framework.waits import wait_for

pytestmark = [pytest.mark.serial, pytest.mark.cluster]

GROUP, VERSION, PLURAL = "workload.serving.volcano.sh", "v1alpha1", "modelservings"


def test_controller_recovers_after_the_apiserver_restarts(
    api_client: Any, cluster: ClusterInfo, reference_controller: dict[str, Any], namespace: str
) -> None:
    if cluster.provider != "local":
        pytest.skip("restarting kube-apiserver is a capability of the local provider")
    custom = client.CustomObjectsApi(api_client)
    pod = {"spec": {"containers": [{"name": "c", "image": "engine:v1"}]}}
    body = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "ModelServing",
        "metadata": {"name": "ride"},
        "spec": {"replicas": 1, "schedulerName": "default-scheduler",
                 "template": {"roles": [{"name": "r", "workerReplicas": 0, "entryTemplate": pod}]}},
    }  # fmt: skip
    custom.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, body)

    def available() -> int:
        ms = custom.get_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, "ride")
        status = ms.get("status") or {}
        current = status.get("observedGeneration") == ms["metadata"]["generation"]
        return int(status.get("availableReplicas") or 0) if current else -1

    wait_for("1 ServingGroup available", available, until=lambda n: n == 1, timeout=60)
    LocalProvider().restart_component(cluster.name, "kube-apiserver")
    custom.patch_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, "ride", {"spec": {"replicas": 3}})
    wait_for("3 ServingGroups available after the restart", available, until=lambda n: n == 3, timeout=90)
    os.kill(reference_controller["pid"], 0)  # the same controller process did it: no manual step
