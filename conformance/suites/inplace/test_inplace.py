"""InPlaceUpdate: image-only changes patch the Pods they find, within the rollout budget."""

from __future__ import annotations

from typing import Any

from conformance.cluster.faults import Fault
from conformance.framework import realnodes
from conformance.framework.catalog import behaviour
from conformance.framework.features import Feature
from conformance.framework.modelserving import (
    ModelServings,
    container_of,
    expect_refused,
    expected_pod_count,
    running_ready,
)
from conformance.framework.rollout_watch import Layout, RolloutWatch
from conformance.suites.rollout import expect_status_updated, never_gone, patch_roles, start, uids_of, with_image

from . import PLUGIN_INTERACTION, STRATEGY, UPDATE_METHOD

NAME = "inplace"
V1, V2 = "registry.example/engine:v1", "registry.example/engine:v2"


def body_of(manifest: Any, replicas: int = 2, **strategy: Any) -> dict[str, Any]:
    body: dict[str, Any] = manifest("inplace-groups")
    body["spec"]["replicas"] = replicas
    body["spec"]["rolloutStrategy"].update(strategy)
    return body


def hold_worker(ms: ModelServings, faults: Any, watch: RolloutWatch, layout: Layout) -> tuple[str, str, str]:
    """Hold one worker Pod NotReady; (its name, its UID, its ServingGroup) once its group is not ready."""
    victim = next(p for p in watch.latest().pods if p.member == "worker")
    faults.inject(ms.ns, victim.name, Fault.NOT_READY)
    ready = layout.replicas - 1
    watch.wait_for(
        "pods-running",
        f"Pod {victim.name} held NotReady ({ready} ServingGroups ready)",
        lambda s: victim.group not in s.ready_groups(layout) and len(s.ready_groups(layout)) == ready,
    )
    assert victim.group is not None
    return victim.name, victim.uid, victim.group


def clear(ms: ModelServings, faults: Any, pod: str) -> None:
    """Let a held Pod be Ready again (a Pod already replaced has nothing to clear)."""
    from kubernetes.client.exceptions import ApiException

    try:
        faults.inject(ms.ns, pod, Fault.CLEAR)
    except ApiException as exc:
        if exc.status != 404:
            raise


@behaviour(
    "inplace/image-only-keeps-uids",
    "With updateMethod InPlace, a change of only regular-container images MUST patch the images of the existing "
    "Pods, keeping every Pod's UID, and the update MUST finish with status.updatedReplicas equal to spec.replicas.",
    STRATEGY,
    Feature.IN_PLACE_UPDATE,
)
def test_image_only_change_keeps_the_pods(ms: ModelServings, manifest: Any, suite: Any, request: Any) -> None:
    body = body_of(manifest)
    real = realnodes.if_declared(suite, request, SIMULATED_RESTART)
    new_image = V2
    if real is not None:  # the Pods run for real: the kubelet restarts each container on the new image
        realnodes.place_modelserving(body, real, variant="v1")
        new_image = real.images.get("v2") or V2
    layout = start(ms, body)
    what = "InPlace, image v1 -> v2"
    before = {p.metadata.uid: _running_image(p) for p in ms.pods(NAME)}
    with RolloutWatch(ms, NAME, layout) as watch:
        uids = uids_of(list(watch.latest().pods))
        patch_roles(ms, body, with_image(body, new_image))
        settled = watch.wait_settled({"server": new_image}, what)
        timeline = watch.snapshot_timeline()
    never_gone(timeline, uids, what)
    assert settled.uids() == uids, f"{what}: expected the same Pods (UIDs) after the update: {settled.describe()}"
    expect_status_updated(ms, NAME, what)
    if real is not None:
        _expect_restarted_on_the_new_image(ms, before, what)
        realnodes.observed_on_real_nodes(request, [p.spec.node_name for p in ms.pods(NAME)])


SIMULATED_RESTART = "kwok's in-place stage marked the container restarted on the new image: no container ran"


def _running_image(pod: Any) -> tuple[str, int]:
    """(imageID, restartCount) of the Pod's template container as the kubelet reports it."""
    (status,) = [s for s in pod.status.container_statuses or [] if s.name == container_of(pod).name] or [None]
    return (status.image_id or "", status.restart_count or 0) if status is not None else ("", 0)


def _expect_restarted_on_the_new_image(ms: ModelServings, before: dict[str, tuple[str, int]], what: str) -> None:
    """On real nodes: every Pod (same UID) has its container restarted by the kubelet (restartCount
    up) and running an image other than before (a new imageID), Ready again."""

    def seen() -> dict[str, tuple[str, int, bool]]:
        return {
            p.metadata.uid: (*_running_image(p), running_ready(p)) for p in ms.pods(NAME) if p.metadata.uid in before
        }

    def done(now: dict[str, tuple[str, int, bool]]) -> bool:
        return len(now) == len(before) and all(
            image and image != before[uid][0] and restarts > before[uid][1] and ready
            for uid, (image, restarts, ready) in now.items()
        )

    ms.wait(
        "pods-running",
        f"{what}: every Pod's container restarted in place by the kubelet and running the new image",
        seen,
        done,
        describe=lambda now: "; ".join(
            f"{uid[:8]}: imageID {before[uid][0][-12:]} -> {image[-12:]}, restarts {before[uid][1]} -> {restarts}, "
            f"ready {ready}"
            for uid, (image, restarts, ready) in sorted(now.items())
        ),
    )


