"""plan() with updateMethod InPlace: image patches, the recreate fallback, the progress deadline."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from kthena_ref.api.types import ModelServing
from kthena_ref.planner import inplace
from kthena_ref.planner.names import LABEL_REVISION, LABEL_ROLE_TEMPLATE_HASH, PodId
from kthena_ref.planner.plan import Plan

from .builders import MS, World, deleted, edit_spec, ordinal, revision, set_image, ts, world

HEADLESS = {"name": "headless-service"}


def _ms(
    replicas: int = 3, *, roles: int = 1, plugins: list[dict[str, Any]] | None = None, **rollout: Any
) -> ModelServing:
    b = MS("ms").replicas(replicas)
    for i in range(roles):
        b.role(f"r{i}", 1, 1, image=f"img{i}:v1")
    b.rollout(**rollout)
    ms = b.build()

    def change(spec: dict[str, Any]) -> None:
        spec["rolloutStrategy"]["updateMethod"] = "InPlace"
        if plugins:
            spec["plugins"] = plugins

    return edit_spec(ms, change)


def _uids(w: World) -> dict[str, str]:
    return {name: pod["metadata"]["uid"] for name, pod in w.pods.items()}


def _images(w: World) -> set[str]:
    return {c["image"].removesuffix("-worker") for pod in w.pods.values() for c in pod["spec"]["containers"]}


def _command(spec: dict[str, Any]) -> None:
    spec["template"]["roles"][0]["entryTemplate"]["spec"]["containers"][0]["command"] = ["serve", "--v2"]


def _patched_ordinals(p: Plan) -> set[int]:
    return {int(patch.name.split("-")[1]) for patch in p.patch_pods if "spec" in patch.body}


def test_image_only_change_patches_pods_in_place_within_the_budget() -> None:
    w = world(_ms(4, max_unavailable=1))
    before = _uids(w)
    w.ms = edit_spec(w.ms, set_image("img0:v2"))
    new = w.plan().status["updateRevision"]
    per_step = []
    for _ in range(20):
        p = w.step()
        assert p.delete_pods == [] and p.create_pods == [], "nothing is recreated"
        if p.patch_pods:
            per_step.append(_patched_ordinals(p))
        if not (p.patch_pods or p.create_revisions):
            break
    assert [s for s in per_step if s] == [{3}, {2}, {1}, {0}], "one ServingGroup at a time, highest first"
    assert _uids(w) == before, "Pods keep their UIDs"
    assert _images(w) == {"img0:v2"}
    assert {revision(pod) for pod in w.pods.values()} == {new}
    assert all(
        inplace.ANNOTATION_IN_PLACE_SINCE not in (pod["metadata"].get("annotations") or {}) for pod in w.pods.values()
    )
    status = w.plan().status
    assert status["updatedReplicas"] == 4 and status["currentRevision"] == new and status["availableReplicas"] == 4


def test_the_patch_sets_images_labels_and_the_start_time_with_the_uid_as_precondition() -> None:
    w = world(_ms(1))
    w.ms = edit_spec(w.ms, set_image("img0:v2"))
    p = w.plan()
    assert sorted(patch.name for patch in p.patch_pods) == ["ms-0-r0-0-0", "ms-0-r0-0-1"]
    body = next(patch.body for patch in p.patch_pods if patch.name == "ms-0-r0-0-0")
    assert body["metadata"]["uid"] == "uid-ms-0-r0-0-0"
    assert body["metadata"]["labels"][LABEL_REVISION] == p.status["updateRevision"]
    assert LABEL_ROLE_TEMPLATE_HASH in body["metadata"]["labels"]
    assert body["metadata"]["annotations"] == {inplace.ANNOTATION_IN_PLACE_SINCE: ts(w.now)}
    assert body["spec"] == {"containers": [{"name": "main", "image": "img0:v2"}]}
    assert [e.reason for e in p.events] == ["InPlaceUpdating"]


def test_a_role_whose_images_did_not_change_only_gets_its_labels_moved() -> None:
    w = world(_ms(1, roles=2))
    w.ms = edit_spec(w.ms, set_image("img0:v2", role=0))
    p = w.plan()
    by_name = {patch.name: patch.body for patch in p.patch_pods}
    assert "spec" in by_name["ms-0-r0-0-0"]
    assert "spec" not in by_name["ms-0-r1-0-0"] and "annotations" not in by_name["ms-0-r1-0-0"]["metadata"]


@pytest.mark.parametrize(
    ("change", "plugins", "says"),
    [
        pytest.param(_command, None, "command", id="command-changed"),
        pytest.param(set_image("img0:v2"), [HEADLESS], "headless-service", id="headless-service-image-only"),
    ],
)
def test_an_ineligible_change_recreates_and_says_why(change: Any, plugins: Any, says: str) -> None:
    w = world(_ms(2, plugins=plugins))
    w.ms = edit_spec(w.ms, change)
    p = w.plan()
    assert p.patch_pods == []
    assert deleted(p) == ["ms-1-r0-0-0", "ms-1-r0-0-1"]
    fallback = [e for e in p.events if e.reason == "InPlaceUpdateFallback"]
    assert len(fallback) == 1 and "ms-1" in fallback[0].message and says in fallback[0].message
    w.apply(p)
    w.converge()
    recreated = {int(d.name.split("-")[1]) for q in w.plans for d in q.delete_pods}
    assert recreated == {0, 1} and not any(q.patch_pods for q in w.plans), "every group was recreated"
    assert _images(w) == ({"img0:v2"} if plugins else {"img0:v1"})


def test_a_group_whose_revision_is_not_recorded_falls_back() -> None:
    w = world(_ms(1))
    w.revisions.clear()
    w.ms = edit_spec(w.ms, set_image("img0:v2"))
    p = w.plan()
    assert p.patch_pods == [] and deleted(p)
    assert any(e.reason == "InPlaceUpdateFallback" and "not recorded" in e.message for e in p.events)


def _stuck(replicas: int = 1, **rollout: Any) -> World:
    """An in-place update whose Pods never come up on the new image."""
    w = world(_ms(replicas, max_unavailable=replicas, **rollout))
    w.ms = edit_spec(w.ms, lambda spec: spec["rolloutStrategy"].update(progressDeadlineSeconds=60))
    w.patched_pods_arrive = False
    w.ms = edit_spec(w.ms, set_image("img0:v2"))
    w.step()
    return w


def test_before_the_deadline_restarted_pods_are_not_failures() -> None:
    w = _stuck()
    w.now += dt.timedelta(seconds=30)
    p = w.plan()
    assert p.delete_pods == [] and p.reports == []
    assert p.requeue_after == pytest.approx(30)
    assert p.status["availableReplicas"] == 0, "a Pod that has not arrived is not available"


@pytest.mark.parametrize(
    ("policy", "rebuilt"),
    [("RoleRecreate", True), ("ServingGroupRecreate", True), ("None", False)],
)
def test_after_the_deadline_it_is_reported_then_the_recovery_policy_applies(policy: str, rebuilt: bool) -> None:
    w = _stuck()
    w.ms = edit_spec(w.ms, lambda spec: spec.update(recoveryPolicy=policy))
    w.now += dt.timedelta(seconds=61)
    p = w.plan()
    assert [reason for reason, _ in p.reports] == ["ProgressDeadlineExceeded"] * 2
    assert "ProgressDeadlineExceeded" in {e.reason for e in p.events if e.type == "Warning"}
    assert bool(p.delete_pods) is rebuilt
    if rebuilt:
        w.apply(p)
        w.patched_pods_arrive = True
        w.converge()
        assert _images(w) == {"img0:v2"}, "rebuilt on the target revision"
        assert w.plan().reports == []


def test_rollback_retargets_a_stuck_unit_in_place() -> None:
    w = _stuck()
    before = _uids(w)
    assert _images(w) == {"img0:v2"}
    w.ms = edit_spec(w.ms, set_image("img0:v1"))
    w.patched_pods_arrive = True
    p = w.step()
    assert _patched_ordinals(p) == {0} and p.delete_pods == []
    w.converge()
    assert _uids(w) == before and _images(w) == {"img0:v1"}
    assert w.plan().status["availableReplicas"] == 1


def test_a_new_target_mid_rollout_retargets_cleanly() -> None:
    w = world(_ms(4, max_unavailable=1))
    before = _uids(w)
    w.ms = edit_spec(w.ms, set_image("img0:v2"))
    w.step()
    w.step()
    w.ms = edit_spec(w.ms, set_image("img0:v3"))
    w.converge()
    assert _uids(w) == before and _images(w) == {"img0:v3"}


def test_an_in_place_update_with_no_unavailability_uses_the_surge() -> None:
    w = world(_ms(2, max_unavailable=0, max_surge=1))
    w.ms = edit_spec(w.ms, set_image("img0:v2"))
    p = w.plan()
    assert {ordinal(pod) for pod in p.create_pods} == {2} and p.patch_pods == []
    w.apply(p)
    w.converge()
    assert _images(w) == {"img0:v2"}
    assert len({ordinal(pod) for pod in w.pods.values()}) == 2


@pytest.mark.parametrize(
    ("image", "normalized"),
    [
        ("nginx", "docker.io/library/nginx:latest"),
        ("nginx:1.25", "docker.io/library/nginx:1.25"),
        ("team/app:v1", "docker.io/team/app:v1"),
        ("registry.local:5000/app", "registry.local:5000/app:latest"),
        ("localhost/app:v2", "localhost/app:v2"),
        ("ghcr.io/org/app@sha256:abc", "ghcr.io/org/app@sha256:abc"),
    ],
)
def test_normalize_image(image: str, normalized: str) -> None:
    assert inplace.normalize_image(image) == normalized


def test_images_current_compares_normalized_names_per_container() -> None:
    pod = {
        "spec": {"containers": [{"name": "a", "image": "nginx:1.25"}, {"name": "b", "image": "x:v1"}]},
        "status": {
            "containerStatuses": [
                {"name": "b", "image": "docker.io/library/x:v1"},
                {"name": "a", "image": "docker.io/library/nginx:1.25"},
            ]
        },
    }
    assert inplace.images_current(pod)
    pod["status"]["containerStatuses"][0]["image"] = "x:v0"
    assert not inplace.images_current(pod)
    assert not inplace.images_current({"spec": pod["spec"], "status": {}})


def test_pod_patch_leaves_unchanged_containers_out() -> None:
    ms = _ms(1)
    role = ms.spec.template.roles[0]
    pod = {"metadata": {"uid": "u"}, "spec": {"containers": [{"name": "main", "image": "img0:v1"}]}}
    body = inplace.pod_patch(pod, role, PodId(0, "r0", 0, 0), "rev", dt.datetime(2026, 1, 1, tzinfo=dt.UTC))
    assert "spec" not in body and "annotations" not in body["metadata"]
