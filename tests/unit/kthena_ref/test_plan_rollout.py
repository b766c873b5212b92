"""plan() rollout (ServingGroupRollingUpdate, Recreate) and ControllerRevisions (creation, history limit)."""

from __future__ import annotations

from typing import Any

import pytest

from kthena_ref.api.types import ModelServing
from kthena_ref.planner.names import LABEL_NAME, LABEL_REVISION
from kthena_ref.planner.plan import Observed, plan

from .builders import (
    MS,
    T0,
    World,
    deleted,
    edit_spec,
    failed,
    fresh_pods,
    fresh_revision,
    name_of,
    names,
    ordinal,
    ordinals,
    pending,
    ready,
    revision,
    set_image,
    with_status,
    world,
)


def _ms(replicas: int = 4, workers: int = 1, **rollout: Any) -> ModelServing:
    b = MS("ms").replicas(replicas).role("r", 1, workers, image="img:v1")
    if rollout:
        b.rollout(**rollout)
    return b.build()


def _updated(w: World, image: str = "img:v2") -> str:
    """Change the image; the new update revision."""
    w.ms = edit_spec(w.ms, set_image(image))
    rev = w.plan().status["updateRevision"]
    assert isinstance(rev, str)
    return rev


def _deleted_ordinals(names_: list[str]) -> set[int]:
    return {int(n.split("-")[1]) for n in names_}


def test_image_change_makes_a_new_update_revision() -> None:
    w = world(_ms())
    assert w.ms.status is not None
    old = w.ms.status.update_revision
    assert old is not None and w.ms.status.current_revision == old
    w.ms = edit_spec(w.ms, set_image("img:v2"))
    p = w.plan()
    new = p.status["updateRevision"]
    assert new != old
    assert p.status["currentRevision"] == old
    (cr,) = p.create_revisions
    assert cr["metadata"]["name"] == f"ms-{new}"
    assert cr["metadata"]["labels"] == {LABEL_NAME: "ms", LABEL_REVISION: new}
    assert cr["revision"] == 2
    assert cr["data"]["roles"][0]["entryTemplate"]["spec"]["containers"][0]["image"] == "img:v2"


@pytest.mark.parametrize(
    ("rollout", "per_step"),
    [
        pytest.param({}, [{3}, {2}, {1}, {0}], id="default-one-by-one-highest-first"),
        pytest.param({"max_unavailable": 1}, [{3}, {2}, {1}, {0}], id="explicit-1"),
        pytest.param({"max_unavailable": 2}, [{2, 3}, {0, 1}], id="two-at-a-time"),
        pytest.param({"max_unavailable": "50%"}, [{2, 3}, {0, 1}], id="50-percent-of-4"),
        pytest.param({"max_unavailable": "30%"}, [{3}, {2}, {1}, {0}], id="30-percent-rounds-down-to-1"),
        pytest.param({"max_unavailable": "10%"}, [{3}, {2}, {1}, {0}], id="10-percent-rounds-to-0-acts-as-1"),
        pytest.param({"max_unavailable": 10}, [{0, 1, 2, 3}], id="all-at-once"),
        pytest.param({"partition": 2}, [{3}, {2}], id="partition-2"),
        pytest.param({"partition": "50%"}, [{3}, {2}], id="partition-50-percent"),
        pytest.param({"partition": "51%"}, [{3}], id="partition-rounds-up"),
        pytest.param({"partition": 4}, [], id="partition-all"),
        pytest.param({"partition": 9}, [], id="partition-above-replicas"),
        pytest.param({"partition": 1, "max_unavailable": 2}, [{2, 3}, {1}], id="partition-and-budget"),
    ],
)
def test_rollout_steps(rollout: dict[str, Any], per_step: list[set[int]]) -> None:
    w = world(_ms(**rollout))
    new = _updated(w)
    w.plans.clear()
    w.converge()
    steps = [_deleted_ordinals(deleted(p)) for p in w.plans if p.delete_pods]
    assert steps == per_step
    assert all(d.reason == "rolling update" for p in w.plans for d in p.delete_pods)
    protected = set(range(4)) - set().union(*per_step)
    assert w.by_revision().get(new, set()) == set(range(4)) - protected
    for pod in w.pods.values():
        image = pod["spec"]["containers"][0]["image"]
        if ordinal(pod) in protected:
            assert revision(pod) != new
            assert image.startswith("img:v1")
        else:
            assert revision(pod) == new
            assert image.startswith("img:v2")


