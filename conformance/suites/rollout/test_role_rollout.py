"""Rollout: RoleRollingUpdate, each Role within its own maxUnavailable, maxSurge and partition.

Spec reading: a Role's budget is resolved from that Role's replicas and applied to its instances
in each ServingGroup ("Kthena performs RoleRollingUpdate across all ServingGroups at the same
time"). An implementation that applies it across all ServingGroups together is stricter, so the
tests bound each ServingGroup separately, which both readings satisfy.
"""

from __future__ import annotations

import copy
from typing import Any

from conformance.framework.catalog import behaviour
from conformance.framework.features import Feature
from conformance.framework.modelserving import ModelServings, role_of
from conformance.framework.rollout_watch import Layout, RolloutWatch, Snapshot, ordinal

from . import API, expect_status_updated, never_gone, patch_roles, role, roles_of, start, uids_of, with_image

NAME = "roles"
A1, A2 = "registry.example/role-a:v1", "registry.example/role-a:v2"
B1 = "registry.example/role-b:v1"
ROLE = f"{API}#Role"
STRATEGY = f"{API}#RolloutStrategy"


def _body(manifest: Any, replicas: int = 1, **a: Any) -> dict[str, Any]:
    body: dict[str, Any] = manifest("rollout-roles")
    body["spec"]["replicas"] = replicas
    role(body, "a").update(a)
    return body


def _expect_min_ready_instances(
    timeline: Any, layout: Layout, groups: list[str], minimum: int, what: str, name: str = "a"
) -> None:
    for g in groups:
        value, at = timeline.min_ready_instances(layout, name, group=g)
        assert value >= minimum, (
            f"{what}: expected at least {minimum} ready instances of Role {name} in ServingGroup {g} at every "
            f"moment; only {value} were at {at.describe()}"
        )


def _roll_a(ms: ModelServings, body: dict[str, Any], what: str) -> tuple[Any, Layout, Snapshot]:
    """Change Role a's image under a watch until everything is settled; (timeline, layout, baseline)."""
    layout = start(ms, body)
    with RolloutWatch(ms, NAME, layout) as watch:
        baseline = watch.latest()
        patch_roles(ms, body, with_image(body, A2, "a"))
        watch.wait_settled({"a": A2, "b": B1}, what)
        timeline = watch.snapshot_timeline()
    return timeline, layout, baseline


@behaviour(
    "rollout/role/unchanged-role-keeps-pods",
    "Under RoleRollingUpdate, changing one Role's template SHOULD leave the other Roles' Pods alone (none deleted "
    "or recreated) while that Role's instances are updated in every ServingGroup (the spec names the Role "
    "instance as the unit recreated, without saying an unchanged Role keeps its Pods).",
    STRATEGY,
    Feature.ROLE_ROLLING_UPDATE,
)
def test_only_the_changed_role_is_updated(ms: ModelServings, manifest: Any) -> None:
    body = _body(manifest, replicas=2)
    what = "RoleRollingUpdate, Role a's image changed in 2 ServingGroups"
    timeline, _, baseline = _roll_a(ms, body, what)
    b_uids = uids_of([p for p in baseline.pods if p.role == "b"])
    assert len(b_uids) == 8, f"expected the 8 Pods of Role b before the update, seen {sorted(b_uids)}"
    never_gone(timeline, b_uids, f"{what}: Role b is unchanged")
    ms.holds(
        f"{what}: Role b's Pods keep their UIDs",
        lambda: {p.metadata.name: p.metadata.uid for p in ms.pods(NAME) if role_of(p) == "b"},
        lambda seen: seen == b_uids,
    )
    expect_status_updated(ms, NAME, what)


@behaviour(
    "rollout/role/max-unavailable",
    "Under RoleRollingUpdate a Role with 4 replicas and maxUnavailable 2 MUST keep at least 2 of its instances in "
    "each ServingGroup ready at every moment of its update, and the update MUST finish.",
    ROLE,
    Feature.ROLE_ROLLING_UPDATE,
)
def test_role_max_unavailable_bounds_its_update(ms: ModelServings, manifest: Any) -> None:
    body = _body(manifest, 1)
    role(body, "a").update(replicas=4, maxUnavailable=2)
    what = "RoleRollingUpdate, Role a: 4 replicas, maxUnavailable 2"
    timeline, layout, baseline = _roll_a(ms, body, what)
    _expect_min_ready_instances(timeline, layout, sorted(baseline.existing_groups()), 2, what)
    expect_status_updated(ms, NAME, what)


