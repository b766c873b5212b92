"""plan(): fresh creation, steady state, scale up (lowest ordinals), scale down order, role replicas."""

from __future__ import annotations

from typing import Any

import pytest

from kthena_ref.api.types import ModelServing
from kthena_ref.planner.names import LABEL_ROLE_ID
from kthena_ref.planner.plan import Observed, plan

from .builders import (
    MS,
    T0,
    World,
    deleted,
    deleting,
    edit_spec,
    fresh_pods,
    instances,
    label,
    names,
    ordinal,
    ordinals,
    pending,
    ready,
    revision,
    with_cost,
    world,
)


def _replicas(n: int) -> Any:
    def change(spec: dict[str, Any]) -> None:
        spec["replicas"] = n

    return change


def _role_replicas(role: int, n: int) -> Any:
    def change(spec: dict[str, Any]) -> None:
        spec["template"]["roles"][role]["replicas"] = n

    return change


@pytest.mark.parametrize(
    ("replicas", "roles", "per_group"),
    [
        pytest.param(1, [("r", 1, 0)], 1, id="1x1"),
        pytest.param(3, [("r", 1, 0)], 1, id="3x1"),
        pytest.param(2, [("r", 1, 3)], 4, id="2-groups-1-instance-3-workers"),
        pytest.param(2, [("p", 2, 1), ("d", 3, 0)], 2 * 2 + 3 * 1, id="2-roles"),
        pytest.param(3, [("p", 1, 1), ("d", 2, 2), ("c", 0, 1)], 2 + 6, id="3-roles-one-empty"),
        pytest.param(0, [("r", 2, 2)], 0, id="zero-replicas"),
    ],
)
def test_fresh_modelserving_creates_every_pod_and_one_revision(
    replicas: int, roles: list[tuple[str, int, int]], per_group: int
) -> None:
    b = MS("llm").replicas(replicas)
    for name, role_replicas, workers in roles:
        b.role(name, role_replicas, workers)
    p = plan(Observed(ms=b.build(), pods=[], now=T0))
    assert len(p.create_pods) == replicas * per_group
    assert len(set(names(p.create_pods))) == len(p.create_pods)
    assert ordinals(p.create_pods) == set(range(replicas))
    assert len(p.create_revisions) == 1
    assert {revision(pod) for pod in p.create_pods} <= {revision(p.create_revisions[0])}
    assert (p.delete_pods, p.delete_revisions, p.apply_podgroups) == ([], [], [])


def test_fresh_pod_names() -> None:
    ms = MS("llm").replicas(2).role("p", 1, 1).role("d", 2, 0).build()
    assert sorted(names(fresh_pods(ms))) == sorted(
        [f"llm-{o}-p-0-{k}" for o in (0, 1) for k in (0, 1)] + [f"llm-{o}-d-{i}-0" for o in (0, 1) for i in (0, 1)]
    )


def test_fresh_modelserving_emits_role_creating_events() -> None:
    ms = MS("llm").replicas(1).role("p", 2, 1).build()
    p = plan(Observed(ms=ms, pods=[], now=T0))
    creating = [e for e in p.events if e.reason == "RoleCreating"]
    assert {e.type for e in creating} == {"Normal"}
    assert len(creating) == 2
    assert all("llm-0" in e.message for e in creating)


@pytest.mark.parametrize(
    "ms",
    [
        pytest.param(MS().replicas(3).role("r", 1, 0).build(), id="simple"),
        pytest.param(MS().replicas(2).role("p", 2, 1).role("d", 1, 2).build(), id="multi-role"),
        pytest.param(MS().replicas(2).role("r", 1, 1).recovery("ServingGroupRecreate").build(), id="sg-recreate"),
        pytest.param(MS().replicas(2).role("r").rollout(partition=1).build(), id="partition"),
    ],
)
def test_nothing_to_do_once_everything_is_ready(ms: ModelServing) -> None:
    w = world(ms)
    p = w.plan()
    assert (p.create_pods, p.delete_pods, p.create_revisions, p.delete_revisions) == ([], [], [], [])
    assert (p.apply_podgroups, p.delete_podgroups, p.events, p.requeue_after) == ([], [], [], None)
    assert p.status["availableReplicas"] == ms.spec.replicas


