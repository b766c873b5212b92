"""``make bench``: how fast the reference autoscaler acts on a metric change, and its memory.

Prints, in one run on one embedded cluster (2 kwok nodes), with the reference controller running as
it does in the suite (least-privilege token) and a real Prometheus scraping a metrics endpoint the
bench sets (scrape interval 1 s):

- decision latency: from ``endpoint.set`` of a value asking for 2 replicas to the ModelServing's
  ``spec.replicas == 2`` arriving on a watch of ModelServings, for one policy alone
  (``BENCH_ROUNDS`` times, default 3, each on a ModelServing of its own, the change made at phases
  spread over the loop's period: right after a loop read the series, then later) and then for
  :data:`POLICIES` policies on one controller, all changed at once right after a loop (p50 / p95 /
  max over the 100), to compare with the single policy changed at the same phase;
- the controller's resident memory (itself and any children): idle with no ModelServing and no
  policy, with the 100 ModelServings and no policy, and with the 100 policies after a few loops
  (peak, sampled every 0.2 s); its CPU time per loop with 100 policies and nothing to change;
- how long one loop's work takes for 100 policies: the spread between the first and the last of
  the 100 scale writes of one loop (every policy is reconciled concurrently in the loop, each
  writes as soon as its decision is made).

Every policy is homogeneous: one ModelServing (1 replica, one Role, a kwok Pod), min 1, max 3,
target 10, one Prometheus series per policy (``bench_load{ms="ms-17"}``, queried as
``sum(bench_load{ms="ms-17"})``), ``panicThresholdPercent: 1000``. The series starts at 10 (1
replica, within tolerance) and the controller is seen reading it (the policy's status) before the
change to 30: in stable mode the decision averages the last 60 s of samples, so the earlier
samples of 10 delay the decision until the average leaves the 10 % tolerance (with the 5 s loop of
2026-12-05, 12 earlier samples: at once; with today's 2 s loop, 30: after two loops with 30), and the
stable step limit (+1 instance) writes exactly 2; 30 is 3x the target, under the 10x panic threshold,
so no panic. The latency is then the wait for the next scrape (0-1 s), the wait for the next loop
(0 to the reference's loop period, :data:`LOOP_SECONDS`, from the controller's start, whatever the
change's phase) and for the average to move, the Prometheus query and the decision and patch, and the
watch's delivery.

``BENCH_TIMEOUT`` (default 120 s) bounds each wait; ``BENCH_LOG_DIR`` keeps the controller's log.
Nothing here is asserted: the figures are for people to read.
"""

from __future__ import annotations

import functools
import json
import math
import os
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kubernetes import client, watch

from conformance.cluster.kube import api_client
from conformance.cluster.local.prometheus import MetricsEndpoint, Prometheus
from conformance.cluster.provider import ClusterInfo
from conformance.framework.waits import WaitTimeout, wait_for
from conformance.implementations import reference
from kthena_ref.autoscaler.loop import LOOP_SECONDS

from .controller_bench import _cpu_seconds, _namespace, _rss_tree_mb, on_cluster, peak_rss

GROUP, VERSION = "workload.serving.volcano.sh", "v1alpha1"
MS_PLURAL, POLICY_PLURAL = "modelservings", "autoscalingpolicies"
CLUSTER = "bench-autoscaler"
NODES = 2
POLICIES = 100
METRIC = "bench_load"
TARGET, LOW, HIGH = 10, 1, 3
BASELINE, CHANGED = 10.0, 30.0  # 1 replica (within tolerance); asks for >= 2 in stable mode, no panic
SCRAPE_SECONDS = 1.0
SETTLE_LOOPS = 3
NAMESPACE = "bench-autoscaler"


@dataclass(frozen=True)
class Summary:
    count: int
    p50: float
    p95: float
    max: float


