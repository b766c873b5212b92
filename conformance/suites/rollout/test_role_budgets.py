"""Rollout: a Role's own budget under RoleRollingUpdate: defaults, rounding, all ServingGroups at once.

Why this module exists: :mod:`.test_role_rollout` uses percentages that resolve exactly (50% of 2)
and always sets maxUnavailable. The spec also says: maxUnavailable "Defaults to 1"; a percentage
"is calculated ... from the corresponding Role's replicas for RoleRollingUpdate, then rounded
down" (maxUnavailable) or "rounded up" (maxSurge); a partition may be "an absolute number"; and
"Kthena performs RoleRollingUpdate across all ServingGroups at the same time". The manifest's Role
a has 3 replicas, so 60% resolves to 1 (2 rounded up) and 10% to 1 (0 rounded down).

"At the same time" is observed with the suite playing the scheduler (see
:mod:`conformance.suites.eviction`): the first replacement of Role a in one ServingGroup stays
Pending, so an implementation that updates the ServingGroups one after another never starts the
next one, while one that updates them together starts Role a in every ServingGroup.
"""

from __future__ import annotations

from typing import Any

from conformance.framework.catalog import behaviour
from conformance.framework.features import Feature
from conformance.framework.modelserving import ModelServings
from conformance.framework.rollout_watch import Layout, RolloutWatch, Snapshot, Timeline, ordinal
from conformance.suites.eviction import MANUAL_SCHEDULER, Binder
from conformance.suites.eviction import start as start_bound

from . import API, expect_status_updated, never_gone, patch_roles, role, start, uids_of, with_image

NAME = "role-budgets"
A1, A2, B1 = "registry.example/role-a:v1", "registry.example/role-a:v2", "registry.example/role-b:v1"
ROLE = f"{API}#Role"
STRATEGY = f"{API}#RolloutStrategy"


def _body(manifest: Any, replicas: int = 1, **a: Any) -> dict[str, Any]:
    body: dict[str, Any] = manifest("rollout-role-budgets")
    body["spec"]["replicas"] = replicas
    role(body, "a").update(a)
    return body


def _roll_a(ms: ModelServings, body: dict[str, Any], what: str) -> tuple[Timeline, Layout, str]:
    """Change Role a's image under a watch until settled; (timeline, layout, the one ServingGroup)."""
    layout = start(ms, body)
    with RolloutWatch(ms, NAME, layout) as watch:
        (group,) = sorted(watch.latest().existing_groups())
        patch_roles(ms, body, with_image(body, A2, "a"))
        watch.wait_settled({"a": A2, "b": B1}, what)
        timeline = watch.snapshot_timeline()
    expect_status_updated(ms, NAME, what)
    return timeline, layout, group


def _expect_min_ready(timeline: Timeline, layout: Layout, group: str, minimum: int, what: str) -> None:
    value, at = timeline.min_ready_instances(layout, "a", group=group)
    assert value >= minimum, (
        f"{what}: expected at least {minimum} of Role a's 3 instances ready at every moment; only {value} were at "
        f"{at.describe()}"
    )


@behaviour(
    "rollout/role/default-max-unavailable",
    "Under RoleRollingUpdate a Role that sets no maxUnavailable MUST use its default of 1, so with 3 replicas at "
    "least 2 of its instances MUST be ready at every moment of its update, and the update MUST finish.",
    ROLE,
    Feature.ROLE_ROLLING_UPDATE,
)
def test_role_max_unavailable_defaults_to_one(ms: ModelServings, manifest: Any) -> None:
    what = "RoleRollingUpdate, Role a: 3 replicas, maxUnavailable unset (1)"
    timeline, layout, group = _roll_a(ms, _body(manifest), what)
    _expect_min_ready(timeline, layout, group, 2, what)


@behaviour(
    "rollout/role/default-max-surge",
    "Under RoleRollingUpdate a Role that sets no maxSurge MUST use its default of 0, so with 3 replicas and "
    "maxUnavailable 1 never more than 3 of its instances MUST exist at any moment of its update, and the update "
    "MUST finish.",
    ROLE,
    Feature.ROLE_ROLLING_UPDATE,
)
def test_role_max_surge_defaults_to_zero(ms: ModelServings, manifest: Any) -> None:
    what = "RoleRollingUpdate, Role a: 3 replicas, maxUnavailable 1, maxSurge unset (0)"
    timeline, _, group = _roll_a(ms, _body(manifest, maxUnavailable=1), what)
    value, at = timeline.max_instances("a", group=group)
    assert value <= 3, f"{what}: expected at most 3 instances of Role a at once; {value} existed at {at.describe()}"


