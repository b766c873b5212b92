"""Rollout: updateMethod Recreate, the default, replaces the Pods of an outdated ServingGroup.

Why this module exists: the budget tests only look at availability, which an implementation that
patched images in place would keep too. "RecreateUpdateMethod deletes outdated Pods and creates new
ones", and Recreate is the default, so after an image-only change under Recreate (given or left to
its default) no Pod of the ServingGroup may keep its UID. The InPlace method is the InPlaceUpdate
suite's.
"""

from __future__ import annotations

from typing import Any

from conformance.framework.catalog import behaviour
from conformance.framework.features import Feature
from conformance.framework.modelserving import ModelServings
from conformance.framework.rollout_watch import RolloutWatch, Snapshot

from . import API, expect_status_updated, patch_roles, start, uids_of, with_image

NAME = "update-method"
V2 = "registry.example/engine:v2"


def _expect_replaced(ms: ModelServings, body: dict[str, Any], what: str) -> None:
    """Change only the image under a watch: every Pod must end Running and Ready on it with a new UID."""
    layout = start(ms, body)
    with RolloutWatch(ms, NAME, layout) as watch:
        before = set(uids_of(list(watch.latest().pods)).values())
        patch_roles(ms, body, with_image(body, V2))

        def replaced(s: Snapshot) -> bool:
            return s.settled_on(layout, {"server": V2}) and not before & set(s.uids().values())

        watch.wait_for(
            "rollout",
            f"{what}: every Pod replaced (none of the UIDs {sorted(before)} left) and Ready on {V2}",
            replaced,
        )
    expect_status_updated(ms, NAME, what)


@behaviour(
    "rollout/update-method/recreate-replaces-pods",
    "With rolloutStrategy.updateMethod Recreate, an image-only change MUST delete the outdated Pods and create new "
    "ones (no Pod keeps its UID), ending with every Pod Running and Ready on the new image.",
    f"{API}#UpdateMethod",
    Feature.ROLLING_UPDATE,
)
def test_recreate_replaces_the_pods(ms: ModelServings, manifest: Any) -> None:
    body: dict[str, Any] = manifest("rollout-update-method")
    body["spec"]["rolloutStrategy"] = {"type": "ServingGroupRollingUpdate", "updateMethod": "Recreate"}
    _expect_replaced(ms, body, "updateMethod Recreate, image v1 -> v2")


@behaviour(
    "rollout/update-method/default-recreate",
    "With no rolloutStrategy, updates MUST use the default updateMethod Recreate, so an image-only change MUST "
    "replace every Pod (new UIDs) and end with every Pod Running and Ready on the new image.",
    f"{API}#RolloutStrategy",
    Feature.ROLLING_UPDATE,
)
def test_recreate_is_the_default_update_method(ms: ModelServings, manifest: Any) -> None:
    body: dict[str, Any] = manifest("rollout-update-method")
    _expect_replaced(ms, body, "no rolloutStrategy (updateMethod defaults to Recreate), image v1 -> v2")