def percentile(values: Sequence[float], q: float) -> float:
    """The nearest-rank ``q``-th percentile (0 < q <= 100) of ``values`` (not empty)."""
    if not values:
        raise ValueError("no values")
    if not 0 < q <= 100:
        raise ValueError(f"a percentile is in (0, 100], not {q}")
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q / 100 * len(ordered)) - 1)]


def summarize(values: Sequence[float]) -> Summary:
    return Summary(len(values), percentile(values, 50), percentile(values, 95), max(values))


def spread(times: Sequence[float]) -> float:
    """Seconds between the first and the last of ``times`` (0 for fewer than two)."""
    return max(times) - min(times) if len(times) > 1 else 0.0


def phase(index: int, rounds: int) -> float:
    """Seconds after a loop to make round ``index``'s change: ``rounds`` phases spread evenly over
    one period, the first right after a loop (the slowest: the next loop is a whole period away)."""
    return index / rounds * LOOP_SECONDS


def query(name: str) -> str:
    return f'sum({METRIC}{{ms="{name}"}})'


def modelserving(name: str) -> dict[str, Any]:
    pod = {"spec": {"containers": [{"name": "engine", "image": "engine:v1"}]}}
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "ModelServing",
        "metadata": {"name": name},
        "spec": {
            "replicas": 1,
            "template": {"roles": [{"name": "r", "replicas": 1, "workerReplicas": 0, "entryTemplate": pod}]},
        },
    }


def policy(name: str, prometheus_url: str) -> dict[str, Any]:
    source = {"prometheus": {"serverURL": prometheus_url, "query": query(name)}}
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "AutoscalingPolicy",
        "metadata": {"name": name},
        "spec": {
            "metrics": [{"name": "load", "targetValue": TARGET}],
            "behavior": {"scaleUp": {"panicPolicy": {"panicThresholdPercent": 1000}}},
            "homogeneousTarget": {
                "minReplicas": LOW,
                "maxReplicas": HIGH,
                "target": {"targetRef": {"kind": "ModelServing", "name": name}, "metricSources": {"load": source}},
            },
        },
    }


