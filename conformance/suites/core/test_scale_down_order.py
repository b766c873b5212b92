"""Scale-down order: which ServingGroup, or which Role instance, lowering a count removes.

Why it exists: the spec does not say which replica a scale-down removes. Upstream Kthena removes
not-ready units first, then the lowest summed ``controller.kubernetes.io/pod-deletion-cost`` of their
Pods, then the highest ordinal (index): Kubernetes' ReplicaSet convention for that annotation, which
users of a Kubernetes workload expect. So these behaviours are SHOULD (a failure is a warning), for
ServingGroups and for Role instances under both rollout strategies (docs/spec-readings.md).

Each test runs four units (ServingGroups, or instances of one Role in one ServingGroup) of an entry
Pod and a worker, puts a cost on the lowest unit (entry +3, worker -8: summed -5, though the entry
alone costs more than the others), holds the second unit's worker NotReady, waits until status
shows the controller saw it, then lowers the count 4 -> 3 -> 2 -> 1. The fair order removes the
not-ready unit (though another costs less), then the costed one (though its index is the lowest),
then the highest of the two equal ones. A unit is told apart by the implementation's declared Pod
labels, and judged removed when any of its Pods' UIDs is gone.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from conformance.cluster.faults import Fault
from conformance.framework.catalog import behaviour
from conformance.framework.features import Feature
from conformance.framework.modelserving import ModelServings, running_ready
from conformance.framework.outcomes import precondition
from conformance.framework.rollout_watch import PodState, Snapshot, ordinal

API = "api-reference-workload-v1alpha1.txt"
NAME = "small"
ROLE = "server"
COST = "controller.kubernetes.io/pod-deletion-cost"
ORDER = "not-ready first, then the lowest summed pod-deletion-cost, then the highest ordinal/index"


def _snapshot(ms: ModelServings) -> Snapshot:
    pods = ms.pods(NAME)
    return Snapshot(0, 0.0, tuple(PodState.from_json(ms.kube.api.sanitize_for_serialization(p), ms.pod_labels)
                                  for p in pods if not p.metadata.deletion_timestamp))  # fmt: skip


def _groups(snapshot: Snapshot) -> dict[str, list[PodState]]:
    return snapshot.groups()


def _instances(snapshot: Snapshot) -> dict[str, list[PodState]]:
    return {role_id: pods for (_, role_id), pods in snapshot.instances(ROLE).items()}


def _expect_scale_down_order(
    ms: ModelServings,
    kube: Any,
    faults: Any,
    body: dict[str, Any],
    units_of: Callable[[Snapshot], dict[str, list[PodState]]],
    scale_to: Callable[[int], object],
    available_when_held: int,
    what: str,
) -> None:
    with precondition(f"{what}: 4 units running, one held not ready, with deletion costs set"):
        ms.create(body)
        ms.wait_pods(NAME, 8)
        ms.wait_settled(NAME)
        units = units_of(_snapshot(ms))
        ids = sorted(units, key=ordinal)
        seen = {u: [p.name for p in units[u]] for u in ids}
        assert len(ids) == 4 and all(len(units[u]) == 2 for u in ids), (
            f"{what}: expected 4 units of an entry Pod and a worker; seen {seen}"
        )
        costly, held, high, higher = ids
        for pod, cost in zip(sorted(units[costly], key=lambda p: p.member), ("3", "-8"), strict=True):  # entry, worker
            kube.core.patch_namespaced_pod(pod.name, ms.ns, {"metadata": {"annotations": {COST: cost}}})
        worker = next(p for p in units[held] if p.member == "worker")
        faults.inject(ms.ns, worker.name, Fault.NOT_READY)
        ms.wait(
            "pods-running",
            f"Pod {worker.name} NotReady",
            lambda: kube.core.read_namespaced_pod(worker.name, ms.ns),
            lambda pod: not running_ready(pod),
        )
        ms.wait(
            "status-updated",
            f"status.availableReplicas {available_when_held} (the controller saw {held} not ready)",
            lambda: ms.status_summary(NAME),
            lambda seen: seen.get("availableReplicas") == available_when_held,
        )

    remaining = {u: {p.uid for p in units[u]} for u in ids}
    steps = [
        (3, held, f"{held} is not ready (though {costly} costs less)"),
        (2, costly, f"{costly}'s Pods sum to the lowest deletion cost, -5 (though its index is the lowest)"),
        (1, higher, f"{higher} has the highest index of the two left, both costing 0"),
    ]
    for count, victim, why in steps:
        scale_to(count)
        live = {p.metadata.uid for p in ms.wait_pods(NAME, 2 * count, ready=False, wait="scale")}
        gone = sorted(u for u, uids in remaining.items() if not uids <= live)
        assert gone == [victim], (
            f"{what}: lowering the count to {count} SHOULD remove {victim}, because {why} (order: {ORDER}); "
            f"it removed {gone or 'nothing'} (units left before: {sorted(remaining, key=ordinal)})"
        )
        del remaining[victim]
    assert list(remaining) == [high]


@behaviour(
    "core/servinggroup/scale-down-order",
    "Lowering spec.replicas SHOULD remove not-ready ServingGroups first, then those whose Pods have the lowest "
    "summed controller.kubernetes.io/pod-deletion-cost, then those with the highest ordinal.",
    f"{API}#ModelServingSpec",
    Feature.CORE,
)
def test_servinggroup_scale_down_order(ms: ModelServings, manifest: Any, kube: Any, faults: Any) -> None:
    body = manifest("core-small")
    body["spec"]["replicas"] = 4
    _expect_scale_down_order(ms, kube, faults, body, _groups,
                             lambda n: ms.patch(NAME, {"spec": {"replicas": n}}), 3,
                             "4 ServingGroups scaled down one at a time")  # fmt: skip


def _role_scale_down(ms: ModelServings, manifest: Any, kube: Any, faults: Any, strategy: str | None) -> None:
    body = manifest("core-small")
    roles = body["spec"]["template"]["roles"]
    roles[0]["replicas"] = 4
    if strategy is not None:
        body["spec"]["rolloutStrategy"] = {"type": strategy}

    def scale_to(n: int) -> None:
        roles[0]["replicas"] = n
        ms.patch(NAME, {"spec": {"template": {"roles": roles}}})  # a merge patch replaces the list

    what = f"Role {ROLE} of 4 instances scaled down one at a time ({strategy or 'default rolloutStrategy'})"
    _expect_scale_down_order(ms, kube, faults, body, _instances, scale_to, 0, what)


@behaviour(
    "core/role/scale-down-order",
    "Lowering a Role's replicas SHOULD remove, in each ServingGroup, its not-ready instances first, then those whose "
    "Pods have the lowest summed controller.kubernetes.io/pod-deletion-cost, then those with the highest index.",
    f"{API}#Role",
    Feature.CORE,
)
def test_role_scale_down_order(ms: ModelServings, manifest: Any, kube: Any, faults: Any) -> None:
    _role_scale_down(ms, manifest, kube, faults, None)


@behaviour(
    "rollout/role/scale-down-order",
    "Under RoleRollingUpdate, lowering a Role's replicas SHOULD remove, in each ServingGroup, its not-ready instances "
    "first, then those whose Pods have the lowest summed controller.kubernetes.io/pod-deletion-cost, then those with "
    "the highest index.",
    f"{API}#Role",
    Feature.ROLE_ROLLING_UPDATE,
)
def test_role_scale_down_order_under_role_rolling_update(
    ms: ModelServings, manifest: Any, kube: Any, faults: Any
) -> None:
    _role_scale_down(ms, manifest, kube, faults, "RoleRollingUpdate")