def test_rollout_first_step_deletes_the_highest_ordinal_group_only() -> None:
    w = world(_ms(replicas=3, workers=2))
    _updated(w)
    p = w.plan()
    assert deleted(p) == ["ms-2-r-0-0", "ms-2-r-0-1", "ms-2-r-0-2"]
    assert p.create_pods == []
    assert [e.reason for e in p.events] == ["RoleDeleting"]


def test_rollout_recreates_the_deleted_group_at_the_new_revision_under_the_same_name() -> None:
    w = world(_ms(replicas=2, workers=1))
    new = _updated(w)
    w.step()
    p = w.step()
    assert sorted(names(p.create_pods)) == ["ms-1-r-0-0", "ms-1-r-0-1"]
    assert {revision(pod) for pod in p.create_pods} == {new}
    assert p.delete_pods == []  # the recreated group is not yet counted as ready: budget used


@pytest.mark.parametrize("replicas", [1, 3, 5])
def test_rollout_converges_to_the_update_revision(replicas: int) -> None:
    w = world(_ms(replicas=replicas))
    new = _updated(w)
    w.converge()
    assert {revision(pod) for pod in w.pods.values()} == {new}
    assert len(w.pods) == 2 * replicas
    status = w.plan().status
    assert status["updatedReplicas"] == replicas
    assert status["currentReplicas"] == replicas
    assert status["availableReplicas"] == replicas
    assert status["currentRevision"] == status["updateRevision"] == new


def test_rollout_status_mid_way() -> None:
    w = world(_ms(replicas=4))
    assert w.ms.status is not None
    old = w.ms.status.current_revision
    new = _updated(w)
    w.step()  # delete group 3
    w.step()  # create group 3 at the new revision
    status = w.plan().status
    assert (status["currentRevision"], status["updateRevision"]) == (old, new)
    assert status["updatedReplicas"] == 1
    assert status["currentReplicas"] == 3


def test_unready_outdated_group_is_replaced_first_without_using_budget_twice() -> None:
    w = world(_ms(replicas=4))
    w.pods["ms-1-r-0-0"] = pending(w.pods["ms-1-r-0-0"])
    _updated(w)
    assert _deleted_ordinals(deleted(w.plan())) == {1}


def test_unready_updated_group_blocks_the_rollout() -> None:
    w = world(_ms(replicas=3))
    _updated(w)
    w.step()
    w.step()  # group 2 recreated at the new revision
    w.pods["ms-2-r-0-0"] = pending(w.pods["ms-2-r-0-0"])
    p = w.plan()
    assert (p.delete_pods, p.create_pods) == ([], [])


def test_missing_group_blocks_the_rollout() -> None:
    w = world(_ms(replicas=3))
    _updated(w)
    for name in ["ms-0-r-0-0", "ms-0-r-0-1"]:
        del w.pods[name]
    p = w.plan()
    assert p.delete_pods == []
    assert ordinals(p.create_pods) == {0}