class ReplicasWatch:
    """Watches the ModelServings of a namespace from now on; records when each first has
    ``spec.replicas >= replicas`` (``time.monotonic()`` at the event's arrival)."""

    def __init__(self, custom: Any, namespace: str, replicas: int, timeout: float) -> None:
        self.custom, self.namespace, self.replicas, self.timeout = custom, namespace, replicas, timeout
        self.reached: dict[str, float] = {}
        self.error: str = ""
        self._watch: Any = watch.Watch()  # type: ignore[no-untyped-call]
        raw = custom.list_namespaced_custom_object(GROUP, VERSION, namespace, MS_PLURAL, _preload_content=False)
        self._version = json.loads(raw.data)["metadata"]["resourceVersion"]
        self._thread = threading.Thread(target=self._run, name="replicas-watch", daemon=True)

    def _run(self) -> None:
        try:
            for event in self._watch.stream(
                self.custom.list_namespaced_custom_object, GROUP, VERSION, self.namespace, MS_PLURAL,
                resource_version=self._version, timeout_seconds=int(self.timeout),
            ):  # fmt: skip
                obj = event["object"]
                name = obj["metadata"]["name"]
                if int(obj["spec"].get("replicas", 1)) >= self.replicas and name not in self.reached:
                    self.reached[name] = time.monotonic()
        except Exception as exc:  # the cluster going away at the end, or a broken watch: reported
            self.error = f"{type(exc).__name__}: {exc}"

    def __enter__(self) -> ReplicasWatch:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._watch.stop()  # takes effect at the next event or the server-side timeout; daemon thread

    def wait(self, names: Sequence[str], timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if all(n in self.reached for n in names):
                return True
            time.sleep(0.02)
        return False


def _statuses_seen(custom: Any, names: set[str]) -> int:
    """How many of ``names`` the autoscaler has reconciled (a homogeneousStatus with currentReplicas)."""
    raw = custom.list_namespaced_custom_object(GROUP, VERSION, NAMESPACE, POLICY_PLURAL, _preload_content=False)
    return sum(
        1
        for p in json.loads(raw.data)["items"]
        if p["metadata"]["name"] in names
        and ((p.get("status") or {}).get("homogeneousStatus") or {}).get("currentReplicas")
    )


def _pods_running(core: Any, count: int, timeout: float) -> None:
    def running() -> int:
        raw = core.list_namespaced_pod(NAMESPACE, _preload_content=False)
        return sum(1 for p in json.loads(raw.data)["items"] if (p.get("status") or {}).get("phase") == "Running")

    wait_for(f"{count} Pods Running", running, until=lambda n: n >= count, timeout=timeout, interval=0.5)


def _latencies(
    custom: Any, endpoint: MetricsEndpoint, names: list[str], timeout: float
) -> tuple[list[float], list[float], str]:
    """Set every series in ``names`` to :data:`CHANGED` at once; the latency of each ModelServing
    that reached 2 replicas, the arrival times, and what went wrong (empty if nothing)."""
    with ReplicasWatch(custom, NAMESPACE, 2, timeout + 30) as seen:
        started = time.monotonic()
        for name in names:
            endpoint.set(METRIC, CHANGED, {"ms": name})
        done = seen.wait(names, timeout)
    arrivals = [seen.reached[n] for n in names if n in seen.reached]
    problem = "" if done else f"{len(names) - len(arrivals)} of {len(names)} not at 2 replicas within {timeout:.0f}s"
    if seen.error and not done:
        problem += f" (watch: {seen.error})"
    return [t - started for t in arrivals], arrivals, problem


def _fmt(s: Summary | None) -> str:
    if s is None:
        return "not measured"
    return f"p50 {s.p50:5.2f}s  p95 {s.p95:5.2f}s  max {s.max:5.2f}s  (n={s.count})"


def run(info: ClusterInfo, workdir: Path, rounds: int, timeout: float, progress: Callable[[str], None]) -> None:
    api = api_client(info.kubeconfig)
    core, custom = client.CoreV1Api(api), client.CustomObjectsApi(api)
    reference.install(info)
    kubeconfig = reference.token_kubeconfig(info, workdir)
    controller = reference.start(kubeconfig, workdir / "kthena-ref.log", owner_pid=os.getpid())
    solo: list[tuple[float, float]] = []  # (seconds after a loop the change came, latency)
    many: list[float] = []
    problems: list[str] = []
    rss_idle = rss_ms = 0.0
    rss_policies, cpu_per_loop, loop_work = [0.0], None, None
    try:
        with (
            MetricsEndpoint() as endpoint,
            Prometheus(targets=[endpoint.address], scrape_interval=SCRAPE_SECONDS) as prom,
        ):
            _namespace(core, NAMESPACE)
            time.sleep(2 * LOOP_SECONDS)  # a couple of (empty) loops after start
            rss_idle = _rss_tree_mb(controller.pid)

            for i in range(rounds):
                name = f"solo-{i}"
                endpoint.set(METRIC, BASELINE, {"ms": name})
                custom.create_namespaced_custom_object(GROUP, VERSION, NAMESPACE, MS_PLURAL, modelserving(name))
                custom.create_namespaced_custom_object(GROUP, VERSION, NAMESPACE, POLICY_PLURAL, policy(name, prom.url))
                wait_for(f"{name}: the baseline read", functools.partial(_statuses_seen, custom, {name}),
                         until=lambda k: k == 1, timeout=timeout, interval=0.2)  # fmt: skip
                offset = phase(i, rounds)
                time.sleep(offset)
                latencies, _, problem = _latencies(custom, endpoint, [name], timeout)
                solo += [(offset, t) for t in latencies]
                said = f"{latencies[0]:.2f}s" if latencies else problem
                progress(f"1 policy, round {i + 1}/{rounds}, changed {offset:.1f}s after a loop: {said}")
                custom.delete_namespaced_custom_object(GROUP, VERSION, NAMESPACE, POLICY_PLURAL, name)
                if problem:
                    problems.append(f"1 policy: {problem}")
                    break

            names = [f"ms-{i}" for i in range(POLICIES)]
            progress(f"creating {POLICIES} ModelServings")
            for name in names:
                endpoint.set(METRIC, BASELINE, {"ms": name})
                custom.create_namespaced_custom_object(GROUP, VERSION, NAMESPACE, MS_PLURAL, modelserving(name))
            _pods_running(core, POLICIES + rounds, timeout)
            time.sleep(2 * LOOP_SECONDS)
            rss_ms = _rss_tree_mb(controller.pid)

            progress(f"creating {POLICIES} AutoscalingPolicies")
            with peak_rss(controller.pid) as rss_policies:
                for name in names:
                    custom.create_namespaced_custom_object(
                        GROUP, VERSION, NAMESPACE, POLICY_PLURAL, policy(name, prom.url)
                    )
                wait_for(f"{POLICIES} policies reconciled", lambda: _statuses_seen(custom, set(names)),
                         until=lambda k: k == POLICIES, timeout=timeout, interval=0.5)  # fmt: skip
                cpu = _cpu_seconds(controller.pid)
                time.sleep(SETTLE_LOOPS * LOOP_SECONDS)
                cpu_per_loop = (_cpu_seconds(controller.pid) - cpu) / SETTLE_LOOPS

            progress(f"changing the {POLICIES} series at once")
            many, arrivals, problem = _latencies(custom, endpoint, names, timeout)
            if problem:
                problems.append(f"{POLICIES} policies: {problem}")
            if arrivals:
                first = min(arrivals)
                same_loop = [t for t in arrivals if t - first < LOOP_SECONDS]
                loop_work = (spread(same_loop), len(same_loop))
    except WaitTimeout as exc:
        problems.append(str(exc))
    finally:
        controller.stop()

    progress("== kthena-ref autoscaler bench ==")
    rounds_said = ", ".join(f"{t:.2f}s at +{o:.1f}s" for o, t in solo) or "not measured"
    progress(f"decision latency, 1 policy, by phase:     {rounds_said}")
    at_zero = [t for o, t in solo if o == 0.0]
    progress(f"decision latency, 1 policy, phase 0:      {_fmt(summarize(at_zero) if at_zero else None)}")
    progress(f"decision latency, {POLICIES} policies, phase 0: {_fmt(summarize(many) if many else None)}")
    progress(
        f"  = next scrape (0-{SCRAPE_SECONDS:.0f}s) + next loop (0-{LOOP_SECONDS:.0f}s, period {LOOP_SECONDS:.0f}s) "
        "+ query, decision and patch + watch delivery; stable mode (no panic), 1 -> 2 replicas; "
        "phase: how long after the loop that last read the series the change came (phase 0 waits a whole period)"
    )
    if loop_work is not None:
        progress(f"one loop's work, {POLICIES} policies: {loop_work[0]:.2f}s between its first and last scale "
                 f"write ({loop_work[1]} writes in that loop)")  # fmt: skip
    if cpu_per_loop is not None:
        progress(f"controller CPU per loop, {POLICIES} policies, nothing to change: {cpu_per_loop:.3f}s")
    progress(f"controller RSS idle (0 ModelServings, 0 policies): {rss_idle:4.0f} MiB")
    progress(f"controller RSS, {POLICIES} ModelServings, 0 policies: {rss_ms:4.0f} MiB")
    progress(f"controller peak RSS, {POLICIES} policies over {SETTLE_LOOPS}+ loops: {rss_policies[0]:4.0f} MiB")
    for problem in problems:
        progress(f"problem: {problem}")


def main(progress: Callable[[str], None] = print) -> None:
    on_cluster(run, CLUSTER, NODES, 120, progress)


if __name__ == "__main__":
    main()