@pytest.mark.parametrize(
    ("existing", "replicas", "created"),
    [
        pytest.param({1, 2}, 4, {0, 3}, id="fill-0-then-append"),
        pytest.param({0, 2}, 3, {1}, id="fill-hole"),
        pytest.param({5}, 3, {0, 1}, id="lowest-first"),
        pytest.param({0, 1}, 4, {2, 3}, id="append"),
        pytest.param(set(), 2, {0, 1}, id="from-nothing"),
        pytest.param({0, 1, 2}, 3, set(), id="already-there"),
    ],
)
def test_scale_up_fills_lowest_missing_ordinals(existing: set[int], replicas: int, created: set[int]) -> None:
    ms = MS("ms").replicas(replicas).role("r", 1, 1).build()
    template = MS("ms").replicas(10).role("r", 1, 1).build()
    pods = [ready(pod) for pod in fresh_pods(template) if ordinal(pod) in existing]
    p = plan(Observed(ms=ms, pods=pods, now=T0))
    assert ordinals(p.create_pods) == created
    assert len(p.create_pods) == 2 * len(created)
    assert p.delete_pods == []


def _group_world(groups: int, workers: int = 0) -> World:
    return world(MS("ms").replicas(groups).role("r", 1, workers).build())


@pytest.mark.parametrize(
    ("replicas", "not_ready", "costs", "victims"),
    [
        pytest.param(3, set(), {}, {3}, id="highest-ordinal"),
        pytest.param(2, set(), {}, {2, 3}, id="two-highest"),
        pytest.param(0, set(), {}, {0, 1, 2, 3}, id="to-zero"),
        pytest.param(3, {1}, {}, {1}, id="not-ready-first"),
        pytest.param(2, {0}, {}, {0, 3}, id="not-ready-then-highest"),
        pytest.param(3, {0, 1}, {}, {1}, id="highest-not-ready"),
        pytest.param(3, {0, 1}, {1: 5}, {0}, id="cheapest-not-ready"),
        pytest.param(3, {0}, {0: 100}, {0}, id="not-ready-beats-cost"),
        pytest.param(3, set(), {3: 10}, {2}, id="costly-highest-kept"),
        pytest.param(3, set(), {0: -5}, {0}, id="negative-cost-first"),
        pytest.param(2, set(), {0: 5, 1: 1, 2: 1, 3: 5}, {1, 2}, id="two-cheapest"),
        pytest.param(1, set(), {0: 3, 1: 2, 2: 2, 3: 1}, {1, 2, 3}, id="keep-most-costly"),
    ],
)
def test_scale_down_order(replicas: int, not_ready: set[int], costs: dict[int, int], victims: set[int]) -> None:
    w = _group_world(4)
    for name, pod in list(w.pods.items()):
        o = ordinal(pod)
        if o in not_ready:
            w.pods[name] = pending(w.pods[name])
        if o in costs:
            w.pods[name] = with_cost(w.pods[name], costs[o])
    w.ms = edit_spec(w.ms, _replicas(replicas))
    p = w.plan()
    assert {int(n.split("-")[1]) for n in deleted(p)} == victims
    assert len(p.delete_pods) == len(victims)
    assert {d.reason for d in p.delete_pods} <= {"scale-down"}
    assert p.create_pods == []


@pytest.mark.parametrize(
    ("costs", "victim"),
    [
        pytest.param({"ms-2-r-0-0": 4, "ms-2-r-0-1": -4, "ms-3-r-0-0": 1}, 2, id="sum-zero-beats-one"),
        pytest.param({"ms-2-r-0-0": 3, "ms-2-r-0-1": 3, "ms-3-r-0-0": 5}, 3, id="sum-six-loses-to-five"),
    ],
)
def test_scale_down_sums_pod_deletion_costs(costs: dict[str, int], victim: int) -> None:
    w = _group_world(4, workers=1)
    for name, cost in costs.items():
        w.pods[name] = with_cost(w.pods[name], cost)
    for name in ("ms-0-r-0-0", "ms-1-r-0-0"):
        w.pods[name] = with_cost(w.pods[name], 100)
    w.ms = edit_spec(w.ms, _replicas(3))
    assert deleted(w.plan()) == [f"ms-{victim}-r-0-0", f"ms-{victim}-r-0-1"]


def test_invalid_deletion_cost_counts_as_zero() -> None:
    w = _group_world(2)
    w.pods["ms-0-r-0-0"] = with_cost(w.pods["ms-0-r-0-0"], "not-a-number")
    w.pods["ms-1-r-0-0"] = with_cost(w.pods["ms-1-r-0-0"], 1)
    w.ms = edit_spec(w.ms, _replicas(1))
    assert deleted(w.plan()) == ["ms-0-r-0-0"]


