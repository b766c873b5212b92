"""``make bench``: a 20-ServingGroup rolling update, its duration and the availability seen.

On one embedded cluster (2 kwok nodes) with the reference controller running as in the suite, a
ModelServing of 20 ServingGroups (1 Role: an entry and one worker Pod, 40 Pods) with
``ServingGroupRollingUpdate``, ``maxUnavailable: 25%`` (= 5) and ``maxSurge: 25%`` (= 5) is
brought up, then its image is changed, once with ``updateMethod: Recreate`` and once with
``InPlace`` (each in a namespace of its own). For each it prints:

- the rollout time: from the patch until ``status.updatedReplicas == availableReplicas ==
  replicas == 20`` at the new generation and every Pod is Running, Ready and on the new image;
- the fewest ready ServingGroups seen at any moment (the floor is 20 - 5 = 15) and the most
  ServingGroups that existed at once (the ceiling is 20 + 5 = 25), from a Pod watch that sees
  every change (a ServingGroup exists when it has a Pod that is not terminating, and is ready when
  both its Pods are Running, Ready, not terminating and on the image their spec names);
- for InPlace, how many Pods kept their UID (all 40 is the point).

``BENCH_TIMEOUT`` (default 180 s) bounds each wait. Nothing is asserted: the figures are for
people to read (and the conformance suite checks the budget as behaviour).
"""

from __future__ import annotations

import os
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from kubernetes import client, watch

from conformance.cluster.kube import api_client
from conformance.cluster.local.provider import LocalProvider
from conformance.cluster.provider import ClusterInfo
from conformance.cluster.spec import ClusterSpec, NodePool
from conformance.framework.waits import WaitTimeout, wait_for
from conformance.implementations import reference

GROUP, VERSION, PLURAL = "workload.serving.volcano.sh", "v1alpha1", "modelservings"
CLUSTER = "bench-rollout"
GROUPS, PODS_PER_GROUP = 20, 2
BUDGET = "25%"
FLOOR, CEILING = GROUPS - GROUPS // 4, GROUPS + GROUPS // 4
GROUP_LABEL = "modelserving.volcano.sh/group-name"


def _modelserving(method: str) -> dict[str, Any]:
    pod = {"spec": {"containers": [{"name": "engine", "image": "engine:v1"}]}}
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "ModelServing",
        "metadata": {"name": "llm"},
        "spec": {
            "replicas": GROUPS,
            "schedulerName": "default-scheduler",
            "rolloutStrategy": {
                "updateMethod": method,
                "rollingUpdateConfiguration": {"maxUnavailable": BUDGET, "maxSurge": BUDGET},
            },
            "template": {
                "roles": [
                    {"name": "engine", "replicas": 1, "workerReplicas": 1, "entryTemplate": pod, "workerTemplate": pod}
                ]
            },
        },
    }


def _available(pod: Any) -> bool:
    if pod.metadata.deletion_timestamp or pod.status.phase != "Running":
        return False
    ready = any(c.type == "Ready" and c.status == "True" for c in pod.status.conditions or [])
    running = {s.name: s.image for s in pod.status.container_statuses or []}
    return ready and all(running.get(c.name) == c.image for c in pod.spec.containers)


@dataclass
class Watcher:
    """Every change to the namespace's Pods, reduced to the two figures."""

    core: Any
    namespace: str
    pods: dict[str, Any] = field(default_factory=dict)
    min_ready: int = GROUPS
    max_groups: int = 0
    _stop: threading.Event = field(default_factory=threading.Event)

    def _account(self) -> None:
        groups: dict[str, list[Any]] = {}
        for pod in self.pods.values():
            groups.setdefault((pod.metadata.labels or {}).get(GROUP_LABEL, "?"), []).append(pod)
        existing = [g for g, pods in groups.items() if any(not p.metadata.deletion_timestamp for p in pods)]
        ready = [g for g, pods in groups.items() if len(pods) == PODS_PER_GROUP and all(map(_available, pods))]
        self.max_groups = max(self.max_groups, len(existing))
        self.min_ready = min(self.min_ready, len(ready))

    def run(self, resource_version: str) -> None:
        stream: Any = cast(Any, watch).Watch()
        while not self._stop.is_set():
            for event in stream.stream(
                self.core.list_namespaced_pod, self.namespace, resource_version=resource_version, timeout_seconds=5
            ):
                pod = event["object"]
                resource_version = pod.metadata.resource_version
                if event["type"] == "DELETED":
                    self.pods.pop(pod.metadata.name, None)
                else:
                    self.pods[pod.metadata.name] = pod
                self._account()
                if self._stop.is_set():
                    stream.stop()

    def stop(self) -> None:
        self._stop.set()


