"""Recovery: what the controller rebuilds when a Pod is lost, fails or restarts (RecoveryPolicy).

The spec leaves Pod and ServingGroup names open, so the tests never ask which group or Role
instance a Pod belongs to. The manifest (two ServingGroups, each with two instances of a Role of
an entry Pod and one worker) makes the policies differ in *how many* Pod UIDs change: a Role
instance is 2 of the 8 Pods, a ServingGroup 4. After the change settles the count must hold for
the steady-state window, so a rebuild that happens in steps cannot pass by being caught half way.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from conformance.cluster.faults import Fault
from conformance.framework.catalog import behaviour
from conformance.framework.features import Feature
from conformance.framework.modelserving import ModelServings, expected_pod_count, member, running_ready

API = "api-reference-workload-v1alpha1.txt"
NAME = "recovery"


def _start(ms: ModelServings, manifest: Any, policy: str) -> tuple[int, dict[str, str], Any]:
    """Create the 8-Pod ModelServing with ``policy``; (Pod count, uid -> member, a worker Pod)."""
    body = manifest("core-recovery")
    body["spec"]["recoveryPolicy"] = policy
    ms.create(body)
    total = expected_pod_count(body)
    pods = ms.wait_pods(NAME, total)
    victim = next(p for p in pods if member(p) == "worker")
    return total, {p.metadata.uid: member(p) for p in pods}, victim


def _expect_rebuilt(
    ms: ModelServings, total: int, before: dict[str, str], victim_uid: str, changed: int, what: str
) -> None:
    """Wait until ``total`` Pods run again with exactly ``changed`` of the original UIDs replaced
    (the victim's among them), then require that to hold for the steady-state window."""
    survivors = len(before) - changed

    def observe() -> dict[str, Any]:
        pods = ms.pods(NAME)
        return {
            "pods": len(pods),
            "running-ready": sum(1 for p in pods if running_ready(p)),
            "victim-present": any(p.metadata.uid == victim_uid for p in pods),
            "original-uids-kept": sum(1 for p in pods if p.metadata.uid in before),
            "uids": sorted(p.metadata.uid for p in pods),
            "new-members": sorted(member(p) for p in pods if p.metadata.uid not in before),
        }

    def done(seen: dict[str, Any]) -> bool:
        return (
            seen["pods"] == total
            and seen["running-ready"] == total
            and not seen["victim-present"]
            and seen["original-uids-kept"] == survivors
        )

    seen = ms.wait(
        "recovery",
        f"{what}: {total} Pods Running and Ready, exactly {changed} of the {len(before)} original Pod UIDs "
        f"replaced (the affected Pod's among them) and {survivors} kept",
        observe,
        done,
    )
    lost = Counter(before[u] for u in before if u not in seen["uids"])
    assert Counter(seen["new-members"]) == lost, (
        f"expected the replacements to match the replaced Pods (entry/worker); replaced {dict(lost)}, "
        f"new {seen['new-members']}"
    )
    ms.holds(
        f"{what}: the {total} Pods after recovery keep their UIDs (no further Pod is recreated)",
        lambda: sorted(p.metadata.uid for p in ms.pods(NAME)),
        lambda uids: uids == seen["uids"],
    )


@behaviour(
    "core/recovery/role-recreate-deleted-pod",
    "With recoveryPolicy RoleRecreate, deleting one Pod MUST recreate every Pod of its Role instance and "
    "MUST NOT recreate Pods of other Role instances or ServingGroups.",
    f"{API}#RecoveryPolicy",
    Feature.RECOVERY,
)
def test_role_recreate_rebuilds_the_instance_of_a_deleted_pod(ms: ModelServings, manifest: Any, kube: Any) -> None:
    total, before, victim = _start(ms, manifest, "RoleRecreate")
    kube.core.delete_namespaced_pod(victim.metadata.name, ms.ns)
    _expect_rebuilt(ms, total, before, victim.metadata.uid, 2, "RoleRecreate after deleting a worker Pod")


@behaviour(
    "core/recovery/role-recreate-failed-pod",
    "With recoveryPolicy RoleRecreate, a Pod that fails MUST be replaced together with every Pod of its Role "
    "instance, and Pods of other Role instances or ServingGroups MUST NOT be recreated.",
    f"{API}#RecoveryPolicy",
    Feature.RECOVERY,
)
def test_role_recreate_rebuilds_the_instance_of_a_failed_pod(ms: ModelServings, manifest: Any, faults: Any) -> None:
    total, before, victim = _start(ms, manifest, "RoleRecreate")
    faults.inject(ms.ns, victim.metadata.name, Fault.FAIL)
    _expect_rebuilt(ms, total, before, victim.metadata.uid, 2, "RoleRecreate after a worker Pod failed")


@behaviour(
    "core/recovery/role-recreate-restarted-container",
    "With recoveryPolicy RoleRecreate, a restarted container MUST cause every Pod of its Role instance to be "
    "recreated, and Pods of other Role instances or ServingGroups MUST NOT be recreated.",
    f"{API}#RecoveryPolicy",
    Feature.RECOVERY,
)
def test_role_recreate_rebuilds_the_instance_of_a_restarted_container(
    ms: ModelServings, manifest: Any, faults: Any
) -> None:
    total, before, victim = _start(ms, manifest, "RoleRecreate")
    # The container restarts and does not come back Ready, as a crashing engine would.
    faults.inject(ms.ns, victim.metadata.name, Fault.NOT_READY)
    faults.inject(ms.ns, victim.metadata.name, Fault.RESTART)
    _expect_rebuilt(ms, total, before, victim.metadata.uid, 2, "RoleRecreate after a worker container restarted")


@behaviour(
    "core/recovery/servinggroup-recreate-deleted-pod",
    "With recoveryPolicy ServingGroupRecreate, deleting one Pod MUST recreate every Pod of its ServingGroup and "
    "MUST NOT recreate Pods of other ServingGroups.",
    f"{API}#RecoveryPolicy",
    Feature.RECOVERY,
)
def test_servinggroup_recreate_rebuilds_the_group_of_a_deleted_pod(ms: ModelServings, manifest: Any, kube: Any) -> None:
    total, before, victim = _start(ms, manifest, "ServingGroupRecreate")
    kube.core.delete_namespaced_pod(victim.metadata.name, ms.ns)
    _expect_rebuilt(ms, total, before, victim.metadata.uid, 4, "ServingGroupRecreate after deleting a worker Pod")


@behaviour(
    "core/recovery/none-deleted-pod",
    "With recoveryPolicy None, a deleted Pod MUST be replaced on its own and the controller MUST NOT recreate "
    "any other Pod.",
    f"{API}#RecoveryPolicy",
    Feature.RECOVERY,
)
def test_none_replaces_only_the_deleted_pod(ms: ModelServings, manifest: Any, kube: Any) -> None:
    total, before, victim = _start(ms, manifest, "None")
    kube.core.delete_namespaced_pod(victim.metadata.name, ms.ns)
    _expect_rebuilt(ms, total, before, victim.metadata.uid, 1, "None after deleting a worker Pod")
