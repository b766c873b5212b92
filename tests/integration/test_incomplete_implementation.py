"""A deliberately incomplete implementation, judged as any external one: the reference without its
headless-service plugin (tests/integration/incomplete_controller.py) and with a CRD that lacks the
documented field ``spec.rolloutStrategy.rollingUpdateConfiguration.maxSurge``, started by the
harness from the support file's ``launch`` section (the declarative ``--implementation-command``)
on the local provider with the default waits.

What must hold (issue 17): the report names each cause in one line (the missing field once, the
missing feature once) with the behaviours it explains, the behaviours that do not need either
still pass, and the run takes well under the sum of the waits its failures would otherwise have
cost: a test whose ModelServing gets no Pod while the implementation keeps logging an error about
it stops early (conformance.framework.early_stop). The figures go to
``reports/incomplete-implementation.json``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from conformance.framework.timeouts import WAITS
from conformance.implementations import reference
from conformance.run.options import REFERENCE_SUPPORT, RunOptions
from conformance.run.orchestration import run

pytestmark = [pytest.mark.serial, pytest.mark.own_controller, pytest.mark.slow]

REPORTS = Path(__file__).resolve().parents[2] / "reports"
CONTROLLER = Path(__file__).with_name("incomplete_controller.py")
MISSING = "spec.rolloutStrategy.rollingUpdateConfiguration.maxSurge"
PASSING = ["core/servinggroup/pods-created", "core/servinggroup/scale-down-whole-groups"]
HEADLESS = ["dns/entry-service/*", "dns/discovery-service/*", "dns/services/per-instance"]
SURGE = ["rollout/sg/max-surge", "rollout/sg/max-surge-percent-rounds-up"]
WEBHOOK = ["--webhook-port", "{webhook_port}", "--webhook-host", "127.0.0.1",
           "--webhook-cert", "{webhook_cert}", "--webhook-key", "{webhook_key}"]  # fmt: skip
WORKERS = 2


def crds_without(path: str) -> list[dict[str, Any]]:
    """The reference's CRDs with the ModelServing property at ``path`` removed from the schema."""
    crds = reference.crds()
    for crd in crds:
        if crd["spec"]["names"]["kind"] != "ModelServing":
            continue
        for version in crd["spec"]["versions"]:
            node = version["schema"]["openAPIV3Schema"]
            *parents, leaf = path.split(".")
            for part in parents:
                node = node["properties"][part]
            del node["properties"][leaf]
    return crds


def test_an_incomplete_implementation_gets_one_line_per_cause_quickly(tmp_path: Path) -> None:
    manifests = tmp_path / "incomplete.yaml"
    webhook = reference.webhook_configuration("https://127.0.0.1:{webhook_port}", "{webhook_ca_bundle}")
    manifests.write_text(yaml.safe_dump_all([*crds_without(MISSING), webhook]))
    support = yaml.safe_load(REFERENCE_SUPPORT.read_text())
    support["implementation"]["name"] = "incomplete"
    support["launch"] = {
        "command": [sys.executable, str(CONTROLLER), "run", *WEBHOOK],
        "manifests": [manifests.name],  # relative to the support file
        "readyLog": "caches synced",
        "webhook": True,
    }
    support_file = tmp_path / "support.yaml"
    support_file.write_text(yaml.safe_dump(support))
    result = run(
        RunOptions(
            report_dir=tmp_path / "report",
            implementation="auto",  # the CLI's default: external, as the support file starts it
            support_file=support_file,
            ids=[*PASSING, *HEADLESS, *SURGE],
            workers=WORKERS,
        )
    )
    data = result.report
    ran = {t["id"]: t for t in data["tests"] if t["outcome"] != "skipped-by-user"}
    headless = [t for i, t in ran.items() if i.startswith("dns/")]
    early = [t for t in headless if "stopped waiting early" in t["message"]]
    failed = [t for t in ran.values() if t["outcome"] != "passed"]
    waits = len(failed) * WAITS["pods-running"].seconds  # what each would cost waiting for its Pods
    took = data["run"]["durationSeconds"]
    REPORTS.mkdir(exist_ok=True)
    (REPORTS / "incomplete-implementation.json").write_text(json.dumps({
        "runSeconds": took, "failed": len(failed), "stoppedEarly": len(early), "waitSecondsAvoidable": waits,
        "behaviourSeconds": {i: t["durationSeconds"] for i, t in ran.items()},
    }, indent=2) + "\n")  # fmt: skip
    assert data.get("error") is None, data["error"]
    assert data["implementation"]["deployedBy"] == "harness-command"
    assert data["implementation"]["command"][1] == str(CONTROLLER)
    assert {i for i, t in ran.items() if t["outcome"] == "passed"} == set(PASSING), {
        i: t["outcome"] for i, t in ran.items()
    }
    assert data["cluster"]["crdMissingFields"] == [MISSING]
    causes = {c["cause"]: c["behaviours"] for c in data["causes"]}
    field = next(c for c in causes if MISSING in c)
    assert sorted(causes[field]) == SURGE
    feature = next(c for c in causes if c.startswith("feature HeadlessService: none of its"))
    assert "stopped waiting early" in feature and "not a registered plugin" in feature, feature
    assert len(causes) == 2, causes  # one line per cause; nothing else failed
    assert early, [t["message"] for t in headless]
    assert all(t["durationSeconds"] < WAITS["pods-running"].seconds / 2 for t in early), early
    assert took < waits / WORKERS / 2, f"the run took {took}s; its failures alone would have waited {waits:g}s"
