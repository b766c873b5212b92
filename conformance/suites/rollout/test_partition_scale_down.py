"""Rollout: a scale-down under a partition leaves the protected replicas on the template they ran.

Why it exists: the API reference says a partition "protects the first N existing replicas in
ascending ordinal order from updates" (RollingUpdateConfiguration for ServingGroups, Role.partition
under RoleRollingUpdate). After an update rolled past the partition, lowering the count to N or
below leaves only replicas among "the first N existing": every one of them MUST run the template it
ran before the update. A scale-down that removes protected replicas and keeps updated ones breaks
that (upstream Kthena's e2e ``TestModelServingRolePartitionScaleDown`` caught the reference doing it).

The test makes that mistake tempting the way upstream's e2e does: the updated replica's Pods carry
the highest ``controller.kubernetes.io/pod-deletion-cost`` and the protected ones cost 0, so an
order by cost alone (core/*/scale-down-order, a SHOULD) would remove a protected replica. Only the
end state is asserted (docs/spec-readings.md): which replicas go, and whether a protected replica's
Pods are kept, is the implementation's business, as long as every replica left runs the old
template, Ready. The revision is observed through the image; ServingGroups and Role instances are
told apart by the implementation's declared Pod labels.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from conformance.framework.catalog import behaviour
from conformance.framework.features import Feature
from conformance.framework.modelserving import ModelServings
from conformance.framework.rollout_watch import PodState, RolloutWatch, Snapshot, ordinal
from conformance.framework.waits import wait_for

from . import API, patch_roles, role, start, with_image

COST = "controller.kubernetes.io/pod-deletion-cost"


def _cost(ms: ModelServings, kube: Any, pods: list[PodState], cost: int) -> None:
    for pod in pods:
        if not pod.terminating:
            kube.core.patch_namespaced_pod(pod.name, ms.ns, {"metadata": {"annotations": {COST: str(cost)}}})


def _settled_on_old(
    ms: ModelServings,
    watch: RolloutWatch,
    units: Callable[[Snapshot], dict[str, list[PodState]]],
    ready: Callable[[Snapshot, str | None], set[str]],
    count: int,
    old: str,
    what: str,
) -> Snapshot:
    """Wait until exactly ``count`` units exist, all Ready on ``old``. Given up (a failure) once
    ``count`` units have stood Ready, unchanged, for the steady-state window with one not on ``old``:
    the implementation settled there."""
    settled_since: list[tuple[frozenset[str], float]] = []

    def done(s: Snapshot) -> bool:
        existing = {u for u, pods in units(s).items() if any(not p.terminating for p in pods)}
        return len(existing) == count and ready(s, old) == existing

    def give_up(s: Snapshot, _elapsed: float) -> str | None:
        existing = {u for u, pods in units(s).items() if any(not p.terminating for p in pods)}
        if len(existing) != count or ready(s, None) != existing:
            settled_since.clear()
            return None
        key = frozenset(p.uid for p in s.pods)
        if not settled_since or settled_since[0][0] != key:
            settled_since[:] = [(key, time.monotonic())]
            return None
        if time.monotonic() - settled_since[0][1] < ms.timeouts.seconds("steady-state"):
            return None
        return f"the {count} units left stood Ready and unchanged for the steady-state window: {s.describe()}"

    return wait_for(
        f"{what}: {count} units left, each Ready on the template it ran before the update ({old})",
        watch.latest,
        until=done,
        timeout=ms.timeouts.seconds("scale"),
        interval=0.2,
        give_up=give_up,
    )


@behaviour(
    "rollout/role/partition-scale-down-keeps-protected",
    "Under RoleRollingUpdate, after a Role's update rolled past its partition, lowering the Role's replicas to the "
    "partition MUST leave only instances running the template they ran before the update.",
    f"{API}#Role",
    Feature.ROLE_ROLLING_UPDATE,
)
def test_role_scale_down_to_the_partition_keeps_the_old_template(ms: ModelServings, manifest: Any, kube: Any) -> None:
    body = manifest("rollout-roles")
    role(body, "a").update(replicas=3, partition=2)
    role(body, "b").update(replicas=1)
    old, new = "registry.example/role-a:v1", "registry.example/role-a:v2"
    what = "RoleRollingUpdate, Role a: 3 instances, partition 2, updated, then scaled to 2"
    layout = start(ms, body)

    def units(s: Snapshot) -> dict[str, list[PodState]]:
        return {rid: pods for (_, rid), pods in s.instances("a").items()}

    def ready(s: Snapshot, image: str | None) -> set[str]:
        return {rid for _, rid in s.ready_instances(layout, "a", image)}

    with RolloutWatch(ms, body["metadata"]["name"], layout) as watch:
        found = sorted((rid for _, rid in watch.latest().existing_instances("a")), key=ordinal)
        assert len(found) == 3, f"{what}: expected 3 instances of Role a before the update, seen {found}"
        protected, updated = found[:2], found[2]
        patch_roles(ms, body, with_image(body, new, "a"))
        before = watch.wait_for(
            "rollout",
            f"{what}: {updated} Ready on {new}, {protected} (the partition) Ready on {old}",
            lambda s: ready(s, new) == {updated} and ready(s, old) == set(protected),
        )
        for unit, pods in units(before).items():
            _cost(ms, kube, pods, 10000 + ordinal(unit) if unit == updated else 0)
        role(body, "a").update(replicas=2)
        patch_roles(ms, body, body["spec"]["template"]["roles"])
        _settled_on_old(ms, watch, units, ready, 2, old, what)


@behaviour(
    "rollout/sg/partition-scale-down-keeps-protected",
    "Under ServingGroupRollingUpdate, after an update rolled past the partition, lowering spec.replicas to the "
    "partition MUST leave only ServingGroups running the template they ran before the update.",
    f"{API}#RollingUpdateConfiguration",
    Feature.ROLLING_UPDATE,
)
def test_servinggroup_scale_down_to_the_partition_keeps_the_old_template(
    ms: ModelServings, manifest: Any, kube: Any
) -> None:
    body = manifest("rollout-groups")
    body["spec"]["replicas"] = 3
    body["spec"]["rolloutStrategy"] = {
        "type": "ServingGroupRollingUpdate",
        "rollingUpdateConfiguration": {"maxUnavailable": 1, "partition": 2},
    }
    old, new = "registry.example/engine:v1", "registry.example/engine:v2"
    what = "ServingGroupRollingUpdate of 3 ServingGroups, partition 2, updated, then scaled to 2"
    name = body["metadata"]["name"]
    layout = start(ms, body)

    def units(s: Snapshot) -> dict[str, list[PodState]]:
        return s.groups()

    def ready(s: Snapshot, image: str | None) -> set[str]:
        return s.ready_groups(layout, image)

    with RolloutWatch(ms, name, layout) as watch:
        found = sorted(watch.latest().existing_groups(), key=ordinal)
        assert len(found) == 3, f"{what}: expected 3 ServingGroups before the update, seen {found}"
        protected, updated = found[:2], found[2]
        patch_roles(ms, body, with_image(body, new))
        before = watch.wait_for(
            "rollout",
            f"{what}: {updated} Ready on {new}, {protected} (the partition) Ready on {old}",
            lambda s: ready(s, new) == {updated} and ready(s, old) == set(protected),
        )
        for unit, pods in units(before).items():
            _cost(ms, kube, pods, 10000 + ordinal(unit) if unit == updated else 0)
        ms.patch(name, {"spec": {"replicas": 2}})
        _settled_on_old(ms, watch, units, ready, 2, old, what)
