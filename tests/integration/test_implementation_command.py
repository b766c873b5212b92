"""The reference as someone else's implementation: ``run --implementation-command`` on the local
provider starts it from a command line (its CRDs and webhook configuration from
``--implementation-manifest``, its webhook's port and certificate from ``--implementation-webhook``
placeholders, readiness from its log), restarts it for the restart behaviour, and stops it,
leaving no process behind. Behaviours that need each cluster capability (admission through the
webhook, injected faults, DNS, a restart) pass as when the harness deploys the reference itself;
a selection, not every profile, to keep ``make test`` short."""

from __future__ import annotations

import os
import shlex
import sys
from pathlib import Path

import pytest
import yaml

from conformance.implementations import reference
from conformance.run.options import REFERENCE_SUPPORT, RunOptions
from conformance.run.orchestration import run

pytestmark = [pytest.mark.serial, pytest.mark.own_controller, pytest.mark.slow]

IDS = [
    "core/admission/*",  # the webhook (and CEL) refusals
    "core/servinggroup/pods-created",
    "core/recovery/role-recreate-failed-pod",  # an injected fault
    "core/recovery/role-recreate-restarted-container",
    "dns/resolution/member-and-entry-addresses",  # cluster DNS
    "dns/services/kept-across-controller-restart",  # a restart of the command
]
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


def test_the_reference_runs_as_a_command(tmp_path: Path) -> None:
    manifests = tmp_path / "reference.yaml"
    webhook = reference.webhook_configuration("https://127.0.0.1:{webhook_port}", "{webhook_ca_bundle}")
    manifests.write_text(yaml.safe_dump_all([*reference.crds(), webhook]))
    options = RunOptions(
        report_dir=tmp_path / "report",
        implementation="external",
        support_file=REFERENCE_SUPPORT,
        implementation_command=shlex.join([sys.executable, "-m", "kthena_ref.cli", "run", *WEBHOOK]),
        implementation_manifests=[manifests],
        implementation_ready_log="caches synced",
        implementation_webhook=True,
        ids=IDS,
    )
    result = run(options)
    data = result.report
    ran = {t["id"]: t["outcome"] for t in data["tests"] if t["outcome"] != "skipped-by-user"}
    assert len(ran) >= len(IDS) + 5 and set(ran.values()) == {"passed"}, (data.get("error"), ran)
    assert data["verdict"] == "partial" and result.exit_code == 1  # partial: the unselected behaviours
    assert data["implementation"]["deployedBy"] == "harness-command"
    assert data["implementation"]["command"][-len(WEBHOOK) :] == WEBHOOK  # as given, placeholders unfilled
    assert any(c["name"] == "admission-webhook" and c["result"] == "ok" for c in data["preflight"])
    log = Path(data["implementation"]["log"])
    assert log.read_text().count("caches synced") == 2, "started once and restarted once for the restart behaviour"
    assert not _writing_to(log), "the command and its watchdog are gone after the run"
