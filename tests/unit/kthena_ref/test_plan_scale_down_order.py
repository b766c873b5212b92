"""Scale-down order, shared by ServingGroups and Role instances: not-ready first, then the lowest
summed pod-deletion-cost, then the highest ordinal (index); a Role scaled down keeps the instances
it chose, under both rollout strategies."""

from __future__ import annotations

from typing import Any

import pytest

from kthena_ref import faults
from kthena_ref.api.types import ModelServing
from kthena_ref.planner.names import LABEL_ROLE_ID
from kthena_ref.planner.scaledown import Candidate, choose, instance_ids, order

from .builders import MS, World, deleted, deleting, edit_spec, label, pending, with_cost, world

STRATEGIES = [
    pytest.param(None, id="ServingGroupRollingUpdate"),
    pytest.param("RoleRollingUpdate", id="RoleRollingUpdate"),
]


@pytest.mark.parametrize(
    ("units", "replicas", "kept", "victims"),
    [
        pytest.param([(0, True, 0), (1, True, 0), (2, True, 0)], 2, [0, 1], [2], id="highest-id"),
        pytest.param([(0, True, 0), (1, False, 0), (2, True, 0)], 2, [0, 2], [1], id="not-ready-first"),
        pytest.param([(0, True, -5), (1, False, 0), (2, True, 0)], 2, [0, 2], [1], id="not-ready-beats-cost"),
        pytest.param([(0, True, -5), (1, True, 0), (2, True, 0)], 2, [1, 2], [0], id="cost-beats-index"),
        pytest.param([(0, True, 9), (1, True, 1), (2, True, 1)], 1, [0], [2, 1], id="victims-in-order"),
        pytest.param([(0, False, 0), (3, False, 0), (5, True, 0)], 2, [0, 5], [3], id="highest-not-ready"),
        pytest.param([(1, True, 0), (4, True, 0)], 4, [0, 1, 2, 4], [], id="refill-lowest-free"),
        pytest.param([(0, True, 0), (1, True, 0)], 0, [], [1, 0], id="to-zero"),
        pytest.param([], 2, [0, 1], [], id="nothing-yet"),
    ],
)
def test_choose(units: list[tuple[int, bool, int]], replicas: int, kept: list[int], victims: list[int]) -> None:
    assert choose([Candidate(*u) for u in units], replicas) == (kept, victims)


def test_order_is_the_one_key() -> None:
    assert sorted([Candidate(2, True), Candidate(0, False, 7), Candidate(1, True, -1)], key=order) == [
        Candidate(0, False, 7),
        Candidate(1, True, -1),
        Candidate(2, True),
    ]


def test_instance_ids_fault_removes_the_highest_index_whatever_else() -> None:
    units = [Candidate(0, True), Candidate(1, False), Candidate(2, True, 5)]
    assert instance_ids(units, 2) == [0, 2]
    with faults.injected("role-scale-down-highest-index"):
        assert instance_ids(units, 2) == [0, 1]


# -- Role-level scale-down in plan() ------------------------------------------------------------------


def _ms(strategy: str | None, groups: int = 1, instances: int = 4, workers: int = 1) -> ModelServing:
    b = MS("ms").replicas(groups).role("r", instances, workers)
    if strategy is not None:
        b.rollout(type=strategy)
    return b.build()


def _role_replicas(n: int) -> Any:
    def change(spec: dict[str, Any]) -> None:
        spec["template"]["roles"][0]["replicas"] = n

    return change


def _instance(pod_name: str) -> str:
    """``ms-0-r-2-1`` -> ``0/r-2``."""
    parts = pod_name.split("-")
    return f"{parts[1]}/{parts[2]}-{parts[3]}"


