"""Core: a ModelServing's ServingGroups, Roles and Pods."""

from __future__ import annotations

from typing import Any

from conformance.framework.catalog import behaviour
from conformance.framework.features import Feature
from conformance.framework.modelserving import ModelServings, expected_pod_count, member

API = "api-reference-workload-v1alpha1.txt"


@behaviour(
    "core/servinggroup/pods-created",
    "A ModelServing MUST run spec.replicas ServingGroups, each with role.replicas instances of every Role, "
    "each instance one entry Pod from entryTemplate plus workerReplicas worker Pods from workerTemplate.",
    f"{API}#Role",
    Feature.CORE,
)
def test_every_pod_of_every_servinggroup_is_created(ms: ModelServings, manifest: Any) -> None:
    body = manifest("basic")
    ms.create(body)
    pods = ms.wait_pods("basic", expected_pod_count(body))
    members = sorted(member(p) for p in pods)
    assert members == ["entry"] * 2 + ["worker"] * 4, f"entry/worker split is wrong: {members}"
    images = {member(p): {p.spec.containers[0].image} for p in pods}
    assert images["entry"] == {"registry.example/engine:v1"}
    assert images["worker"] == {"registry.example/engine-worker:v1"}