@pytest.mark.parametrize(
    "change",
    [
        pytest.param(lambda s: s.update(replicas=4), id="replicas"),
        pytest.param(lambda s: s.update(schedulerName="other"), id="schedulerName"),
        pytest.param(lambda s: s.update(recoveryPolicy="None"), id="recoveryPolicy"),
        pytest.param(lambda s: s["template"].update(restartGracePeriodSeconds=60), id="restartGracePeriodSeconds"),
        pytest.param(lambda s: s["template"].update(gangPolicy={"minRoleReplicas": {"r": 1}}), id="gangPolicy"),
        pytest.param(lambda s: s["template"]["roles"][0].update(maxUnavailable=2), id="role-maxUnavailable"),
        pytest.param(lambda s: s["template"]["roles"][0].update(partition=1), id="role-partition"),
        pytest.param(lambda s: s.update(revisionHistoryLimit=1), id="revisionHistoryLimit"),
    ],
)
def test_changes_that_do_not_roll_pods(change: Any) -> None:
    w = world(_ms(replicas=3))
    w.ms = edit_spec(w.ms, change)
    p = w.plan()
    assert p.delete_pods == []
    assert p.create_revisions == []


def test_partition_protected_group_is_rebuilt_from_the_current_revision() -> None:
    w = world(_ms(replicas=3, partition=2))
    assert w.ms.status is not None
    old = w.ms.status.current_revision
    _updated(w)
    w.converge()
    for name in ["ms-0-r-0-0", "ms-0-r-0-1"]:
        del w.pods[name]
    p = w.plan()
    assert ordinals(p.create_pods) == {0}
    assert {revision(pod) for pod in p.create_pods} == {old}
    assert {pod["spec"]["containers"][0]["image"] for pod in p.create_pods} == {"img:v1", "img:v1-worker"}


def test_missing_pod_of_an_old_group_is_rebuilt_from_its_controller_revision() -> None:
    w = world(_ms(replicas=2, partition=1))
    assert w.ms.status is not None
    old = w.ms.status.current_revision
    _updated(w)
    w.converge()
    del w.pods["ms-0-r-0-1"]
    (pod,) = w.plan().create_pods
    assert (name_of(pod), revision(pod)) == ("ms-0-r-0-1", old)
    assert pod["spec"]["containers"][0]["image"] == "img:v1-worker"


def test_partition_protected_group_rebuilt_by_recovery_keeps_the_current_revision() -> None:
    w = world(_ms(replicas=2, partition=1))
    assert w.ms.status is not None
    old = w.ms.status.current_revision
    new = _updated(w)
    w.converge()
    assert w.by_revision() == {old: {0}, new: {1}}
    w.pods["ms-0-r-0-1"] = failed(w.pods["ms-0-r-0-1"])
    assert deleted(w.step()) == ["ms-0-r-0-0"]  # RoleRecreate: the sibling first...
    assert deleted(w.step()) == ["ms-0-r-0-1"]  # ...then the failed Pod
    p = w.plan()
    assert ordinals(p.create_pods) == {0}
    assert {revision(pod) for pod in p.create_pods} == {old}


def test_partition_protects_the_first_existing_groups_when_ordinals_are_not_contiguous() -> None:
    w = world(_ms(replicas=3, max_unavailable=2, partition=1))
    w.pods["ms-0-r-0-0"] = pending(w.pods["ms-0-r-0-0"])
    w.ms = edit_spec(w.ms, lambda s: s.update(replicas=2))
    w.converge()
    assert ordinals(w.pods.values()) == {1, 2}
    _updated(w)
    assert _deleted_ordinals(deleted(w.plan())) == {2}


def test_role_replicas_scale_reaches_partition_protected_groups() -> None:
    w = world(_ms(replicas=2, workers=0, partition=1))
    assert w.ms.status is not None
    old = w.ms.status.current_revision
    new = _updated(w)
    w.converge()
    assert w.by_revision() == {old: {0}, new: {1}}
    w.ms = edit_spec(w.ms, lambda s: s["template"]["roles"][0].update(replicas=2))
    w.converge()
    assert sorted(w.pods) == ["ms-0-r-0-0", "ms-0-r-1-0", "ms-1-r-0-0", "ms-1-r-1-0"]
    assert revision(w.pods["ms-0-r-1-0"]) == old


def test_role_rolling_update_converges_to_the_update_revision() -> None:
    w = world(_ms(replicas=2, type="RoleRollingUpdate"))
    new = _updated(w)
    w.converge()
    assert {revision(pod) for pod in w.pods.values()} == {new}