def _status(custom: Any, namespace: str) -> dict[str, Any]:
    obj = custom.get_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, "llm")
    return {"generation": obj["metadata"].get("generation"), **(obj.get("status") or {})}


def _settled(custom: Any, core: Any, namespace: str, image: str) -> bool:
    s = _status(custom, namespace)
    counts = (s.get("replicas"), s.get("availableReplicas"), s.get("updatedReplicas"))
    if s.get("observedGeneration") != s["generation"] or counts != (GROUPS, GROUPS, GROUPS):
        return False
    pods = core.list_namespaced_pod(namespace).items
    return len(pods) == GROUPS * PODS_PER_GROUP and all(
        _available(p) and p.spec.containers[0].image == image for p in pods
    )


def rollout(info: ClusterInfo, method: str, timeout: float, progress: Callable[[str], None]) -> str:
    api = api_client(info.kubeconfig)
    core: Any = client.CoreV1Api(api)
    custom: Any = client.CustomObjectsApi(api)
    namespace = f"bench-rollout-{method.lower()}"
    core.create_namespace({"metadata": {"name": namespace}})
    custom.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, _modelserving(method))
    try:
        wait_for(f"{GROUPS} ServingGroups Available", lambda: _settled(custom, core, namespace, "engine:v1"),
                 timeout=timeout, interval=0.2)  # fmt: skip
    except WaitTimeout:
        return f"{method}: never Available (last status {_status(custom, namespace)})"
    before = {p.metadata.name: p.metadata.uid for p in core.list_namespaced_pod(namespace).items if p.metadata}
    listing = core.list_namespaced_pod(namespace)
    watcher = Watcher(core, namespace, {p.metadata.name: p for p in listing.items})
    thread = threading.Thread(target=watcher.run, args=(listing.metadata.resource_version,), daemon=True)
    thread.start()
    image = {"spec": {"containers": [{"name": "engine", "image": "engine:v2"}]}}
    roles = [{"name": "engine", "replicas": 1, "workerReplicas": 1, "entryTemplate": image, "workerTemplate": image}]
    start = time.monotonic()
    custom.patch_namespaced_custom_object(
        GROUP, VERSION, namespace, PLURAL, "llm", {"spec": {"template": {"roles": roles}}}
    )
    try:
        wait_for("the rollout", lambda: _settled(custom, core, namespace, "engine:v2"), timeout=timeout, interval=0.1)
        took = f"{time.monotonic() - start:.1f} s"
    except WaitTimeout:
        took = f"did not finish in {timeout:.0f} s (last status {_status(custom, namespace)})"
    finally:
        watcher.stop()
        thread.join(timeout=10)
    after = {p.metadata.name: p.metadata.uid for p in core.list_namespaced_pod(namespace).items if p.metadata}
    kept = sum(1 for name, uid in after.items() if before.get(name) == uid)
    line = (
        f"{method:>8}: rollout {took}; fewest ready ServingGroups {watcher.min_ready} (floor {FLOOR}); "
        f"most ServingGroups at once {watcher.max_groups} (ceiling {CEILING}); "
        f"Pods that kept their UID {kept}/{GROUPS * PODS_PER_GROUP}"
    )
    core.delete_namespace(namespace)
    return line


def main(progress: Callable[[str], None] = print) -> None:
    timeout = float(os.environ.get("BENCH_TIMEOUT", "180"))
    provider = LocalProvider()
    spec = ClusterSpec(name=CLUSTER, node_pools=[NodePool(name="worker", count=2)])
    try:
        progress("starting a 2-node embedded cluster")
        info = provider.up(spec, progress=lambda m: progress(f"  cluster: {m}"), owner_pid=os.getpid())
        reference.install(info)
        with tempfile.TemporaryDirectory(prefix="kthena-bench-rollout-") as workdir:
            kubeconfig = reference.token_kubeconfig(info, Path(workdir))
            controller = reference.start(kubeconfig, Path(workdir) / "kthena-ref.log", owner_pid=os.getpid())
            try:
                progress(
                    f"rolling update of {GROUPS} ServingGroups x {PODS_PER_GROUP} Pods, "
                    f"maxUnavailable {BUDGET}, maxSurge {BUDGET}"
                )
                for method in ("Recreate", "InPlace"):
                    progress(rollout(info, method, timeout, progress))
            finally:
                controller.stop()
    finally:
        provider.down(CLUSTER)


if __name__ == "__main__":
    main()
