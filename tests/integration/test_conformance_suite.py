"""The conformance suite, end to end, against the healthy reference controller: the control run.

The reference runs as someone else's implementation would: started by ``run
--implementation-command`` from a command line (its CRDs and webhook configuration from
``--implementation-manifest``, its webhook's port and certificate from ``--implementation-webhook``
placeholders, readiness from its log), restarted by the harness for the restart behaviour, stopped
at the end with nothing left behind. It passes every behaviour of every profile, faults and DNS
included (Accelerators on the fake GPU and NPU drivers): the verdicts ``make conformance`` gets
with the harness deploying the reference itself (success for every profile), so the external
path cannot rot. The report verifies, the JUnit file and the HTML report agree, and the fake
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

pytestmark = [pytest.mark.serial, pytest.mark.own_controller, pytest.mark.slow]

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
def cluster_name() -> Iterator[str]:
    yield from kept_cluster(f"control-{os.getpid()}")


def test_the_reference_controller_conforms_to_every_profile(cluster_name: str, tmp_path: Path) -> None:
    manifests = tmp_path / "reference.yaml"
    webhook = reference.webhook_configuration("https://127.0.0.1:{webhook_port}", "{webhook_ca_bundle}")
    manifests.write_text(yaml.safe_dump_all([*reference.crds(), webhook]))
    command = [sys.executable, "-m", "kthena_ref.cli", "run", *WEBHOOK]
    report_dir = tmp_path / "report"
    data = kept_run(
        report_dir, cluster_name, workers=2, timeouts=WAIT_OVERRIDES, implementation="external",
        support_file=REFERENCE_SUPPORT, implementation_command=shlex.join(command),
        implementation_manifests=[manifests], implementation_ready_log="caches synced", implementation_webhook=True,
    )  # fmt: skip
    failing = [f"{t['id']}: {t['outcome']}: {t['message'][:300]}" for t in data["tests"]
               if t["outcome"] not in ("passed", "not-supported")]  # fmt: skip
    assert not failing, "\n".join(failing)
    verdicts = {p["profile"]: p["verdict"] for p in data["profiles"]}
    assert verdicts == dict.fromkeys(PROFILES, "success"), verdicts
    assert data["verdict"] == "success" and data["exitCode"] == 0
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
    assert set(drivers) == {"gpu.example.com", "npu.example.com"}
    assert {Path(c["file"]).name for c in drivers.values()} == {"gpu.yaml", "npu.yaml"}
    assert all(c["sha256"] for c in drivers.values())
    assert data["accelerators"]["faults"] == [] and data["accelerators"]["warnings"] == []
    assert data["accelerators"]["chosenByDefault"] is True  # no --capabilities: the fake drivers, said so
    assert {"accel-gpu-0", "accel-gpu-1", "accel-npu-0", "accel-npu-1"} <= set(data["cluster"]["nodes"])
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
