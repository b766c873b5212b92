"""Clusters of their own: start, stop, and every way a start can go wrong, leaving nothing behind.

Each test brings up (or fails to bring up) a private embedded cluster under a temporary cache
root, so these run alone (marker ``serial``) after the shared-cluster tests. "Nothing behind"
means: no process whose command line names the run directory, the run directory removed, and the
cluster's ports free again.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from conformance.cluster.binaries import ALL_BINARIES, BinaryCache, recipe_digest
from conformance.cluster.errors import HarnessError
from conformance.cluster.local.processes import port_in_use
from conformance.cluster.local.provider import LocalProvider
from conformance.cluster.spec import ClusterSpec, NodePool
from conformance.cluster.versions import PINNED
from conformance.framework.waits import wait_for

from .conftest import isolated_cache

pytestmark = [pytest.mark.serial, pytest.mark.slow]

SMALL = ClusterSpec(name="life", node_pools=[NodePool(name="worker", count=1)])
CLI = [sys.executable, "-m", "conformance.cli"]


@pytest.fixture(scope="module")
def real_bin_dir() -> Path:
    found = BinaryCache().load(PINNED)
    assert found is not None, "run `make binaries` first"
    return found.directory


@pytest.fixture
def isolated(tmp_path: Path, real_bin_dir: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A private cache root (runs and all) that still uses the real, already-built binaries."""
    yield from isolated_cache(tmp_path, real_bin_dir, monkeypatch)


def processes_naming(path: Path) -> list[str]:
    found = []
    for proc in psutil.process_iter(["pid", "cmdline"]):
        try:
            cmdline = " ".join(proc.info["cmdline"] or [])
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
        if str(path) in cmdline and proc.info["pid"] != os.getpid() and proc.status() != psutil.STATUS_ZOMBIE:
            found.append(f"{proc.info['pid']}: {cmdline[:120]}")
    return found


def assert_nothing_left(run_dir: Path, ports: dict[str, int] | None = None) -> None:
    wait_for(f"no process naming {run_dir}", lambda: processes_naming(run_dir), until=lambda p: not p, timeout=10)
    assert not run_dir.exists(), f"{run_dir} was left behind: {list(run_dir.rglob('*'))[:5]}"
    for name, port in (ports or {}).items():
        assert not port_in_use(port), f"{name} port {port} still in use"


def cli_env(cache_root: Path, bin_dir: Path, **extra: str) -> dict[str, str]:
    return {**os.environ, "KTHENA_CACHE_DIR": str(cache_root), "KTHENA_BIN_DIR": str(bin_dir), **extra}


def test_up_then_down_leaves_no_process_port_or_directory(isolated: Path) -> None:
    provider = LocalProvider()
    info = provider.up(SMALL)
    run_dir = isolated / SMALL.name
    state = provider.status(SMALL.name)
    assert state is not None and state["phase"] == "ready" and state["live"] is True
    # CoreDNS runs too when the binary directory has it (KTHENA_BIN_DIR picks it up).
    expected = {"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok"}
    assert set(state["components_alive"]) == expected | ({"coredns"} if state.get("dns") else set())
    assert all(state["components_alive"].values())
    assert info.kubeconfig.is_file() and info.kubeconfig.is_relative_to(run_dir)
    assert provider.down(SMALL.name) is True
    assert_nothing_left(run_dir, state["ports"])
    assert provider.down(SMALL.name) is False, "a second down has nothing to remove"


def test_up_is_idempotent_for_the_same_spec_and_refuses_a_different_one(isolated: Path) -> None:
    provider = LocalProvider()
    first = provider.up(SMALL)
    try:
        assert provider.up(SMALL).kubeconfig == first.kubeconfig
        other = SMALL.model_copy(update={"node_pools": [NodePool(name="worker", count=3)]})
        with pytest.raises(HarnessError, match="already running with a different spec"):
            provider.up(other)
    finally:
        provider.down(SMALL.name)
    assert_nothing_left(isolated / SMALL.name)


