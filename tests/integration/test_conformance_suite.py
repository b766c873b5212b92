"""The conformance suite, end to end, against the reference controller and its broken variants.

1. The reference controller passes every test it claims (Core, Plugins, HeadlessServiceDNS), the
   report verifies, and the JUnit file agrees.
2. Self-validation: for every switchable fault of the reference controller (kthena_ref/faults.py)
   the suite, narrowed to the behaviours that should notice, reports at least one of them
   non-conformant. Faults that break behaviour the spec does not document cannot be caught by a
   spec-only suite; they are listed with the reason and must stay uncaught (if one starts being
   caught, move it). The mutation score is written to ``reports/self-validation.json``.

All runs share one embedded cluster (kept between runs, dying with this process); each run
deploys and stops its own controller, so this module runs in the own-controller pass.
"""

from __future__ import annotations

import json
import os
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from conformance.framework import catalog, report
from conformance.runner import RunOptions, run
from kthena_ref.faults import FAULTS

pytestmark = [pytest.mark.serial, pytest.mark.own_controller, pytest.mark.slow]

REPORTS = Path(__file__).resolve().parents[2] / "reports"

# fault -> behaviour ids (patterns) expected to come out non-conformant
CAUGHT_BY: dict[str, list[str]] = {
    "no-recovery": ["core/recovery/role-recreate-deleted-pod", "core/recovery/servinggroup-recreate-deleted-pod"],
    "stale-available-replicas": ["core/status/settled"],
    "no-entry-label": ["core/status/label-selector"],
    "plugin-order-reversed": ["plugins/chain/list-order"],
    "chain-immutability-not-enforced": ["plugins/immutability/change-config", "plugins/immutability/reorder"],
    "unknown-plugin-accepted": ["plugins/framework/unknown-plugin-not-ignored"],
    "demo-env-replaces": ["plugins/demo-pod-tweaks/env-appended"],
    "no-discovery-service": ["dns/discovery-service/lists-members"],
    "entry-service-selects-all": ["dns/entry-service/selects-entry-only"],
    "wrong-entry-address": ["dns/entry-service/selects-entry-only"],
    "services-not-published-before-ready": ["dns/services/publish-not-ready"],
    "services-not-recreated": ["dns/services/recreated"],
    "deletion-identity-ignored": ["dns/deletion/identity-changed"],
    "migration-layout-changed": ["dns/migration/legacy-layout-preserved"],
    "unavailable-rounds-up": ["rollout/sg/max-unavailable-percent-rounds-down"],
    "surge-ignored": ["rollout/sg/max-surge-percent-rounds-up"],
    "partition-ignored": ["rollout/sg/partition"],
    "role-unchanged-recreated": ["rollout/role/unchanged-role-keeps-pods"],
    "coordination-ignored": ["rollout/coordination/max-skew"],
    "in-place-ineligible-patched": ["inplace/fallback/ineligible-change"],
    "no-fallback-event": ["inplace/fallback/ineligible-change"],
    "no-progress-deadline": ["inplace/progress-deadline"],
    "eviction-budget-off-by-one": ["eviction/servinggroup/min-available"],
    "role-eviction-budget-ignored": ["eviction/role/role-min-available"],
}

# fault -> why no spec-backed behaviour can notice it
UNDETECTABLE: dict[str, str] = {
    "scale-down-lowest-ordinal": "the spec does not say which ServingGroup a scale-down removes",
    "wrong-worker-index": "WORKER_INDEX is upstream's convention, not in the spec",
    "wrong-group-size": "GROUP_SIZE is upstream's convention, not in the spec",
    "admission-allows-missing-worker-template": (
        "the spec never says workerTemplate is required (upstream's webhook rule); the harness's "
        "webhook-registration probe uses that rule, so this variant cannot even be deployed"
    ),
    "eviction-percent-rounds-down": "eviction percentages' rounding is not asserted (spec reading 28)",
}

