"""The embedded cluster's kwok acts only on the Pod a stage was computed for (kwok_guard.py).

kwok deletes and patches Pods by name: a stage computed for a Pod that a controller has since
rebuilt under the same name would otherwise delete or fail the new Pod, which no kubelet does.
These tests make kwok's requests themselves (impersonating its user) against a Pod that is not
terminating and not annotated, as a stale stage would, and check the API server refuses them,
while the requests kwok makes for a live stage still go through.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from conformance.cluster.faults import Fault, FaultInjector
from conformance.cluster.kube import api_client as make_api_client
from conformance.cluster.local.kwok_guard import KWOK_USER, POLICY_NAME
from conformance.cluster.provider import ClusterInfo
from conformance.framework.waits import wait_for

pytestmark = pytest.mark.cluster

FAILED_STATUS = {"status": {"phase": "Failed"}}


@pytest.fixture
def core(api_client: Any) -> client.CoreV1Api:
    return client.CoreV1Api(api_client)


@pytest.fixture
def as_kwok(cluster: ClusterInfo) -> Iterator[client.CoreV1Api]:
    """The core API as kwok's user (the admin may impersonate it)."""
    if cluster.provider != "local":
        pytest.skip(f"the kwok guard belongs to the embedded cluster, not to provider {cluster.provider}")
    api = make_api_client(cluster.kubeconfig, cluster.context)
    api.set_default_header("Impersonate-User", KWOK_USER)
    api.set_default_header("Impersonate-Group", "system:masters")
    try:
        yield client.CoreV1Api(api)
    finally:
        api.close()


def running_pod(core: client.CoreV1Api, namespace: str, name: str) -> Any:
    body = {"metadata": {"name": name}, "spec": {"containers": [{"name": "main", "image": "engine:v1"}]}}
    core.create_namespaced_pod(namespace, body)
    return wait_for(
        f"Pod {name} Running",
        lambda: core.read_namespaced_pod(name, namespace),
        until=lambda p: p.status.phase == "Running",
    )


def refusal(call: Any) -> ApiException:
    with pytest.raises(ApiException) as caught:
        call()
    return caught.value


def test_kwok_cannot_delete_a_pod_nobody_asked_to_delete(
    core: client.CoreV1Api, as_kwok: client.CoreV1Api, namespace: str
) -> None:
    pod = running_pod(core, namespace, "fresh")
    exc = refusal(lambda: as_kwok.delete_namespaced_pod("fresh", namespace, grace_period_seconds=0))
    assert exc.status == 403 and POLICY_NAME in str(exc.body), (
        f"expected the guard's refusal, got {exc.status}: {exc.body}"
    )
    assert core.read_namespaced_pod("fresh", namespace).metadata.uid == pod.metadata.uid, "the Pod is still there"


def test_kwok_still_deletes_a_terminating_pod(core: client.CoreV1Api, namespace: str) -> None:
    pod = running_pod(core, namespace, "leaving")
    core.delete_namespaced_pod("leaving", namespace)  # default grace: kwok's pod-delete stage finishes it

    def gone() -> bool:
        try:
            return core.read_namespaced_pod("leaving", namespace).metadata.uid != pod.metadata.uid
        except ApiException as exc:
            return exc.status == 404

    wait_for("kwok to delete the terminating Pod", gone, until=bool)


def test_kwok_cannot_fail_a_pod_without_the_fault_annotation(
    core: client.CoreV1Api, as_kwok: client.CoreV1Api, namespace: str
) -> None:
    running_pod(core, namespace, "healthy")
    exc = refusal(lambda: as_kwok.patch_namespaced_pod_status("healthy", namespace, FAILED_STATUS))
    assert exc.status == 403 and POLICY_NAME in str(exc.body), (
        f"expected the guard's refusal, got {exc.status}: {exc.body}"
    )
    assert core.read_namespaced_pod("healthy", namespace).status.phase == "Running"


def test_the_fail_fault_still_fails_the_annotated_pod(
    core: client.CoreV1Api, namespace: str, faults: FaultInjector
) -> None:
    running_pod(core, namespace, "doomed")
    faults.inject(namespace, "doomed", Fault.FAIL)
    wait_for("phase Failed", lambda: core.read_namespaced_pod("doomed", namespace).status.phase, until="Failed".__eq__)
