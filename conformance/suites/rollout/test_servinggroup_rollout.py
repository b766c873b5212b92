"""Rollout: ServingGroupRollingUpdate budgets (maxUnavailable, maxSurge), partitions and retargeting."""

from __future__ import annotations

from typing import Any

from conformance.framework.catalog import behaviour
from conformance.framework.features import Feature
from conformance.framework.modelserving import ModelServings
from conformance.framework.outcomes import Inconclusive
from conformance.framework.rollout_watch import RolloutWatch, Snapshot, ordinal

from . import (
    API,
    by_ordinal,
    expect_max_groups,
    expect_min_ready_groups,
    expect_status_updated,
    group_pods,
    patch_roles,
    start,
    uids_of,
    with_image,
)

NAME = "rollout"
V1, V2, V3 = "registry.example/engine:v1", "registry.example/engine:v2", "registry.example/engine:v3"
CONFIG = f"{API}#RollingUpdateConfiguration"


def _body(manifest: Any, replicas: int, **budget: Any) -> dict[str, Any]:
    body: dict[str, Any] = manifest("rollout-groups")
    body["spec"]["replicas"] = replicas
    body["spec"]["rolloutStrategy"] = {"type": "ServingGroupRollingUpdate", "rollingUpdateConfiguration": budget}
    return body


def _roll(ms: ModelServings, body: dict[str, Any], *, min_ready: int, max_groups: int, what: str) -> None:
    """Change the image v1 -> v2 under a watch; the rollout must finish within the bounds."""
    layout = start(ms, body)
    with RolloutWatch(ms, NAME, layout) as watch:
        patch_roles(ms, body, with_image(body, V2))
        watch.wait_settled({"server": V2}, what)
        timeline = watch.snapshot_timeline()
    expect_min_ready_groups(timeline, layout, min_ready, what)
    expect_max_groups(timeline, max_groups, what)
    expect_status_updated(ms, NAME, what)


@behaviour(
    "rollout/sg/max-unavailable",
    "During a ServingGroupRollingUpdate with maxUnavailable 2 and 4 ServingGroups, at least 2 ServingGroups MUST "
    "be ready at every moment and no more than 4 MUST exist (maxSurge defaults to 0), and the update MUST finish "
    "with every Pod on the new template, status.updatedReplicas equal to spec.replicas and currentRevision equal "
    "to updateRevision.",
    CONFIG,
    Feature.ROLLING_UPDATE,
)
def test_max_unavailable_bounds_the_rollout(ms: ModelServings, manifest: Any) -> None:
    body = _body(manifest, 4, maxUnavailable=2)
    _roll(ms, body, min_ready=2, max_groups=4, what="maxUnavailable 2 of 4")


@behaviour(
    "rollout/sg/max-unavailable-percent-rounds-down",
    "A percentage maxUnavailable MUST be resolved against spec.replicas rounding down, so with 40% of 4 "
    "ServingGroups (1) at least 3 ServingGroups MUST be ready at every moment of the update.",
    CONFIG,
    Feature.ROLLING_UPDATE,
)
def test_max_unavailable_percentage_rounds_down(ms: ModelServings, manifest: Any) -> None:
    body = _body(manifest, 4, maxUnavailable="40%")
    _roll(ms, body, min_ready=3, max_groups=4, what="maxUnavailable 40% of 4 (1)")


@behaviour(
    "rollout/sg/max-surge",
    "With maxSurge 1 and maxUnavailable 0, a ServingGroupRollingUpdate of 4 ServingGroups MUST finish while never "
    "more than 5 ServingGroups exist and never fewer than 4 are ready.",
    CONFIG,
    Feature.MAX_SURGE,
)
def test_max_surge_bounds_the_rollout(ms: ModelServings, manifest: Any) -> None:
    body = _body(manifest, 4, maxUnavailable=0, maxSurge=1)
    _roll(ms, body, min_ready=4, max_groups=5, what="maxSurge 1, maxUnavailable 0, 4 ServingGroups")


@behaviour(
    "rollout/sg/max-surge-percent-rounds-up",
    "A percentage maxSurge MUST be resolved against spec.replicas rounding up, so with 25% of 3 ServingGroups (1) "
    "and maxUnavailable 0 the update MUST finish while never more than 4 ServingGroups exist and never fewer than "
    "3 are ready.",
    CONFIG,
    Feature.MAX_SURGE,
)
def test_max_surge_percentage_rounds_up(ms: ModelServings, manifest: Any) -> None:
    body = _body(manifest, 3, maxUnavailable=0, maxSurge="25%")
    _roll(ms, body, min_ready=3, max_groups=4, what="maxSurge 25% of 3 (1), maxUnavailable 0")


