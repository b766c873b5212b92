"""plan() status: replica counts, revisions, observedGeneration, labelSelector, conditions."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from kthena_ref.api.types import ModelServing
from kthena_ref.planner.plan import Observed, label_selector, plan

from .builders import (
    MS,
    T0,
    World,
    deleting,
    edit_spec,
    failed,
    fresh_pods,
    name_of,
    ordinal,
    pending,
    ready,
    running_not_ready,
    selector_matches,
    set_image,
    ts,
    world,
)

LATER = T0 + dt.timedelta(hours=2)


def _world(replicas: int = 3) -> World:
    return world(MS("ms").replicas(replicas).role("p", 1, 1).role("d", 2, 0).build())


def _condition(status: dict[str, Any], kind: str) -> dict[str, Any]:
    found: list[dict[str, Any]] = [c for c in status["conditions"] if c["type"] == kind]
    assert len(found) == 1
    return found[0]


def _mark(w: World, states: dict[str, str]) -> None:
    for name, state in states.items():
        if state == "gone":
            del w.pods[name]
        else:
            change = {"pending": pending, "deleting": deleting, "failed": failed, "not-ready": running_not_ready}
            w.pods[name] = change[state](w.pods[name])


@pytest.mark.parametrize(
    ("states", "replicas", "available"),
    [
        pytest.param({}, 3, 3, id="all-ready"),
        pytest.param({"ms-1-p-0-1": "pending"}, 3, 2, id="pending-worker"),
        pytest.param({"ms-1-p-0-1": "not-ready"}, 3, 2, id="running-not-ready"),
        pytest.param({"ms-0-d-1-0": "gone"}, 3, 2, id="missing-pod"),
        pytest.param({"ms-2-d-0-0": "deleting"}, 3, 2, id="one-pod-terminating"),
        pytest.param(
            {n: "deleting" for n in ("ms-2-p-0-0", "ms-2-p-0-1", "ms-2-d-0-0", "ms-2-d-1-0")},
            3,
            2,
            id="group-terminating-still-counted",
        ),
        pytest.param(
            {n: "gone" for n in ("ms-2-p-0-0", "ms-2-p-0-1", "ms-2-d-0-0", "ms-2-d-1-0")}, 2, 2, id="group-gone"
        ),
        pytest.param({"ms-0-p-0-0": "pending", "ms-1-d-0-0": "pending"}, 3, 1, id="two-groups-down"),
    ],
)
def test_replicas_and_available(states: dict[str, str], replicas: int, available: int) -> None:
    w = _world()
    _mark(w, states)
    status = w.plan().status
    assert (status["replicas"], status["availableReplicas"]) == (replicas, available)


@pytest.mark.parametrize("generation", [1, 2, 17])
def test_observed_generation(generation: int) -> None:
    ms = MS().generation(generation).build()
    status = plan(Observed(ms=ms, pods=[], now=T0)).status
    assert status["observedGeneration"] == generation
    assert {c["observedGeneration"] for c in status["conditions"]} == {generation}


def test_fresh_status() -> None:
    ms = MS("ms").replicas(2).build()
    status = plan(Observed(ms=ms, pods=[], now=T0)).status
    assert status["replicas"] == status["availableReplicas"] == status["updatedReplicas"] == 0
    assert status["currentRevision"] == status["updateRevision"]


def test_steady_status() -> None:
    w = _world()
    status = w.plan().status
    assert status["replicas"] == status["availableReplicas"] == 3
    assert status["updatedReplicas"] == status["currentReplicas"] == 3
    assert status["currentRevision"] == status["updateRevision"]


@pytest.mark.parametrize(
    ("old_groups", "new_groups"),
    [
        pytest.param({0, 1, 2}, set(), id="not-started"),
        pytest.param({0, 1}, {2}, id="one-updated"),
        pytest.param({0}, {1, 2}, id="two-updated"),
        pytest.param(set(), {0, 1, 2}, id="done"),
    ],
)
def test_updated_and_current_replicas(old_groups: set[int], new_groups: set[int]) -> None:
    old_ms = MS("ms").replicas(3).role("r", 1, 0, image="v1").build()
    new_ms = edit_spec(old_ms, set_image("v2"))
    old_rev = plan(Observed(ms=old_ms, pods=[], now=T0)).status["updateRevision"]
    pods = [ready(p) for p in fresh_pods(old_ms) if ordinal(p) in old_groups]
    pods += [ready(p) for p in fresh_pods(new_ms) if ordinal(p) in new_groups]
    ms = MS("ms").replicas(3).role("r", 1, 0, image="v2").current_revision(old_rev).build()
    status = plan(Observed(ms=ms, pods=pods, now=T0)).status
    assert status["updatedReplicas"] == len(new_groups)
    assert status["availableReplicas"] == 3
    if old_groups:
        assert (status["currentRevision"], status["currentReplicas"]) == (old_rev, len(old_groups))
    else:
        assert (status["currentRevision"], status["currentReplicas"]) == (status["updateRevision"], 3)


def test_current_replicas_counts_groups_at_the_reported_current_revision() -> None:
    old_ms = MS("ms").replicas(3).role("r", 1, 0, image="v1").build()
    new_ms = edit_spec(old_ms, set_image("v2"))
    old_rev = plan(Observed(ms=old_ms, pods=[], now=T0)).status["updateRevision"]
    pods = [ready(p) for p in fresh_pods(new_ms) if ordinal(p) in {0, 1}]
    pods += [ready(p) for p in fresh_pods(old_ms) if ordinal(p) == 2]
    ms = _with_replicas(new_ms, 2, old_rev)
    status = plan(Observed(ms=ms, pods=pods, now=T0)).status
    at_current = {0, 1} if status["currentRevision"] == status["updateRevision"] else {2}
    assert status["currentReplicas"] == len(at_current)


def _with_replicas(ms: ModelServing, replicas: int, current: str) -> ModelServing:
    data = ms.to_api()
    data["spec"]["replicas"] = replicas
    data["status"] = {"currentRevision": current}
    return ModelServing.model_validate(data)


# -- labelSelector ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "ms",
    [
        pytest.param(MS("ms").replicas(3).role("r", 1, 0).build(), id="one-pod-groups"),
        pytest.param(MS("ms").replicas(2).role("r", 1, 3).build(), id="workers"),
        pytest.param(MS("ms").replicas(2).role("p", 2, 1).role("d", 3, 2).build(), id="multi-role"),
        pytest.param(MS("ms").replicas(2).role("z", 0, 1).role("a", 2, 0).build(), id="first-role-empty"),
        pytest.param(MS("ms-1").replicas(4).role("r", 2, 1).build(), id="name-with-digit"),
    ],
)
def test_label_selector_selects_one_pod_per_group(ms: ModelServing) -> None:
    w = world(ms)
    status = w.plan().status
    selected = [p for p in w.pods.values() if selector_matches(status["labelSelector"], p["metadata"]["labels"])]
    assert len(selected) == status["replicas"] == ms.spec.replicas
    assert sorted(ordinal(p) for p in selected) == list(range(ms.spec.replicas))
    assert status["labelSelector"] == label_selector(ms)


def test_label_selector_ignores_other_modelservings() -> None:
    a = world(MS("a").replicas(2).build())
    b = world(MS("b").replicas(3).build())
    selector = a.plan().status["labelSelector"]
    everything = [*a.pods.values(), *b.pods.values()]
    selected = [name_of(p) for p in everything if selector_matches(selector, p["metadata"]["labels"])]
    assert sorted(selected) == ["a-0-r-0-0", "a-1-r-0-0"]


def test_label_selector_counts_terminating_groups_like_replicas() -> None:
    w = _world()
    for name in ("ms-2-p-0-0", "ms-2-p-0-1", "ms-2-d-0-0", "ms-2-d-1-0"):
        w.pods[name] = deleting(w.pods[name])
    status = w.plan().status
    selected = [p for p in w.pods.values() if selector_matches(status["labelSelector"], p["metadata"]["labels"])]
    assert len(selected) == status["replicas"] == 3


@pytest.mark.parametrize(
    ("selector", "labels", "want"),
    [
        pytest.param("a=1,b=2", {"a": "1", "b": "2", "c": "3"}, True, id="equality"),
        pytest.param("a=1,b=2", {"a": "1"}, False, id="missing"),
        pytest.param("a==1", {"a": "1"}, True, id="double-equals"),
        pytest.param("a!=1", {"a": "2"}, True, id="not-equals"),
        pytest.param("a in (1, 2),!c", {"a": "2"}, True, id="set-based"),
        pytest.param("a notin (1,2)", {"a": "2"}, False, id="notin"),
        pytest.param("a", {"b": "1"}, False, id="exists"),
    ],
)
def test_selector_helper(selector: str, labels: dict[str, str], want: bool) -> None:
    assert selector_matches(selector, labels) is want


# -- conditions ------------------------------------------------------------------------------------


def test_conditions_when_all_ready() -> None:
    status = _world().plan().status
    assert {c["type"] for c in status["conditions"]} == {"Available", "Progressing", "UpdateInProgress"}
    available = _condition(status, "Available")
    assert (available["status"], available["reason"]) == ("True", "AllGroupsReady")
    assert _condition(status, "UpdateInProgress")["status"] == "False"


@pytest.mark.parametrize(
    "states",
    [
        pytest.param({"ms-1-p-0-1": "pending"}, id="pending"),
        pytest.param({"ms-0-d-1-0": "gone"}, id="missing"),
    ],
)
def test_conditions_while_progressing(states: dict[str, str]) -> None:
    w = _world()
    _mark(w, states)
    status = w.plan().status
    assert _condition(status, "Available")["status"] == "False"
    progressing = _condition(status, "Progressing")
    assert (progressing["status"], progressing["reason"]) == ("True", "GroupProgressing")


def test_conditions_while_updating() -> None:
    w = _world()
    w.ms = edit_spec(w.ms, set_image("v2"))
    w.step()
    status = w.step().status
    updating = _condition(status, "UpdateInProgress")
    assert (updating["status"], updating["reason"]) == ("True", "GroupsUpdating")
    progressing = _condition(status, "Progressing")
    assert (progressing["status"], progressing["reason"]) == ("True", "GroupProgressing")
    w.converge()
    status = w.plan().status
    assert _condition(status, "UpdateInProgress")["status"] == "False"
    assert _condition(status, "Available")["reason"] == "AllGroupsReady"


@pytest.mark.parametrize(
    ("old_status", "kept"),
    [
        pytest.param("True", True, id="unchanged-keeps-time"),
        pytest.param("False", False, id="changed-takes-now"),
    ],
)
def test_last_transition_time(old_status: str, kept: bool) -> None:
    w = _world()
    old = {"type": "Available", "status": old_status, "reason": "x", "lastTransitionTime": ts(T0)}
    data = w.ms.to_api()
    data["status"]["conditions"] = [old]
    w.ms = ModelServing.model_validate(data)
    w.now = LATER
    available = _condition(w.plan().status, "Available")
    assert available["status"] == "True"
    assert available["lastTransitionTime"] == (ts(T0) if kept else ts(LATER))


def test_last_transition_time_across_steps() -> None:
    w = _world()
    first = {c["type"]: c["lastTransitionTime"] for c in w.plan().status["conditions"]}
    w.now = LATER
    w.step()
    again = {c["type"]: c["lastTransitionTime"] for c in w.plan().status["conditions"]}
    assert again == first
    w.pods["ms-0-p-0-0"] = pending(w.pods["ms-0-p-0-0"])
    changed = {c["type"]: c["lastTransitionTime"] for c in w.plan().status["conditions"]}
    assert changed["Available"] == changed["Progressing"] == ts(LATER)
    assert changed["UpdateInProgress"] == first["UpdateInProgress"]


def test_role_running_is_emitted_once_when_an_instance_becomes_running() -> None:
    from kthena_ref.planner.plan import Observed, plan

    ms = MS("ms").replicas(1).role("r", 1, 1).build()
    first = plan(Observed(ms=ms, pods=[], previously_running=frozenset()))
    pods = [ready(p) for p in first.create_pods]
    assert [e.reason for e in first.events if e.reason == "RoleRunning"] == []
    running = plan(
        Observed(ms=ms, pods=pods, revisions=first.create_revisions, previously_running=first.running_instances)
    )
    assert running.running_instances == frozenset({"ms-0/r-0"})
    assert [e.message for e in running.events if e.reason == "RoleRunning"] == [
        "role r-0 of ServingGroup ms-0 is running"
    ]
    again = plan(
        Observed(ms=ms, pods=pods, revisions=first.create_revisions, previously_running=running.running_instances)
    )
    assert [e for e in again.events if e.reason == "RoleRunning"] == [], "no repeat while it stays running"
    fresh = plan(Observed(ms=ms, pods=pods, revisions=first.create_revisions, previously_running=None))
    assert [e for e in fresh.events if e.reason == "RoleRunning"] == [], (
        "a restarted controller does not replay history"
    )
