"""InPlaceUpdate to an image that cannot be pulled: a patch is not progress until the Pods are Ready.

Why this module exists: a kubelet that cannot pull the image an in-place patch names stops the old
container and leaves the container waiting (ErrImagePull, then ImagePullBackOff): the Pod keeps its
UID and its phase Running but is not Ready, so its ServingGroup is not in ready state on the target
image. That is the update progressDeadlineSeconds exists for and the one a rollback (changing the
image back) rescues, and only a pull that really fails shows whether an implementation waits for
readiness (availableReplicas, the maxUnavailable budget, the deadline) or takes the patch itself for
progress. (These tests used to hold a Pod NotReady with a fault annotation instead.)

The image is in a registry that never resolves (:func:`conformance.cluster.faults.unpullable`), so
every cluster fails its pull; a cluster that does not show the failure makes the test
inconclusive (:func:`conformance.framework.kubelet.expect_pull_failed`), never passed.
"""

from __future__ import annotations

from typing import Any

from conformance.cluster.faults import unpullable
from conformance.framework.catalog import behaviour
from conformance.framework.features import Feature
from conformance.framework.kubelet import expect_pull_failed
from conformance.framework.modelserving import ModelServings
from conformance.framework.rollout_watch import RolloutWatch, Snapshot
from conformance.suites.rollout import never_gone, patch_roles, start, uids_of, with_image

from . import STRATEGY
from .test_inplace import NAME, V1, V2, body_of

BAD = unpullable(V2)  # same path and tag as V2 (so the same resolved imagePullPolicy): eligible in place


def _bad_groups(snapshot: Snapshot) -> set[str]:
    """ServingGroups with a live Pod whose spec names the unpullable image."""
    return {str(p.group) for p in snapshot.live() if p.image == BAD}


def _expect_pull_failed(ms: ModelServings, snapshot: Snapshot) -> None:
    """The Pods of ``snapshot`` patched to the unpullable image show the failed pull, or the test is
    inconclusive (the cluster cannot produce what it needs)."""
    pods = sorted(p.name for p in snapshot.live() if p.image == BAD)
    expect_pull_failed(ms.kube, ms.ns, pods, timeout=ms.timeouts.seconds("pods-running"))


def _hold_settings(body: dict[str, Any]) -> dict[str, Any]:
    # Spec reading: a Pod whose patched image cannot be pulled is not rebuilt for the restart while
    # the test runs, whichever of restartGracePeriodSeconds or the (default, 1800 s) progress
    # deadline an implementation applies to Pods being updated in place.
    body["spec"]["template"]["restartGracePeriodSeconds"] = 3600
    return body


@behaviour(
    "inplace/unpullable-image-holds-the-rollout",
    "With updateMethod InPlace and maxUnavailable 1, a ServingGroup whose Pods were patched in place to an image "
    "that cannot be pulled is not in ready state: status.availableReplicas MUST NOT count it, and the controller "
    "MUST NOT patch another ServingGroup while it stays unready.",
    STRATEGY,
    Feature.IN_PLACE_UPDATE,
)
def test_an_unpullable_image_holds_the_rollout(ms: ModelServings, manifest: Any) -> None:
    body = _hold_settings(body_of(manifest, 2))  # maxUnavailable 1 (the manifest)
    layout = start(ms, body)
    what = f"InPlace, maxUnavailable 1 of 2 ServingGroups, image v1 -> {BAD} (cannot be pulled)"
    with RolloutWatch(ms, NAME, layout) as watch:
        mark = watch.seq
        patch_roles(ms, body, with_image(body, BAD))
        first = watch.wait_for(
            "rollout",
            f"{what}: a ServingGroup's Pods patched in place to {BAD}",
            lambda s: any(
                len([p for p in s.live() if p.group == g and p.image == BAD]) == layout.pods_per_group
                for g in _bad_groups(s)
            ),
        )
        _expect_pull_failed(ms, first)

        def observe() -> dict[str, Any]:
            summary = ms.status_summary(NAME)
            return {"availableReplicas": summary.get("availableReplicas"), "patched": _bad_groups(watch.latest())}

        def one_unready(seen: dict[str, Any]) -> bool:
            return seen["availableReplicas"] == 1 and len(seen["patched"]) == 1

        ms.wait(
            "status-updated",
            f"{what}: status.availableReplicas 1 (the patched ServingGroup is not ready), one ServingGroup patched",
            observe,
            one_unready,
        )
        ms.holds(f"{what}: availableReplicas stays 1 and no other ServingGroup is patched", observe, one_unready)
        timeline = watch.snapshot_timeline()
    most, at = max(((len(_bad_groups(s)), s) for s in timeline.since(mark)), key=lambda pair: pair[0])
    assert most <= 1, (
        f"{what}: the controller patched {most} ServingGroups to the image that cannot be pulled while the first "
        f"was unready (maxUnavailable 1): {at.describe()}"
    )


