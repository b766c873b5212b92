"""The conformance suite, end to end, against the healthy reference controller: the control run.

The reference runs as someone else's implementation would: started by ``run
--implementation-command`` from a command line (its CRDs and webhook configuration from
``--implementation-manifest``, its webhook's port and certificate from ``--implementation-webhook``
placeholders, readiness from its log), restarted by the harness for the restart behaviour, stopped
at the end with nothing left behind. It passes every behaviour of every profile, faults and DNS
included (Accelerators on the fake GPU and NPU drivers): the verdicts ``make conformance`` gets
with the harness deploying the reference itself (success for every profile), so the external
path cannot rot. With real nodes (the host has them; CI must) the behaviours inside running
containers pass on them too; without, those cannot decide and their profiles are partial. The report verifies, the JUnit file and the HTML report agree, and the fake
drivers' publishers survive the run. It runs with the same waits
as every self-validation variant (tests/integration/test_self_validation.py): a variant's failure
at a deadline then means the fault, not a short wait. Per-behaviour durations go to
``reports/suite-duration.json`` (they show how much headroom those waits leave).
"""

from __future__ import annotations

import json
import os
import shlex
import sys
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from conformance.cluster.local.provider import LocalProvider
from conformance.framework import catalog, report
from conformance.framework.features import PROFILES
from conformance.implementations import reference
from conformance.run.options import REFERENCE_SUPPORT
from tests.integration.kept_runs import WAIT_OVERRIDES, kept_cluster, kept_run
from tests.integration.real_nodes import host_turn

pytestmark = [pytest.mark.serial, pytest.mark.own_controller, pytest.mark.slow]

# Behaviours only a running container shows, and the ones that run in containers where real nodes exist.
IN_CONTAINER_ONLY = {"dns/in-container/hostname-and-addresses", "accelerators/cdi/container-environment"}
REAL_WHERE_DECLARED = {
    "inplace/image-only-keeps-uids",
    "core/recovery/none-restarted-container",
    "core/recovery/role-recreate-other-roles-untouched",
    "core/recovery/servinggroup-recreate-restarted-container",
}


def real_nodes_usable() -> bool:
    """The control run uses real nodes where the host has them; CI (KTHENA_REQUIRE_REAL_NODES=1) must."""
    from conformance.cluster.realnode import preflight

    if os.environ.get("KTHENA_REQUIRE_REAL_NODES") == "1":
        return True
    return preflight.usable(preflight.evaluate(preflight.gather_facts()))


REPORTS = Path(__file__).resolve().parents[2] / "reports"
WEBHOOK = ["--webhook-port", "{webhook_port}", "--webhook-host", "127.0.0.1",
           "--webhook-cert", "{webhook_cert}", "--webhook-key", "{webhook_key}"]  # fmt: skip


