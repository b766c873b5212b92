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
    """4 ServingGroups, a budget of 2: two Evictions of different groups allowed, the third and a
    fourth (a worker) refused; once the evicted groups are ready again, an Eviction is allowed."""
    body = _body(manifest, 4, min_available)
    what = f"minAvailable {min_available!r} of 4 ServingGroups"
    binder = Binder(ms)
    layout = start(ms, binder, body)
    with RolloutWatch(ms, NAME, layout) as watch:
        baseline = watch.latest()
        g = groups_by_ordinal(baseline)
        assert len(g) == 4, f"expected 4 ServingGroups, seen {g}"
        for i in (0, 1):
            expect_allowed(ms.evict(pod_of(baseline, g[i], "entry").name), f"{what}: evicting a Pod of {g[i]} "
                           f"({4 - i} ready ServingGroups, {3 - i} after)")  # fmt: skip
        third = ms.evict(pod_of(baseline, g[2], "entry").name)
        expect_budget_refused(third, f"{what}: evicting a Pod of {g[2]} with 2 ServingGroups ready (1 after)")
        fourth = ms.evict(pod_of(baseline, g[3], "worker").name)
        expect_budget_refused(fourth, f"{what}: evicting the worker of {g[3]} with 2 ServingGroups ready")
        timeline = watch.snapshot_timeline()
        expect_ready_floor(timeline, layout, 2, what)
        recover(watch, binder, lambda s: len(s.ready_groups(layout)) == 4, f"{what}: every ServingGroup ready again")
        evict_when_allowed(ms, pod_of(watch.latest(), g[2], "entry").name, f"{what}, once all 4 are ready again")


@behaviour(
    "eviction/servinggroup/min-available",
    "With protectionLevel ServingGroup and minAvailable 2 of 4 ServingGroups, Evictions of Pods of two ready "
    "ServingGroups MUST be allowed, a further Eviction that would leave fewer than 2 ready MUST be refused, and "
    "once the ServingGroups are ready again an Eviction MUST be allowed.",
    EVICTION,
    Feature.EVICTION_BUDGET,
)
def test_min_available_number_bounds_evictions(ms: ModelServings, manifest: Any) -> None:
    _boundary(ms, manifest, 2)


@behaviour(
    "eviction/servinggroup/min-available-percent",
    "A percentage minAvailable MUST be taken of spec.replicas, so with 50% of 4 ServingGroups Evictions MUST be "
    "allowed while 2 ServingGroups stay ready and refused below that.",
    EVICTION,
    Feature.EVICTION_BUDGET,
)
def test_min_available_percentage_bounds_evictions(ms: ModelServings, manifest: Any) -> None:
    _boundary(ms, manifest, "50%")


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
    "allowed, and exactly 2 Evictions in all before the evicted ServingGroups recover.",
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
        # Top up sequentially (recovery held back): the budget is exactly 2 in all.
        evicted = {a.pod for a in allowed}
        rest = [group for group, pod in zip(g, targets, strict=True) if pod not in evicted]
        total = len(allowed)
        for group in rest:
            answer = ms.evict(pod_of(baseline, group, "worker").name)
            if total < 2:
                expect_allowed(answer, f"{what}: evicting the worker of {group} after {total} allowed Eviction(s)")
                total += 1
            else:
                expect_budget_refused(answer, f"{what}: evicting the worker of {group} after 2 allowed Evictions")
                break
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
