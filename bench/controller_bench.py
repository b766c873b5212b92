"""``make bench``: how fast the reference controller brings a ModelServing up, and its memory.

Prints, in one run on one embedded cluster (4 kwok nodes, room for 1,000 Pods each), with the
reference controller running as it does in the suite (least-privilege token, ``--workers 8``):

- time to Available for a ModelServing of 50 ServingGroups x 2 roles x (1 entry + 3 workers) =
  400 Pods: from the create call until ``status.availableReplicas == 50 == status.replicas`` and
  ``status.observedGeneration == metadata.generation``, polled every 0.1 s;
- the floor: the same 400 Pods (same Pod spec, other names, without the controller's labels so it
  ignores them) created directly by one asyncio client with 32 requests in flight, until every one
  is Running and Ready (listed every 0.1 s once the creates have returned); and the ratio;
- the controller's peak resident memory (itself and any children, sampled every 0.2 s) while a
  ModelServing of 2,000 Pods (250 groups x 2 roles x 4 Pods) becomes Available, in a freshly
  started controller once the earlier namespaces are gone, and how long that took;
- the CPU time the controller used in each of those steps (the machine's cores are shared with
  the whole cluster, so a busy controller also slows the API server, scheduler and kwok).

A ModelServing of 4 Pods is brought up first, untimed, so no figure pays for first-use costs.
The 400-Pod pair runs ``BENCH_ROUNDS`` times (default 3, alternating which goes first, each round
in namespaces of its own) and the medians are reported.

Targets (issue 3): 400 Pods Available in <= 20 s and <= 2x the floor; controller peak RSS at
2,000 Pods <= 200 MB. A step that takes longer than ``BENCH_TIMEOUT`` seconds (default 180) is
reported with the last status seen, and no further rounds (nor the 2,000-Pod step) run.
``BENCH_LOG_DIR`` keeps the controller's logs in that directory. Nothing here is asserted: the
figures are for people to read.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import statistics
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil
from kubernetes import client

from conformance.cluster.kube import api_client
from conformance.cluster.local.provider import LocalProvider
from conformance.cluster.provider import ClusterInfo
from conformance.cluster.spec import ClusterSpec, NodePool
from conformance.framework.waits import WaitTimeout, wait_for
from conformance.implementations import reference

GROUP, VERSION, PLURAL = "workload.serving.volcano.sh", "v1alpha1", "modelservings"
CLUSTER = "bench-controller"
NODES = 4
CAPACITY = {"cpu": "1000", "memory": "4Ti", "pods": "1000"}
ROLES, PODS_PER_ROLE = ("prefill", "decode"), 4  # 1 entry + 3 workers
GROUPS, BIG_GROUPS = 50, 250  # 400 and 2,000 Pods
PODS, BIG_PODS = GROUPS * len(ROLES) * PODS_PER_ROLE, BIG_GROUPS * len(ROLES) * PODS_PER_ROLE
IN_FLIGHT = 32
WORKERS = ("--workers", "8")
TIME_TARGET, RATIO_TARGET, RSS_TARGET_MB = 20.0, 2.0, 200.0
POD_SPEC: dict[str, Any] = {
    "schedulerName": "default-scheduler",
    "containers": [{"name": "engine", "image": "engine:v1", "resources": {"requests": {"cpu": "10m"}}}],
}


@dataclass
class Step:
    """One timed step: seconds (None if it timed out), what it last saw then, and extra figures."""

    seconds: float | None
    last: str = ""
    figures: dict[str, float] = field(default_factory=dict)


def _modelserving(name: str, groups: int) -> dict[str, Any]:
    def role(role_name: str) -> dict[str, Any]:
        return {
            "name": role_name,
            "replicas": 1,
            "workerReplicas": PODS_PER_ROLE - 1,
            "entryTemplate": {"spec": POD_SPEC},
            "workerTemplate": {"spec": POD_SPEC},
        }

    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "ModelServing",
        "metadata": {"name": name},
        "spec": {
            "replicas": groups,
            "schedulerName": "default-scheduler",
            "template": {"roles": [role(r) for r in ROLES]},
        },
    }


def _namespace(core: Any, name: str) -> None:
    core.create_namespace({"metadata": {"name": name}})
    wait_for(f"ServiceAccount {name}/default", lambda: core.read_namespaced_service_account("default", name))


def _process_tree(pid: int) -> list[psutil.Process]:
    """``pid`` and its descendants (empty when it is gone)."""
    try:
        proc = psutil.Process(pid)
        return [proc, *proc.children(recursive=True)]
    except psutil.NoSuchProcess:
        return []


def _cpu_seconds(pid: int) -> float:
    total = 0.0
    for p in _process_tree(pid):
        with contextlib.suppress(psutil.NoSuchProcess):
            times = p.cpu_times()
            total += times.user + times.system
    return total


def bring_up(custom: Any, namespace: str, name: str, groups: int, controller_pid: int, timeout: float) -> Step:
    """From the create call until the ModelServing is Available."""

    def status() -> dict[str, Any]:
        ms = custom.get_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, name)
        return {**(ms.get("status") or {}), "generation": ms["metadata"]["generation"]}

    def available(s: dict[str, Any]) -> bool:
        return bool(
            s.get("availableReplicas") == groups == s.get("replicas") and s.get("observedGeneration") == s["generation"]
        )

    cpu = _cpu_seconds(controller_pid)
    started = time.monotonic()
    custom.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, _modelserving(name, groups))
    try:
        wait_for(f"{name}: {groups} ServingGroups available", status, until=available, timeout=timeout, interval=0.1)
    except WaitTimeout as exc:
        return Step(None, str(exc))
    seconds = time.monotonic() - started
    return Step(seconds, figures={"cpu": _cpu_seconds(controller_pid) - cpu})


def _ready_pods(core: Any, namespace: str) -> int:
    """Pods in ``namespace`` that are Running and Ready (raw JSON: the client's models are slow)."""
    raw = core.list_namespaced_pod(namespace, _preload_content=False)
    count = 0
    for pod in json.loads(raw.data)["items"]:
        status = pod.get("status") or {}
        conditions = status.get("conditions") or []
        if status.get("phase") == "Running" and any(c["type"] == "Ready" and c["status"] == "True" for c in conditions):
            count += 1
    return count


async def _create_all(kubeconfig: Path, namespace: str, bodies: list[dict[str, Any]]) -> None:
    from kubernetes_asyncio import client as aclient
    from kubernetes_asyncio import config as aconfig

    configuration = aclient.Configuration()
    await aconfig.load_kube_config(config_file=str(kubeconfig), client_configuration=configuration)
    configuration.connection_pool_maxsize = IN_FLIGHT
    async with aclient.ApiClient(configuration) as api:
        core: Any = aclient.CoreV1Api(api)
        gate = asyncio.Semaphore(IN_FLIGHT)

        async def create(body: dict[str, Any]) -> None:
            async with gate:
                await core.create_namespaced_pod(namespace, body, _preload_content=False)

        await asyncio.gather(*(create(b) for b in bodies))


def floor(kubeconfig: Path, core: Any, namespace: str, groups: int, timeout: float) -> Step:
    """A client creating the same Pods directly, until it sees them all Running and Ready."""
    bodies = [
        {"metadata": {"name": f"floor-{g}-{r}-0-{k}", "labels": {"bench": "floor"}}, "spec": POD_SPEC}
        for g in range(groups)
        for r in ROLES
        for k in range(PODS_PER_ROLE)
    ]
    started = time.monotonic()
    asyncio.run(_create_all(kubeconfig, namespace, bodies))
    created = time.monotonic() - started
    try:
        wait_for(
            f"{len(bodies)} Pods Running and Ready",
            lambda: _ready_pods(core, namespace),
            until=lambda n: n >= len(bodies),
            timeout=timeout,
            interval=0.1,
        )
    except WaitTimeout as exc:
        return Step(None, str(exc), {"creates": created})
    return Step(time.monotonic() - started, figures={"creates": created})


def _rss_tree_mb(pid: int) -> float:
    total = 0
    for p in _process_tree(pid):
        with contextlib.suppress(psutil.NoSuchProcess):
            total += p.memory_info().rss
    return total / 2**20


@contextlib.contextmanager
def peak_rss(pid: int, interval: float = 0.2) -> Iterator[list[float]]:
    """Samples ``pid``'s tree every ``interval``; the yielded list holds the peak (MiB) afterwards."""
    peak = [_rss_tree_mb(pid)]
    stop = threading.Event()

    def sample() -> None:
        while not stop.wait(interval):
            peak[0] = max(peak[0], _rss_tree_mb(pid))

    thread = threading.Thread(target=sample, name="rss-sampler", daemon=True)
    thread.start()
    try:
        yield peak
    finally:
        stop.set()
        thread.join()
        peak[0] = max(peak[0], _rss_tree_mb(pid))


def _delete_namespaces(core: Any, names: list[str], timeout: float) -> bool:
    """Delete ``names`` and wait until they (and so every object in them) are gone."""
    for name in names:
        core.delete_namespace(name, propagation_policy="Background")

    def remaining() -> list[str]:
        left = {n["metadata"]["name"] for n in json.loads(core.list_namespace(_preload_content=False).data)["items"]}
        return [n for n in names if n in left]

    try:
        wait_for("earlier namespaces deleted", remaining, until=lambda left: not left, timeout=timeout, interval=0.5)
    except WaitTimeout:
        return False
    return True


def _log_summary(log: Path) -> str:
    text = log.read_text(errors="replace")
    failures = re.findall(r"reconcile (\S+) failed \((.{0,120})", text)
    warnings = text.count(" WARNING ")
    if not failures:
        return f"controller log: no failed reconciles, {warnings} warnings"
    return f"controller log: {len(failures)} failed reconciles, {warnings} warnings, e.g. {failures[0][1]!r}"


def _one(step: Step) -> str:
    return f"{step.seconds:.2f}s" if step.seconds is not None else "timed out"


def _fmt(steps: list[Step]) -> str:
    done = [s.seconds for s in steps if s.seconds is not None]
    if not done:
        return "timed out"
    runs = ", ".join(f"{s.seconds:.2f}" if s.seconds is not None else "timeout" for s in steps)
    return f"median {statistics.median(done):6.2f}s  (runs: {runs})"


def _median(steps: list[Step], key: str | None = None) -> float | None:
    values = [(s.figures[key] if key else s.seconds) for s in steps if s.seconds is not None]
    return statistics.median(v for v in values if v is not None) if values else None


def run(info: ClusterInfo, workdir: Path, rounds: int, timeout: float, progress: Callable[[str], None]) -> None:
    api = api_client(info.kubeconfig)
    core, custom = client.CoreV1Api(api), client.CustomObjectsApi(api)
    reference.install(info)
    kubeconfig = reference.token_kubeconfig(info, workdir)
    log = workdir / "kthena-ref.log"
    controller = reference.start(kubeconfig, log, owner_pid=os.getpid(), extra=WORKERS)
    controller_steps: list[Step] = []
    floor_steps: list[Step] = []
    namespaces = ["bench-warmup"]
    big, idle, rss_big = Step(None), 0.0, [0.0]
    try:
        _namespace(core, "bench-warmup")
        progress("warm-up: a ModelServing of 4 Pods")
        warm = bring_up(custom, "bench-warmup", "warmup", 1, controller.pid, timeout)
        if warm.seconds is None:
            progress(f"  warm-up {warm.last}")
        with peak_rss(controller.pid) as rss_small:
            for i in range(rounds):
                floor_ns, ms_ns = f"bench-floor-{i}", f"bench-ms-{i}"
                for ns in (floor_ns, ms_ns):
                    _namespace(core, ns)
                namespaces += [floor_ns, ms_ns]

                def the_floor(ns: str = floor_ns) -> None:
                    floor_steps.append(floor(info.kubeconfig, core, ns, GROUPS, timeout))

                def the_controller(ns: str = ms_ns) -> None:
                    controller_steps.append(bring_up(custom, ns, "llm", GROUPS, controller.pid, timeout))

                for measure in (the_floor, the_controller) if i % 2 == 0 else (the_controller, the_floor):
                    measure()
                progress(
                    f"round {i + 1}/{rounds}: controller {_one(controller_steps[-1])}, floor {_one(floor_steps[-1])}"
                )
                if controller_steps[-1].seconds is None or floor_steps[-1].seconds is None:
                    break
        progress(f"  {_log_summary(log)}")

        if controller_steps and controller_steps[-1].seconds is not None:
            progress("stopping the controller, deleting the earlier namespaces, starting a fresh controller")
            controller.stop()
            if not _delete_namespaces(core, namespaces, timeout):
                progress("  (earlier namespaces still present after the timeout; measuring anyway)")
            log_big = workdir / "kthena-ref-big.log"
            controller = reference.start(kubeconfig, log_big, owner_pid=os.getpid(), extra=WORKERS)
            idle = _rss_tree_mb(controller.pid)
            _namespace(core, "bench-big")
            progress(f"controller: a ModelServing of {BIG_GROUPS} groups ({BIG_PODS} Pods), sampling RSS")
            with peak_rss(controller.pid) as rss_big:
                big = bring_up(custom, "bench-big", "big", BIG_GROUPS, controller.pid, timeout)
            progress(f"  {_log_summary(log_big)}")
        else:
            progress(f"skipping the {BIG_PODS}-Pod step: the {PODS}-Pod one timed out")
    finally:
        controller.stop()

    progress("== kthena-ref controller bench ==")
    progress(f"{PODS} Pods Available (controller): {_fmt(controller_steps)}   target <= {TIME_TARGET:.0f}s")
    progress(f"{PODS} Pods Ready (floor, {IN_FLIGHT} in flight): {_fmt(floor_steps)}")
    ms_s, floor_s = _median(controller_steps), _median(floor_steps)
    if ms_s is not None and floor_s is not None:
        progress(f"ratio controller/floor (medians):  {ms_s / floor_s:6.2f}    target <= {RATIO_TARGET:.0f}x")
    creates = _median(floor_steps, "creates")
    if creates is not None:
        progress(f"  floor: its create calls alone took {creates:.2f}s (median)")
    cpu = _median(controller_steps, "cpu")
    if cpu is not None:
        progress(f"  controller CPU time per {PODS}-Pod run: {cpu:.2f}s (median)")
    progress(f"controller peak RSS, {PODS}-Pod rounds: {rss_small[0]:4.0f} MiB")
    big_s = f"{big.seconds:6.2f}s" if big.seconds is not None else "timed out" if big.last else "skipped"
    big_cpu = f" (controller CPU time {big.figures['cpu']:.2f}s)" if big.seconds is not None else ""
    progress(f"{BIG_PODS} Pods Available (controller): {big_s}{big_cpu}")
    rss = f"{rss_big[0]:4.0f} MiB" if big.seconds is not None or big.last else "not measured"
    progress(
        f"controller peak RSS at {BIG_PODS} Pods: {rss}   target <= {RSS_TARGET_MB:.0f} MB "
        f"({RSS_TARGET_MB * 1e6 / 2**20:.0f} MiB); {idle:.0f} MiB idle after start"
    )
    for timed_out in (*floor_steps, *controller_steps, big):
        if timed_out.last:
            progress(f"timed out: {timed_out.last}")


Runner = Callable[[ClusterInfo, Path, int, float, Callable[[str], None]], None]


def on_cluster(
    runner: Runner, cluster: str, nodes: int, default_timeout: float, progress: Callable[[str], None] = print
) -> None:
    """Run a bench on a fresh ``nodes``-node embedded cluster, with ``BENCH_ROUNDS`` rounds, a
    ``BENCH_TIMEOUT`` per wait and its logs in ``BENCH_LOG_DIR`` (a temporary directory when unset);
    the cluster is torn down however the bench ends. Shared by the controller and autoscaler benches."""
    rounds = int(os.environ.get("BENCH_ROUNDS", "3"))
    timeout = float(os.environ.get("BENCH_TIMEOUT", str(default_timeout)))
    provider = LocalProvider()
    spec = ClusterSpec(name=cluster, node_pools=[NodePool(name="worker", count=nodes, capacity=CAPACITY)])
    try:
        progress(f"starting a {nodes}-node embedded cluster")
        info = provider.up(spec, progress=lambda m: progress(f"  cluster: {m}"), owner_pid=os.getpid())
        keep = os.environ.get("BENCH_LOG_DIR")
        if keep:
            Path(keep).mkdir(parents=True, exist_ok=True)
            runner(info, Path(keep), rounds, timeout, progress)
        else:
            with tempfile.TemporaryDirectory(prefix=f"kthena-{cluster}-") as workdir:
                runner(info, Path(workdir), rounds, timeout, progress)
    finally:
        provider.down(cluster)


def main(progress: Callable[[str], None] = print) -> None:
    on_cluster(run, CLUSTER, NODES, 180, progress)


if __name__ == "__main__":
    main()