def _writing_to(log: Path) -> list[str]:
    """Command lines of the processes whose stdout is ``log`` (the command and its watchdog)."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            if os.readlink(proc / "fd" / "1") == str(log):
                found.append((proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace"))
        except OSError:
            continue
    return found


@pytest.fixture(scope="module")
def cluster_name(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with host_turn(tmp_path_factory):  # the kept cluster has real nodes until it is taken down
        yield from kept_cluster(f"control-{os.getpid()}")


def test_the_reference_controller_conforms_to_every_profile(cluster_name: str, tmp_path: Path) -> None:
    manifests = tmp_path / "reference.yaml"
    webhook = reference.webhook_configuration("https://127.0.0.1:{webhook_port}", "{webhook_ca_bundle}")
    manifests.write_text(yaml.safe_dump_all([*reference.crds(), webhook]))
    command = [sys.executable, "-m", "kthena_ref.cli", "run", *WEBHOOK]
    report_dir = tmp_path / "report"
    real = real_nodes_usable()
    data = kept_run(
        report_dir, cluster_name, workers=2, timeouts=WAIT_OVERRIDES, implementation="external", real_nodes=real,
        support_file=REFERENCE_SUPPORT, implementation_command=shlex.join(command),
        implementation_manifests=[manifests], implementation_ready_log="caches synced", implementation_webhook=True,
    )  # fmt: skip
    # Without real nodes the behaviours inside running containers cannot decide (error), never pass.
    undecided = {
        t["id"] for t in data["tests"] if not real and t["id"] in IN_CONTAINER_ONLY and t["outcome"] == "error"
    }
    failing = [f"{t['id']}: {t['outcome']}: {t['message'][:300]}" for t in data["tests"]
               if t["outcome"] not in ("passed", "not-supported") and t["id"] not in undecided]  # fmt: skip
    assert not failing, "\n".join(failing)
    verdicts = {p["profile"]: p["verdict"] for p in data["profiles"]}
    partial = {"HeadlessServiceDNS", "Accelerators"} if undecided else set()
    assert verdicts == {p: "partial" if p in partial else "success" for p in PROFILES}, verdicts
    observed = {t["id"]: t.get("observed") or "" for t in data["tests"]}
    if real:
        assert all(observed[i].startswith("real nodes") for i in IN_CONTAINER_ONLY | REAL_WHERE_DECLARED), observed
        assert any(n.startswith("observed in running containers on real nodes") for n in data["notes"])
    else:
        assert all(observed[i].startswith("simulated") for i in REAL_WHERE_DECLARED), observed
        unavailable_note = [n for n in data["notes"] if n.startswith("real nodes:")]
        assert unavailable_note, data["notes"]
    assert (data["verdict"], data["exitCode"]) == (("partial", 1) if undecided else ("success", 0))
    assert data["implementation"]["deployedBy"] == "harness-command"
    assert data["implementation"]["command"][-len(WEBHOOK) :] == WEBHOOK  # as given, placeholders unfilled
    assert any(c["name"] == "admission-webhook" and c["result"] == "ok" for c in data["preflight"])
    log = Path(data["implementation"]["log"])
    assert log.read_text().count("caches synced") == 2, "started once and restarted once for the restart behaviour"
    assert not _writing_to(log), "the command and its watchdog are gone after the run"
    assert report.verify(report_dir / "conformance-report.json", digest=catalog.suite_digest()) == []
    assert report.verify(report_dir / "conformance-report.yaml", digest=catalog.suite_digest()) == []
    cases = ET.parse(report_dir / "junit.xml").getroot().iter("testcase")
    assert sorted(c.get("name") or "" for c in cases) == sorted(t["id"] for t in data["tests"])
    assert (report_dir / "index.html").is_file()
    # Accelerators on the fake drivers: both drivers and their shipped files, nodes shaped by them
    drivers = {c["driver"]: c for c in data["accelerators"]["capabilities"]}
    assert set(drivers) == {"gpu.fake.kthena-conformance.io", "npu.fake.kthena-conformance.io"}
    assert {Path(c["file"]).name for c in drivers.values()} == {"gpu.yaml", "npu.yaml"}
    assert all(c["sha256"] for c in drivers.values())
    assert data["accelerators"]["faults"] == [] and data["accelerators"]["warnings"] == []
    assert data["accelerators"]["chosenByDefault"] is True  # no --capabilities: the fake drivers, said so
    shaped = {"accel-gpu-real-0", "accel-gpu-0", "accel-npu-real-0", "accel-npu-0"} if real else {
        "accel-gpu-0", "accel-gpu-1", "accel-npu-0", "accel-npu-1"}  # fmt: skip
    assert shaped <= set(data["cluster"]["nodes"]), data["cluster"]["nodes"]
    pending = next(t for t in data["tests"] if t["id"] == "accelerators/scheduling/unsatisfiable-claim-pending")
    assert "cannot allocate all claims" in pending["message"], pending["message"]  # the scheduler's reason
    assert pending["evidence"] and any(Path(pending["evidence"]).glob("scheduler-reason-*.txt"))
    alive = (LocalProvider().status(cluster_name) or {}).get("components_alive", {})
    assert alive.get("fake-devices-gpu") and alive.get("fake-devices-npu"), alive
    REPORTS.mkdir(exist_ok=True)
    durations = {t["id"]: t["durationSeconds"] for t in data["tests"]}
    (REPORTS / "suite-duration.json").write_text(
        json.dumps({"seconds": data["run"]["durationSeconds"], "behaviours": durations}, indent=2) + "\n"
    )