@behaviour(
    "rollout/role/max-unavailable-percent-rounds-down",
    "Under RoleRollingUpdate a percentage maxUnavailable MUST be rounded down, so 60% of a Role's 3 replicas (1, "
    "not 2) MUST keep at least 2 of its instances ready at every moment of its update.",
    ROLE,
    Feature.ROLE_ROLLING_UPDATE,
)
def test_role_max_unavailable_percentage_rounds_down(ms: ModelServings, manifest: Any) -> None:
    what = "RoleRollingUpdate, Role a: 3 replicas, maxUnavailable 60% (1)"
    timeline, layout, group = _roll_a(ms, _body(manifest, maxUnavailable="60%"), what)
    _expect_min_ready(timeline, layout, group, 2, what)


@behaviour(
    "rollout/role/max-surge-percent-rounds-up",
    "Under RoleRollingUpdate a percentage maxSurge MUST be resolved against the Role's replicas rounding up, so with "
    "10% of 3 replicas (1) and maxUnavailable 0 the Role's update MUST finish while never more than 4 of its "
    "instances exist and never fewer than 3 are ready.",
    ROLE,
    Feature.MAX_SURGE,
    requires=(Feature.ROLE_ROLLING_UPDATE,),
)
def test_role_max_surge_percentage_rounds_up(ms: ModelServings, manifest: Any) -> None:
    what = "RoleRollingUpdate, Role a: 3 replicas, maxSurge 10% (1), maxUnavailable 0"
    timeline, layout, group = _roll_a(ms, _body(manifest, maxUnavailable=0, maxSurge="10%"), what)
    value, at = timeline.max_instances("a", group=group)
    assert value <= 4, f"{what}: expected at most 4 instances of Role a at once; {value} existed at {at.describe()}"
    _expect_min_ready(timeline, layout, group, 3, what)


@behaviour(
    "rollout/role/partition-absolute",
    "Under RoleRollingUpdate an absolute Role partition MUST protect that many of the Role's instances with the "
    "lowest indices: with partition 1 of 3, the lowest instance MUST keep its Pod on the old template while the "
    "other 2 are updated.",
    ROLE,
    Feature.ROLE_ROLLING_UPDATE,
)
def test_role_partition_as_a_number(ms: ModelServings, manifest: Any) -> None:
    body = _body(manifest, partition=1)
    layout = start(ms, body)
    what = "RoleRollingUpdate, Role a: 3 replicas, partition 1"
    with RolloutWatch(ms, NAME, layout) as watch:
        baseline = watch.latest()
        instances = sorted(baseline.existing_instances("a"), key=lambda k: ordinal(k[1]))
        assert len(instances) == 3, f"{what}: expected 3 instances of Role a before the update, seen {instances}"
        kept, updated = {instances[0]}, set(instances[1:])
        kept_uids = uids_of([p for p in baseline.pods if (p.group, p.role_id) in kept])

        def split(s: Snapshot) -> bool:
            return s.ready_instances(layout, "a", A2) == updated and s.ready_instances(layout, "a", A1) == kept

        patch_roles(ms, body, with_image(body, A2, "a"))
        watch.wait_for("rollout", f"{what}: instances {sorted(updated)} on {A2}, {sorted(kept)} on {A1}", split)
        ms.holds(
            f"{what}: instance {sorted(kept)} keeps its Pod",
            watch.latest,
            lambda s: split(s) and uids_of([p for p in s.pods if (p.group, p.role_id) in kept]) == kept_uids,
        )
        timeline = watch.snapshot_timeline()
    never_gone(timeline, kept_uids, f"{what}: protected instance {sorted(kept)}")


@behaviour(
    "rollout/role/all-groups-concurrently",
    "RoleRollingUpdate MUST update a Role in every ServingGroup at the same time: with 2 ServingGroups and the "
    "first replacement instance in each left Pending, an instance of the Role on the new template MUST be created "
    "in both ServingGroups, and the update MUST finish once they can run.",
    STRATEGY,
    Feature.ROLE_ROLLING_UPDATE,
)
def test_role_rolling_update_runs_in_every_group_at_once(ms: ModelServings, manifest: Any) -> None:
    body = _body(manifest, 2)
    body["spec"]["schedulerName"] = MANUAL_SCHEDULER
    binder = Binder(ms)
    layout = start_bound(ms, binder, body)
    what = "RoleRollingUpdate of Role a in 2 ServingGroups, new Pods left Pending"
    with RolloutWatch(ms, NAME, layout) as watch:
        groups = sorted(watch.latest().existing_groups())
        assert len(groups) == 2, f"expected 2 ServingGroups, seen {groups}"

        def started_everywhere(s: Snapshot) -> bool:
            return all(any(p.group == g and p.role == "a" and p.image == A2 and not p.terminating for p in s.pods)
                       for g in groups)  # fmt: skip

        patch_roles(ms, body, with_image(body, A2, "a"))
        watch.wait_for(
            "rollout",
            f"{what}: a Pod of Role a on {A2} (Pending: nothing binds it yet) in each of {groups}",
            started_everywhere,
        )
        with binder.running():
            watch.wait_settled({"a": A2, "b": B1}, f"{what}: the update finishes once its Pods can run")
    expect_status_updated(ms, NAME, what)