@behaviour(
    "inplace/budget",
    "With updateMethod InPlace and maxUnavailable 1, while one of 3 ServingGroups is not ready the controller "
    "MUST NOT patch the images of another (an image patch restarts containers), so at least 2 ServingGroups MUST "
    "stay ready, and the update MUST finish in place once the unready one recovers.",
    STRATEGY,
    Feature.IN_PLACE_UPDATE,
)
def test_in_place_update_stays_within_the_budget(ms: ModelServings, manifest: Any, faults: Any) -> None:
    body = body_of(manifest, 3, rollingUpdateConfiguration={"maxUnavailable": 1})
    layout = start(ms, body)
    what = "InPlace, maxUnavailable 1 of 3, one ServingGroup held not ready"
    with RolloutWatch(ms, NAME, layout) as watch:
        held, _, held_group = hold_worker(ms, faults, watch, layout)
        others = uids_of([p for p in watch.latest().pods if p.group != held_group])
        mark = watch.seq
        patch_roles(ms, body, with_image(body, V2))
        ms.holds(
            f"{what}: the 2 other ServingGroups stay ready while {held_group} is not",
            watch.latest,
            lambda s: len(s.ready_groups(layout)) >= 2,
        )
        clear(ms, faults, held)
        watch.wait_settled({"server": V2}, what)
        timeline = watch.snapshot_timeline()
    value, at = timeline.min_ready_groups(layout, since=mark)
    assert value >= 2, (
        f"{what}: expected at least 2 ready ServingGroups at every moment (a Pod whose new image is not yet "
        f"running counts as unavailable); {value} at {at.describe()}"
    )
    never_gone(timeline, others, f"{what}: ServingGroups other than {held_group} are updated in place")


@behaviour(
    "inplace/progress-deadline-minimum",
    "A rolloutStrategy.progressDeadlineSeconds below 60 MUST be refused at admission and not stored, and 60 MUST be "
    "accepted.",
    STRATEGY,
    Feature.PROGRESS_DEADLINE,
)
def test_progress_deadline_minimum(ms: ModelServings, manifest: Any) -> None:
    for seconds in (59, 0):
        body = body_of(manifest, 0, progressDeadlineSeconds=seconds)
        body["metadata"]["name"] = f"deadline-{seconds}"
        ms.refused_create(body, f"progressDeadlineSeconds {seconds}")
    body = body_of(manifest, 0, progressDeadlineSeconds=60)
    body["metadata"]["name"] = "deadline-60"
    rejection = ms.try_create(body)
    assert rejection is None, f"expected progressDeadlineSeconds 60 to be accepted; rejected: {rejection}"


@behaviour(
    "inplace/update-method-enum",
    "A rolloutStrategy.updateMethod other than Recreate or InPlace MUST be refused at admission and not stored.",
    UPDATE_METHOD,
    Feature.IN_PLACE_UPDATE,
)
def test_update_method_enum(ms: ModelServings, manifest: Any) -> None:
    # Not "InPlaceUpdate": the plugin document's spelling is read as a typo (spec reading 1), which an
    # implementation may still accept as an alias.
    for i, bad in enumerate(["Rolling", "Patch"]):
        body = body_of(manifest, 0, updateMethod=bad)
        body["metadata"]["name"] = f"method-{i}"
        ms.refused_create(body, f"updateMethod {bad!r}")


@behaviour(
    "inplace/update-method-spelling",
    "A rolloutStrategy.updateMethod of InPlaceUpdate (the plugin document's spelling) MUST either be refused at "
    "admission and not stored, or act as InPlace: a change of only images patches the existing Pods, keeping "
    "their UIDs.",
    PLUGIN_INTERACTION,
    Feature.IN_PLACE_UPDATE,
)
def test_in_place_update_spelling_is_refused_or_in_place(ms: ModelServings, manifest: Any) -> None:
    # Spec reading 1: "updateMethod: InPlaceUpdate" in the headless-service document is read as a typo
    # for the enum value InPlace; an implementation may refuse it (not an enum value) or accept it as
    # an alias. What both readings exclude: storing it and then recreating Pods (or doing nothing) on
    # an image change, as if the field were Recreate or unknown.
    body = body_of(manifest, 1, updateMethod="InPlaceUpdate")
    what = "updateMethod InPlaceUpdate, image v1 -> v2"
    rejection = ms.try_create(body)
    if rejection is not None:
        expect_refused(rejection, "updateMethod InPlaceUpdate")
        assert not ms.exists(NAME), f"updateMethod InPlaceUpdate was refused but ModelServing {ms.ns}/{NAME} exists"
        return
    ms.wait_pods(NAME, expected_pod_count(body))
    ms.wait_settled(NAME)
    layout = Layout.of(body)
    with RolloutWatch(ms, NAME, layout) as watch:
        uids = uids_of(list(watch.latest().pods))
        patch_roles(ms, body, with_image(body, V2))
        settled = watch.wait_settled({"server": V2}, f"{what} (accepted at admission, so it must act as InPlace)")
        timeline = watch.snapshot_timeline()
    never_gone(timeline, uids, f"{what}: accepted at admission, so the Pods must be patched in place")
    assert settled.uids() == uids, f"{what}: expected the same Pods (UIDs) after the update: {settled.describe()}"
