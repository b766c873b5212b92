"""Probes of the Role-level scale-down, partition and Pod-template list-map faults (issue 13).

Why this module exists: ``test_faults.py`` holds one probe per fault; these are the ones for the
Role-level scale-down order, the recreation of a partition-protected ServingGroup or Role
instance, a scale-down under a partition and the CRD's embedded PodSpec list-maps, kept apart so the table there stays
readable. Each row is ``(fault, probe, off, on, overlaps)``: ``overlaps`` names the other faults
that break the same observable on purpose.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kthena_ref.api.crd import crd
from kthena_ref.api.types import ModelServing

from .builders import MS, deleted, edit_spec, pending, with_cost, world

Row = tuple[str, Callable[[], Any], Any, Any, tuple[str, ...]]


def _role_replicas(n: int) -> Callable[[dict[str, Any]], None]:
    def change(spec: dict[str, Any]) -> None:
        spec["template"]["roles"][0]["replicas"] = n

    return change


def probe_role_scale_down() -> list[str]:
    """Role r (3 instances, instance 1 not ready) scaled to 2: which Pods go."""
    w = world(MS().role("r", 3, 0).build())
    w.pods["ms-0-r-1-0"] = pending(w.pods["ms-0-r-1-0"])
    w.ms = edit_spec(w.ms, _role_replicas(2))
    return deleted(w.plan())


def _partitioned() -> ModelServing:
    ms = MS().role("a", 2, 0, image="a:v1").role("b", 1, 0, image="b:v1").rollout(type="RoleRollingUpdate").build()
    return edit_spec(ms, lambda spec: spec["template"]["roles"][0].update(partition=1))


def _entry_image(image: str) -> Callable[[dict[str, Any]], None]:
    def change(spec: dict[str, Any]) -> None:
        spec["template"]["roles"][0]["entryTemplate"]["spec"]["containers"][0]["image"] = image

    return change


def probe_role_partition_refill() -> str:
    """Role a (2 instances, partition 1) updated to a:v2, then its protected instance deleted: the
    image it comes back with."""
    w = world(_partitioned())
    w.ms = edit_spec(w.ms, _entry_image("a:v2"))
    w.converge()
    del w.pods["ms-0-a-0-0"]
    w.converge()
    return str(w.pods["ms-0-a-0-0"]["spec"]["containers"][0]["image"])


def probe_group_partition_refill() -> str:
    """2 ServingGroups with partition 1 updated to engine:v2, then the protected group 0 deleted: the
    image it comes back with."""
    w = world(MS().replicas(2).role("r", 1, 0).rollout(partition=1).build())
    w.ms = edit_spec(w.ms, _entry_image("engine:v2"))
    w.converge()
    del w.pods["ms-0-r-0-0"]
    w.converge()
    return str(w.pods["ms-0-r-0-0"]["spec"]["containers"][0]["image"])


def _entry_images(w: Any, unit: Callable[[str], str]) -> dict[str, str]:
    return {unit(n): str(pod["spec"]["containers"][0]["image"]) for n, pod in w.pods.items() if n.endswith("-0")}


def _costly_updates(w: Any, image: str) -> None:
    """Deletion cost 100 on every Pod running ``image``."""
    for name, pod in list(w.pods.items()):
        if pod["spec"]["containers"][0]["image"] == image:
            w.pods[name] = with_cost(pod, 100)


def probe_group_partition_scale_down() -> dict[str, str]:
    """3 ServingGroups, partition 2, updated to engine:v2 (group 2), the protected groups' Pods made the
    cheapest to delete, then scaled to 2: the image of each group left."""
    w = world(MS().replicas(3).role("r", 1, 0).rollout(partition=2).build())
    w.ms = edit_spec(w.ms, _entry_image("engine:v2"))
    w.converge()
    _costly_updates(w, "engine:v2")
    w.ms = edit_spec(w.ms, lambda spec: spec.update(replicas=2))
    w.converge()
    return _entry_images(w, lambda n: n.rsplit("-", 3)[0])


def probe_role_partition_scale_down() -> dict[str, str]:
    """RoleRollingUpdate, Role a of 3 instances, partition 2, updated to a:v2 (instance 2), which is made
    the costliest to delete, then scaled to 2 instances: the image of each instance left."""
    ms = MS().role("a", 3, 0, image="a:v1").rollout(type="RoleRollingUpdate").build()
    w = world(edit_spec(ms, lambda spec: spec["template"]["roles"][0].update(partition=2)))
    w.ms = edit_spec(w.ms, _entry_image("a:v2"))
    w.converge()
    _costly_updates(w, "a:v2")
    w.ms = edit_spec(w.ms, _role_replicas(2))
    w.converge()
    return _entry_images(w, lambda n: "-".join(n.split("-")[2:4]))


def probe_pod_template_list_maps() -> dict[str, Any]:
    """The list type of hostAliases and of a container's env in the CRD's embedded PodSpec."""
    version = crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    role = version["properties"]["spec"]["properties"]["template"]["properties"]["roles"]["items"]
    pod = role["properties"]["entryTemplate"]["properties"]["spec"]
    env = pod["properties"]["containers"]["items"]["properties"]["env"]
    aliases = pod["properties"]["hostAliases"]
    return {name: (node.get("x-kubernetes-list-type"), node.get("x-kubernetes-list-map-keys")) for name, node in
            (("hostAliases", aliases), ("env", env))}  # fmt: skip


CASES: list[Row] = [
    # Core
    # (a Role's replicas in the revision make a scale-down a rollout: another choice of instances)
    (  # role-scale-down-ignored: no instance goes at all
        "role-scale-down-highest-index",
        probe_role_scale_down,
        ["ms-0-r-1-0"],
        ["ms-0-r-2-0"],
        ("replicas-in-revision", "role-scale-down-ignored"),
    ),
    (
        "pod-template-list-maps-enforced",
        probe_pod_template_list_maps,
        {"hostAliases": ("atomic", None), "env": ("atomic", None)},
        {"hostAliases": ("map", ["ip"]), "env": ("map", ["name"])},
        (),
    ),
    # Rollout
    # (partition-ignored updates the protected group in the first place)
    (
        "group-partition-refilled-at-update",
        probe_group_partition_refill,
        "engine:v1",
        "engine:v2",
        ("current-revision-is-update", "partition-ignored"),
    ),
    # (the revision a protected instance comes back at is status.currentRevision's)
    (
        "role-partition-refilled-at-update",
        probe_role_partition_refill,
        "a:v1",
        "a:v2",
        ("current-revision-is-update", "role-partition-absolute-ignored"),  # the probe's partition is a number
    ),
    # issue 31, section 5: a scale-down under a partition removes the updated units outside it first
    (
        "scale-down-ignores-partition",
        probe_group_partition_scale_down,
        {"ms-0": "engine:v1", "ms-1": "engine:v1"},
        {"ms-0": "engine:v1", "ms-2": "engine:v2"},
        ("partition-ignored",),
    ),
    (
        "role-scale-down-ignores-partition",
        probe_role_partition_scale_down,
        {"a-0": "a:v1", "a-1": "a:v1"},
        {"a-0": "a:v1", "a-2": "a:v2"},
        ("role-partition-absolute-ignored", "role-scale-down-ignored"),
    ),
]
