"""Rollout: how a ServingGroupRollingUpdate's budget is counted and which settings make it.

Why this module exists: the budget tests of :mod:`.test_servinggroup_rollout` start from a settled
ModelServing with every setting given. These behaviours are about the edges of that: a
ServingGroup that is already unready when the update starts (it is unavailable, so it uses the
budget up: another implementation was seen taking a further ServingGroup down), the default
maxUnavailable when rollingUpdateConfiguration is omitted, percentages that both resolve to 0
(refused, or the update still progresses: docs/spec-readings.md), and a Role's own rolling
settings (maxUnavailable, maxSurge and partition), which ServingGroupRollingUpdate accepts and
ignores ("rolling update settings on individual Roles do not take effect").

The unready ServingGroup must stay unready for as long as the test needs, whatever the controller
does with it: the test plays the scheduler (see :mod:`conformance.suites.eviction`), so a
ServingGroup the controller recreates stays Pending until the test binds its Pods.
"""

from __future__ import annotations

from typing import Any

from conformance.framework.catalog import behaviour
from conformance.framework.features import Feature
from conformance.framework.modelserving import ModelServings, expect_refused
from conformance.framework.rollout_watch import RolloutWatch, Snapshot
from conformance.suites.eviction import MANUAL_SCHEDULER, Binder
from conformance.suites.eviction import start as start_bound
from conformance.suites.inplace.test_inplace import clear, hold_worker

from . import (
    API,
    expect_max_groups,
    expect_min_ready_groups,
    expect_status_updated,
    patch_roles,
    role,
    start,
    uids_of,
    with_image,
)

NAME = "budget-rules"
V2 = "registry.example/engine:v2"
CONFIG = f"{API}#RollingUpdateConfiguration"
STRATEGY = f"{API}#RolloutStrategy"


def _body(manifest: Any, rolling: dict[str, Any] | None) -> dict[str, Any]:
    body: dict[str, Any] = manifest("rollout-budget-rules")
    strategy: dict[str, Any] = {"type": "ServingGroupRollingUpdate"}
    if rolling is not None:
        strategy["rollingUpdateConfiguration"] = rolling
    body["spec"]["rolloutStrategy"] = strategy
    return body


def _roll(
    ms: ModelServings, body: dict[str, Any], *, min_ready: int, max_groups: int, what: str, created: bool = False
) -> None:
    """Change the image under a watch (``body`` is created first unless it was already); the update
    must finish within the bounds."""
    layout = start(ms, body, created=created)
    with RolloutWatch(ms, NAME, layout) as watch:
        patch_roles(ms, body, with_image(body, V2))
        watch.wait_settled({"server": V2}, what)
        timeline = watch.snapshot_timeline()
    expect_min_ready_groups(timeline, layout, min_ready, what)
    expect_max_groups(timeline, max_groups, what)
    expect_status_updated(ms, NAME, what)


@behaviour(
    "rollout/sg/unready-counts-against-budget",
    "A ServingGroup that is already not ready when a ServingGroupRollingUpdate starts MUST count against "
    "maxUnavailable, so with maxUnavailable 1 and one of 3 ServingGroups not ready the controller MUST NOT take "
    "down any other ServingGroup while that one stays unready, and the update MUST finish once it is ready.",
    CONFIG,
    Feature.ROLLING_UPDATE,
)
def test_an_unready_group_counts_against_max_unavailable(ms: ModelServings, manifest: Any, faults: Any) -> None:
    body = _body(manifest, {"maxUnavailable": 1})
    body["spec"]["schedulerName"] = MANUAL_SCHEDULER
    binder = Binder(ms)
    layout = start_bound(ms, binder, body)
    what = "maxUnavailable 1 of 3 ServingGroups, one held not ready when the update starts"
    with RolloutWatch(ms, NAME, layout) as watch:
        held, _, held_group = hold_worker(ms, faults, watch, layout)
        others = uids_of([p for p in watch.latest().pods if p.group != held_group])
        patch_roles(ms, body, with_image(body, V2))
        ms.wait_observed(NAME)

        def untouched(s: Snapshot) -> bool:
            return uids_of([p for p in s.pods if p.group != held_group]) == others and len(s.ready_groups(layout)) >= 2

        ms.holds(
            f"{what}: while {held_group} is not ready (its replacement, if any, is left Pending), the other "
            f"ServingGroups keep their Pods ({sorted(others)}) and stay ready",
            watch.latest,
            untouched,
        )
        clear(ms, faults, held)
        with binder.running():
            watch.wait_settled({"server": V2}, f"{what}: the update finishes once {held_group} can be ready")
        timeline = watch.snapshot_timeline()
    expect_min_ready_groups(timeline, layout, 2, what)
    expect_status_updated(ms, NAME, what)


