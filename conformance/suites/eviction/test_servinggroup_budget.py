"""EvictionBudget: protectionLevel ServingGroup, minAvailable as a number and an exact percentage,
a worker's Eviction disrupting its whole ServingGroup, concurrent Evictions, and how a refusal is
answered (HTTP 429, a SHOULD)."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from conformance.framework.catalog import behaviour
from conformance.framework.features import Feature
from conformance.framework.modelserving import EvictionAnswer, ModelServings, evict
from conformance.framework.outcomes import Inconclusive
from conformance.framework.rollout_watch import RolloutWatch

from . import (
    EVICTION,
    Binder,
    evict_when_allowed,
    expect_allowed,
    expect_budget_refused,
    expect_ready_floor,
    groups_by_ordinal,
    pod_of,
    recover,
    start,
    with_strategy,
)

NAME = "budget"


def _body(manifest: Any, replicas: int, min_available: int | str) -> dict[str, Any]:
    body: dict[str, Any] = manifest("eviction-groups")
    body["spec"]["replicas"] = replicas
    return with_strategy(body, protectionLevel="ServingGroup", minAvailable=min_available)


def _boundary(ms: ModelServings, manifest: Any, min_available: int | str) -> None:
    """4 ServingGroups, a budget of 2, an Eviction of a Pod of each ServingGroup in turn (the last a
    worker): the floor is what the spec guarantees ("the number of ready ServingGroups is not below the
    threshold"), so at most 2 may be allowed and ready ServingGroups never drop below 2. Whether an
    Eviction above the floor is allowed is the SHOULD of eviction/servinggroup/within-budget-allowed."""
    body = _body(manifest, 4, min_available)
    what = f"minAvailable {min_available!r} of 4 ServingGroups"
    binder = Binder(ms)
    layout = start(ms, binder, body)
    with RolloutWatch(ms, NAME, layout) as watch:
        baseline = watch.latest()
        g = groups_by_ordinal(baseline)
        assert len(g) == 4, f"expected 4 ServingGroups, seen {g}"
        allowed: list[str] = []
        for group, member in ((g[0], "entry"), (g[1], "entry"), (g[2], "entry"), (g[3], "worker")):
            answer = ms.evict(pod_of(baseline, group, member).name)
            if answer.allowed:
                allowed.append(answer.describe())
            else:
                expect_budget_refused(answer, f"{what}: evicting the {member} of {group}")
            assert len(allowed) <= 2, (
                f"{what}: an Eviction that leaves fewer than 2 ready ServingGroups MUST be refused; "
                f"{len(allowed)} of the 4 ServingGroups were disrupted: {allowed}"
            )
        expect_ready_floor(watch.snapshot_timeline(), layout, 2, what)


@behaviour(
    "eviction/servinggroup/min-available",
    "With protectionLevel ServingGroup and minAvailable 2 of 4 ServingGroups, an Eviction that would leave fewer "
    "than 2 ready ServingGroups MUST be refused, so Evictions of a Pod of each ServingGroup in turn MUST NOT "
    "disrupt more than 2 of them.",
    EVICTION,
    Feature.EVICTION_BUDGET,
)
def test_min_available_number_bounds_evictions(ms: ModelServings, manifest: Any) -> None:
    _boundary(ms, manifest, 2)


@behaviour(
    "eviction/servinggroup/min-available-percent",
    "A percentage minAvailable MUST be taken of spec.replicas, so with 50% of 4 ServingGroups an Eviction that "
    "would leave fewer than 2 ready MUST be refused.",
    EVICTION,
    Feature.EVICTION_BUDGET,
)
def test_min_available_percentage_bounds_evictions(ms: ModelServings, manifest: Any) -> None:
    _boundary(ms, manifest, "50%")


@behaviour(
    "eviction/servinggroup/within-budget-allowed",
    "With protectionLevel ServingGroup and minAvailable 2 of 4 ServingGroups, Evictions of Pods of two ready "
    "ServingGroups SHOULD be allowed, and once every ServingGroup is ready again an Eviction SHOULD be allowed (the "
    "spec guarantees the floor only; a budget that refuses above it serves no drain).",
    EVICTION,
    Feature.EVICTION_BUDGET,
)
def test_evictions_within_the_budget_are_allowed(ms: ModelServings, manifest: Any) -> None:
    body = _body(manifest, 4, 2)
    what = "minAvailable 2 of 4 ServingGroups"
    binder = Binder(ms)
    layout = start(ms, binder, body)
    with RolloutWatch(ms, NAME, layout) as watch:
        baseline = watch.latest()
        g = groups_by_ordinal(baseline)
        assert len(g) == 4, f"expected 4 ServingGroups, seen {g}"
        for i in (0, 1):
            expect_allowed(ms.evict(pod_of(baseline, g[i], "entry").name), f"{what}: evicting a Pod of {g[i]} "
                           f"({4 - i} ready ServingGroups, {3 - i} after)")  # fmt: skip
        recover(watch, binder, lambda s: len(s.ready_groups(layout)) == 4, f"{what}: every ServingGroup ready again")
        evict_when_allowed(ms, pod_of(watch.latest(), g[2], "entry").name, f"{what}, once all 4 are ready again")


@behaviour(
    "eviction/servinggroup/worker-disrupts-group",
    "Evicting any Pod of a ServingGroup, a worker included, MUST count as disrupting that whole ServingGroup, so "
    "with minAvailable 3 of 4 an Eviction of a worker MUST use up the budget and an Eviction of the entry or "
    "the worker of another ServingGroup MUST then be refused.",
    EVICTION,
    Feature.EVICTION_BUDGET,
)
def test_evicting_a_worker_disrupts_its_group(ms: ModelServings, manifest: Any) -> None:
    body = _body(manifest, 4, 3)
    what = "minAvailable 3 of 4 ServingGroups"
    binder = Binder(ms)
    layout = start(ms, binder, body)
    with RolloutWatch(ms, NAME, layout) as watch:
        baseline = watch.latest()
        g = groups_by_ordinal(baseline)
        expect_allowed(ms.evict(pod_of(baseline, g[0], "worker").name), f"{what}: evicting the worker of {g[0]}")
        for member in ("entry", "worker"):
            answer = ms.evict(pod_of(baseline, g[1], member).name)
            expect_budget_refused(answer, f"{what}: evicting the {member} of {g[1]} after the worker of {g[0]}")
        expect_ready_floor(watch.snapshot_timeline(), layout, 3, what)


@behaviour(
    "eviction/servinggroup/concurrent",
    "Concurrent Evictions of Pods of different ServingGroups MUST NOT together leave fewer ready ServingGroups "
    "than minAvailable: with 6 ServingGroups and minAvailable 4, at most 2 of 6 simultaneous Evictions MUST be "
    "allowed, and at most 2 Evictions in all before the evicted ServingGroups recover.",
    EVICTION,
    Feature.EVICTION_BUDGET,
)
def test_concurrent_evictions_keep_the_floor(ms: ModelServings, manifest: Any) -> None:
    body = _body(manifest, 6, 4)
    what = "6 simultaneous Evictions, minAvailable 4 of 6 ServingGroups"
    binder = Binder(ms)
    layout = start(ms, binder, body)
    with RolloutWatch(ms, NAME, layout) as watch:
        baseline = watch.latest()
        g = groups_by_ordinal(baseline)
        assert len(g) == 6, f"expected 6 ServingGroups, seen {g}"
        targets = [pod_of(baseline, group, "entry").name for group in g]
        barrier = threading.Barrier(len(targets))

        def one(pod: str) -> EvictionAnswer:
            barrier.wait(timeout=30)
            return evict(ms.kube, ms.ns, pod)

        with ThreadPoolExecutor(max_workers=len(targets)) as pool:
            answers = list(pool.map(one, targets))
        allowed = [a for a in answers if a.allowed]
        shown = "; ".join(a.describe() for a in answers)
        assert len(allowed) <= 2, f"{what}: at most 2 may be allowed; {len(allowed)} were: {shown}"
        odd = [a for a in answers if not a.allowed and not a.refused]
        if any(a.status >= 500 for a in odd):
            raise Inconclusive(f"{what}: the server failed some Evictions: {shown}")
        assert not odd, f"{what}: every Eviction not allowed must be refused (HTTP 4xx); answered {shown}"
        # Top up sequentially (recovery held back): at most 2 in all (the floor is what the spec guarantees;
        # whether the rest of the budget is used is not asserted here).
        evicted = {a.pod for a in allowed}
        rest = [group for group, pod in zip(g, targets, strict=True) if pod not in evicted]
        total = len(allowed)
        for group in rest:
            answer = ms.evict(pod_of(baseline, group, "worker").name)
            if answer.allowed:
                total += 1
                assert total <= 2, f"{what}: evicting the worker of {group} after 2 allowed Evictions MUST be refused"
            else:
                expect_budget_refused(answer, f"{what}: evicting the worker of {group}")
        expect_ready_floor(watch.snapshot_timeline(), layout, 4, what)


@behaviour(
    "eviction/servinggroup/refusal-too-many-requests",
    "An Eviction the budget refuses SHOULD be answered with HTTP 429 Too Many Requests and a message saying why, as "
    "PodDisruptionBudgets answer, so that kubectl drain retries it.",
    EVICTION,
    Feature.EVICTION_BUDGET,
)
def test_refusals_are_too_many_requests(ms: ModelServings, manifest: Any) -> None:
    body = _body(manifest, 2, 2)
    what = "minAvailable 2 of 2 ServingGroups (no Eviction fits the budget)"
    binder = Binder(ms)
    layout = start(ms, binder, body)
    with RolloutWatch(ms, NAME, layout) as watch:
        baseline = watch.latest()
        g = groups_by_ordinal(baseline)
        for group, member in ((g[0], "entry"), (g[-1], "worker")):
            answer = ms.evict(pod_of(baseline, group, member).name)
            expect_budget_refused(answer, f"{what}: evicting the {member} of {group}")
            assert answer.too_many_requests, (
                f"{what}: expected the refusal of the {member} of {group} to be HTTP 429 Too Many Requests (what "
                f"kubectl drain retries); answered {answer.describe()}"
            )
            assert answer.message.strip(), f"{what}: the refusal (HTTP 429) should say why; it has no message"
