"""run --dry-run names the behaviours that need real nodes when the run would have none (issue 31):
it said they would run on a host that cannot run them."""

from __future__ import annotations

import pytest

from conformance.framework import catalog
from conformance.framework.realnodes import needs_real_nodes
from conformance.framework.support import support_from_flags
from conformance.run.orchestration import dry_run_verdict


@pytest.mark.parametrize(
    ("source", "needs"),
    [
        pytest.param('    real = require(suite, "a Pod serving its metrics")', True, id="require"),
        pytest.param('    real = realnodes.require(suite, "x")', True, id="qualified"),
        pytest.param("    real = if_declared(suite, request, 'x')", False, id="optional-real-nodes"),
        pytest.param("    ms.require_nothing(suite)", False, id="another-name"),
    ],
)
def test_needs_real_nodes(source: str, needs: bool) -> None:
    assert needs_real_nodes(source) is needs


def test_dry_run_says_a_real_node_behaviour_is_inconclusive_without_them() -> None:
    behaviours = {b.id: b for b in catalog.collect()}
    support = support_from_flags("impl", "1", None, True)
    pod_metric = behaviours["autoscaling/pod-metric/scrape"]
    verdict = dry_run_verdict(pod_metric, support, "local", frozenset(), "real nodes: none (--no-real-nodes)")
    assert verdict == "inconclusive here: it needs real nodes (real nodes: none (--no-real-nodes))"
    assert dry_run_verdict(pod_metric, support, "local", frozenset(), None) == "run"
    plain = behaviours["core/spec/defaults"]
    assert dry_run_verdict(plain, support, "local", frozenset(), "real nodes: none") == "run"