@behaviour(
    "rollout/sg/default-max-unavailable",
    "With rollingUpdateConfiguration omitted, a ServingGroupRollingUpdate MUST use its default maxUnavailable of "
    "1, so with 3 ServingGroups at least 2 MUST be ready and no more than 3 MUST exist at every moment, and the "
    "update MUST finish.",
    CONFIG,
    Feature.ROLLING_UPDATE,
)
def test_max_unavailable_defaults_to_one(ms: ModelServings, manifest: Any) -> None:
    body = _body(manifest, None)
    _roll(ms, body, min_ready=2, max_groups=3, what="rollingUpdateConfiguration omitted (maxUnavailable 1 of 3)")


@behaviour(
    "rollout/sg/role-settings-ignored",
    "Under ServingGroupRollingUpdate a Role's own maxUnavailable, maxSurge and partition MUST be accepted and MUST "
    "NOT take effect, so with rollingUpdateConfiguration maxUnavailable 1 and the Role's maxUnavailable and "
    "maxSurge 100% and partition 1, every ServingGroup MUST be updated, at least 2 of 3 ServingGroups MUST be ready "
    "and no more than 3 MUST exist at every moment of the update.",
    STRATEGY,
    Feature.ROLLING_UPDATE,
)
def test_role_rolling_settings_do_not_take_effect(ms: ModelServings, manifest: Any) -> None:
    body = _body(manifest, {"maxUnavailable": 1})
    role(body, "server").update(maxUnavailable="100%", maxSurge="100%", partition=1)
    what = (
        "ServingGroupRollingUpdate, maxUnavailable 1 of 3; the Role's maxUnavailable and maxSurge 100% and partition "
        "1 (no ServingGroup may stay on the old image)"
    )
    _roll(ms, body, min_ready=2, max_groups=3, what=what)


@behaviour(
    "rollout/sg/max-unavailable-zero-percentages",
    "A rollingUpdateConfiguration whose maxUnavailable and maxSurge percentages both resolve to 0 (10% and 0% of 3 "
    "ServingGroups) MUST either be refused at admission or, when accepted, the update MUST still progress and "
    "finish, with at least 2 of 3 ServingGroups ready and no more than 4 existing at every moment.",
    CONFIG,
    Feature.ROLLING_UPDATE,
)
def test_percentages_that_both_resolve_to_zero(ms: ModelServings, manifest: Any) -> None:
    body = _body(manifest, {"maxUnavailable": "10%", "maxSurge": "0%"})
    rejection = ms.try_create(body)
    if rejection is not None:  # spec reading: refusing them is fair; the refusal must be about the budget
        expect_refused(rejection, "maxUnavailable 10% with maxSurge 0% of 3 ServingGroups")
        control = _body(manifest, {"maxUnavailable": "34%", "maxSurge": "0%"})
        control["metadata"]["name"] = f"{NAME}-control"
        refused = ms.try_create(control)
        assert refused is None, (
            f"maxUnavailable 10% with maxSurge 0% was refused ({rejection.message}), but so was maxUnavailable 34% "
            f"(1 of 3) with maxSurge 0%: {refused}; the refusal is not about both percentages resolving to 0"
        )
        return
    what = (
        "maxUnavailable 10% and maxSurge 0% of 3 ServingGroups (both resolve to 0), accepted: the update must "
        "progress (acting as maxUnavailable 1 or maxSurge 1), never stay stuck"
    )
    _roll(ms, body, min_ready=2, max_groups=4, what=what, created=True)