# Waits are halved for the broken variants: a behaviour that never happens fails at the deadline.
VARIANT_TIMEOUT_SCALE = "0.5"


@pytest.fixture(scope="module")
def cluster_name() -> Iterator[str]:
    from conformance.cluster.local.provider import LocalProvider

    name = f"selfval-{os.getpid()}"
    yield name
    LocalProvider().down(name)


def suite(tmp: Path, cluster: str, **options: Any) -> dict[str, Any]:
    result = run(
        RunOptions(
            report_dir=tmp,
            keep_cluster=True,
            cluster_name=cluster,
            cluster_owner_pid=os.getpid(),
            **options,
        )
    )
    return result.report


def test_the_reference_controller_conforms_to_every_profile(cluster_name: str, tmp_path: Path) -> None:
    data = suite(tmp_path, cluster_name, workers=2)
    failing = [f"{t['id']}: {t['outcome']}: {t['message'][:300]}" for t in data["tests"]
               if t["outcome"] not in ("passed", "not-supported")]  # fmt: skip
    assert not failing, "\n".join(failing)
    verdicts = {p["profile"]: p["verdict"] for p in data["profiles"]}
    expected = ["Core", "Plugins", "HeadlessServiceDNS", "Rollout", "InPlaceUpdate", "GangScheduling", "EvictionBudget"]
    assert verdicts == dict.fromkeys(expected, "success"), verdicts
    assert data["verdict"] == "success" and data["exitCode"] == 0
    assert report.verify(tmp_path / "conformance-report.json", digest=catalog.suite_digest()) == []
    assert report.verify(tmp_path / "conformance-report.yaml", digest=catalog.suite_digest()) == []
    cases = ET.parse(tmp_path / "junit.xml").getroot().iter("testcase")
    assert sorted(c.get("name") or "" for c in cases) == sorted(t["id"] for t in data["tests"])
    REPORTS.mkdir(exist_ok=True)
    (REPORTS / "suite-duration.json").write_text(json.dumps({"seconds": data["run"]["durationSeconds"]}))


def test_every_fault_is_classified() -> None:
    assert set(CAUGHT_BY) | set(UNDETECTABLE) == set(FAULTS)
    assert not set(CAUGHT_BY) & set(UNDETECTABLE)


_SCORE: dict[str, Any] = {}


@pytest.fixture(scope="module")
def score() -> Iterator[dict[str, Any]]:
    yield _SCORE
    caught = sum(1 for v in _SCORE.values() if v["caught"])
    summary = {
        "caught": caught,
        "variants": len(_SCORE),
        "undetectable": UNDETECTABLE,
        "score": f"{caught}/{len(FAULTS)} faults caught ({len(UNDETECTABLE)} undetectable by a spec-only suite)",
        "variantsDetail": _SCORE,
    }
    REPORTS.mkdir(exist_ok=True)
    (REPORTS / "self-validation.json").write_text(json.dumps(summary, indent=2) + "\n")


@pytest.mark.parametrize("fault", sorted(CAUGHT_BY))
def test_the_suite_catches_a_broken_variant(fault: str, cluster_name: str, tmp_path: Path, score: Any) -> None:
    data = suite(
        tmp_path, cluster_name, workers=2, ids=CAUGHT_BY[fault], reference_faults=[fault],
        timeout_scale=VARIANT_TIMEOUT_SCALE,
    )  # fmt: skip
    outcomes = {t["id"]: t["outcome"] for t in data["tests"] if t["outcome"] != "skipped-by-user"}
    caught = sorted(i for i, o in outcomes.items() if o == "non-conformant")
    score[fault] = {"caught": bool(caught), "by": caught, "outcomes": outcomes}
    assert caught, f"no test noticed fault {fault!r} ({FAULTS[fault]}); outcomes: {outcomes}"
    assert data["verdict"] == "failure" and data["exitCode"] == 1
