"""Rollout: a deleted partition-protected replica comes back as the partition left it.

Why it exists: the API reference says a partition "protects the first N existing replicas in
ascending ordinal order from updates", for ServingGroups (rollingUpdateConfiguration) and for a
Role's instances (Role.partition, RoleRollingUpdate). A protected replica that is deleted (a node
lost, a Pod removed by hand) and rebuilt is still that replica: rebuilt from the update template it
would have been updated after all. So it MUST come back on the template it ran before the update,
and status.currentRevision ("the ControllerRevision version preserved by ServingGroups that have not
been updated") MUST NOT change because of it. The deletion comes after the update has finished for
the unprotected replicas; the revision is observed through the image, as in the other rollout
tests. Which Pods form a ServingGroup or Role instance is read from the implementation's declared
Pod labels.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from conformance.framework.catalog import behaviour
from conformance.framework.features import Feature
from conformance.framework.modelserving import ModelServings
from conformance.framework.rollout_watch import Layout, PodState, RolloutWatch, Snapshot, ordinal

from . import API, patch_roles, role, start, with_image


def _current_revision(ms: ModelServings, name: str) -> str:
    """status.currentRevision once status reports the current generation ("" when not set)."""
    status = ms.wait(
        "status-updated",
        f"status of {ms.ns}/{name} to report the current generation",
        lambda: ms.status_summary(name),
        lambda seen: seen.get("observedGeneration") == seen["metadata.generation"],
    )
    return str(status.get("currentRevision") or "")


def _expect_rebuilt_as_it_was(
    ms: ModelServings,
    kube: Any,
    body: dict[str, Any],
    pods_of: Callable[[Snapshot, str], list[PodState]],
    ready: Callable[[Snapshot, str | None], set[str]],
    units: Callable[[Snapshot], list[str]],
    old: str,
    new: str,
    changed: tuple[str, ...],
    what: str,
) -> None:
    """Roll ``body`` from image ``old`` to ``new`` (the ``changed`` Roles; every Role when none is
    named) with the lowest unit protected, delete the protected unit's entry Pod, and expect it back
    on ``old`` with currentRevision unchanged. ``units`` lists the units (ServingGroups or Role
    instances) in ascending order, ``pods_of`` a unit's Pods and ``ready`` the units ready (on an
    image, when given)."""
    name = body["metadata"]["name"]
    start(ms, body)
    with RolloutWatch(ms, name, Layout.of(body)) as watch:
        found = units(watch.latest())
        assert len(found) == 2, f"{what}: expected 2 units before the update, seen {found}"
        protected, updated = found

        def split(s: Snapshot) -> bool:
            return ready(s, new) == {updated} and ready(s, old) == {protected}

        patch_roles(ms, body, with_image(body, new, *changed))
        before = watch.wait_for("rollout", f"{what}: {updated} on {new}, {protected} kept on {old}", split)
        current = _current_revision(ms, name)
        entry = next(p for p in pods_of(before, protected) if p.member == "entry" and not p.terminating)
        kube.core.delete_namespaced_pod(entry.name, ms.ns)

        def rebuilt(s: Snapshot) -> bool:
            uids = {p.uid for p in pods_of(s, protected) if not p.terminating}
            return protected in ready(s, None) and entry.uid not in uids

        after = watch.wait_for("recovery", f"{what}: {protected} recreated after its entry Pod was deleted", rebuilt)
    images = sorted({p.image for p in pods_of(after, protected) if not p.terminating})
    assert images == [old], (
        f"{what}: the partition protects {protected}, so after its entry Pod was deleted it MUST come back on the "
        f"template it ran ({old}); its Pods run {images} ({after.describe()})"
    )
    assert ready(after, new) == {updated}, f"{what}: {updated} must stay on {new} ({after.describe()})"
    if current:  # it was set before the deletion: it must still be, for the whole steady-state window
        ms.holds(
            f"{what}: status.currentRevision stays {current!r} after {protected} was recreated",
            lambda: str(ms.status_summary(name).get("currentRevision") or ""),
            lambda revision: revision == current,
        )


@behaviour(
    "rollout/role/partition-deleted-instance-keeps-template",
    "Under RoleRollingUpdate, a Role instance its partition protects that is deleted after the Role's update MUST be "
    "recreated from the template it ran before the update, and status.currentRevision MUST NOT change.",
    f"{API}#Role",
    Feature.ROLE_ROLLING_UPDATE,
)
def test_deleted_protected_instance_comes_back_on_its_old_template(ms: ModelServings, manifest: Any, kube: Any) -> None:
    body = manifest("rollout-roles")
    role(body, "a").update(replicas=2, partition=1)
    layout = Layout.of(body)

    def instance(s: Snapshot, key: str) -> list[PodState]:
        return next((pods for (_, rid), pods in s.instances("a").items() if rid == key), [])

    def ready(s: Snapshot, image: str | None) -> set[str]:
        return {rid for _, rid in s.ready_instances(layout, "a", image)}

    def units(s: Snapshot) -> list[str]:
        return sorted((rid for _, rid in s.existing_instances("a")), key=ordinal)

    _expect_rebuilt_as_it_was(
        ms, kube, body, instance, ready, units, "registry.example/role-a:v1", "registry.example/role-a:v2", ("a",),
        "RoleRollingUpdate, Role a: 2 instances, partition 1",
    )  # fmt: skip


@behaviour(
    "rollout/sg/partition-deleted-group-keeps-template",
    "Under ServingGroupRollingUpdate, a ServingGroup the partition protects that is deleted after the update MUST be "
    "recreated from the template it ran before the update, and status.currentRevision MUST NOT change.",
    f"{API}#RollingUpdateConfiguration",
    Feature.ROLLING_UPDATE,
)
def test_deleted_protected_group_comes_back_on_its_old_template(ms: ModelServings, manifest: Any, kube: Any) -> None:
    body = manifest("rollout-groups")
    body["spec"]["replicas"] = 2
    body["spec"]["rolloutStrategy"] = {
        "type": "ServingGroupRollingUpdate",
        "rollingUpdateConfiguration": {"maxUnavailable": 1, "partition": 1},
    }
    layout = Layout.of(body)

    def group(s: Snapshot, key: str) -> list[PodState]:
        return s.groups().get(key, [])

    def ready(s: Snapshot, image: str | None) -> set[str]:
        return s.ready_groups(layout, image)

    def units(s: Snapshot) -> list[str]:
        return sorted(s.existing_groups(), key=ordinal)

    _expect_rebuilt_as_it_was(
        ms, kube, body, group, ready, units, "registry.example/engine:v1", "registry.example/engine:v2", (),
        "ServingGroupRollingUpdate of 2 ServingGroups, partition 1",
    )  # fmt: skip