def test_scale_down_emits_role_deleting() -> None:
    w = _group_world(2)
    w.ms = edit_spec(w.ms, _replicas(1))
    p = w.plan()
    assert [(e.type, e.reason) for e in p.events] == [("Normal", "RoleDeleting")]
    assert "ms-1" in p.events[0].message


@pytest.mark.parametrize(
    ("terminating", "want_deleted"),
    [
        pytest.param({"ms-2-r-0-0", "ms-2-r-0-1"}, [], id="whole-group-terminating"),
        pytest.param({"ms-2-r-0-0"}, ["ms-2-r-0-1"], id="half-terminating"),
    ],
)
def test_deleting_pods_are_not_deleted_again(terminating: set[str], want_deleted: list[str]) -> None:
    w = _group_world(3, workers=1)
    for name in terminating:
        w.pods[name] = deleting(w.pods[name])
    w.ms = edit_spec(w.ms, _replicas(2))
    p = w.plan()
    assert deleted(p) == want_deleted
    assert p.create_pods == []


def test_scale_down_converges() -> None:
    w = _group_world(5, workers=1)
    w.ms = edit_spec(w.ms, _replicas(2))
    w.converge()
    assert ordinals(w.pods.values()) == {0, 1}
    assert w.ms.status is not None
    assert (w.ms.status.replicas, w.ms.status.available_replicas) == (2, 2)


def test_scale_up_while_a_removed_group_terminates_waits_for_it() -> None:
    w = _group_world(3, workers=1)
    for name in ("ms-2-r-0-0", "ms-2-r-0-1"):
        w.pods[name] = deleting(w.pods[name])
    p = w.plan()  # replicas still 3: group 2 is kept but its Pods still exist
    assert p.create_pods == []
    assert p.delete_pods == []


@pytest.mark.parametrize(
    ("before", "after", "created"),
    [
        pytest.param(1, 3, {"p-1", "p-2"}, id="up-1-to-3"),
        pytest.param(2, 3, {"p-2"}, id="up-2-to-3"),
        pytest.param(0, 1, {"p-0"}, id="up-from-0"),
    ],
)
def test_role_replicas_increase_creates_instances_without_new_revision(
    before: int, after: int, created: set[str]
) -> None:
    w = world(MS("ms").replicas(2).role("p", before, 1).role("d", 1, 0).build())
    old_revision = w.ms.status.update_revision if w.ms.status else None
    w.ms = edit_spec(w.ms, _role_replicas(0, after))
    p = w.plan()
    assert p.create_revisions == []
    assert p.delete_pods == []
    assert instances(p.create_pods) == {(o, rid) for o in (0, 1) for rid in created}
    assert {revision(pod) for pod in p.create_pods} == {old_revision}
    assert p.status["updateRevision"] == old_revision


@pytest.mark.parametrize(
    ("before", "after", "removed"),
    [
        pytest.param(3, 1, {"p-1", "p-2"}, id="down-3-to-1"),
        pytest.param(2, 0, {"p-0", "p-1"}, id="down-to-0"),
    ],
)
def test_role_replicas_decrease_deletes_instances_without_new_revision(
    before: int, after: int, removed: set[str]
) -> None:
    w = world(MS("ms").replicas(2).role("p", before, 1).role("d", 1, 0).build())
    w.ms = edit_spec(w.ms, _role_replicas(0, after))
    p = w.plan()
    assert p.create_revisions == []
    assert p.create_pods == []
    gone = {(int(n.split("-")[1]), "-".join(n.split("-")[2:4])) for n in deleted(p)}
    assert gone == {(o, rid) for o in (0, 1) for rid in removed}


def test_role_replicas_change_keeps_existing_pods() -> None:
    w = world(MS("ms").replicas(1).role("p", 1, 1).build())
    before = {name: label(pod, LABEL_ROLE_ID) for name, pod in w.pods.items()}
    w.ms = edit_spec(w.ms, _role_replicas(0, 2))
    w.converge()
    assert {name: label(pod, LABEL_ROLE_ID) for name, pod in w.pods.items() if name in before} == before
    assert len(w.pods) == 4
    assert w.plans[0].delete_pods == []
