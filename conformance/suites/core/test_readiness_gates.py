"""Core: a Pod's readiness gates are part of its ServingGroup's readiness.

Why this module exists: status.availableReplicas counts the ServingGroups "that are in ready
state", and a Pod is ready (its Ready condition) only when its containers are ready and every
readiness gate its template declares is True (spec reading: a ServingGroup in ready state). An
implementation that judges readiness from the containers alone counts a group whose gate is still
closed. Only a kubelet that leaves gates alone shows the difference: the test owns the gate (sets
its condition through the status subresource, as a load balancer controller would) and first
checks the cluster kept the Pods not Ready while it was unset; where it did not, the test is
inconclusive.
"""

from __future__ import annotations

from typing import Any

from conformance.framework.catalog import behaviour
from conformance.framework.features import Feature
from conformance.framework.kubelet import condition_status, expect_gates_honoured, set_pod_condition
from conformance.framework.modelserving import ModelServings, expected_pod_count

API = "api-reference-workload-v1alpha1.txt"
NAME = "gated"
GATE = "conformance.kthena.io/warmed-up"


def _gated_pods(ms: ModelServings, count: int) -> list[Any]:
    """The ``count`` Pods, Running with their containers ready (the kubelet's part done)."""

    def done(pods: list[Any]) -> bool:
        live = [p for p in pods if not p.metadata.deletion_timestamp]
        return len(live) == count and all(
            p.status.phase == "Running" and condition_status(p, "ContainersReady") == "True" for p in live
        )

    return ms.wait("pods-running", f"{count} Pods of {NAME} Running with ready containers", lambda: ms.pods(NAME), done)


def _available(ms: ModelServings, want: int, what: str, *, hold: bool = False) -> None:
    """status.availableReplicas reaches ``want`` (for the current generation); with ``hold``, it
    must stay there for the steady-state window (a "MUST NOT count" that a late count would break)."""

    def seen(summary: dict[str, Any]) -> bool:
        return (
            summary.get("observedGeneration") == summary["metadata.generation"]
            and summary.get("availableReplicas") == want
        )

    ms.wait("status-updated", f"{what}: status.availableReplicas {want}", lambda: ms.status_summary(NAME), seen)
    if hold:
        ms.holds(f"{what}: status.availableReplicas stays {want}", lambda: ms.status_summary(NAME), seen)


@behaviour(
    "core/status/readiness-gates",
    "A ServingGroup whose Pod has a readiness gate (from its template) that is not True is not in ready state: "
    "status.availableReplicas MUST NOT count it while the gate is not True, and MUST count it once the gate is True.",
    f"{API}#ModelServingStatus",
    Feature.CORE,
)
def test_a_closed_readiness_gate_keeps_a_servinggroup_unavailable(ms: ModelServings, manifest: Any) -> None:
    body = manifest("core-readiness-gate")
    ms.create(body)
    pods = _gated_pods(ms, expected_pod_count(body))
    without = [p.metadata.name for p in pods if GATE not in [g.condition_type for g in p.spec.readiness_gates or []]]
    assert not without, f"the Pods must carry the template's readinessGates ({GATE}); these do not: {without}"
    expect_gates_honoured(pods, GATE)
    ms.wait_observed(NAME)
    _available(ms, 0, "both Pods' readiness gates unset (containers ready)", hold=True)

    first, second = sorted(p.metadata.name for p in pods)
    set_pod_condition(ms.kube, ms.ns, first, GATE, "True")
    _available(ms, 1, f"the gate of {first} True, of {second} unset")
    set_pod_condition(ms.kube, ms.ns, second, GATE, "True")
    _available(ms, 2, "both gates True")
    set_pod_condition(ms.kube, ms.ns, first, GATE, "False")
    _available(ms, 1, f"the gate of {first} False again", hold=True)
