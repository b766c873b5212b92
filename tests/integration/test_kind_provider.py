"""The kind provider for real (issue 32): ``cluster up --provider kind`` on this machine (the
harness's own Docker engine, kind and the node image built here), a multi-node cluster Ready with
its declarations, a small selection of the HeadlessServiceDNS profile run against it (in-container
DNS on a real kubelet, the entry Service), ``cluster down``, and the host equal to its
snapshot afterwards; bad input refused in one line with nothing left behind.

Marker ``kind`` (and ``serial``: the engine holds the host-wide lock real nodes take). Cost: a warm
run (node image cached by content in the engine's data root under ~/.cache) is about a cluster
start; a cold one builds kind, kubeadm, kubectl, kube-proxy, the Debian root file system and the
node image first (figures in docs/cluster.md). Skipped unless root on Linux; ``KTHENA_REQUIRE_KIND=1``
makes a skip a failure.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conformance.cluster.docker_engine import DockerEngine
from conformance.cluster.realnode import host

pytestmark = [pytest.mark.kind, pytest.mark.serial, pytest.mark.slow]

CLI = [sys.executable, "-m", "conformance.cli"]
NAME = "kt-kind"


LOCK_WAIT = 900.0  # seconds to wait for another run's real nodes (they hold the host lock) to go


def _require() -> None:
    from conformance.cluster.realnode.fleet import host_lock_holder
    from conformance.framework.waits import wait_for

    why = None
    if sys.platform != "linux" or os.geteuid() != 0:
        why = "the kind provider starts its own Docker engine here: needs root on Linux"
    elif DockerEngine().external_host() is not None:
        why = "a Docker engine not started by the harness answers: its host changes are not the harness's to check"
    else:
        try:
            wait_for("the host lock (real nodes of another run)", lambda: host_lock_holder() is None,
                     timeout=LOCK_WAIT, interval=2.0)  # fmt: skip
        except Exception:
            why = f"real nodes of another run hold the host lock ({host_lock_holder()}): a kind cluster is refused beside them"
    if why is not None:
        if os.environ.get("KTHENA_REQUIRE_KIND") == "1":
            pytest.fail(why)
        pytest.skip(why)


def _cli(*args: str, timeout: float = 3600) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=timeout, check=False)


def test_kind_cluster_lifecycle_one_profile_and_the_host_after_down(tmp_path: Path) -> None:
    _require()
    engine = DockerEngine()
    assert not engine.own_running(), "the harness's Docker engine runs already (another kind cluster?)"
    before = engine.take_snapshot()
    try:
        up = _cli("cluster", "up", "--provider", "kind", "--name", NAME, "--nodes", "2")
        assert up.returncode == 0, up.stderr[-3000:]
        kubeconfig = up.stdout.strip().splitlines()[-1]
        nodes = subprocess.run(
            ["docker", "exec", f"{NAME}-control-plane", "kubectl", "--kubeconfig=/etc/kubernetes/admin.conf",
             "get", "nodes", "-o", "json"],
            env=engine.env(), capture_output=True, text=True, check=True, timeout=60,
        )  # fmt: skip
        items = json.loads(nodes.stdout)["items"]
        assert len(items) == 3, [i["metadata"]["name"] for i in items]
        for item in items:
            ready = {c["type"]: c["status"] for c in item["status"]["conditions"]}["Ready"]
            assert ready == "True", item["metadata"]["name"]
            assert item["status"]["nodeInfo"]["kubeletVersion"] == "v1.36.3"

        taken = _cli("cluster", "up", "--provider", "kind", "--name", NAME)
        assert taken.returncode == 0, "the harness's own running cluster is found again, not refused"

        # A small, cheap selection: in-container DNS (a real kubelet's container) and the entry Service.
        report = tmp_path / "report"
        run = _cli("run", "--provider", "existing", "--kubeconfig", kubeconfig, "--context", f"kind-{NAME}",
                   "--profile", "HeadlessServiceDNS", "--id", "dns/in-container/*", "--id", "dns/entry-service/*",
                   "--report-dir", str(report))  # fmt: skip
        assert (report / "conformance-report.json").exists(), run.stderr[-3000:]
        data = json.loads((report / "conformance-report.json").read_text())
        outcomes = {t["id"]: t["outcome"] for t in data["tests"]}
        assert outcomes["dns/in-container/hostname-and-addresses"] == "passed", outcomes  # observed in a container
        assert all(o == "passed" for i, o in outcomes.items() if i.startswith("dns/entry-service/")), outcomes
        assert data["cluster"]["realNodes"]["images"]["v1"] == "kthena-conformance.local/workload:v1"
    finally:
        down = _cli("cluster", "down", "--provider", "kind", "--name", NAME, timeout=600)
    assert down.returncode == 0, down.stderr[-2000:]
    assert not engine.own_running()
    assert host.diff(before, engine.take_snapshot()).lines() == []


def test_a_kind_cluster_named_like_a_foreign_one_is_refused(tmp_path: Path) -> None:
    _require()
    engine = DockerEngine()
    assert not engine.own_running()
    before = engine.take_snapshot()
    bad = _cli("cluster", "up", "--provider", "kind", "--name", "Not_A_Valid_Name!")
    assert bad.returncode != 0
    assert "Traceback" not in bad.stderr
    assert not engine.own_running()
    assert host.diff(before, engine.take_snapshot()).lines() == []
