"""Self-validation: every switchable fault of the reference controller is caught by the behaviour
it targets, at a cost that grows with the number of faults, not faults x behaviours.

For each fault in :data:`CAUGHT_BY` the suite runs only the behaviours that fault must break,
against the reference controller started with that fault (``kthena-ref run --fault NAME``), and
at least one of them must come out non-conformant (and the run's verdict ``failure``). What makes
a catch mean something:

- the waits are the same as the control run's (``test_conformance_suite.py`` runs the whole suite
  against the healthy reference with ``kept_runs.WAIT_OVERRIDES`` too), so a behaviour that passes for the
  healthy controller within these waits and fails for the broken one is failed by the fault, not
  by a short deadline;
- every variant runs through the same :func:`conformance.runner.run` a user runs: cluster, deploy,
  preflight, the pytest passes, the report.

Cost: a variant reuses a kept embedded cluster (one per xdist worker; ``make test`` runs this
module on several workers, so variants that wait out a deadline overlap) and restarts only the
controller. Faults that break behaviour the spec does not document cannot be caught by a
spec-only suite; they are listed in :data:`UNDETECTABLE` with the reason. Each variant's outcome
goes to ``reports/self-validation/<fault>.json``; ``tests/conftest.py`` sums them up in
``reports/self-validation.json`` and on the terminal.
"""

from __future__ import annotations

import fnmatch
import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from kthena_ref.faults import FAULTS
from tests.integration.kept_runs import WAIT_OVERRIDES, kept_cluster, kept_run

pytestmark = [pytest.mark.serial, pytest.mark.own_controller, pytest.mark.slow, pytest.mark.self_validation]

REPORTS = Path(__file__).resolve().parents[2] / "reports"
VARIANTS_DIR = REPORTS / "self-validation"

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


def test_every_fault_is_classified() -> None:
    assert set(CAUGHT_BY) | set(UNDETECTABLE) == set(FAULTS)
    assert not set(CAUGHT_BY) & set(UNDETECTABLE)


@pytest.fixture(scope="session")
def variant_cluster(worker_id: str) -> Iterator[str]:
    """One kept embedded cluster per xdist worker (dying with this process), reused by every
    variant the worker runs: a variant restarts only the controller."""
    yield from kept_cluster(f"selfval-{worker_id}-{os.getpid()}")


# `make test-all`: every variant runs the whole suite (faults x behaviours) and records what else
# it breaks; the targets must still be among the non-conformant behaviours.
EXHAUSTIVE = os.environ.get("KTHENA_SELFVAL_EXHAUSTIVE") == "1"


@pytest.mark.parametrize("fault", sorted(CAUGHT_BY))
def test_the_suite_catches_a_broken_variant(fault: str, variant_cluster: str, tmp_path: Path) -> None:
    data = kept_run(
        tmp_path,
        variant_cluster,
        ids=[] if EXHAUSTIVE else CAUGHT_BY[fault],
        reference_faults=[fault],
        timeouts=WAIT_OVERRIDES,
        workers=2 if EXHAUSTIVE else 1,
    )
    outcomes = {t["id"]: t["outcome"] for t in data["tests"] if t["outcome"] != "skipped-by-user"}
    broken = sorted(i for i, o in outcomes.items() if o == "non-conformant")
    caught = [i for i in broken if any(fnmatch.fnmatchcase(i, pattern) for pattern in CAUGHT_BY[fault])]
    VARIANTS_DIR.mkdir(parents=True, exist_ok=True)
    record = {
        "fault": fault,
        "description": FAULTS[fault],
        "caught": bool(caught),
        "by": caught,
        "alsoBroken": sorted(set(broken) - set(caught)),
        "outcomes": outcomes,
        "seconds": data["run"]["durationSeconds"],
    }
    (VARIANTS_DIR / f"{fault}.json").write_text(json.dumps(record, indent=2) + "\n")
    messages = {t["id"]: t["message"][:400] for t in data["tests"] if t["outcome"] != "skipped-by-user"}
    assert caught, f"no test noticed fault {fault!r} ({FAULTS[fault]}); outcomes: {outcomes}; messages: {messages}"
    assert data["verdict"] == "failure" and data["exitCode"] == 1, (data["verdict"], data["exitCode"])
