"""Two reference controllers with leader election: one acts; when it dies, the other takes over."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from conformance.cluster.provider import ClusterInfo
from conformance.framework.waits import wait_for
from conformance.implementations import reference

# The own-controller pass runs on xdist workers: these tests take turns on the shared cluster
# (the alone_on_the_shared_cluster fixture), so no two of their controllers act on it at once.
pytestmark = [pytest.mark.cluster, pytest.mark.serial, pytest.mark.slow, pytest.mark.own_controller]

GROUP, VERSION, PLURAL = "workload.serving.volcano.sh", "v1alpha1", "modelservings"
LEASE = ("kthena-ref-controller", "kthena-system")


def test_only_the_lease_holder_acts_and_a_standby_takes_over(
    alone_on_the_shared_cluster: None, api_client: Any, cluster: ClusterInfo, namespace: str, tmp_path: Path
) -> None:
    reference.install(cluster)
    kubeconfig = reference.token_kubeconfig(cluster, tmp_path)
    flags = ("--leader-elect", "--lease-namespace", LEASE[1])
    running: list[reference.RunningController] = []
    try:
        for log in ("a.log", "b.log"):
            running.append(
                reference.start(kubeconfig, tmp_path / log, owner_pid=os.getpid(), extra=flags, wait_synced=False)
            )
        coordination = client.CoordinationV1Api(api_client)
        holder = wait_for(
            "a Lease holder", lambda: coordination.read_namespaced_lease(*LEASE).spec.holder_identity, timeout=60
        )
        leader = next(c for c in running if holder.endswith(f"-{c.pid}"))
        standby = next(c for c in running if c is not leader)
        custom = client.CustomObjectsApi(api_client)
        pod = {"spec": {"containers": [{"name": "c", "image": "engine:v1"}]}}
        body = {"apiVersion": f"{GROUP}/{VERSION}", "kind": "ModelServing", "metadata": {"name": "le"},
                "spec": {"replicas": 1, "schedulerName": "default-scheduler",
                         "template": {"roles": [{"name": "r", "workerReplicas": 0, "entryTemplate": pod}]}}}  # fmt: skip
        custom.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, body)

        def available() -> int:
            ms = custom.get_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, "le")
            status = ms.get("status") or {}
            return (
                int(status.get("availableReplicas") or 0)
                if status.get("observedGeneration") == ms["metadata"]["generation"]
                else -1
            )

        wait_for("the leader to serve the ModelServing", available, until=lambda n: n == 1, timeout=60)
        assert b"caches synced" not in standby.log.read_bytes(), (
            "the standby must not act while it does not hold the Lease"
        )
        leader.kill()
        custom.patch_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, "le", {"spec": {"replicas": 2}})
        wait_for("the standby to take over and scale", available, until=lambda n: n == 2, timeout=90)
        assert coordination.read_namespaced_lease(*LEASE).spec.holder_identity.endswith(f"-{standby.pid}")
    finally:
        for controller in running:
            controller.stop()
