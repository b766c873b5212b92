"""``make bench``: what a real node costs next to kwok nodes, measured in one run.

Prints, side by side for a kwok-only cluster and the same cluster plus one real node
(``cluster up --real-nodes 1``), on the same binaries:

- ``cluster up`` to every Node Ready (and, for the real node, kubelet start to Ready);
- Pod create to Running, on a kwok node and on the real node (``BENCH_PODS`` Pods, default 5, one at
  a time; the median);
- resident memory: the whole cluster, and the real node's own processes (kubelet, containerd, the
  shims of its running Pods);
- ``cluster down`` (the real node's host restore included), and whether the host then matches the
  snapshot taken before.

Needs what real nodes need (root, runc, containernetworking-plugins, iptables, busybox-static, the
real-node binaries); without it, says what is missing and measures nothing. Nothing is asserted.
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable
from functools import partial
from typing import Any

import psutil
from kubernetes import client

from bench.cluster_bench import rss_mib
from conformance.cluster.binaries import BinaryCache
from conformance.cluster.kube import api_client
from conformance.cluster.local.provider import LocalProvider, declared_real_nodes
from conformance.cluster.realnode import host, images, preflight
from conformance.cluster.realnode.node import PROCESS_BINARIES, WATCHED_PATHS
from conformance.cluster.spec import ClusterSpec, NodePool
from conformance.framework.waits import wait_for

KWOK = ClusterSpec(name="bench-kwok", node_pools=[NodePool(name="worker", count=2)])
REAL = ClusterSpec(
    name="bench-real", node_pools=[NodePool(name="worker", count=2), NodePool(name="real", kind="real", count=1)]
)


def _real_node_pids(bin_dir: str) -> list[int]:
    names = {os.path.join(bin_dir, b) for b in PROCESS_BINARIES}
    pids = []
    for proc in psutil.process_iter(["pid", "exe"]):
        if (proc.info.get("exe") or "") in names:
            pids.append(proc.info["pid"])
    return pids


def _phase(core: Any, name: str) -> str:
    return str(core.read_namespaced_pod(name, "default").status.phase)


def _pod_seconds(core: Any, node: str, count: int, real: bool) -> list[float]:
    times = []
    for i in range(count):
        name = f"bench-{node}-{i}"
        spec: dict[str, Any] = {
            "nodeSelector": {"kubernetes.io/hostname": node},
            "automountServiceAccountToken": False,
            "terminationGracePeriodSeconds": 0,
            "tolerations": [dict(t) for t in declared_real_nodes().tolerations] if real else [],
            "containers": [{"name": "main", "image": images.WORKLOAD_IMAGES["v1"] if real else "engine:v1",
                            "imagePullPolicy": "IfNotPresent"}],
        }  # fmt: skip
        started = time.monotonic()
        core.create_namespaced_pod("default", {"metadata": {"name": name}, "spec": spec})
        wait_for(f"{name} Running", partial(_phase, core, name), until="Running".__eq__, timeout=60, interval=0.05)
        times.append(time.monotonic() - started)
    return times


def _bench(spec: ClusterSpec, pods: int, bin_dir: str) -> dict[str, Any]:
    provider = LocalProvider()
    started = time.monotonic()
    info = provider.up(spec)
    figures: dict[str, Any] = {"up": time.monotonic() - started, "timings": info.details.get("timings", {})}
    core = client.CoreV1Api(api_client(info.kubeconfig))
    try:
        figures["pod_kwok"] = _pod_seconds(core, "worker-0", pods, real=False)
        if spec.real_pools():
            figures["pod_real"] = _pod_seconds(core, "real-0", pods, real=True)
            figures["rss_real_node"] = rss_mib(_real_node_pids(bin_dir))
        state = provider.status(spec.name) or {}
        figures["rss_cluster"] = rss_mib(list((state.get("components") or {}).values()))
    finally:
        started = time.monotonic()
        provider.down(spec.name)
        figures["down"] = time.monotonic() - started
    return figures


def _median(values: list[float]) -> str:
    return f"{statistics.median(values):.2f}s (runs: {', '.join(f'{v:.2f}' for v in values)})"


def main(progress: Callable[[str], None] = print) -> None:
    progress("== real nodes next to kwok nodes ==")
    reqs = preflight.evaluate(preflight.gather_facts())
    if not preflight.usable(reqs):
        progress(f"skipped: {preflight.summary(reqs)}")
        return
    binaries = BinaryCache().ensure(real_nodes=True, progress=lambda m: progress(f"  build: {m}"))
    missing = [b for b in PROCESS_BINARIES if not binaries.optional(b)]
    if missing:
        progress(f"skipped: real-node binaries missing: {', '.join(missing)}")
        return
    bin_dir = str(binaries.directory)
    pods = int(os.environ.get("BENCH_PODS", "5"))
    cgroups = [f"kthena-{n}" for n in REAL.node_names()]
    before = host.take_snapshot(WATCHED_PATHS, [binaries.directory / b for b in PROCESS_BINARIES], cgroups)
    kwok = _bench(KWOK, pods, bin_dir)
    real = _bench(REAL, pods, bin_dir)
    after = host.take_snapshot(WATCHED_PATHS, [binaries.directory / b for b in PROCESS_BINARIES], cgroups)
    timings = real["timings"]
    kubelet_to_ready = timings.get("ready", 0.0) - timings.get("real_nodes_started", 0.0)
    progress(f"up to every Node Ready:      kwok-only {kwok['up']:.2f}s   with a real node {real['up']:.2f}s")
    progress(f"  real node: kubelet started to all Nodes Ready {kubelet_to_ready:.2f}s (supervisor timings)")
    progress(f"Pod create to Running:       kwok node {_median(kwok['pod_kwok'])}")
    progress(f"                             real node {_median(real['pod_real'])}")
    progress(
        f"memory (RSS):                kwok-only cluster {kwok['rss_cluster']:.0f} MiB; with a real node "
        f"{real['rss_cluster']:.0f} MiB, of which the real node (kubelet, containerd, {pods} Pods' shims) "
        f"{real['rss_real_node']:.0f} MiB"
    )
    progress(f"down:                        kwok-only {kwok['down']:.2f}s   with a real node {real['down']:.2f}s")
    left = host.diff(before, after).lines()
    progress("host after down:             " + ("as before" if not left else "CHANGED: " + "; ".join(left)))


if __name__ == "__main__":
    main()
