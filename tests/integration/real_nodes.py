"""What the real-node tests share: when they may run, the host snapshot they compare, Pods on a
real node (running the harness's workload image, exec'd into through the API server), and
:func:`host_turn`, the turn tests of one pass take at the host's real nodes."""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from filelock import FileLock
from kubernetes import client

from conformance.cluster.realnode import config as cfg
from conformance.cluster.realnode import host, images, preflight
from conformance.cluster.realnode.node import PROCESS_BINARIES, REAL_NODE_TAINT, WATCHED_PATHS
from conformance.cluster.testing import shared_dir
from conformance.framework.realnodes import run_in
from conformance.framework.waits import wait_for

POD_TIMEOUT = 90.0  # Pod create to Running: ~0.3 s measured (make bench), generous for a loaded CI machine
V1, V2 = images.WORKLOAD_IMAGES["v1"], images.WORKLOAD_IMAGES["v2"]


@contextmanager
def host_turn(factory: pytest.TempPathFactory) -> Iterator[None]:
    """Held while a cluster of the test has (or may have) real nodes: one cluster at a time may run
    them on a host (its lock refuses a second at once), so tests of one pass that want them on
    different xdist workers (the control run, the installed wheel) take turns through a file lock in
    the directory every worker shares, instead of one failing."""
    with FileLock(str(shared_dir(factory) / "real-nodes.lock")):
        yield


def unavailable(reason: str) -> None:
    """Skip, naming what is missing; fail instead under ``KTHENA_REQUIRE_REAL_NODES=1`` (CI), so a
    run never passes by skipping."""
    if os.environ.get("KTHENA_REQUIRE_REAL_NODES") == "1":
        pytest.fail(f"real nodes are required here (KTHENA_REQUIRE_REAL_NODES=1) but {reason}")
    pytest.skip(reason)


def require_host() -> None:
    reqs = preflight.evaluate(preflight.gather_facts())
    if not preflight.usable(reqs):
        unavailable(preflight.summary(reqs))


def require_binaries(bin_dir: Path) -> None:
    missing = [b for b in PROCESS_BINARIES if not (bin_dir / b).exists()]
    if missing:
        unavailable(
            f"real-node binaries not built: {', '.join(missing)} (kthena-conformance binaries build --real-nodes)"
        )


def built_binaries() -> Path:
    """The pinned binary directory with the real nodes' binaries in it, for a test that starts real
    nodes; skips (or fails where real nodes are required) on a host that cannot run them."""
    from conformance.cluster.binaries import BinaryCache
    from conformance.cluster.versions import PINNED

    require_host()
    found = BinaryCache().load(PINNED)
    assert found is not None, "run `make binaries` first"
    require_binaries(found.directory)
    return found.directory


def snapshot(bin_dir: Path, nodes: Sequence[str]) -> host.HostSnapshot:
    """The host as the real nodes ``nodes`` could change it (only the real-node executables'
    processes count, never a control plane sharing the directory)."""
    cgroups = [f"{cfg.CGROUP_PREFIX}{n}" for n in nodes]
    return host.take_snapshot(WATCHED_PATHS, [bin_dir / b for b in PROCESS_BINARIES], cgroups)


def pod(
    name: str, node: str, image: str = V1, *, spec: Mapping[str, Any] | None = None, **container: Any
) -> dict[str, Any]:
    """A Pod pinned to ``node`` (tolerating the test taint) running ``image`` without a pull."""
    return {
        "metadata": {"name": name, "labels": {"app": name}},
        "spec": {
            "nodeSelector": {"kubernetes.io/hostname": node},
            "tolerations": [{"key": REAL_NODE_TAINT["key"], "operator": "Exists"}],
            "automountServiceAccountToken": False,
            "terminationGracePeriodSeconds": 1,
            "containers": [{"name": "main", "image": image, "imagePullPolicy": "IfNotPresent", **container}],
            **(spec or {}),
        },
    }


def running(core: client.CoreV1Api, namespace: str, body: dict[str, Any]) -> Any:
    """Create ``body`` and wait until it is Running."""
    name = body["metadata"]["name"]
    core.create_namespaced_pod(namespace, body)
    return wait_for(
        f"Pod {name} Running",
        lambda: core.read_namespaced_pod(name, namespace),
        until=lambda p: p.status.phase == "Running",
        describe=lambda p: f"phase {p.status.phase}, {p.status.container_statuses}",
        timeout=POD_TIMEOUT,
    )


def in_container(core: client.CoreV1Api, namespace: str, name: str, *command: str) -> str:
    """``command`` run in the Pod's container through the API server (exec); its output."""
    return run_in(core, namespace, name, "main", *command)
