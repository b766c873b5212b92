"""EvictionBudget under a node drain (cordon, then Evictions retried while refused, as
``kubectl drain`` does on HTTP 429): the drain finishes, and never takes ready ServingGroups below
minAvailable. Every refusal is retried, whatever its code: which code the budget refuses with is
the SHOULD behaviour eviction/servinggroup/refusal-too-many-requests, not this one.

Disruptive and cluster-wide (it cordons a node every test shares), so it runs in the serial pass.
"""

from __future__ import annotations

from typing import Any

from conformance.framework import drain
from conformance.framework.catalog import behaviour
from conformance.framework.features import Feature
from conformance.framework.modelserving import ModelServings, member
from conformance.framework.outcomes import Inconclusive
from conformance.framework.rollout_watch import RolloutWatch

from . import EVICTION, Binder, expect_ready_floor, schedulable_nodes, start, with_strategy

NAME = "budget"


@behaviour(
    "eviction/servinggroup/drain",
    "A node drain that evicts through the Eviction API and retries refusals MUST be able to finish while the "
    "evicted ServingGroups recover elsewhere, and MUST NOT at any moment leave fewer ready ServingGroups than "
    "minAvailable (3 of 4, every ServingGroup with a Pod on the drained node).",
    EVICTION,
    Feature.EVICTION_BUDGET,
    serial=True,
    slow=True,
)
def test_drain_keeps_min_available(ms: ModelServings, manifest: Any, suite: Any) -> None:
    nodes = schedulable_nodes(ms.kube)
    if len(nodes) < 2:
        raise Inconclusive(f"a drain test needs 2 schedulable nodes; the cluster has {nodes}")
    drained, other = nodes[0], nodes[1]

    def place(pod: Any, schedulable: list[str]) -> str | None:
        # Entries on the node to drain, workers on the other: every ServingGroup has a Pod there.
        want = drained if member(pod) == "entry" else other
        return want if want in schedulable else next((n for n in schedulable if n != drained), None)

    body: dict[str, Any] = manifest("eviction-groups")
    with_strategy(body, protectionLevel="ServingGroup", minAvailable=3)
    what = f"draining {drained} (an entry of each of 4 ServingGroups), minAvailable 3"
    binder = Binder(ms, place)
    layout = start(ms, binder, body)
    on_node = [p.name for p in drain.node_pods(ms.kube, drained, ms.ns)]
    assert len(on_node) == 4, f"expected the 4 entry Pods on {drained} before the drain; seen {on_node}"
    with RolloutWatch(ms, NAME, layout) as watch, binder.running():
        try:
            result = drain.drain(
                ms.kube,
                drained,
                timeout=ms.timeouts.seconds("drain"),
                namespace=ms.ns,
                run_id=ms.run_id,
                retry_refusals=True,
            )
        finally:
            drain.uncordon(ms.kube, drained)
        watch.wait_for("recovery", f"{what}: every ServingGroup ready again",
                       lambda s: len(s.ready_groups(layout)) == 4)  # fmt: skip
        timeline = watch.snapshot_timeline()
    evicted = sorted({key.split("/", 1)[1] for key in result.evicted})
    assert set(on_node) <= set(evicted), f"{what}: the drain must evict every Pod on the node; evicted {evicted}"
    expect_ready_floor(timeline, layout, 3, what)