@behaviour(
    "inplace/rollback",
    "With updateMethod InPlace, changing the image back while an in-place update is unfinished SHOULD be applied "
    "before the update's progressDeadlineSeconds, bringing the same Pods (same UIDs) back to the previous image "
    "(the spec does not say when an unfinished in-place update takes a new target).",
    STRATEGY,
    Feature.IN_PLACE_UPDATE,
)
def test_retargeting_rolls_back_in_place(ms: ModelServings, manifest: Any) -> None:
    body = _hold_settings(body_of(manifest, 1))
    layout = start(ms, body)
    what = f"InPlace, v1 -> {BAD} (cannot be pulled), then back to v1"
    with RolloutWatch(ms, NAME, layout) as watch:
        uids = uids_of(list(watch.latest().pods))
        patch_roles(ms, body, with_image(body, BAD))

        def patched(s: Snapshot) -> bool:
            return s.uids() == uids and all(p.image == BAD for p in s.live())

        _expect_pull_failed(ms, watch.wait_for("rollout", f"{what}: every Pod patched to {BAD} in place", patched))
        rejection = ms.try_patch(NAME, {"spec": {"template": {"roles": with_image(body, V1)}}})
        assert rejection is None, f"{what}: changing the image back during the update must be accepted: {rejection}"
        settled = watch.wait_settled({"server": V1}, what)
        timeline = watch.snapshot_timeline()
    never_gone(timeline, uids, what)
    assert settled.uids() == uids, f"{what}: expected the same Pods (UIDs) back on {V1}: {settled.describe()}"


@behaviour(
    "inplace/progress-deadline",
    "When a ServingGroup updated in place is not ready on the target image progressDeadlineSeconds after the "
    "update, the controller MUST report a Warning Event ProgressDeadlineExceeded and then MUST handle its unready "
    "Pods by the RecoveryPolicy (RoleRecreate replaces them), not before the deadline.",
    STRATEGY,
    Feature.PROGRESS_DEADLINE,
    slow=True,
)
def test_progress_deadline_hands_unready_pods_to_recovery(ms: ModelServings, manifest: Any) -> None:
    deadline = 60
    body = body_of(manifest, 1, progressDeadlineSeconds=deadline)
    layout = start(ms, body)
    what = f"InPlace, progressDeadlineSeconds {deadline}, image v1 -> {BAD} (cannot be pulled)"
    with RolloutWatch(ms, NAME, layout) as watch:
        originals = uids_of(list(watch.latest().pods))
        mark = watch.seq
        patched_at = watch.elapsed()
        patch_roles(ms, body, with_image(body, BAD))

        def patched(s: Snapshot) -> bool:
            return s.uids() == originals and all(p.image == BAD for p in s.live())

        _expect_pull_failed(ms, watch.wait_for("rollout", f"{what}: every Pod patched to {BAD} in place", patched))
        event = ms.wait_event(NAME, "ProgressDeadlineExceeded", wait="progress-deadline")

        def replaced(s: Snapshot) -> bool:
            live = s.live()
            return len(live) == layout.pods_per_group and not set(originals.values()) & {p.uid for p in live}

        watch.wait_for("recovery", f"{what}: the unready Pods replaced by the RecoveryPolicy", replaced)
        timeline = watch.snapshot_timeline()
    assert event.type == "Warning", f"{what}: ProgressDeadlineExceeded must be a Warning Event, seen {event.type}"
    assert (event.message or "").strip(), f"{what}: the ProgressDeadlineExceeded Event must say why"
    for name, uid in sorted(originals.items()):
        gone = timeline.gone_at(uid, since=mark)
        assert gone is not None, f"{what}: Pod {name} (not ready on the target image) was never replaced"
        waited = gone.at - patched_at
        assert waited >= deadline - 2, (
            f"{what}: Pod {name} was deleted {waited:.1f}s after the update, before progressDeadlineSeconds "
            f"({deadline}s) passed: {gone.describe()}"
        )
