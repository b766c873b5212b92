"""``make bench``: how long the embedded cluster takes to build, start and stop, next to kwokctl.

Prints, in one run and on the same binaries:

- the cold build time when this run had to build (else the time recorded when the cache was made);
- ``cluster up`` (API ready, components healthy, every Node Ready, default ServiceAccount present)
  and ``cluster down`` (every process gone, run directory removed) for the local provider;
- the same two figures for ``kwokctl --runtime binary`` bringing up an equivalent cluster
  (RBAC and admission on, same node count, same readiness conditions), and the ratio;
- the resident memory of the cluster's processes once ready.

``BENCH_COLD=1`` also measures a cold compile: it builds every binary again into a scratch cache
with an empty Go build cache (modules already downloaded stay in GOMODCACHE, so this measures
compiling and linking, not the network); it takes several minutes on two cores.

Targets (issue 2): up <= 10 s, down <= 3 s. Rounds: ``BENCH_ROUNDS`` (default 3); the median is
reported. Nothing here is asserted: the figures are for people to read.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil

from conformance.cluster.binaries import BinaryCache, BinarySet
from conformance.cluster.kube import api_client
from conformance.cluster.local.provider import LocalProvider
from conformance.cluster.spec import ClusterSpec, NodePool
from conformance.framework.waits import wait_for

NODES = 2
UP_TARGET, DOWN_TARGET = 10.0, 3.0


def _ready(kubeconfig: Path, nodes: int) -> None:
    from kubernetes import client

    core = client.CoreV1Api(api_client(kubeconfig))

    def ready_count() -> int:
        items: list[Any] = core.list_node().items
        return sum(
            1 for n in items if any(c.type == "Ready" and c.status == "True" for c in (n.status.conditions or []))
        )

    wait_for(f"{nodes} nodes Ready", ready_count, until=lambda n: n >= nodes, timeout=60, interval=0.05)
    wait_for(
        "default ServiceAccount",
        lambda: core.read_namespaced_service_account("default", "default"),
        timeout=60,
        interval=0.05,
    )


def rss_mib(pids: list[int]) -> float:
    """The resident memory of ``pids`` together, in MiB (a process gone meanwhile counts 0)."""
    total = 0
    for pid in pids:
        with contextlib.suppress(psutil.NoSuchProcess):
            total += psutil.Process(pid).memory_info().rss
    return total / 2**20


def _procs_under(path: str) -> list[int]:
    pids = []
    for p in psutil.process_iter(["pid", "cmdline"]):
        try:
            if path in " ".join(p.info["cmdline"] or []) and p.status() != psutil.STATUS_ZOMBIE:
                pids.append(p.info["pid"])
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return pids


def _wait_gone(path: str) -> None:
    """Until no process names ``path`` (the run or work directory) on its command line."""
    wait_for(
        f"processes under {path} to exit", lambda: _procs_under(path), until=lambda p: not p, timeout=30, interval=0.02
    )


def bench_local(rounds: int) -> tuple[list[float], list[float], float]:
    provider = LocalProvider()
    spec = ClusterSpec(name="bench-local", node_pools=[NodePool(name="worker", count=NODES)])
    ups, downs, rss = [], [], 0.0
    for _ in range(rounds):
        started = time.monotonic()
        info = provider.up(spec)
        ups.append(time.monotonic() - started)
        state = provider.status(spec.name) or {}
        rss = rss_mib(list((state.get("components") or {}).values()))
        run_dir = str(info.details["run_dir"])
        started = time.monotonic()
        provider.down(spec.name)
        _wait_gone(run_dir)
        downs.append(time.monotonic() - started)
    return ups, downs, rss


def bench_kwokctl(binaries: BinarySet, rounds: int) -> tuple[list[float], list[float], float]:
    kwokctl = str(binaries.path("kwokctl"))
    ups, downs, rss = [], [], 0.0
    for _ in range(rounds):
        workdir = tempfile.mkdtemp(prefix="kthena-bench-kwokctl-")
        env = {**os.environ, "KWOK_WORKDIR": workdir}
        kubeconfig = Path(workdir) / "kubeconfig"

        def run(*args: str, env: dict[str, str] = env, workdir: str = workdir) -> None:
            subprocess.run([kwokctl, *args], env=env, cwd=workdir, check=True, capture_output=True, timeout=120)

        try:
            started = time.monotonic()
            run(
                "create", "cluster", "--name", "bench", "--runtime", "binary", "--wait", "60s",
                "--kube-authorization", "--kube-admission", "--kubeconfig", str(kubeconfig),
                "--kube-apiserver-binary", str(binaries.path("kube-apiserver")),
                "--kube-controller-manager-binary", str(binaries.path("kube-controller-manager")),
                "--kube-scheduler-binary", str(binaries.path("kube-scheduler")),
                "--etcd-binary", str(binaries.path("etcd")),
                "--kwok-controller-binary", str(binaries.path("kwok")),
            )  # fmt: skip
            run("scale", "node", "--replicas", str(NODES), "--name", "bench")
            _ready(kubeconfig, NODES)
            ups.append(time.monotonic() - started)
            rss = rss_mib(_procs_under(workdir))
            started = time.monotonic()
            run("delete", "cluster", "--name", "bench", "--kubeconfig", str(kubeconfig))
            _wait_gone(workdir)
            downs.append(time.monotonic() - started)
        finally:
            for pid in _procs_under(workdir):
                psutil.Process(pid).kill()
            shutil.rmtree(workdir, ignore_errors=True)
    return ups, downs, rss


def cold_build_seconds(progress: Callable[[str], None]) -> float:
    with tempfile.TemporaryDirectory(prefix="kthena-bench-cold-") as scratch:
        saved = os.environ.get("GOCACHE")
        os.environ["GOCACHE"] = str(Path(scratch) / "gocache")
        try:
            started = time.monotonic()
            BinaryCache(root=Path(scratch) / "bin").ensure(
                force=True, try_fallbacks=False, progress=lambda m: progress(f"  cold: {m}")
            )
            return time.monotonic() - started
        finally:
            if saved is None:
                os.environ.pop("GOCACHE", None)
            else:
                os.environ["GOCACHE"] = saved


def _fmt(values: list[float]) -> str:
    return f"median {statistics.median(values):5.2f}s  (runs: {', '.join(f'{v:.2f}' for v in values)})"


def main(progress: Callable[[str], None] = print) -> None:
    rounds = int(os.environ.get("BENCH_ROUNDS", "3"))
    if os.environ.get("BENCH_COLD") == "1":
        progress(f"cold compile (empty GOCACHE, scratch binary cache): {cold_build_seconds(progress):.0f}s")
    cache = BinaryCache()
    binaries = cache.ensure(progress=lambda m: progress(f"  build: {m}"))
    progress("== kthena-conformance cluster bench ==")
    if binaries.build_seconds is not None:
        progress(f"cold build (this run):      {binaries.build_seconds:.0f}s")
    else:
        recorded = binaries.manifest.get("build_seconds")
        built_at = binaries.manifest.get("built_at")
        progress(
            f"cold build:                 not needed (cached; the build that made the cache took {recorded}s "
            f"at {built_at}; warm Go caches make that smaller than a cold one: BENCH_COLD=1 measures one)"
        )
    local_up, local_down, local_rss = bench_local(rounds)
    kw_up, kw_down, kw_rss = bench_kwokctl(binaries, rounds)
    progress(f"local  up   ({NODES} nodes Ready): {_fmt(local_up)}   target <= {UP_TARGET:.0f}s")
    progress(f"local  down:                {_fmt(local_down)}   target <= {DOWN_TARGET:.0f}s")
    progress(f"kwokctl up  ({NODES} nodes Ready): {_fmt(kw_up)}")
    progress(f"kwokctl down:               {_fmt(kw_down)}")
    progress(f"ratio up   local/kwokctl:   {statistics.median(local_up) / statistics.median(kw_up):.2f}")
    progress(f"ratio down local/kwokctl:   {statistics.median(local_down) / statistics.median(kw_down):.2f}")
    progress(f"memory once ready (RSS):    local {local_rss:.0f} MiB, kwokctl {kw_rss:.0f} MiB")


if __name__ == "__main__":
    main()
