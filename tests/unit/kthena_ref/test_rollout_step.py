"""rollout.step(): the rolling-update arithmetic, one step at a time and simulated to the end."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from kthena_ref.planner.rollout import Pace, Step, Unit, protected_ids, slots, step


def _old(*ids: int, ready: bool = True, in_place: bool = False) -> list[Unit]:
    return [Unit(i, outdated=True, ready=ready, in_place=in_place) for i in ids]


def _new(*ids: int, ready: bool = True) -> list[Unit]:
    return [Unit(i, outdated=False, ready=ready) for i in ids]


@pytest.mark.parametrize(
    ("units", "pace", "expected"),
    [
        pytest.param(_new(0, 1, 2), Pace(3, 1), None, id="nothing-outdated-no-rollout"),
        pytest.param(_old(0, 1), Pace(2, 1, partition=2), None, id="everything-protected-no-rollout"),
        pytest.param(_old(0, 1, 2, 3), Pace(4, 1), Step(frozenset(), recreate=[3]), id="one-at-a-time-highest-first"),
        pytest.param(_old(0, 1, 2, 3), Pace(4, 2), Step(frozenset(), recreate=[3, 2]), id="two-at-a-time"),
        pytest.param(
            _old(0, 1, 2, 3), Pace(4, 1, partition=2), Step(frozenset({0, 1}), recreate=[3]), id="partition-protects"
        ),
        pytest.param(
            _old(0, 1, 2, 3),
            Pace(4, 0, max_surge=1),
            Step(frozenset(), create=[4]),
            id="surge-first-creates-above",
        ),
        pytest.param(
            _old(0, 1, 2, 3) + _new(4),
            Pace(4, 0, max_surge=1),
            Step(frozenset(), recreate=[3]),
            id="surge-ready-then-one-old-goes",
        ),
        pytest.param(
            _old(0, 1, 2, 3) + _new(4, ready=False),
            Pace(4, 0, max_surge=1),
            Step(frozenset()),
            id="surge-not-ready-nothing-goes",
        ),
        pytest.param(
            _old(0, 1, 3) + _old(2, ready=False),
            Pace(4, 1),
            Step(frozenset(), recreate=[2]),
            id="not-ready-outdated-first-and-counted",
        ),
        pytest.param(
            _old(0, 1, 2, 3, in_place=True),
            Pace(4, 1, max_surge=1),
            Step(frozenset(), patch=[3]),
            id="in-place-no-surge",
        ),
        pytest.param(
            _old(0, 1, 2, 3, in_place=True),
            Pace(4, 0, max_surge=1),
            Step(frozenset(), create=[4]),
            id="in-place-with-unavailable-0-uses-surge",
        ),
        pytest.param(
            _old(0, 1, 2, 3) + _new(4, 5),
            Pace(2, 1, max_surge=1),
            Step(frozenset(), remove=[3, 2, 1], recreate=[0]),
            id="scale-down-mid-rollout-removes-outdated-first",
        ),
        pytest.param(
            _old(1, 2, 3),
            Pace(4, 1, partition=1),
            Step(frozenset({0}), recreate=[], create=[0]),
            id="lost-protected-group-is-refilled",
        ),
    ],
)
def test_step(units: list[Unit], pace: Pace, expected: Step | None) -> None:
    assert step(units, pace) == expected


@pytest.mark.parametrize(
    ("ids", "replicas", "partition", "expected"),
    [
        ({0, 1, 2, 3}, 4, 2, {0, 1}),
        ({1, 2, 3, 4}, 4, 2, {1, 2}),
        ({2, 3}, 4, 1, {0}),  # a missing slot below counts: it is refilled first
        ({0, 1}, 2, 5, {0, 1}),
        ({0, 1}, 2, 0, set()),
    ],
)
def test_protected_ids(ids: set[int], replicas: int, partition: int, expected: set[int]) -> None:
    assert protected_ids(slots(ids, replicas), partition) == frozenset(expected)


@dataclass
class Run:
    steps: int
    max_total: int
    min_ready: int
    final: list[int]
    untouched: set[int]


def _simulate(replicas: int, pace: Pace, *, in_place: bool = False, limit: int = 200) -> Run:
    """Each step: removed/recreated units terminate, the next step they are gone; created and
    patched units become ready one step after they appear."""
    units = {i: Unit(i, outdated=True, ready=True, in_place=in_place) for i in range(replicas)}
    touched: set[int] = set()
    max_total, min_ready = len(units), replicas
    for n in range(limit):
        s = step(list(units.values()), pace)
        if s is None:
            return Run(n, max_total, min_ready, sorted(units), set(range(replicas)) - touched)
        # terminating units go; not-ready updated units become ready
        for i, u in list(units.items()):
            if u.terminating:
                del units[i]
            elif not u.outdated and not u.ready:
                units[i] = Unit(i, outdated=False, ready=True)
        for i in s.remove + s.recreate:
            if i in units:
                touched.add(i)
                units[i] = Unit(i, outdated=units[i].outdated, ready=False, terminating=True)
        for i in s.patch:
            touched.add(i)
            units[i] = Unit(i, outdated=False, ready=False)
        for i in s.create:
            units[i] = Unit(i, outdated=i in s.protected, ready=False)
        max_total = max(max_total, len(units))
        min_ready = min(min_ready, sum(1 for u in units.values() if u.ready and not u.terminating))
    raise AssertionError(f"no convergence in {limit} steps: {units}")


@pytest.mark.parametrize(
    ("replicas", "pace", "in_place"),
    [
        (4, Pace(4, 1), False),
        (4, Pace(4, 2), False),
        (20, Pace(20, 5, max_surge=5), False),
        (4, Pace(4, 0, max_surge=1), False),
        (5, Pace(5, 0, max_surge=2), False),
        (4, Pace(4, 1, partition=2), False),
        (4, Pace(4, 1), True),
        (4, Pace(4, 0, max_surge=1), True),
        (3, Pace(3, 3, max_surge=3), False),
    ],
)
def test_simulated_rollout_respects_the_budget_and_converges(replicas: int, pace: Pace, in_place: bool) -> None:
    run = _simulate(replicas, pace, in_place=in_place)
    assert run.max_total <= pace.replicas + pace.max_surge
    assert run.min_ready >= pace.replicas - pace.max_unavailable
    assert len(run.final) >= replicas
    assert run.untouched >= set(range(min(pace.partition, replicas)))
