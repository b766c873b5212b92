"""The conformance suite, end to end, against the healthy reference controller: the control run.

The reference controller passes every behaviour of every profile (Accelerators on the fake GPU
and NPU drivers, as ``make conformance`` runs it), the report verifies, the JUnit file and the
HTML report agree, and the fake drivers' publishers survive the run. It runs with the same waits
as every self-validation variant (tests/integration/test_self_validation.py): a variant's failure
at a deadline then means the fault, not a short wait. Per-behaviour durations go to
``reports/suite-duration.json`` (they show how much headroom those waits leave).
"""

from __future__ import annotations

import json
import os
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path

import pytest

from conformance.cluster.local.provider import LocalProvider
from conformance.framework import catalog, report
from conformance.framework.features import PROFILES
from tests.integration.kept_runs import WAIT_OVERRIDES, kept_cluster, kept_run

pytestmark = [pytest.mark.serial, pytest.mark.own_controller, pytest.mark.slow]

REPORTS = Path(__file__).resolve().parents[2] / "reports"


@pytest.fixture(scope="module")
def cluster_name() -> Iterator[str]:
    yield from kept_cluster(f"control-{os.getpid()}")


def test_the_reference_controller_conforms_to_every_profile(cluster_name: str, tmp_path: Path) -> None:
    data = kept_run(tmp_path, cluster_name, workers=2, timeouts=WAIT_OVERRIDES)
    failing = [f"{t['id']}: {t['outcome']}: {t['message'][:300]}" for t in data["tests"]
               if t["outcome"] not in ("passed", "not-supported")]  # fmt: skip
    assert not failing, "\n".join(failing)
    verdicts = {p["profile"]: p["verdict"] for p in data["profiles"]}
    assert verdicts == dict.fromkeys(PROFILES, "success"), verdicts
    assert data["verdict"] == "success" and data["exitCode"] == 0
    assert report.verify(tmp_path / "conformance-report.json", digest=catalog.suite_digest()) == []
    assert report.verify(tmp_path / "conformance-report.yaml", digest=catalog.suite_digest()) == []
    cases = ET.parse(tmp_path / "junit.xml").getroot().iter("testcase")
    assert sorted(c.get("name") or "" for c in cases) == sorted(t["id"] for t in data["tests"])
    assert (tmp_path / "index.html").is_file()
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