@behaviour(
    "rollout/role/max-unavailable-percent-of-role",
    "Under RoleRollingUpdate a percentage maxUnavailable MUST be resolved against the Role's replicas (not "
    "spec.replicas) rounding down, so 50% of a Role with 2 replicas in 4 ServingGroups MUST keep at least 1 of "
    "its instances in each ServingGroup ready at every moment.",
    ROLE,
    Feature.ROLE_ROLLING_UPDATE,
)
def test_role_max_unavailable_percentage_is_of_the_role(ms: ModelServings, manifest: Any) -> None:
    body = _body(manifest, 4, maxUnavailable="50%")
    b = role(body, "b")
    b.update(replicas=1, workerReplicas=0)
    b.pop("workerTemplate")
    what = "RoleRollingUpdate, Role a: 2 replicas, maxUnavailable 50% (1; 2 if taken of the 4 ServingGroups)"
    timeline, layout, baseline = _roll_a(ms, body, what)
    groups = sorted(baseline.existing_groups())
    assert len(groups) == 4, f"expected 4 ServingGroups, seen {groups}"
    _expect_min_ready_instances(timeline, layout, groups, 1, what)


@behaviour(
    "rollout/role/partition",
    "Under RoleRollingUpdate a Role's partition MUST be resolved against the Role's replicas rounding up and MUST "
    "protect that many of its instances with the lowest indices from the update, so 30% of 4 replicas keeps the 2 "
    "lowest instances' Pods and updates the others.",
    ROLE,
    Feature.ROLE_ROLLING_UPDATE,
)
def test_role_partition_protects_the_lowest_instances(ms: ModelServings, manifest: Any) -> None:
    body = _body(manifest, 1)
    role(body, "a").update(replicas=4, partition="30%")
    layout = start(ms, body)
    what = "RoleRollingUpdate, Role a: 4 replicas, partition 30% (2)"
    with RolloutWatch(ms, NAME, layout) as watch:
        baseline = watch.latest()
        instances = sorted(baseline.existing_instances("a"), key=lambda k: ordinal(k[1]))
        assert len(instances) == 4, f"{what}: expected 4 instances of Role a before the update, seen {instances}"
        kept, updated = set(instances[:2]), set(instances[2:])
        kept_uids = uids_of([p for p in baseline.pods if (p.group, p.role_id) in kept])

        def split(s: Snapshot) -> bool:
            return s.ready_instances(layout, "a", A2) == updated and s.ready_instances(layout, "a", A1) == kept

        patch_roles(ms, body, with_image(body, A2, "a"))
        watch.wait_for("rollout", f"{what}: instances {sorted(updated)} on {A2}, {sorted(kept)} on {A1}", split)
        ms.holds(
            f"{what}: instances {sorted(kept)} keep their Pods",
            watch.latest,
            lambda s: split(s) and uids_of([p for p in s.pods if (p.group, p.role_id) in kept]) == kept_uids,
        )
        timeline = watch.snapshot_timeline()
    never_gone(timeline, kept_uids, f"{what}: protected instances {sorted(kept)}")


@behaviour(
    "rollout/role/max-surge",
    "Under RoleRollingUpdate a Role with 2 replicas, maxSurge 1 and maxUnavailable 0 MUST finish its update while "
    "never more than 3 of its instances exist and never fewer than 2 are ready in the ServingGroup.",
    ROLE,
    Feature.MAX_SURGE,
    requires=(Feature.ROLE_ROLLING_UPDATE,),
)
def test_role_max_surge_bounds_its_update(ms: ModelServings, manifest: Any) -> None:
    body = _body(manifest, 1, maxUnavailable=0, maxSurge=1)
    what = "RoleRollingUpdate, Role a: 2 replicas, maxSurge 1, maxUnavailable 0"
    timeline, layout, baseline = _roll_a(ms, body, what)
    (group,) = sorted(baseline.existing_groups())
    value, at = timeline.max_instances("a", group=group)
    assert value <= 3, f"{what}: expected at most 3 instances of Role a at once; {value} existed at {at.describe()}"
    _expect_min_ready_instances(timeline, layout, [group], 2, what)


@behaviour(
    "rollout/role/admission",
    "Under RoleRollingUpdate, rolloutStrategy.rollingUpdateConfiguration and a Role with maxUnavailable 0 and "
    "maxSurge 0 MUST be refused at admission and not stored, while Role budgets and partitions MUST be accepted.",
    STRATEGY,
    Feature.ROLE_ROLLING_UPDATE,
)
def test_role_rolling_update_admission(ms: ModelServings, manifest: Any) -> None:
    base = _body(manifest, 0)

    def variant(name: str) -> dict[str, Any]:
        body = copy.deepcopy(base)
        body["metadata"]["name"] = name
        return body

    group_config = variant("group-config")
    group_config["spec"]["rolloutStrategy"]["rollingUpdateConfiguration"] = {"maxUnavailable": 1}
    ms.refused_create(group_config, "RoleRollingUpdate with rolloutStrategy.rollingUpdateConfiguration")
    zero = variant("zero-budget")
    role(zero, "a").update(maxUnavailable=0, maxSurge=0)
    ms.refused_create(zero, "RoleRollingUpdate with a Role's maxUnavailable 0 and maxSurge 0")
    allowed = variant("role-budgets")
    for r in roles_of(allowed):
        r.update(maxUnavailable="50%", partition=1)
    rejection = ms.try_create(allowed)
    assert rejection is None, (
        f"expected RoleRollingUpdate with Role maxUnavailable 50% and partition 1 to be accepted; rejected: {rejection}"
    )