def _mark(w: World, not_ready: set[str], costs: dict[str, int]) -> None:
    """Hold the worker (``-1``) Pods of ``not_ready`` instances Pending; put ``costs`` on Pods by name."""
    for name in list(w.pods):
        if _instance(name) in not_ready and name.endswith("-1"):
            w.pods[name] = pending(w.pods[name])
        if name in costs:
            w.pods[name] = with_cost(w.pods[name], costs[name])


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize(
    ("replicas", "not_ready", "costs", "removed"),
    [
        pytest.param(3, set(), {}, {"0/r-3"}, id="highest-index"),
        pytest.param(2, set(), {}, {"0/r-3", "0/r-2"}, id="two-highest"),
        pytest.param(3, {"0/r-1"}, {}, {"0/r-1"}, id="not-ready-first"),
        pytest.param(3, {"0/r-1"}, {"ms-0-r-0-0": -5}, {"0/r-1"}, id="not-ready-beats-cost"),
        pytest.param(3, {"0/r-0", "0/r-2"}, {}, {"0/r-2"}, id="highest-not-ready"),
        pytest.param(3, set(), {"ms-0-r-0-0": -5}, {"0/r-0"}, id="lowest-cost"),
        pytest.param(3, set(), {"ms-0-r-3-0": 10}, {"0/r-2"}, id="costly-highest-kept"),
        pytest.param(3, set(), {"ms-0-r-1-0": 3, "ms-0-r-1-1": -8, "ms-0-r-2-0": -4}, {"0/r-1"}, id="summed-cost"),
        pytest.param(1, {"0/r-3"}, {"ms-0-r-0-0": 1}, {"0/r-3", "0/r-2", "0/r-1"}, id="keep-the-costliest"),
        pytest.param(0, set(), {}, {"0/r-0", "0/r-1", "0/r-2", "0/r-3"}, id="to-zero"),
    ],
)
def test_role_scale_down_order(
    strategy: str | None, replicas: int, not_ready: set[str], costs: dict[str, int], removed: set[str]
) -> None:
    w = world(_ms(strategy))
    _mark(w, not_ready, costs)
    w.ms = edit_spec(w.ms, _role_replicas(replicas))
    p = w.plan()
    assert {_instance(n) for n in deleted(p)} == removed
    assert len(p.delete_pods) == 2 * len(removed), "whole instances go"
    assert p.create_pods == [] and p.create_revisions == []


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_each_servinggroup_chooses_its_own_instances(strategy: str | None) -> None:
    w = world(_ms(strategy, groups=2, instances=3))
    _mark(w, {"0/r-0"}, {"ms-1-r-1-0": -2})
    w.ms = edit_spec(w.ms, _role_replicas(2))
    assert {_instance(n) for n in deleted(w.plan())} == {"0/r-0", "1/r-1"}


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_the_kept_instances_stay_and_a_scale_up_fills_the_lowest_free_index(strategy: str | None) -> None:
    w = world(_ms(strategy, instances=3))
    _mark(w, set(), {"ms-0-r-0-0": -1})
    w.ms = edit_spec(w.ms, _role_replicas(2))
    kept = {n: p["metadata"]["uid"] for n, p in w.pods.items() if _instance(n) != "0/r-0"}
    w.converge()
    assert {n: p["metadata"]["uid"] for n, p in w.pods.items()} == kept, "instances 1 and 2 keep their Pods"
    assert w.plans[-1].status["availableReplicas"] == 1
    w.ms = edit_spec(w.ms, _role_replicas(3))
    w.converge()
    assert sorted({str(label(p, LABEL_ROLE_ID)) for p in w.pods.values()}) == ["r-0", "r-1", "r-2"]
    assert all(w.pods[n]["metadata"]["uid"] == uid for n, uid in kept.items())


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_a_terminating_instance_is_not_deleted_again(strategy: str | None) -> None:
    w = world(_ms(strategy))
    for name in ("ms-0-r-1-0", "ms-0-r-1-1"):
        w.pods[name] = deleting(w.pods[name])
    w.ms = edit_spec(w.ms, _role_replicas(3))
    p = w.plan()
    assert not {"ms-0-r-1-0", "ms-0-r-1-1"} & set(deleted(p))
    assert p.create_pods == []


def test_a_terminating_instance_is_the_first_to_go_under_servinggroup_rolling_update() -> None:
    w = world(_ms(None))
    for name in ("ms-0-r-1-0", "ms-0-r-1-1"):
        w.pods[name] = deleting(w.pods[name])
    w.ms = edit_spec(w.ms, _role_replicas(3))
    assert deleted(w.plan()) == [], "the terminating instance is the one removed: nothing else goes"


def test_servinggroup_level_fault_leaves_role_level_alone() -> None:
    w = world(_ms(None))
    _mark(w, {"0/r-1"}, {})
    w.ms = edit_spec(w.ms, _role_replicas(3))
    with faults.injected("scale-down-lowest-ordinal"):
        assert {_instance(n) for n in deleted(w.plan())} == {"0/r-1"}
    with faults.injected("role-scale-down-highest-index"):
        assert {_instance(n) for n in deleted(w.plan())} == {"0/r-3"}


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_a_terminating_victim_spares_the_cheapest_instance(strategy: str | None) -> None:
    """4 -> 3 removed instance 1 (not ready), whose Pods are still terminating when the next
    reconcile runs; instance 0 costs least. The terminating one is the one removed: counting it
    as ready would make instance 0 a second victim (seen in rollout/role/scale-down-order)."""
    w = world(_ms(strategy))
    _mark(w, {"0/r-1"}, {"ms-0-r-0-0": 3, "ms-0-r-0-1": -8})
    w.ms = edit_spec(w.ms, _role_replicas(3))
    assert {_instance(n) for n in deleted(w.plan())} == {"0/r-1"}
    for name in ("ms-0-r-1-0", "ms-0-r-1-1"):
        w.pods[name] = deleting(w.pods[name])
    again = w.plan()
    assert deleted(again) == [] and again.create_pods == [], "nothing else goes, nothing comes back"
