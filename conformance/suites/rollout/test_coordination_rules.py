"""Rollout: the rules of rolloutStrategy.roleCoordination beyond a plain maxSkew and one dependency.

Why this module exists: :mod:`.test_coordination` checks maxSkew between two Roles that both take
part and one direct dependency. RoleCoordination says more: "An empty list selects every Role",
maxSkew takes "Only percentage values", the Ready ratios use "their entire formal replica count,
including partition-protected capacity", "A graph root waits for target-version Ready capacity
throughout its dependency closure", and "old dependency capacity is retained while old callers
remain".

To make a Role lag on purpose, the suite plays the scheduler (see :mod:`conformance.suites.eviction`)
and leaves some of that Role's new Pods Pending (:class:`HoldingBinder`); then a "must not" is
observed for the steady-state window, and the update must finish once everything may run. A
Role's target-version Ready ratio is its instances available on the new image over its replicas.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from fractions import Fraction
from itertools import combinations
from typing import Any

from conformance.framework.catalog import behaviour
from conformance.framework.features import Feature
from conformance.framework.modelserving import ModelServings, container_of, expect_refused, role_of
from conformance.framework.rollout_watch import Layout, RolloutWatch, Snapshot, Timeline
from conformance.suites.eviction import Binder
from conformance.suites.eviction import start as start_bound

from . import API, expect_status_updated, patch_roles, role, roles_of, with_image

NAME = "coordination"
COORDINATION = f"{API}#RoleCoordination"
OLD = {r: f"registry.example/role-{r}:v1" for r in "abc"}
NEW = {r: f"registry.example/role-{r}:v2" for r in "abc"}

Held = Callable[[Any, list[Any]], bool]  # (a Pending Pod, every Pod of the namespace) -> leave it Pending?


class HoldingBinder(Binder):
    """A :class:`Binder` that leaves Pending the Pods :attr:`held` picks (asked again at every pass,
    so the test can change it)."""

    def __init__(self, ms: ModelServings, held: Held) -> None:
        super().__init__(ms)
        self.held = held

    def pending(self) -> list[Any]:
        pods = super().pending()
        if not pods:
            return pods
        everything = self.ms.kube.core.list_namespaced_pod(self.ms.ns).items
        return [p for p in pods if not self.held(p, everything)]


def on_new(pod: Any, name: str) -> bool:
    """A Pod of Role ``name`` built from the new template (its image)."""
    return role_of(pod) == name and container_of(pod).image == NEW[name]


def never(pod: Any, everything: list[Any]) -> bool:
    return False


def _body(manifest: Any, roles: dict[str, dict[str, Any]], coordination: dict[str, Any]) -> dict[str, Any]:
    """The manifest with only ``roles`` (name -> settings such as replicas, maxUnavailable) and ``coordination``."""
    body: dict[str, Any] = manifest("rollout-coordination-rules")
    body["spec"]["template"]["roles"] = [r for r in roles_of(body) if r["name"] in roles]
    for name, settings in roles.items():
        role(body, name).update(settings)
    body["spec"]["rolloutStrategy"]["roleCoordination"] = coordination
    return body


def _update_all(ms: ModelServings, body: dict[str, Any]) -> None:
    """Every Role of ``body`` to its new image, in one change."""
    for r in roles_of(body):
        with_image(body, NEW[r["name"]], r["name"])
    patch_roles(ms, body, copy.deepcopy(roles_of(body)))


def _ratio(s: Snapshot, layout: Layout, name: str) -> Fraction:
    return Fraction(len(s.ready_instances(layout, name, NEW[name])), layout.role_replicas(name))


def _skew(s: Snapshot, layout: Layout, names: list[str]) -> Fraction:
    return max(
        (abs(_ratio(s, layout, x) - _ratio(s, layout, y)) for x, y in combinations(names, 2)), default=Fraction(0)
    )


def _expect_skew(timeline: Timeline, layout: Layout, names: list[str], limit: Fraction, what: str) -> None:
    worst = max(timeline.snapshots, key=lambda s: _skew(s, layout, names))
    assert _skew(worst, layout, names) <= limit, (
        f"{what}: the target-version Ready ratios of {names} (over each Role's replicas) differed by "
        f"{float(_skew(worst, layout, names)) * 100:g} percentage points, more than maxSkew, at {worst.describe()}"
    )


def _skew_holds(ms: ModelServings, watch: RolloutWatch, layout: Layout, names: list[str], limit: Fraction,
                what: str) -> None:  # fmt: skip
    ms.holds(
        f"{what}: the target-version Ready ratios of {names} stay within {float(limit) * 100:g} percentage points",
        watch.latest,
        lambda s: _skew(s, layout, names) <= limit,
    )


def _any_new_pod(s: Snapshot) -> bool:
    return any(p.image == NEW.get(p.role) for p in s.pods)


@behaviour(
    "rollout/coordination/max-skew-percent-only",
    "A roleCoordination maxSkew that is not a percentage (an integer, or a string such as 0.25) MUST be rejected, "
    "while a percentage such as 25% MUST be accepted.",
    COORDINATION,
    Feature.ROLE_COORDINATION,
)
def test_max_skew_takes_only_percentages(ms: ModelServings, manifest: Any) -> None:
    for i, skew in enumerate([1, "0.25"]):
        body = _body(manifest, {"a": {}, "b": {}}, {"maxSkew": skew})
        body["metadata"]["name"] = f"skew-{i}"
        body["spec"]["replicas"] = 0
        expect_refused(ms.try_create(body), f"roleCoordination maxSkew {skew!r}")
    body = _body(manifest, {"a": {}, "b": {}}, {"maxSkew": "25%"})
    body["spec"]["replicas"] = 0
    rejection = ms.try_create(body)
    assert rejection is None, f"expected roleCoordination maxSkew 25% to be accepted; rejected: {rejection}"


@behaviour(
    "rollout/coordination/dependencies-immutable",
    "roleCoordination's dependencies are part of its policy, which is immutable after creation: changing a "
    "dependency's dependsOn, adding a dependency or removing the dependencies MUST be refused, while other changes "
    "to such a ModelServing MUST be accepted.",
    COORDINATION,
    Feature.ROLE_COORDINATION,
)
def test_dependencies_are_immutable(ms: ModelServings, manifest: Any) -> None:
    dependencies = [{"role": "a", "dependsOn": ["b"]}]
    body = _body(manifest, {"a": {}, "b": {}, "c": {}}, {"dependencies": dependencies})
    body["spec"]["replicas"] = 0
    ms.create(body)
    changes = [
        ("changing a dependency's dependsOn", [{"role": "a", "dependsOn": ["c"]}]),
        ("adding a dependency", [*dependencies, {"role": "b", "dependsOn": ["c"]}]),
        ("removing the dependencies", None),
    ]
    for what, new in changes:
        patch = {"spec": {"rolloutStrategy": {"roleCoordination": {"dependencies": new}}}}
        expect_refused(ms.try_patch(NAME, patch), f"{what} of roleCoordination after creation")
    rejection = ms.try_patch(NAME, {"spec": {"revisionHistoryLimit": 3}})
    assert rejection is None, (
        f"expected a change of revisionHistoryLimit on a ModelServing with roleCoordination dependencies to be "
        f"accepted; rejected: {rejection}"
    )


@behaviour(
    "rollout/coordination/every-role-by-default",
    "With roleCoordination roles [] every Role MUST take part: with maxSkew 25% and Roles a, b and c of 4 replicas "
    "each, while Role c's new Pods cannot run the target-version Ready ratios of a and b MUST stay within 25 "
    "percentage points of c's, and the update MUST finish once they can.",
    COORDINATION,
    Feature.ROLE_COORDINATION,
)
def test_an_empty_role_list_selects_every_role(ms: ModelServings, manifest: Any) -> None:
    fast = {"replicas": 4, "maxUnavailable": 4}
    body = _body(manifest, {"a": fast, "b": fast, "c": {"replicas": 4, "maxUnavailable": 1}},
                 {"roles": [], "maxSkew": "25%"})  # fmt: skip
    names, limit = ["a", "b", "c"], Fraction(25, 100)
    what = "roleCoordination roles [] maxSkew 25%, a and b 4-at-a-time, c held"
    binder = HoldingBinder(ms, never)
    layout = start_bound(ms, binder, body)
    with RolloutWatch(ms, NAME, layout) as watch:
        binder.held = lambda pod, _: on_new(pod, "c")
        with binder.running():
            _update_all(ms, body)
            watch.wait_for("rollout", f"{what}: the update to start (a Pod on a new image)", _any_new_pod)
            _skew_holds(ms, watch, layout, names, limit, f"{what}, while c's new Pods are Pending")
            binder.held = never
            watch.wait_settled({r: NEW[r] for r in names}, what)
        timeline = watch.snapshot_timeline()
    _expect_skew(timeline, layout, names, limit, what)
    expect_status_updated(ms, NAME, what)


@behaviour(
    "rollout/coordination/listed-roles-only",
    "With roleCoordination roles [a, b] only the listed Roles MUST take part: while Role a's new Pods cannot run, "
    "Role b MUST stay within maxSkew 25% of a, and Role c, not listed, MUST still finish its update.",
    COORDINATION,
    Feature.ROLE_COORDINATION,
)
def test_only_the_listed_roles_take_part(ms: ModelServings, manifest: Any) -> None:
    fast = {"replicas": 4, "maxUnavailable": 4}
    body = _body(manifest, {"a": {"replicas": 4, "maxUnavailable": 1}, "b": fast, "c": fast},
                 {"roles": ["a", "b"], "maxSkew": "25%"})  # fmt: skip
    limit = Fraction(25, 100)
    what = "roleCoordination roles [a, b] maxSkew 25%, a's new Pods held, c not listed"
    binder = HoldingBinder(ms, never)
    layout = start_bound(ms, binder, body)
    with RolloutWatch(ms, NAME, layout) as watch:
        binder.held = lambda pod, _: on_new(pod, "a")
        with binder.running():
            _update_all(ms, body)
            watch.wait_for("rollout", f"{what}: every instance of Role c Ready on {NEW['c']} while a is held",
                           lambda s: len(s.ready_instances(layout, "c", NEW["c"])) == 4)  # fmt: skip
            binder.held = never
            watch.wait_settled({r: NEW[r] for r in "abc"}, what)
        timeline = watch.snapshot_timeline()
    _expect_skew(timeline, layout, ["a", "b"], limit, what)
    expect_status_updated(ms, NAME, what)


@behaviour(
    "rollout/coordination/partition-in-ratio",
    "maxSkew MUST compare Ready ratios over each Role's entire replica count including partition-protected "
    "capacity: with maxSkew 50%, Role a of 4 replicas with partition 2 and 1 instance Ready on its target, Role b "
    "of 4 replicas MUST NOT have more than 3 instances Ready on its target, and the update MUST finish.",
    COORDINATION,
    Feature.ROLE_COORDINATION,
)
def test_partition_protected_capacity_counts_in_the_ratio(ms: ModelServings, manifest: Any) -> None:
    body = _body(manifest, {"a": {"replicas": 4, "partition": 2, "maxUnavailable": 1},
                            "b": {"replicas": 4, "maxUnavailable": 4}}, {"maxSkew": "50%"})  # fmt: skip
    names, limit = ["a", "b"], Fraction(50, 100)
    what = "roleCoordination maxSkew 50%: Role a (4, partition 2), Role b (4, maxUnavailable 4)"
    binder = HoldingBinder(ms, never)
    layout = start_bound(ms, binder, body)

    def second_a(pod: Any, everything: list[Any]) -> bool:  # one new Pod of a may run, no more
        return on_new(pod, "a") and any(on_new(p, "a") and p.spec.node_name for p in everything)

    with RolloutWatch(ms, NAME, layout) as watch:
        binder.held = second_a
        with binder.running():
            _update_all(ms, body)
            watch.wait_for("rollout", f"{what}: one instance of Role a Ready on its target",
                           lambda s: len(s.ready_instances(layout, "a", NEW["a"])) == 1)  # fmt: skip
            _skew_holds(ms, watch, layout, names, limit, f"{what}, while a has 1 of 4 on its target")
            binder.held = never
            watch.wait_for("rollout", f"{what}: b on its target, a's 2 unprotected instances too",
                           lambda s: s.settled_on(layout, {"b": NEW["b"]})
                           and len(s.ready_instances(layout, "a", NEW["a"])) == 2)  # fmt: skip
        timeline = watch.snapshot_timeline()
    _expect_skew(timeline, layout, names, limit, what)


@behaviour(
    "rollout/coordination/dependency-capacity-retained",
    "With roleCoordination dependencies [{role: a, dependsOn: [b]}], while any Pod of Role a still runs its old "
    "template at least one instance of Role b MUST stay Ready on its old template (old dependency capacity is "
    "retained while old callers remain), and the update MUST finish.",
    COORDINATION,
    Feature.ROLE_COORDINATION,
)
def test_old_dependency_capacity_is_retained(ms: ModelServings, manifest: Any) -> None:
    body = _body(manifest, {"a": {"replicas": 2, "maxUnavailable": 1}, "b": {"replicas": 2, "maxUnavailable": 2}},
                 {"dependencies": [{"role": "a", "dependsOn": ["b"]}]})  # fmt: skip
    what = "roleCoordination: a depends on b; b (2 instances) may update both at once"
    binder = Binder(ms)
    layout = start_bound(ms, binder, body)
    with RolloutWatch(ms, NAME, layout) as watch:
        mark = watch.seq
        with binder.running():
            _update_all(ms, body)
            watch.wait_settled({"a": NEW["a"], "b": NEW["b"]}, what)
        timeline = watch.snapshot_timeline()
    for s in timeline.since(mark):
        old_callers = [p.name for p in s.live() if p.role == "a" and p.image == OLD["a"]]
        if old_callers:
            assert s.ready_instances(layout, "b", OLD["b"]), (
                f"{what}: Role a still had Pods on its old template ({old_callers}) but no instance of Role b was "
                f"Ready on its old template at {s.describe()}"
            )
    expect_status_updated(ms, NAME, what)


@behaviour(
    "rollout/coordination/transitive-dependencies",
    "With roleCoordination dependencies a on b and b on c, the graph root a MUST NOT start its update (no Pod of a "
    "on its new template) before Role c, in its dependency closure, has an instance Ready on its target, even once "
    "b has; and the update MUST finish.",
    COORDINATION,
    Feature.ROLE_COORDINATION,
)
def test_a_root_waits_for_its_whole_dependency_closure(ms: ModelServings, manifest: Any) -> None:
    body = _body(manifest, {"a": {}, "b": {}, "c": {}},
                 {"dependencies": [{"role": "a", "dependsOn": ["b"]}, {"role": "b", "dependsOn": ["c"]}]})  # fmt: skip
    what = "roleCoordination: a depends on b, b on c; c's new Pod held Pending"
    binder = HoldingBinder(ms, never)
    layout = start_bound(ms, binder, body)
    with RolloutWatch(ms, NAME, layout) as watch:
        binder.held = lambda pod, _: on_new(pod, "c")
        with binder.running():
            _update_all(ms, body)
            watch.wait_for("rollout", f"{what}: the update to start (a Pod on a new image)", _any_new_pod)
            ms.holds(
                f"{what}: no Pod of Role a on its new template while c has no instance Ready on its target",
                watch.latest,
                lambda s: not any(p.role == "a" and p.image == NEW["a"] for p in s.pods),
            )
            binder.held = never
            watch.wait_settled({r: NEW[r] for r in "abc"}, what)
        timeline = watch.snapshot_timeline()
    a_started = timeline.first_pod(lambda p: p.role == "a" and p.image == NEW["a"])
    c_ready = timeline.first(lambda s: bool(s.ready_instances(layout, "c", NEW["c"])))
    assert a_started is not None and c_ready is not None, f"{what}: the update finished without Pods on the targets?"
    assert c_ready.seq < a_started.seq, (
        f"{what}: a Pod of Role a on its target existed ({a_started.describe()}) before any instance of Role c was "
        f"Ready on its target ({c_ready.describe()})"
    )
    expect_status_updated(ms, NAME, what)