# -- ControllerRevisions ---------------------------------------------------------------------------


def _cr(image: str, number: int) -> dict[str, Any]:
    cr = fresh_revision(MS("ms").role("r", 1, 1, image=image).build())
    cr["revision"] = number
    return cr


def _history(count: int) -> list[dict[str, Any]]:
    """ControllerRevisions for img:v1..img:v<count>, numbered 1..count (deliberately listed newest first)."""
    return [_cr(f"img:v{i}", i) for i in range(count, 0, -1)]


def _at(image: str, ordinals_: set[int], replicas: int = 3) -> list[dict[str, Any]]:
    ms = MS("ms").replicas(replicas).role("r", 1, 1, image=image).build()
    return [ready(pod) for pod in fresh_pods(ms) if ordinal(pod) in ordinals_]


@pytest.mark.parametrize(
    ("limit", "deleted_versions"),
    [
        pytest.param(10, [], id="default-10"),
        pytest.param(5, [], id="exactly-at-limit"),
        pytest.param(4, [1], id="one-over"),
        pytest.param(2, [1, 2, 3], id="oldest-first"),
        pytest.param(0, [1, 2, 3, 4, 5], id="zero-keeps-only-live"),
    ],
)
def test_history_limit_deletes_the_oldest_dead_revisions(limit: int, deleted_versions: list[int]) -> None:
    history = _history(6)
    ms = MS("ms").replicas(3).role("r", 1, 1, image="img:v6").history_limit(limit).build()
    p = plan(Observed(ms=ms, pods=_at("img:v6", {0, 1, 2}), revisions=history, now=T0))
    by_image = {i: name_of(_cr(f"img:v{i}", i)) for i in range(1, 7)}
    assert sorted(p.delete_revisions) == sorted(by_image[i] for i in deleted_versions)
    assert p.create_revisions == []


def test_history_limit_never_deletes_live_revisions() -> None:
    history = _history(6)
    names_by_version = {i: name_of(_cr(f"img:v{i}", i)) for i in range(1, 7)}
    current = revision(_cr("img:v3", 3))
    assert current is not None
    ms = MS("ms").replicas(3).role("r", 1, 1, image="img:v6").history_limit(0).current_revision(current).build()
    pods = _at("img:v2", {0}) + _at("img:v3", {1}) + _at("img:v6", {2})  # v2 still run by group 0
    p = plan(Observed(ms=ms, pods=pods, revisions=history, now=T0))
    assert sorted(p.delete_revisions) == sorted(names_by_version[i] for i in (1, 4, 5))
    assert p.status["currentRevision"] == current


def test_update_revision_created_once_with_the_next_number() -> None:
    history = _history(3)
    ms = MS("ms").replicas(1).role("r", 1, 1, image="img:v9").build()
    p = plan(Observed(ms=ms, pods=_at("img:v3", {0}, 1), revisions=history, now=T0))
    (cr,) = p.create_revisions
    assert cr["revision"] == 4
    assert revision(cr) == p.status["updateRevision"]
    p2 = plan(Observed(ms=ms, pods=_at("img:v3", {0}, 1), revisions=[*history, cr], now=T0))
    assert p2.create_revisions == []


def test_damaged_controller_revision_is_ignored() -> None:
    broken = _cr("img:v1", 1)
    broken["data"] = {"roles": [{"name": "r", "bogus": True}]}
    ms = MS("ms").replicas(1).role("r", 1, 1, image="img:v2").build()
    p = plan(Observed(ms=ms, pods=_at("img:v2", {0}, 1), revisions=[broken], now=T0))
    assert len(p.create_revisions) == 1
    assert p.delete_pods == []


