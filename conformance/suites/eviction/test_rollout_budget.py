"""EvictionBudget during a rolling update: ServingGroups the rollout has taken down count against
the budget like evicted ones."""

from __future__ import annotations

import copy
from typing import Any

from conformance.framework.catalog import behaviour
from conformance.framework.features import Feature
from conformance.framework.modelserving import ModelServings
from conformance.framework.rollout_watch import RolloutWatch, Snapshot

from . import (
    EVICTION,
    Binder,
    expect_budget_refused,
    pod_of,
    start,
    with_strategy,
)

NAME = "budget"
V1, V2 = "registry.example/engine:v1", "registry.example/engine:v2"


@behaviour(
    "eviction/servinggroup/during-rollout",
    "While a ServingGroupRollingUpdate (maxUnavailable 1 of 4) holds one ServingGroup down and minAvailable is "
    "3, an Eviction of a Pod of a ready ServingGroup MUST be refused.",
    EVICTION,
    Feature.EVICTION_BUDGET,
    requires=(Feature.ROLLING_UPDATE,),
    slow=True,
)
def test_evictions_refused_while_the_rollout_holds_the_floor(ms: ModelServings, manifest: Any) -> None:
    body: dict[str, Any] = manifest("eviction-groups")
    body["spec"]["rolloutStrategy"] = {
        "type": "ServingGroupRollingUpdate",
        "rollingUpdateConfiguration": {"maxUnavailable": 1},
    }
    with_strategy(body, protectionLevel="ServingGroup", minAvailable=3)
    what = "a rollout of 4 ServingGroups (maxUnavailable 1), minAvailable 3"
    binder = Binder(ms)
    layout = start(ms, binder, body)
    roles = copy.deepcopy(body["spec"]["template"]["roles"])
    for kind in ("entryTemplate", "workerTemplate"):
        roles[0][kind]["spec"]["containers"][0]["image"] = V2
    with RolloutWatch(ms, NAME, layout) as watch:
        ms.patch(NAME, {"spec": {"template": {"roles": roles}}})

        def held(s: Snapshot) -> bool:  # one ServingGroup taken down by the rollout, its new Pods Pending
            return len(s.ready_groups(layout, V1)) == 3 and len(s.ready_groups(layout)) == 3

        down = watch.wait_for("rollout", f"{what}: the rollout to take one ServingGroup down", held)
        ready = sorted(down.ready_groups(layout, V1))
        for group, member in ((ready[0], "entry"), (ready[-1], "worker")):
            answer = ms.evict(pod_of(down, group, member).name)
            expect_budget_refused(answer, f"{what}: evicting the {member} of {group} while the rollout holds 3 ready")
        # Whether an Eviction is allowed again after the update is eviction/servinggroup/within-budget-allowed's
        # SHOULD (the spec guarantees the floor only); the rollout is let finish so the namespace ends clean.
        with binder.running():
            watch.wait_settled({"server": V2}, f"{what}: the rollout to finish")
