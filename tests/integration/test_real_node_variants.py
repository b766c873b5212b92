"""Self-validation on real nodes: the faults only a running container shows are caught.

Two broken variants whose fault is invisible to kwok (no container runs there), each judged by the
behaviour that looks inside a running container on a real node:

- the reference controller with ``hostname-as-fqdn`` (headless-service also sets
  ``setHostnameAsFQDN``): ``dns/in-container/hostname-and-addresses`` must come out non-conformant;
- the fake drivers with ``cdi-env-next-device`` (the kubelet plugin's CDI spec gives the container
  the next device's variables): ``accelerators/cdi/container-environment`` must.

Each variant runs on its own embedded cluster with real nodes (a fake-device fault is read when the
cluster's drivers start), in the serial pass: the host runs one real-node cluster at a time.
Needs what ``test_real_node.py`` needs; skipped (or failed, with ``KTHENA_REQUIRE_REAL_NODES=1``)
without it. Records go to ``reports/self-validation/<fault>.json`` like the other variants'.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from conformance.cluster.local.provider import LocalProvider
from conformance.runner import RunOptions, run
from fake_devices.drivers import FAULTS as DEVICE_FAULTS
from kthena_ref.faults import FAULTS
from tests.integration.kept_runs import WAIT_OVERRIDES
from tests.integration.real_nodes import require_host
from tests.integration.test_self_validation import REAL_NODE_CAUGHT_BY, VARIANTS_DIR

pytestmark = [pytest.mark.serial, pytest.mark.slow, pytest.mark.self_validation]

DEVICE_CAUGHT_BY: dict[str, list[str]] = {"cdi-env-next-device": ["accelerators/cdi/container-environment"]}


def test_every_device_fault_is_classified() -> None:
    from tests.integration.test_accelerators_profile import CAUGHT_BY as PUBLISHER_CAUGHT_BY

    assert set(DEVICE_CAUGHT_BY) | set(PUBLISHER_CAUGHT_BY) == set(DEVICE_FAULTS)


def _variant(tmp_path: Path, fault: str, description: str, targets: list[str], **options: Any) -> None:
    require_host()
    cluster = f"selfval-real-{os.getpid()}"
    try:
        data = run(
            RunOptions(report_dir=tmp_path, keep_cluster=True, cluster_name=cluster, cluster_owner_pid=os.getpid(),
                       real_nodes=True, ids=targets, timeouts=WAIT_OVERRIDES, workers=1, **options)
        ).report  # fmt: skip
    finally:
        LocalProvider().down(cluster)
    outcomes = {t["id"]: t["outcome"] for t in data["tests"] if t["outcome"] != "skipped-by-user"}
    caught = sorted(i for i in targets if outcomes.get(i) == "non-conformant")
    VARIANTS_DIR.mkdir(parents=True, exist_ok=True)
    record = {
        "fault": fault,
        "description": description,
        "caught": bool(caught),
        "by": caught,
        "caughtAs": {i: outcomes[i] for i in caught},
        "alsoBroken": sorted(i for i, o in outcomes.items() if o == "non-conformant" and i not in caught),
        "outcomes": outcomes,
        "seconds": data["run"]["durationSeconds"],
        "realNodes": True,
    }
    (VARIANTS_DIR / f"{fault}.json").write_text(json.dumps(record, indent=2) + "\n")
    messages = {t["id"]: t["message"][:600] for t in data["tests"] if t["outcome"] != "skipped-by-user"}
    assert caught, f"no test noticed fault {fault!r} ({description}); outcomes: {outcomes}; messages: {messages}"
    assert data["verdict"] == "failure" and data["exitCode"] == 1, (data["verdict"], data["exitCode"])
    assert any("real nodes: yes" in n for n in data["notes"]), data["notes"]


@pytest.mark.parametrize("fault", sorted(REAL_NODE_CAUGHT_BY))
def test_a_reference_fault_only_a_container_shows_is_caught(fault: str, tmp_path: Path) -> None:
    _variant(tmp_path, fault, FAULTS[fault], REAL_NODE_CAUGHT_BY[fault], reference_faults=[fault])


@pytest.mark.parametrize("fault", sorted(DEVICE_CAUGHT_BY))
def test_a_kubelet_plugin_fault_is_caught(fault: str, tmp_path: Path) -> None:
    _variant(tmp_path, fault, DEVICE_FAULTS[fault], DEVICE_CAUGHT_BY[fault], fake_device_faults=[fault],
             fake_devices=True)  # fmt: skip
