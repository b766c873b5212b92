"""Rollout: where rolloutStrategy.roleCoordination applies: in each ServingGroup, under RoleRollingUpdate.

Why this module exists: the other coordination tests run one ServingGroup under RoleRollingUpdate.
The spec also says where coordination applies: "proportional rolling updates across selected Roles
in each ServingGroup" (so maxSkew bounds the Roles' Ready ratios within every ServingGroup, not
ratios pooled over all of them), and "the cross-Role coordination parameters to be used when type
is RoleRollingUpdate". Whether roleCoordination with ServingGroupRollingUpdate is refused or
ignored is left open (docs/spec-readings.md): either is accepted, but an accepted one must take no
effect.

As in :mod:`.test_coordination_rules`, the suite plays the scheduler and leaves chosen new Pods
Pending so that a Role lags deterministically; its helpers are reused from there.
"""

from __future__ import annotations

import copy
from fractions import Fraction
from typing import Any

from conformance.framework.catalog import behaviour
from conformance.framework.features import Feature
from conformance.framework.modelserving import ModelServings, expect_refused
from conformance.framework.rollout_watch import Layout, RolloutWatch, Snapshot
from conformance.suites.eviction import start as start_bound

from . import API, by_ordinal, expect_max_groups, expect_min_ready_groups, expect_status_updated
from .test_coordination_rules import NAME, NEW, HoldingBinder, _body, _update_all, never, on_new

COORDINATION = f"{API}#RoleCoordination"
STRATEGY = f"{API}#RolloutStrategy"
LIMIT = Fraction(25, 100)


def _skew_in(s: Snapshot, layout: Layout, group: str) -> Fraction:
    """The difference between Roles a's and b's target-version Ready ratios within ServingGroup ``group``."""
    a = Fraction(len(s.ready_instances(layout, "a", NEW["a"], group=group)), layout.role_replicas("a"))
    b = Fraction(len(s.ready_instances(layout, "b", NEW["b"], group=group)), layout.role_replicas("b"))
    return abs(a - b)


def _worst_group(s: Snapshot, layout: Layout) -> tuple[Fraction, str]:
    """The largest per-ServingGroup skew of ``s`` and its ServingGroup."""
    return max(((_skew_in(s, layout, g), g) for g in s.groups()), default=(Fraction(0), ""))


@behaviour(
    "rollout/coordination/per-servinggroup",
    "roleCoordination MUST bound the Roles' Ready ratios within each ServingGroup separately: with 2 ServingGroups, "
    "maxSkew 25%, Roles a (4 replicas, maxUnavailable 4) and b (4, maxUnavailable 1) and b's new Pods held Pending "
    "in one ServingGroup only, the target-version Ready ratios of a and b within each ServingGroup MUST NOT differ "
    "by more than 25 percentage points at any moment, the other ServingGroup MUST finish its update meanwhile, and "
    "the update MUST finish once b can run.",
    COORDINATION,
    Feature.ROLE_COORDINATION,
)
def test_max_skew_holds_in_each_servinggroup(ms: ModelServings, manifest: Any) -> None:
    body = _body(manifest, {"a": {"replicas": 4, "maxUnavailable": 4}, "b": {"replicas": 4, "maxUnavailable": 1}},
                 {"roles": [], "maxSkew": "25%"})  # fmt: skip
    body["spec"]["replicas"] = 2
    binder = HoldingBinder(ms, never)
    layout = start_bound(ms, binder, body)
    key = ms.pod_labels.serving_group
    with RolloutWatch(ms, NAME, layout) as watch:
        first, lagging = by_ordinal(watch.latest())
        what = f"2 ServingGroups, roleCoordination maxSkew 25%, Role b's new Pods held Pending in {lagging} only"
        binder.held = lambda pod, _: on_new(pod, "b") and (pod.metadata.labels or {}).get(key) == lagging
        with binder.running():
            _update_all(ms, body)
            watch.wait_for(
                "rollout", f"{what}: every instance of a and b in {first} Ready on its target (nothing holds {first})",
                lambda s: all(len(s.ready_instances(layout, r, NEW[r], group=first)) == 4 for r in "ab"),
            )  # fmt: skip
            ms.holds(
                f"{what}: within each ServingGroup the target-version Ready ratios of a and b stay within 25 points "
                f"(ratios pooled over both ServingGroups do not count)",
                watch.latest,
                lambda s: _worst_group(s, layout)[0] <= LIMIT,
            )
            binder.held = never
            watch.wait_settled({r: NEW[r] for r in "ab"}, what)
        timeline = watch.snapshot_timeline()
    worst = max(timeline.snapshots, key=lambda s: _worst_group(s, layout)[0])
    skew, group = _worst_group(worst, layout)
    assert skew <= LIMIT, (
        f"{what}: within ServingGroup {group} the target-version Ready ratios of a and b (over each Role's 4 "
        f"replicas) differed by {float(skew) * 100:g} percentage points, more than maxSkew 25%, at {worst.describe()}"
    )
    expect_status_updated(ms, NAME, what)


