"""Recovery: a restarted init container under ServingGroupRecreate and RoleRecreate.

Why this module exists: the spec's RecoveryPolicy says ServingGroupRecreate recreates every Pod of
the ServingGroup, and RoleRecreate every Pod of one Role (the restarted Pod's Role instance, spec
reading 13), when "any containers/init-containers in a pod is restarted". :mod:`.test_recovery_restarts`
restarts a regular container; this module restarts an init container.

A kubelet restarts an init container of a running Pod only if it is a sidecar (``restartPolicy:
Always``); a regular init container has run to completion once the Pod started. So the Pods of
Role a carry a sidecar, and the test restarts it as a crashing sidecar looks: its
``initContainerStatuses`` restartCount goes up and the Pod is not Ready (a sidecar's readiness is
part of the Pod's). A cluster that cannot restart a sidecar on demand makes the test inconclusive
(:func:`~conformance.framework.kubelet.require_faults`,
:func:`~conformance.framework.kubelet.expect_sidecar_restarted`).
As in :mod:`.test_recovery_restarts` (whose check they share), the tests never ask which
ServingGroup or Role instance a Pod is in: they count which Pods (by Role and entry/worker) were
replaced, and require the count to hold for the steady-state window.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from conformance.cluster.faults import Fault
from conformance.framework.catalog import behaviour
from conformance.framework.features import Feature
from conformance.framework.kubelet import expect_sidecar_restarted, require_faults, sidecar_restarts
from conformance.framework.modelserving import ModelServings, expected_pod_count, member, role_of

from .test_recovery_restarts import Kind, expect_replaced

API = "api-reference-workload-v1alpha1.txt"
NAME = "init-restarts"

# One instance of Role a (the restarted Pod's), and the whole ServingGroup (a's two instances and b).
A_INSTANCE: Counter[Kind] = Counter({("a", "entry"): 1, ("a", "worker"): 1})
GROUP: Counter[Kind] = Counter({("a", "entry"): 2, ("a", "worker"): 2, ("b", "entry"): 1})


def _restart_a_sidecar(ms: ModelServings, manifest: Any, faults: Any, policy: str) -> tuple[int, dict[str, Kind], str]:
    """Create the 10-Pod ModelServing with ``policy``, then restart the sidecar of one of Role a's
    workers, leaving that Pod not Ready as a crashing sidecar does. (Pod count, each original Pod's
    kind by UID, the restarted Pod's UID.)"""
    require_faults(faults, Fault.NOT_READY, Fault.RESTART_SIDECAR)
    body: dict[str, Any] = manifest("core-recovery-init-restarts")
    body["spec"]["recoveryPolicy"] = policy
    ms.create(body)
    total = expected_pod_count(body)
    pods = ms.wait_pods(NAME, total)
    victim = next(p for p in pods if role_of(p) == "a" and member(p) == "worker")
    before = sidecar_restarts(victim)
    faults.inject(ms.ns, victim.metadata.name, Fault.NOT_READY)
    faults.inject(ms.ns, victim.metadata.name, Fault.RESTART_SIDECAR)
    expect_sidecar_restarted(
        ms.kube, ms.ns, victim.metadata.name, before, timeout=ms.timeouts.seconds("pods-running"),
        uid=victim.metadata.uid,
    )  # fmt: skip
    return total, {p.metadata.uid: (role_of(p), member(p)) for p in pods}, victim.metadata.uid


@behaviour(
    "core/recovery/servinggroup-recreate-restarted-init-container",
    "With recoveryPolicy ServingGroupRecreate, a restarted init container (a sidecar whose restartCount goes up) "
    "MUST cause every Pod of its ServingGroup (the Pods of its Role's other instance and of its other Roles "
    "included) to be recreated, and Pods of other ServingGroups MUST NOT be recreated.",
    f"{API}#RecoveryPolicy",
    Feature.RECOVERY,
)
def test_servinggroup_recreate_rebuilds_the_group_of_a_restarted_init_container(
    ms: ModelServings, manifest: Any, faults: Any
) -> None:
    total, before, victim = _restart_a_sidecar(ms, manifest, faults, "ServingGroupRecreate")
    expect_replaced(ms, total, before, victim, GROUP,
                    "ServingGroupRecreate after the sidecar of a worker of Role a restarted", NAME)  # fmt: skip


@behaviour(
    "core/recovery/role-recreate-restarted-init-container",
    "With recoveryPolicy RoleRecreate, a restarted init container (a sidecar whose restartCount goes up) MUST "
    "cause the Pods of its Role instance to be recreated and MUST NOT cause any Pod of another instance of the "
    "Role, of another Role of the same ServingGroup, or of another ServingGroup, to be recreated.",
    f"{API}#RecoveryPolicy",
    Feature.RECOVERY,
)
def test_role_recreate_rebuilds_the_role_instance_of_a_restarted_init_container(
    ms: ModelServings, manifest: Any, faults: Any
) -> None:
    total, before, victim = _restart_a_sidecar(ms, manifest, faults, "RoleRecreate")
    expect_replaced(ms, total, before, victim, A_INSTANCE,
                    "RoleRecreate after the sidecar of a worker of Role a restarted", NAME)  # fmt: skip
