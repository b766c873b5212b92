"""Real nodes start on a host whose ``/sys/fs/cgroup`` holds what Docker leaves there (issue 33).

The crash this guards against: after Debian's dockerd ran one container on a cgroup v1 host,
``/sys/fs/cgroup`` (a read-only tmpfs) held plain directories ``cpu,cpuacct``, ``hugetlb``,
``net_cls,net_prio``, ``perf_event`` and symlinks ``net_cls``, ``net_prio`` beside the real
hierarchies, and ``cluster up --real-nodes`` died with ``OSError: [Errno 30] Read-only file system:
'/sys/fs/cgroup/cpu,cpuacct/...'`` while its preflight said the host was fine.

The test makes that layout without touching the host: a private mount namespace gets a fresh
tmpfs at ``/sys/fs/cgroup`` with the host's hierarchies bound back into it, the stray directories
and symlinks made beside them, then the tmpfs remounted read-only; ``cluster up --real-nodes 1``
runs inside it (its supervisor stays there), the node becomes Ready, ``cluster down`` (from the
host's namespace) takes it down and the host is as it was. Needs a cgroup v1 host (where the
layout occurs) and what every real-node test needs.
"""

from __future__ import annotations

import shlex
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path, PurePosixPath

import pytest
from kubernetes import client

from conformance.cluster.kube import api_client
from conformance.cluster.local.provider import LocalProvider
from conformance.cluster.realnode import host
from conformance.framework.waits import wait_for

from .conftest import isolated_cache
from .real_nodes import built_binaries, snapshot

pytestmark = [pytest.mark.serial, pytest.mark.slow]

CLI = [sys.executable, "-m", "conformance.cli"]
STRAY_DIRS = ("cpu,cpuacct", "hugetlb", "net_cls,net_prio", "perf_event")
STRAY_LINKS = {"net_cls": "net_cls,net_prio", "net_prio": "net_cls,net_prio"}


@pytest.fixture
def bin_dir() -> Path:
    return built_binaries()


@pytest.fixture
def isolated(tmp_path: Path, bin_dir: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    yield from isolated_cache(tmp_path, bin_dir, monkeypatch)


def docker_layout(old: Path) -> str:
    """The shell lines that give this mount namespace Docker's leftover layout (see the module)."""
    mounts = host.parse_cgroup_mounts(Path("/proc/self/mountinfo").read_text())
    names = [str(PurePosixPath(m.path).relative_to(host.CGROUP_FS)) for m in mounts]
    lines = [
        "set -e",
        "mount --make-rprivate /",
        f"mkdir -p {shlex.quote(str(old))}",
        f"mount --rbind /sys/fs/cgroup {shlex.quote(str(old))}",
        "mount -t tmpfs -o mode=755 tmpfs /sys/fs/cgroup",
    ]
    for name in names:
        target = shlex.quote(f"/sys/fs/cgroup/{name}")
        lines += [f"mkdir -p {target}", f"mount --bind {shlex.quote(str(old / name))} {target}"]
    lines += [f"mkdir {shlex.quote('/sys/fs/cgroup/' + d)}" for d in STRAY_DIRS if d not in names]
    lines += [f"ln -s {shlex.quote(t)} /sys/fs/cgroup/{link}" for link, t in STRAY_LINKS.items() if link not in names]
    lines += ["mount -o remount,ro /sys/fs/cgroup", 'exec "$0" "$@"']
    return "\n".join(lines)


def test_real_nodes_start_beside_docker_s_stray_cgroup_directories(
    isolated: Path, bin_dir: Path, tmp_path: Path
) -> None:
    if (Path("/sys/fs/cgroup") / "cgroup.controllers").exists():
        pytest.skip("a cgroup v2 host: Docker's stray v1 directories do not occur there")
    before = snapshot(bin_dir, ["real-0"])
    script = docker_layout(tmp_path / "cgroup-hierarchies")
    up = subprocess.run(
        ["unshare", "--mount", "--propagation", "private", "sh", "-c", script,
         *CLI, "cluster", "up", "--name", "strays", "--nodes", "1", "--real-nodes", "1"],
        capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    try:
        assert up.returncode == 0, up.stderr
        assert "Traceback" not in up.stderr and "Read-only file system" not in up.stderr, up.stderr
        core = client.CoreV1Api(api_client(Path(up.stdout.strip())))
        wait_for(
            "node real-0 Ready",
            lambda: core.read_node("real-0"),
            until=lambda n: any(c.type == "Ready" and c.status == "True" for c in n.status.conditions or []),
            timeout=60,
        )
    finally:
        down = subprocess.run(
            [*CLI, "cluster", "down", "--name", "strays"], capture_output=True, text=True, timeout=300, check=False
        )
    assert down.returncode == 0, down.stderr
    LocalProvider().sweep()
    left = host.diff(before, snapshot(bin_dir, ["real-0"])).lines()
    assert not left, "the host differs from before the cluster started:\n" + "\n".join(left)
