"""``make bench``: schedule a 32-Pod ModelServing with one GPU per Pod across 8 GPU nodes x 4 GPUs.

On one embedded cluster (8 kwok nodes labelled ``gpu.fake.kthena-conformance.io/device-count: "4"``, the fake
GPU driver publishing one ResourceSlice pool per node, plus 2 plain nodes) with the reference
controller running as in the suite, a ModelServing of 32 ServingGroups, each a single entry Pod
that claims one GPU through a ResourceClaimTemplate, is created. It prints:

- the time from the create call until all 32 Pods are Running (scheduled by the real
  kube-scheduler, which allocates every device; kwok then marks the Pods Running), and until then
  when the last Pod was scheduled;
- the number of devices allocated over the ModelServing's ResourceClaims, and of distinct
  ``(driver, pool, device)`` triples among them: both must be exactly 32 (no duplicates), which
  is also every GPU of the cluster.

``BENCH_TIMEOUT`` (default 180 s) bounds the wait. Exit code 1 if the allocation is not exactly
32 distinct devices or the Pods never all ran.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kubernetes import client

from conformance.cluster.kube import api_client
from conformance.cluster.local.provider import LocalProvider
from conformance.cluster.spec import ClusterSpec, NodePool
from conformance.framework.waits import WaitTimeout, wait_for
from conformance.implementations import reference
from fake_devices.drivers import GPU

GROUP, VERSION, PLURAL = "workload.serving.volcano.sh", "v1alpha1", "modelservings"
CLUSTER = "bench-dra"
NODES, GPUS_PER_NODE, PODS = 8, 4, 32
NAMESPACE = "bench-dra"


def _claim_template() -> dict[str, Any]:
    request = {"name": "gpu", "exactly": {"deviceClassName": GPU.device_class_name, "allocationMode": "ExactCount",
                                          "count": 1}}  # fmt: skip
    return {"metadata": {"name": "one-gpu"}, "spec": {"spec": {"devices": {"requests": [request]}}}}


def _modelserving() -> dict[str, Any]:
    pod = {
        "spec": {
            "containers": [{"name": "engine", "image": "engine:v1", "resources": {"claims": [{"name": "gpu"}]}}],
            "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}],
        }
    }
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "ModelServing",
        "metadata": {"name": "llm"},
        "spec": {
            "replicas": PODS,
            "schedulerName": "default-scheduler",
            "template": {"roles": [{"name": "engine", "replicas": 1, "workerReplicas": 0, "entryTemplate": pod}]},
        },
    }


def _allocations(resource: Any) -> list[tuple[str, str, str]]:
    resp = resource.list_namespaced_resource_claim(NAMESPACE, _preload_content=False)
    out = []
    for claim in json.loads(resp.data)["items"]:
        results = (((claim.get("status") or {}).get("allocation") or {}).get("devices") or {}).get("results") or []
        out += [(r["driver"], r["pool"], r["device"]) for r in results]
    return out


def _scheduled_at(pod: Any) -> float | None:
    cond = next((c for c in pod.status.conditions or [] if c.type == "PodScheduled" and c.status == "True"), None)
    return cond.last_transition_time.timestamp() if cond is not None and cond.last_transition_time else None


def schedule(info: Any, timeout: float, progress: Callable[[str], None]) -> bool:
    api = api_client(info.kubeconfig)
    core: Any = client.CoreV1Api(api)
    resource: Any = client.ResourceV1Api(api)
    custom: Any = client.CustomObjectsApi(api)
    core.create_namespace({"metadata": {"name": NAMESPACE}})
    wait_for("the namespace's ServiceAccount", lambda: core.read_namespaced_service_account("default", NAMESPACE))
    resource.create_namespaced_resource_claim_template(NAMESPACE, _claim_template())
    started, wall = time.monotonic(), time.time()
    custom.create_namespaced_custom_object(GROUP, VERSION, NAMESPACE, PLURAL, _modelserving())

    def running() -> list[Any]:
        return [p for p in core.list_namespaced_pod(NAMESPACE).items if p.status.phase == "Running"]

    try:
        pods = wait_for(f"{PODS} Pods Running", running, until=lambda ps: len(ps) == PODS, timeout=timeout,
                        interval=0.1)  # fmt: skip
    except WaitTimeout as exc:
        progress(f"not all Pods ran: {exc}")
        return False
    took = time.monotonic() - started
    last = max((t for t in map(_scheduled_at, pods) if t is not None), default=None)
    devices = wait_for("every claim's allocation", lambda: _allocations(resource), until=lambda d: len(d) >= PODS)
    distinct = set(devices)
    per_node = sorted({p.spec.node_name for p in pods})
    progress(
        f"{PODS} Pods (one GPU each) Running {took:.1f} s after create"
        + (f" (last scheduled at +{last - wall:.1f} s, second resolution)" if last else "")
        + f"; on {len(per_node)} nodes"
    )
    ok = len(devices) == PODS and len(distinct) == PODS
    progress(
        f"devices allocated: {len(devices)}, distinct (driver, pool, device): {len(distinct)} "
        f"(must be exactly {PODS}, no duplicates): {'OK' if ok else 'WRONG'}"
    )
    custom.delete_namespaced_custom_object(GROUP, VERSION, NAMESPACE, PLURAL, "llm")
    core.delete_namespace(NAMESPACE)
    return ok


def main(progress: Callable[[str], None] = print) -> int:
    timeout = float(os.environ.get("BENCH_TIMEOUT", "180"))
    provider = LocalProvider()
    spec = ClusterSpec(
        name=CLUSTER,
        node_pools=[
            NodePool(name="worker", count=2),
            NodePool(name="gpu", count=NODES, labels={GPU.count_label: str(GPUS_PER_NODE)}),
        ],
    )
    try:
        progress(f"starting an embedded cluster: {NODES} GPU nodes x {GPUS_PER_NODE} fake GPUs, 2 plain nodes")
        info = provider.up(spec, progress=lambda m: progress(f"  cluster: {m}"), owner_pid=os.getpid())
        reference.install(info)
        with tempfile.TemporaryDirectory(prefix="kthena-bench-dra-") as workdir:
            kubeconfig = reference.token_kubeconfig(info, Path(workdir))
            controller = reference.start(kubeconfig, Path(workdir) / "kthena-ref.log", owner_pid=os.getpid())
            try:
                progress(f"a ModelServing of {PODS} Pods, each claiming 1 GPU through a ResourceClaimTemplate")
                ok = schedule(info, timeout, progress)
            finally:
                controller.stop()
    finally:
        provider.down(CLUSTER)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
