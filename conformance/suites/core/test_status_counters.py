"""Status counters while ServingGroups are unready or not yet updated, not only once settled.

Why it exists: core/status/settled checks the counters when every ServingGroup runs the current
template, where replicas, availableReplicas, updatedReplicas and currentReplicas all agree; a
controller that counts the wrong thing is only seen when they differ. The tests make them differ at
a moment they control (a Pod made NotReady through the cluster's fault injection; a rollout held by
a partition) and hold it for the steady-state window. Where the cluster declares real nodes, the
unready ServingGroup is made unready by a real exec readiness probe the kubelet runs. An omitted
counter reads as 0 (a Go ``omitempty`` drops it at 0).

currentReplicas "is the number of ServingGroup created by the ModelServing controller from the
ModelServing version": with every ServingGroup on one template every reading gives spec.replicas,
so the unready test asserts it. While a partition holds groups on the old template the readings
part (the ServingGroups at status.currentRevision, reading 21 and StatefulSet's convention; or the
ones built from the current spec): the partition test's MUST leaves it out, and
rollout/status/current-replicas-partition asserts the currentRevision reading as SHOULD.
"""

from __future__ import annotations

from typing import Any

from conformance.cluster.faults import Fault
from conformance.framework import realnodes
from conformance.framework.catalog import behaviour
from conformance.framework.features import Feature
from conformance.framework.modelserving import ModelServings, container_of

from .single_pod_groups import V1, V2, partitioned, roll_to, start

API = "api-reference-workload-v1alpha1.txt"
NAME = "counters"
COUNTERS = ("replicas", "availableReplicas", "updatedReplicas", "currentReplicas")


def _expect_counters(ms: ModelServings, want: dict[str, int], what: str) -> None:
    """status reports the current generation and exactly ``want``, and keeps reporting it for the
    steady-state window."""

    def observe() -> dict[str, Any]:
        status = ms.status_summary(NAME)
        seen = {k: status.get(k) for k in COUNTERS}
        seen["current generation"] = status.get("observedGeneration") == status["metadata.generation"]
        return seen

    def matches(seen: dict[str, Any]) -> bool:
        return bool(seen["current generation"]) and all(seen[k] == v for k, v in want.items())

    ms.wait("status-updated", f"{what}: status of {NAME} to report {want} at the current generation", observe, matches)
    ms.holds(f"{what}: status keeps reporting {want}", observe, matches)


def _pod_on(ms: ModelServings, image: str) -> str:
    return str(next(p.metadata.name for p in ms.pods(NAME) if container_of(p).image == image))


@behaviour(
    "core/status/counters-unready",
    "While one of 3 ServingGroups has a Pod that is not Ready, status MUST report replicas 3, availableReplicas 2, "
    "updatedReplicas 3 and currentReplicas 3, and availableReplicas 3 again once the Pod is Ready.",
    f"{API}#ModelServingStatus",
    Feature.CORE,
)
def test_counters_with_an_unready_servinggroup(
    ms: ModelServings, manifest: Any, faults: Any, suite: Any, request: Any
) -> None:
    body = manifest("core-status-counters")
    real = realnodes.if_declared(suite, request, SIMULATED_READINESS)
    if real is not None:  # the Pods run for real: an exec readiness probe the test switches
        realnodes.place_modelserving(body, real, crashable=True)
    start(ms, body)
    pod = ms.pods(NAME)[0]
    victim = pod.metadata.name

    def set_ready(ready: bool) -> None:
        if real is None:
            faults.inject(ms.ns, victim, Fault.CLEAR if ready else Fault.NOT_READY)
        else:
            realnodes.set_ready(ms.kube.core, ms.ns, victim, container_of(pod).name, ready=ready)

    set_ready(False)
    counters = {"replicas": 3, "availableReplicas": 2, "updatedReplicas": 3, "currentReplicas": 3}
    _expect_counters(ms, counters, f"Pod {victim} NotReady")
    set_ready(True)
    _expect_counters(ms, {**counters, "availableReplicas": 3}, f"Pod {victim} Ready again")
    if real is not None:
        realnodes.observed_on_real_nodes(request, [p.spec.node_name for p in ms.pods(NAME)])


SIMULATED_READINESS = "kwok set the Pod's Ready condition: no readiness probe ran"


@behaviour(
    "rollout/status/counters-partition",
    "While a partition holds 1 of 3 ServingGroups on the old template, status MUST report replicas 3 and "
    "updatedReplicas 2 whichever of them are ready, and availableReplicas the number of ready ServingGroups, "
    "updated or not.",
    f"{API}#ModelServingStatus",
    Feature.ROLLING_UPDATE,
)
def test_counters_during_a_partitioned_rollout(ms: ModelServings, manifest: Any, faults: Any) -> None:
    body = partitioned(manifest("core-status-counters"), 1)
    start(ms, body)
    roll_to(ms, body, V2, updated=2, old={V1: 1})
    held = {"replicas": 3, "updatedReplicas": 2}
    _expect_counters(ms, {**held, "availableReplicas": 3}, "partition 1 holding 1 of 3 ServingGroups on v1")
    updated_pod = _pod_on(ms, V2)
    faults.inject(ms.ns, updated_pod, Fault.NOT_READY)
    _expect_counters(ms, {**held, "availableReplicas": 2}, f"and the updated Pod {updated_pod} NotReady")
    old_pod = _pod_on(ms, V1)
    faults.inject(ms.ns, old_pod, Fault.NOT_READY)
    _expect_counters(ms, {**held, "availableReplicas": 1}, f"and the not-updated Pod {old_pod} NotReady too")


@behaviour(
    "rollout/status/current-replicas-partition",
    "While a partition holds 1 of 3 ServingGroups on the old template, status.currentReplicas SHOULD report 1, the "
    "ServingGroups at status.currentRevision.",
    f"{API}#ModelServingStatus",
    Feature.ROLLING_UPDATE,
)
def test_current_replicas_during_a_partitioned_rollout(ms: ModelServings, manifest: Any) -> None:
    body = partitioned(manifest("core-status-counters"), 1)
    start(ms, body)
    roll_to(ms, body, V2, updated=2, old={V1: 1})
    _expect_counters(ms, {"currentReplicas": 1}, "partition 1 holding 1 of 3 ServingGroups on v1")