@behaviour(
    "rollout/coordination/not-under-servinggroup-rolling",
    'roleCoordination with rolloutStrategy.type ServingGroupRollingUpdate (the spec defines it only "to be used '
    'when type is RoleRollingUpdate") SHOULD either be refused at admission or take no effect: with dependencies '
    "[{role: a, dependsOn: [b]}], 2 ServingGroups and maxUnavailable 1, while Role b's new Pods cannot run the "
    "ServingGroup being updated gets its Role a Pod on the new template, at least 1 ServingGroup is ready and no "
    "more than 2 exist at every moment, and the update finishes.",
    STRATEGY,
    Feature.ROLE_COORDINATION,
    requires=(Feature.ROLLING_UPDATE,),
)
def test_coordination_takes_no_effect_under_servinggroup_rolling(ms: ModelServings, manifest: Any) -> None:
    body = _body(manifest, {"a": {}, "b": {}}, {"dependencies": [{"role": "a", "dependsOn": ["b"]}]})
    body["spec"]["replicas"] = 2
    body["spec"]["rolloutStrategy"].update(type="ServingGroupRollingUpdate", rollingUpdateConfiguration={
        "maxUnavailable": 1})  # fmt: skip
    what = "ServingGroupRollingUpdate with roleCoordination (a depends on b), 2 ServingGroups, maxUnavailable 1"
    probe = copy.deepcopy(body)  # the same spec at replicas 0: is the combination refused?
    probe["metadata"]["name"], probe["spec"]["replicas"] = f"{NAME}-probe", 0
    rejection = ms.try_create(probe)
    if rejection is not None:  # refusing it is fair (docs/spec-readings.md); it must be about roleCoordination
        expect_refused(rejection, what)
        del probe["spec"]["rolloutStrategy"]["roleCoordination"]
        refused = ms.try_create(probe)
        assert refused is None, (
            f"{what} was refused ({rejection.message}), but so was the same ModelServing without roleCoordination: "
            f"{refused}; the refusal is not about roleCoordination"
        )
        return
    binder = HoldingBinder(ms, never)
    layout = start_bound(ms, binder, body)
    with RolloutWatch(ms, NAME, layout) as watch:
        binder.held = lambda pod, _: on_new(pod, "b")
        with binder.running():
            _update_all(ms, body)
            watch.wait_for(
                "rollout", f"{what}, accepted: a Pod of Role a on {NEW['a']} while b's new Pods are Pending (the "
                "dependency must not hold Role a back)",
                lambda s: any(p.role == "a" and p.image == NEW["a"] and not p.terminating for p in s.pods),
            )  # fmt: skip
            binder.held = never
            watch.wait_settled({r: NEW[r] for r in "ab"}, what)
        timeline = watch.snapshot_timeline()
    expect_min_ready_groups(timeline, layout, 1, what)
    expect_max_groups(timeline, 2, what)
    expect_status_updated(ms, NAME, what)
