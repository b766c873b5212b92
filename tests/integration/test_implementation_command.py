"""The reference as someone else's implementation: ``run --implementation-command`` on the local
provider starts it from a command line (its CRDs from ``--implementation-manifest``, readiness
from its log), restarts it for the restart behaviour, and stops it, leaving no process behind.
The same behaviours pass as when the harness deploys the reference itself."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
import yaml

from conformance.implementations import reference
from conformance.run.options import REFERENCE_SUPPORT, RunOptions
from conformance.run.orchestration import run

pytestmark = [pytest.mark.serial, pytest.mark.own_controller, pytest.mark.slow]

# A restart (through the harness's restart service, now restarting the command), plain Pod
# creation and status, and a CEL refusal (no webhook is registered on this path).
IDS = [
    "dns/services/kept-across-controller-restart",
    "core/servinggroup/pods-created",
    "core/status/label-selector",
    "core/admission/role-name-pattern",
]


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


def test_the_reference_runs_as_a_command(tmp_path: Path) -> None:
    manifests = tmp_path / "crds.yaml"
    manifests.write_text(yaml.safe_dump_all(reference.crds()))
    options = RunOptions(
        report_dir=tmp_path / "report",
        implementation="external",
        support_file=REFERENCE_SUPPORT,
        implementation_command=f"{sys.executable} -m kthena_ref.cli run --workers 2",
        implementation_manifests=[manifests],
        implementation_ready_log="caches synced",
        ids=IDS,
    )
    result = run(options)
    data = result.report
    outcomes = {t["id"]: t["outcome"] for t in data["tests"] if t["id"] in IDS}
    assert outcomes == dict.fromkeys(IDS, "passed"), (data.get("error"), data["tests"])
    assert data["implementation"]["deployedBy"] == "harness-command"
    assert data["implementation"]["command"][-4:] == ["kthena_ref.cli", "run", "--workers", "2"]
    log = Path(data["implementation"]["log"])
    assert log.read_text().count("caches synced") == 2, "started once and restarted once for the restart behaviour"
    assert not _writing_to(log), "the command and its watchdog are gone after the run"