def _partition(ms: ModelServings, manifest: Any, partition: int | str, protected: int) -> None:
    body = _body(manifest, 4, partition=partition)
    layout = start(ms, body)
    what = f"partition {partition!r} of 4 ServingGroups ({protected} protected)"
    with RolloutWatch(ms, NAME, layout) as watch:
        baseline = watch.latest()
        groups = by_ordinal(baseline)
        assert len(groups) == 4, f"expected 4 ServingGroups before the update, seen {groups}"
        kept, updated = groups[:protected], groups[protected:]
        kept_uids = {g: uids_of(group_pods(baseline, g)) for g in kept}

        def split(s: Snapshot) -> bool:
            return s.ready_groups(layout, V2) == set(updated) and s.ready_groups(layout, V1) == set(kept)

        patch_roles(ms, body, with_image(body, V2))
        watch.wait_for(
            "rollout",
            f"{what}: ServingGroups {updated} ready on {V2} and {kept} (the lowest ordinals) ready on {V1}",
            split,
        )

        def unchanged(s: Snapshot) -> bool:
            return split(s) and all(uids_of(group_pods(s, g)) == kept_uids[g] for g in kept)

        ms.holds(
            f"{what}: ServingGroups {kept} keep their Pods (same UIDs, {V1}) and {updated} stay on {V2}",
            watch.latest,
            unchanged,
        )
        timeline = watch.snapshot_timeline()
    for g in kept:
        for name, uid in kept_uids[g].items():
            gone = timeline.gone_at(uid)
            assert gone is None, (
                f"{what}: Pod {name} of protected ServingGroup {g} (ordinal {ordinal(g)}) must never be deleted; "
                f"it was at {gone.describe()}"
            )
    expect_min_ready_groups(timeline, layout, 3, what)
    status = ms.wait_updated(NAME, 4 - protected)
    current, update = status.get("currentRevision") or "", status.get("updateRevision") or ""
    assert not current or not update or current != update, (
        f"{what}: with {protected} ServingGroups kept on the old revision, status.currentRevision must name it, "
        f"not the update revision; seen currentRevision={current!r}, updateRevision={update!r}"
    )


@behaviour(
    "rollout/sg/partition",
    "With partition 2, a ServingGroupRollingUpdate MUST update only the ServingGroups above the 2 lowest "
    "ordinals, MUST NOT touch the Pods of the 2 lowest, and status.updatedReplicas MUST report the 2 updated.",
    CONFIG,
    Feature.ROLLING_UPDATE,
)
def test_partition_protects_the_lowest_ordinals(ms: ModelServings, manifest: Any) -> None:
    _partition(ms, manifest, 2, 2)


@behaviour(
    "rollout/sg/partition-percent-rounds-up",
    "A percentage partition MUST be resolved against spec.replicas rounding up, so 30% of 4 ServingGroups MUST "
    "protect the 2 lowest ordinals from the update.",
    CONFIG,
    Feature.ROLLING_UPDATE,
)
def test_partition_percentage_rounds_up(ms: ModelServings, manifest: Any) -> None:
    _partition(ms, manifest, "30%", 2)


@behaviour(
    "rollout/sg/retarget-mid-rollout",
    "A template change during an unfinished ServingGroupRollingUpdate MUST retarget it: every ServingGroup MUST "
    "end on the latest template, and maxUnavailable MUST hold throughout.",
    CONFIG,
    Feature.ROLLING_UPDATE,
)
def test_a_second_change_retargets_the_rollout(ms: ModelServings, manifest: Any) -> None:
    body = _body(manifest, 5, maxUnavailable=1)
    layout = start(ms, body)
    what = "v1 -> v2, retargeted to v3 mid-way, maxUnavailable 1 of 5"
    with RolloutWatch(ms, NAME, layout) as watch:
        patch_roles(ms, body, with_image(body, V2))
        watch.wait_for("rollout", f"{what}: a first Pod on {V2}", lambda s: any(p.image == V2 for p in s.pods))
        mark = watch.seq  # the timeline up to here is what the v3 change interrupted
        patch_roles(ms, body, with_image(body, V3))
        watch.wait_settled({"server": V3}, what)
        timeline = watch.snapshot_timeline()
    before = timeline.snapshots[mark - 1]
    if before.settled_on(layout, {"server": V2}):
        raise Inconclusive(f"{what}: the rollout to {V2} finished before it could be retargeted; {before.describe()}")
    expect_min_ready_groups(timeline, layout, 4, what)
    expect_max_groups(timeline, 5, what)
    expect_status_updated(ms, NAME, what)
