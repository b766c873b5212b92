"""InPlaceUpdateFallback: the recreate fallback of headless-service ModelServings keeps the rollout budget.

Why this module exists: the headless-service plugin does not support in-place updates, so its
ModelServings "use the controller's recreate fallback ... including image-only changes", and the
plugin document adds "Plan for the selected rollout budget and Pod replacement": the fallback
recreates ServingGroups within maxUnavailable like any rolling update.
:mod:`.test_fallback` checks that the fallback happens (one ServingGroup); this checks its pace.
"""

from __future__ import annotations

from typing import Any

from conformance.framework.catalog import behaviour
from conformance.framework.features import Feature
from conformance.framework.modelserving import ModelServings
from conformance.framework.rollout_watch import RolloutWatch, Snapshot
from conformance.suites.rollout import expect_min_ready_groups, patch_roles, start, uids_of, with_image

from . import PLUGIN_INTERACTION
from .test_inplace import V2


@behaviour(
    "inplace/fallback/headless-service-within-budget",
    "A ModelServing with the headless-service plugin, updateMethod InPlace and maxUnavailable 1 of 3 ServingGroups "
    "MUST take the recreate fallback for an image-only change within the budget: at least 2 ServingGroups MUST be "
    "ready at every moment, and every Pod MUST end replaced (new UIDs) on the new image.",
    PLUGIN_INTERACTION,
    Feature.IN_PLACE_FALLBACK,
    requires=(Feature.HEADLESS_SERVICE,),
)
def test_headless_service_fallback_keeps_the_budget(ms: ModelServings, manifest: Any) -> None:
    body: dict[str, Any] = manifest("inplace-headless")
    body["spec"]["replicas"] = 3
    body["spec"]["rolloutStrategy"]["rollingUpdateConfiguration"] = {"maxUnavailable": 1}
    name = body["metadata"]["name"]
    what = "InPlace with headless-service, image only, maxUnavailable 1 of 3 ServingGroups"
    layout = start(ms, body)
    with RolloutWatch(ms, name, layout) as watch:
        before = set(uids_of(list(watch.latest().pods)).values())
        patch_roles(ms, body, with_image(body, V2))

        def replaced(s: Snapshot) -> bool:
            return s.settled_on(layout, {"server": V2}) and not before & set(s.uids().values())

        watch.wait_for("rollout", f"{what}: every Pod replaced (new UIDs) and Ready on {V2}", replaced)
        timeline = watch.snapshot_timeline()
    expect_min_ready_groups(timeline, layout, 2, what)
