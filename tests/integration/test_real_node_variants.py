"""Self-validation on real nodes: the faults only a running container shows are caught.

Two broken variants whose fault is invisible to kwok (no container runs there), each judged by the
behaviour that looks inside a running container on a real node:

- the reference controller with ``hostname-as-fqdn`` (headless-service also sets
  ``setHostnameAsFQDN``): ``dns/in-container/hostname-and-addresses`` must come out non-conformant;
- the fake drivers with ``cdi-env-next-device`` (the kubelet plugin's CDI spec gives the container
  the next device's variables): ``accelerators/cdi/container-environment`` must.

And the recovery faults the kwok-only variants already catch through a simulated restart are caught
again here where the container crashes for real (:data:`ALSO_ON_REAL_NODES`): the real path of
those behaviours can fail too.

The reference's variants share one kept embedded cluster with real nodes and run in rounds, like
test_self_validation.py's (several faults per controller start, each scoped to the namespaces of
its own targets); the fake driver's variant gets a cluster of its own (its fault is read when the
cluster's drivers start). All in the serial pass: the host runs one real-node cluster at a time.
Needs what ``test_real_node.py`` needs; skipped (or failed, with ``KTHENA_REQUIRE_REAL_NODES=1``)
without it. Records go to ``reports/self-validation/<fault>.json`` like the other variants'.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from conformance.cluster.binaries import BinaryCache
from conformance.cluster.kube import api_client
from conformance.cluster.local.provider import LocalProvider
from conformance.cluster.realnode import host
from conformance.cluster.realnode.config import NODE_KIND_LABEL
from conformance.framework.catalog import collect
from conformance.runner import RunOptions, run
from fake_devices.drivers import FAULTS as DEVICE_FAULTS
from kthena_ref.faults import FAULTS
from tests.integration.kept_runs import WAIT_OVERRIDES
from tests.integration.real_nodes import require_host, snapshot
from tests.integration.selfval_rounds import Round, plan_rounds
from tests.integration.selfval_runs import failures, label, prove
from tests.integration.test_self_validation import CAUGHT_BY, REAL_NODE_CAUGHT_BY, SENTINELS, UNSCOPABLE
from tests.integration.variant_records import judge_variant

pytestmark = [pytest.mark.serial, pytest.mark.slow, pytest.mark.self_validation]

DEVICE_CAUGHT_BY: dict[str, list[str]] = {"cdi-env-next-device": ["accelerators/cdi/container-environment"]}
# Faults of CAUGHT_BY whose targets run in real containers when real nodes are declared.
ALSO_ON_REAL_NODES = (
    "available-counts-unready",
    "in-place-recreates",
    "none-recreates-restarted-pod",
    "role-recreate-rebuilds-group",
    "servinggroup-recreate-ignores-restarts",
)


# Every real node a variant's run may make: the plain pool's, or one per device class.
RUN_REAL_NODES = ["real-0", "accel-gpu-real-0", "accel-npu-real-0"]


@contextlib.contextmanager
def host_left_as_before(cluster: str) -> Iterator[None]:
    """Take down ``cluster`` at the end and check the host matches a snapshot taken before it came
    up: the variants make the suite fail on purpose, so this is the host after failed tests."""
    bin_dir = BinaryCache().ensure(real_nodes=True).directory
    before = snapshot(bin_dir, RUN_REAL_NODES)
    try:
        yield
    finally:
        provider = LocalProvider()
        status = provider.status(cluster)
        if status and status.get("live"):
            info = provider.info(cluster)
            core = client.CoreV1Api(api_client(info.kubeconfig, info.context))
            names = {n.metadata.name for n in core.list_node(label_selector=f"{NODE_KIND_LABEL}=real").items}
            assert names <= set(RUN_REAL_NODES), f"real nodes {sorted(names)}: add them to RUN_REAL_NODES"
        provider.down(cluster)
    left = host.diff(before, snapshot(bin_dir, RUN_REAL_NODES)).lines()
    assert not left, f"after cluster {cluster} and its failed runs, the host differs from before:\n" + "\n".join(left)


@pytest.fixture(scope="module")
def real_cluster() -> Iterator[str]:
    """One kept cluster with real nodes for the reference's variants, taken down at the end (the
    host then as before)."""
    require_host()
    name = f"selfval-real-{os.getpid()}"
    with host_left_as_before(name):
        yield name


def test_every_device_fault_is_classified() -> None:
    from tests.integration.test_accelerators_profile import CAUGHT_BY as PUBLISHER_CAUGHT_BY

    assert set(DEVICE_CAUGHT_BY) | set(PUBLISHER_CAUGHT_BY) == set(DEVICE_FAULTS)


def _variant(
    tmp_path: Path, cluster: str, fault: str, description: str, targets: list[str], record: bool, **options: Any
) -> None:
    data = run(
        RunOptions(report_dir=tmp_path, keep_cluster=True, cluster_name=cluster, cluster_owner_pid=os.getpid(),
                   real_nodes=True, ids=targets, timeouts=WAIT_OVERRIDES, workers=1, await_namespace_removal=False,
                   **options)
    ).report  # fmt: skip
    # the kwok-only variant's record stays the fault's record unless ``record``
    verdict = judge_variant(fault, description, data, targets, write=record, realNodes=True)
    outcomes, caught, messages = verdict.outcomes, verdict.caught, verdict.messages
    observed = {t["id"]: t.get("observed") or "" for t in data["tests"] if t["id"] in targets}
    # a broken variant may fail before its Pods run (nothing observed yet), never on the simulated path
    assert not any(o.startswith("simulated") for o in observed.values()), f"simulated, not real: {observed}"
    assert caught, (
        f"no test noticed fault {fault!r} ({description}); outcomes: {outcomes}; messages: {messages}; "
        f"run error: {data.get('error')}"
    )
    assert not verdict.missed, f"fault {fault!r} ({description}) was not caught by {verdict.missed}; {messages}"
    assert data["verdict"] == "failure" and data["exitCode"] == 1, (data["verdict"], data["exitCode"])
    assert any("real nodes: yes" in n for n in data["notes"]), data["notes"]


# Defined first, so it runs (and its cluster goes) before the module's real_cluster takes the host.
@pytest.mark.parametrize("fault", sorted(DEVICE_CAUGHT_BY))
def test_a_kubelet_plugin_fault_is_caught(fault: str, tmp_path: Path) -> None:
    require_host()
    cluster = f"selfval-devices-{os.getpid()}"
    with host_left_as_before(cluster):
        _variant(tmp_path, cluster, fault, DEVICE_FAULTS[fault], DEVICE_CAUGHT_BY[fault], True,
                 fake_device_faults=[fault], fake_devices=True)  # fmt: skip


# The reference's variants on real nodes, in rounds like test_self_validation.py's (scoped faults, one
# controller start per round, sentinels; split and rerun when a round cannot be trusted): the faults only a
# running container shows (recorded), and the recovery faults again where containers crash for real (the
# kwok-only variant's record stays the fault's record). Sentinels: a reconcile and an admission request only
# (every behaviour here starts real containers).
REAL_CAUGHT_BY = {**REAL_NODE_CAUGHT_BY, **{f: CAUGHT_BY[f] for f in ALSO_ON_REAL_NODES}}
REAL_ROUNDS = plan_rounds(
    REAL_CAUGHT_BY, [b.id for b in collect()], unscopable=UNSCOPABLE, sentinels=SENTINELS[:2], key=label
)


@pytest.mark.parametrize("made", REAL_ROUNDS, ids=[r.name for r in REAL_ROUNDS])
def test_reference_faults_are_caught_where_containers_run_for_real(
    made: Round, real_cluster: str, tmp_path: Path
) -> None:
    outcome = prove(made, real_cluster, tmp_path, FAULTS, REAL_CAUGHT_BY, record=lambda f: f in REAL_NODE_CAUGHT_BY,
                    workers=2, real_nodes=True)  # fmt: skip
    print(f"{made.name}: {'; '.join(outcome.runs)}")
    missed = failures(outcome, list(made.faults))
    assert not missed, "\n".join([*missed, f"runs: {outcome.runs}"])
    # a broken variant may fail before its Pods run (nothing observed yet), never on the simulated path
    simulated = {i: o for data in outcome.reports for i, o in _observed(data).items() if o.startswith("simulated")}
    assert not simulated, f"simulated, not real: {simulated}"
    assert all(any("real nodes: yes" in n for n in data["notes"]) for data in outcome.reports), outcome.runs


def _observed(data: dict[str, Any]) -> dict[str, str]:
    return {t["id"]: t.get("observed") or "" for t in data["tests"]}
