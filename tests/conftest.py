"""The project's own tests: unit tests need nothing; tests marked ``cluster`` get the embedded one
(started with the reference's CRDs), and the ones that need it the reference controller too.

After a run that included self-validation (tests/integration/test_self_validation.py, whose
variants may run on several xdist workers), the controller process sums up the variants'
records into ``reports/self-validation.json`` and prints the mutation score."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import pytest

pytest_plugins = ["conformance.cluster.testing", "conformance.implementations.testing"]

# Runs of the suite made by these tests (and the CLI processes they start) get no real nodes unless
# a test asks (`real_nodes=True`): the host runs one real-node cluster at a time, so only the tests
# about real nodes compete for it (conformance/run/realnodes.py).
os.environ["KTHENA_REAL_NODES"] = "off"

_VARIANTS = Path(__file__).resolve().parents[1] / "reports" / "self-validation"


@pytest.fixture(scope="session")
def cluster_crds() -> list[dict[str, Any]]:
    """The shared cluster starts with the reference's CRDs, so deleting a ModelServing in the first
    tests does not wait for the garbage collector's discovery resync."""
    from conformance.implementations import reference

    return reference.crds()


_STARTED = time.time()


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    if hasattr(config, "workerinput"):
        return
    # this run's variants only (an earlier run's records may still be there): `make test`'s passes
    # share the run's start (ci/test_passes.py), so the real-node variants of the serial pass count too
    started = float(os.environ.get("KTHENA_TEST_RUN_STARTED") or _STARTED)
    fresh = [p for p in sorted(_VARIANTS.glob("*.json")) if p.stat().st_mtime >= started]
    records = [json.loads(p.read_text()) for p in fresh]
    if not records:
        return
    from kthena_ref.faults import FAULTS
    from tests.integration.test_real_node_variants import DEVICE_CAUGHT_BY
    from tests.integration.test_self_validation import CAUGHT_BY, REAL_NODE_CAUGHT_BY, UNDETECTABLE

    caught = [r["fault"] for r in records if r["caught"]]
    expected: set[str] = set()  # the kinds of variant that ran: kwok-only, real nodes, or both
    if any(not r.get("realNodes") for r in records):
        expected |= set(CAUGHT_BY)
    if any(r.get("realNodes") for r in records):
        expected |= set(REAL_NODE_CAUGHT_BY) | set(DEVICE_CAUGHT_BY)
    missed = sorted(expected - set(caught))
    reference_caught = [f for f in caught if f in FAULTS]
    summary = {
        "caught": len(caught),
        "variants": len(records),
        "score": f"{len(reference_caught)}/{len(FAULTS)} faults of the reference caught "
        f"({len(UNDETECTABLE)} undetectable by a spec-only suite)"
        + (
            f"; fake drivers: {len(caught) - len(reference_caught)} caught"
            if len(caught) > len(reference_caught)
            else ""
        ),
        "missed": missed,
        "undetectable": UNDETECTABLE,
        "variantSeconds": round(sum(r["seconds"] for r in records), 1),  # each fault's share of its run
        # controller starts: a round's faults share one (tests/integration/selfval_rounds.py)
        "runs": len({(r.get("round") or r["fault"], bool(r.get("realNodes"))) for r in records}),
        "variantsDetail": {r["fault"]: r for r in records},
    }
    (_VARIANTS.parent / "self-validation.json").write_text(json.dumps(summary, indent=2) + "\n")
    terminalreporter.write_line(
        f"self-validation: {summary['score']}; {len(records)} fault(s) proven in {summary['runs']} run(s), "
        f"{summary['variantSeconds']} s of runs; details in reports/self-validation.json"
        + (f"; NOT caught: {', '.join(missed)}" if missed else "")
    )