def test_port_clash_is_reported_and_nothing_is_left(isolated: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(HarnessError) as err:
            LocalProvider().up(SMALL.model_copy(update={"apiserver_port": port}))
    assert f"port {port}" in err.value.message and "already in use" in err.value.message
    assert "--apiserver-port" in err.value.hint
    assert_nothing_left(isolated / SMALL.name)


def test_a_binary_that_crashes_at_start_is_named_with_its_output(
    isolated: Path, tmp_path: Path, real_bin_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    broken = tmp_path / "broken-bin"
    broken.mkdir()
    for name in ALL_BINARIES:
        (broken / name).symlink_to(real_bin_dir / name)
    (broken / "kube-apiserver").unlink()
    (broken / "kube-apiserver").write_text("#!/bin/sh\necho 'E1202 boom: cannot start' >&2\nexit 3\n")
    (broken / "kube-apiserver").chmod(0o755)
    monkeypatch.setenv("KTHENA_BIN_DIR", str(broken))
    with pytest.raises(HarnessError) as err:
        LocalProvider().up(SMALL)
    assert "kube-apiserver exited with code 3 during start" in err.value.message
    assert "boom: cannot start" in err.value.message
    assert_nothing_left(isolated / SMALL.name)


def test_ctrl_c_during_up_tears_everything_down(isolated: Path, real_bin_dir: Path) -> None:
    proc = subprocess.Popen(
        [*CLI, "cluster", "up", "--name", "interrupted", "--nodes", "1"],
        env=cli_env(isolated.parent, real_bin_dir),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stderr is not None
    seen = []
    for line in proc.stderr:
        seen.append(line)
        if "starting etcd and kube-apiserver" in line:
            break
    assert any("starting etcd" in line for line in seen), seen
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=20)
    assert proc.returncode == 130, err  # interrupted (docs/cluster.md)
    assert "interrupted" in err and "Traceback" not in err
    assert_nothing_left(isolated / "interrupted")


def test_killing_the_owner_tears_the_cluster_down(isolated: Path, real_bin_dir: Path) -> None:
    script = (
        "import os, sys, time\n"
        "from conformance.cluster.local.provider import LocalProvider\n"
        "from conformance.cluster.spec import ClusterSpec, NodePool\n"
        "spec = ClusterSpec(name='owned', node_pools=[NodePool(count=1)])\n"
        "LocalProvider().up(spec, owner_pid=os.getpid())\n"
        "print('ready', flush=True)\n"
        "time.sleep(600)\n"
    )
    owner = subprocess.Popen(
        [sys.executable, "-c", script], env=cli_env(isolated.parent, real_bin_dir), stdout=subprocess.PIPE, text=True
    )
    assert owner.stdout is not None
    assert owner.stdout.readline().strip() == "ready"
    run_dir = isolated / "owned"
    state = json.loads((run_dir / "state.json").read_text())
    owner.kill()
    owner.wait()
    wait_for(
        "the supervisor to exit", lambda: psutil.pid_exists(state["supervisor_pid"]), until=lambda alive: not alive
    )
    assert_nothing_left(run_dir, state["ports"])


def test_killing_the_supervisor_kills_the_components_and_sweep_removes_the_rest(isolated: Path) -> None:
    provider = LocalProvider()
    provider.up(SMALL)
    run_dir = isolated / SMALL.name
    state = provider.status(SMALL.name)
    assert state is not None
    os.kill(state["supervisor_pid"], signal.SIGKILL)
    for name, pid in state["components"].items():
        wait_for(
            f"{name} to die with its supervisor", lambda p=pid: psutil.pid_exists(p), until=lambda alive: not alive
        )
    assert run_dir.exists(), "only the run directory can be left after a SIGKILL"
    assert provider.sweep() == [SMALL.name]
    assert_nothing_left(run_dir, state["ports"])


def test_cli_up_status_kubeconfig_down(isolated: Path, real_bin_dir: Path) -> None:
    env = cli_env(isolated.parent, real_bin_dir)
    up = subprocess.run(
        [*CLI, "cluster", "up", "--name", "cli", "--nodes", "1", "--node-label", "tier=gpu"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert up.returncode == 0, up.stderr
    kubeconfig = Path(up.stdout.strip())
    assert kubeconfig.is_file()
    assert "emulated without gang semantics" in up.stderr
    status = subprocess.run(
        [*CLI, "cluster", "status", "--name", "cli", "-o", "json"], env=env, capture_output=True, text=True, check=False
    )
    state = json.loads(status.stdout)
    # The cluster outlives the CLI that started it: detached from its owner, every process alive.
    assert state["phase"] == "ready" and state["live"] is True and state["owner_pid"] is None
    assert all(state["components_alive"].values())
    from kubernetes import client

    from conformance.cluster.kube import api_client

    nodes = client.CoreV1Api(api_client(kubeconfig)).list_node().items
    assert [n.metadata.labels["tier"] for n in nodes] == ["gpu"]
    path = subprocess.run(
        [*CLI, "cluster", "kubeconfig", "--name", "cli"], env=env, capture_output=True, text=True, check=False
    )
    assert path.stdout.strip() == str(kubeconfig)
    down = subprocess.run(
        [*CLI, "cluster", "down", "--name", "cli"], env=env, capture_output=True, text=True, timeout=30, check=False
    )
    assert down.returncode == 0 and "is down" in down.stderr
    gone = subprocess.run(
        [*CLI, "cluster", "status", "--name", "cli"], env=env, capture_output=True, text=True, check=False
    )
    assert gone.returncode == 3
    assert_nothing_left(isolated / "cli")


def test_missing_go_toolchain_with_an_empty_cache_is_one_clear_message(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "KTHENA_BIN_DIR"}
    env.update(KTHENA_CACHE_DIR=str(tmp_path / "empty-cache"), PATH=str(Path(sys.executable).parent))
    result = subprocess.run(
        [*CLI, "cluster", "up", "--name", "nogo"], env=env, capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 1
    assert "the Go toolchain was not found on PATH" in result.stderr
    assert "install Go 1.26 or newer" in result.stderr and "Traceback" not in result.stderr
    assert not (tmp_path / "empty-cache" / "clusters" / "nogo").exists()


def test_corrupt_binary_cache_is_one_clear_message(tmp_path: Path, real_bin_dir: Path) -> None:
    cache = tmp_path / "cache"
    target = cache / "bin" / PINNED.key()
    target.mkdir(parents=True)
    entries = {}
    for name in ALL_BINARIES:
        data = b"#!/bin/sh\nexit 0\n"
        (target / name).write_bytes(data)
        (target / name).chmod(0o755)
        entries[name] = {"size": len(data), "sha256": hashlib.sha256(data).hexdigest()}
    (target / "manifest.json").write_text(json.dumps({"recipe": recipe_digest(PINNED), "binaries": entries}))
    (target / "kube-apiserver").write_bytes(b"#!/bin/sh\n")  # truncated
    env = {k: v for k, v in os.environ.items() if k != "KTHENA_BIN_DIR"}
    env["KTHENA_CACHE_DIR"] = str(cache)
    result = subprocess.run(
        [*CLI, "cluster", "up", "--name", "corrupt"], env=env, capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 1
    assert "is corrupt: kube-apiserver is 10 bytes" in result.stderr
    assert "make binaries FORCE=1" in result.stderr and "Traceback" not in result.stderr


def test_a_component_restarts_in_place_and_the_cluster_keeps_its_state(isolated: Path) -> None:
    from kubernetes import client

    from conformance.cluster.kube import api_client

    provider = LocalProvider()
    info = provider.up(SMALL)
    try:
        core = client.CoreV1Api(api_client(info.kubeconfig))
        core.create_namespaced_config_map("default", {"metadata": {"name": "survivor"}})
        before = provider.status(SMALL.name)
        assert before is not None
        provider.restart_component(SMALL.name, "kube-apiserver")
        after = provider.status(SMALL.name)
        assert after is not None and after["restarts"] == {"kube-apiserver": 1}
        assert after["components"]["kube-apiserver"] != before["components"]["kube-apiserver"]
        assert after["components"]["etcd"] == before["components"]["etcd"]
        assert core.read_namespaced_config_map("survivor", "default").metadata.name == "survivor"
        with pytest.raises(HarnessError, match="no component 'kubelet'"):
            provider.restart_component(SMALL.name, "kubelet")
    finally:
        provider.down(SMALL.name)
    assert_nothing_left(isolated / SMALL.name)
