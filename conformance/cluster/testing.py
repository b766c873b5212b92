"""pytest fixtures that give tests a ready cluster: one per test run, shared by xdist workers.

Load with ``pytest_plugins = ["conformance.cluster.testing"]``. The first test that asks for
``cluster`` starts it (under a file lock, so parallel workers wait for the same cluster instead
of each starting one); the controller process stops it when the run ends. The cluster's owner is
the controller process, so if the whole run is killed the cluster's supervisor notices and tears
everything down by itself.

Provider selection: ``--cluster-provider`` / ``KTHENA_PROVIDER`` (default ``local``); for
``existing``, ``--kubeconfig`` / ``--kube-context``.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from filelock import FileLock

from .faults import FaultInjector
from .provider import ClusterInfo
from .registry import get_provider
from .spec import ClusterSpec, NodePool, Taint

RUN_ENV = "KTHENA_PYTEST_RUN"
OWNER_ENV = "KTHENA_PYTEST_OWNER"

# The embedded cluster the project's integration tests run on: a default pool, and one labelled,
# tainted pool so tests can check node configuration reaches the Nodes.
TEST_SPEC = ClusterSpec(
    node_pools=[
        NodePool(name="worker", count=2),
        NodePool(
            name="special",
            count=1,
            labels={"conformance.kthena.io/pool": "special"},
            capacity={"cpu": "8", "memory": "64Gi", "pods": "20"},
            taints=[Taint(key="conformance.kthena.io/special", value="true", effect="NoSchedule")],
        ),
    ]
)


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("kthena cluster")
    group.addoption(
        "--cluster-provider",
        default=os.environ.get("KTHENA_PROVIDER", "local"),
        help="local (embedded, default), kind or existing",
    )
    group.addoption("--kubeconfig", default=None, help="existing provider: kubeconfig path")
    group.addoption("--kube-context", default=None, help="existing provider: kubeconfig context")


def pytest_configure(config: pytest.Config) -> None:
    if not hasattr(config, "workerinput"):  # the controller (or a run without xdist)
        os.environ.setdefault(RUN_ENV, secrets.token_hex(4))
        os.environ.setdefault(OWNER_ENV, str(os.getpid()))


def pytest_unconfigure(config: pytest.Config) -> None:
    if hasattr(config, "workerinput") or os.environ.get(OWNER_ENV) != str(os.getpid()):
        return
    if config.getoption("--cluster-provider") == "local":
        from .local.provider import LocalProvider

        LocalProvider().down(cluster_name())


def cluster_name() -> str:
    return f"pytest-{os.environ[RUN_ENV]}"


def shared_dir(factory: pytest.TempPathFactory) -> Path:
    """A directory every xdist worker of this run shares (for locks around once-only setup)."""
    base = factory.getbasetemp()
    # Under xdist each worker's basetemp is <root>/popen-gwN: share the root.
    return base.parent if base.name.startswith("popen-gw") else base


@pytest.fixture(scope="session")
def cluster_crds() -> list[dict[str, Any]]:
    """CRDs the cluster installs while it starts (see ``ClusterSpec.crds``): none by default.
    Override this fixture in a conftest to have them Established before kube-controller-manager
    starts, so its garbage collector knows them from the first test on."""
    return []


@pytest.fixture(scope="session")
def cluster(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, cluster_crds: list[dict[str, Any]]
) -> Iterator[ClusterInfo]:
    """A ready cluster for the whole test run."""
    name = request.config.getoption("--cluster-provider")
    provider = get_provider(
        name, kubeconfig=request.config.getoption("--kubeconfig"), context=request.config.getoption("--kube-context")
    )
    spec = TEST_SPEC.model_copy(update={"name": cluster_name(), "crds": cluster_crds})
    lock = FileLock(str(shared_dir(tmp_path_factory) / f"{spec.name}.lock"))
    with lock:
        status = provider.status(spec.name)
        if status and status.get("phase") == "ready" and status.get("live", True):
            info = provider.info(spec.name)
        else:
            info = provider.up(spec, owner_pid=int(os.environ.get(OWNER_ENV, os.getpid())))
    yield info


@pytest.fixture(scope="session")
def api_client(cluster: ClusterInfo) -> Any:
    """An official-client ``ApiClient`` for the cluster's admin kubeconfig."""
    from .kube import api_client as make_client

    return make_client(cluster.kubeconfig, cluster.context)


@pytest.fixture(scope="session")
def faults(cluster: ClusterInfo, request: pytest.FixtureRequest) -> FaultInjector:
    provider = get_provider(request.config.getoption("--cluster-provider"))
    return provider.fault_injector(cluster)


@pytest.fixture
def namespace(api_client: Any) -> Iterator[str]:
    """A fresh namespace for one test (its default ServiceAccount exists), deleted afterwards."""
    from kubernetes import client

    from ..framework.waits import wait_for

    core = client.CoreV1Api(api_client)
    name = f"t-{secrets.token_hex(4)}"
    core.create_namespace(
        client.V1Namespace(metadata=client.V1ObjectMeta(name=name, labels={"conformance.kthena.io/test": "true"}))
    )
    wait_for(
        f"ServiceAccount {name}/default", lambda: core.read_namespaced_service_account("default", name), timeout=30
    )
    yield name
    core.delete_namespace(name, propagation_policy="Background")