def test_pod_rebuilt_without_its_controller_revision_is_labelled_with_the_template_it_was_built_from() -> None:
    ms = MS("ms").replicas(2).role("r", 1, 1, image="img:v2").rollout(partition=2).build()
    old = revision(_cr("img:v1", 1))
    pods = [p for p in _at("img:v1", {0, 1}, 2) if name_of(p) != "ms-0-r-0-1"]
    ms = with_status(ms, {"currentRevision": old})
    (pod,) = plan(Observed(ms=ms, pods=pods, revisions=[], now=T0)).create_pods
    image = pod["spec"]["containers"][0]["image"]
    assert (revision(pod) == old) == image.startswith("img:v1")


# -- maxSurge --------------------------------------------------------------------------------------


def _groups_and_ready(w: World) -> tuple[int, int]:
    groups: dict[int, list[dict[str, Any]]] = {}
    for pod in w.pods.values():
        groups.setdefault(ordinal(pod), []).append(pod)
    ready_groups = sum(
        1
        for pods in groups.values()
        if all(
            c["status"] == "True"
            for p in pods
            for c in p.get("status", {}).get("conditions", [])
            if c["type"] == "Ready"
        )
    )
    return len(groups), ready_groups


@pytest.mark.parametrize(
    ("replicas", "rollout", "max_groups", "min_ready"),
    [
        pytest.param(4, {"max_unavailable": 0, "max_surge": 1}, 5, 4, id="surge-1-unavailable-0"),
        pytest.param(4, {"max_unavailable": 1, "max_surge": 1}, 5, 3, id="surge-1-unavailable-1"),
        pytest.param(3, {"max_unavailable": 0, "max_surge": "25%"}, 4, 3, id="surge-25-percent-of-3-rounds-up-to-1"),
        pytest.param(8, {"max_unavailable": "25%", "max_surge": "25%"}, 10, 6, id="both-25-percent-of-8"),
        pytest.param(4, {"max_unavailable": 0, "max_surge": 2, "partition": 1}, 6, 4, id="surge-with-partition"),
    ],
)
def test_surge_rollout_stays_within_the_ceiling_and_the_floor(
    replicas: int, rollout: dict[str, Any], max_groups: int, min_ready: int
) -> None:
    w = world(_ms(replicas=replicas, **rollout))
    before = {name_of(p): p["metadata"]["uid"] for p in w.pods.values() if ordinal(p) == 0}
    new = _updated(w)
    seen_groups, seen_ready = [], []
    for _ in range(40):
        p = w.step()
        groups, ready_ = _groups_and_ready(w)
        seen_groups.append(groups)
        seen_ready.append(ready_)
        if not (p.create_pods or p.delete_pods):
            break
    assert max(seen_groups) <= max_groups, "the surge ceiling is never exceeded"
    if rollout["max_unavailable"] == 0:
        assert max(seen_groups) == max_groups, "without unavailability the surge is what makes progress"
    assert min(seen_ready) >= min_ready
    status = w.plan().status
    assert status["replicas"] == replicas
    protected = rollout.get("partition", 0)
    assert status["updatedReplicas"] == replicas - protected
    if protected:
        assert {name_of(p): p["metadata"]["uid"] for p in w.pods.values() if ordinal(p) == 0} == before
    assert sum(1 for p in w.pods.values() if revision(p) == new) == 2 * (replicas - protected)


def test_surge_groups_take_new_ordinals_and_replaced_groups_are_not_rebuilt() -> None:
    w = world(_ms(replicas=2, max_unavailable=0, max_surge=1))
    _updated(w)
    p = w.step()
    assert ordinals(p.create_pods) == {2}, "the surge ServingGroup takes the lowest free ordinal"
    assert p.delete_pods == []
    p = w.step()
    assert _deleted_ordinals(deleted(p)) == {1}, "once it is ready, one outdated group goes"
    w.converge()
    assert len(ordinals(w.pods.values())) == 2


def test_surge_is_counted_against_unavailability_too() -> None:
    # maxUnavailable 1, maxSurge 1: the surge group is created and one old group goes at once
    w = world(_ms(replicas=4, max_unavailable=1, max_surge=1))
    _updated(w)
    p = w.plan()
    assert ordinals(p.create_pods) == {4}
    assert _deleted_ordinals(deleted(p)) == {3}
