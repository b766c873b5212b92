"""Rollout: RoleRollingUpdate under recoveryPolicy ServingGroupRecreate recreates whole ServingGroups.

Why this module exists: RolloutStrategyType says "Note that if recoveryPolicy is
ServingGroupRecreate and the rollout strategy is RoleRollingUpdate, deleting an outdated Role
causes its entire ServingGroup to be recreated": the combination is valid (an implementation
that refuses it refuses a ModelServing the spec allows) and a Role's update then recreates the
Pods of the ServingGroup's other Roles too.
"""

from __future__ import annotations

from typing import Any

from conformance.framework.catalog import behaviour
from conformance.framework.features import Feature
from conformance.framework.modelserving import ModelServings
from conformance.framework.rollout_watch import RolloutWatch, Snapshot

from . import API, expect_status_updated, patch_roles, role, start, uids_of, with_image

NAME = "role-budgets"
A2, B1 = "registry.example/role-a:v2", "registry.example/role-b:v1"


@behaviour(
    "rollout/role/servinggroup-recreate-recreates-group",
    "A ModelServing with RoleRollingUpdate and recoveryPolicy ServingGroupRecreate MUST be accepted, and updating "
    "one Role MUST recreate its entire ServingGroup: every Pod, the unchanged Role's included, MUST be replaced "
    "(new UIDs) and end Running and Ready on its template.",
    f"{API}#RolloutStrategyType",
    Feature.ROLE_ROLLING_UPDATE,
    requires=(Feature.RECOVERY,),
)
def test_servinggroup_recreate_recreates_the_group_on_a_role_update(ms: ModelServings, manifest: Any) -> None:
    body: dict[str, Any] = manifest("rollout-role-budgets")
    body["spec"]["recoveryPolicy"] = "ServingGroupRecreate"
    role(body, "a")["replicas"] = 1
    what = "RoleRollingUpdate with recoveryPolicy ServingGroupRecreate, Role a's image changed"
    layout = start(ms, body)
    with RolloutWatch(ms, NAME, layout) as watch:
        before = set(uids_of(list(watch.latest().pods)).values())
        patch_roles(ms, body, with_image(body, A2, "a"))

        def replaced(s: Snapshot) -> bool:
            return s.settled_on(layout, {"a": A2, "b": B1}) and not before & set(s.uids().values())

        watch.wait_for("rollout", f"{what}: every Pod of the ServingGroup, Role b's too, replaced (new UIDs)",
                       replaced)  # fmt: skip
    expect_status_updated(ms, NAME, what)
