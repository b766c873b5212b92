"""A ModelServing created with spec.replicas 0 still gets a status.

Why it exists: another implementation wrote status only from its ServingGroups, so a ModelServing
asking for none never got one, and nothing could tell whether it had been seen (an autoscaler
scaling from zero reads status.replicas through the scale subresource). status.observedGeneration
"is the most recent generation observed", whatever spec.replicas is. An omitted counter reads as 0.
"""

from __future__ import annotations

from typing import Any

from conformance.framework.catalog import behaviour
from conformance.framework.features import Feature
from conformance.framework.modelserving import ModelServings

API = "api-reference-workload-v1alpha1.txt"


@behaviour(
    "core/status/zero-replicas",
    "A ModelServing created with spec.replicas 0 MUST get a status with observedGeneration equal to its "
    "metadata.generation and replicas 0, also after a further change of its spec, and MUST get no Pod.",
    f"{API}#ModelServingStatus",
    Feature.CORE,
)
def test_zero_replicas_gets_a_status(ms: ModelServings, manifest: Any) -> None:
    body = manifest("core-small")
    body["spec"]["replicas"] = 0
    ms.create(body)

    def observe() -> dict[str, Any]:
        status = ms.status_summary("small")
        return {
            "observedGeneration": status.get("observedGeneration"),
            "metadata.generation": status["metadata.generation"],
            "replicas": status.get("replicas"),
            "pods": sorted(p.metadata.name for p in ms.pods("small")),
        }

    def reported(seen: dict[str, Any]) -> bool:
        return bool(seen["observedGeneration"] == seen["metadata.generation"] and seen["replicas"] == 0)

    what = "status of small (spec.replicas 0) with observedGeneration = metadata.generation and replicas 0"
    ms.wait("status-updated", f"{what} (omitted reads as 0)", observe, reported)
    ms.holds(f"{what}, and no Pod", observe, lambda seen: reported(seen) and not seen["pods"])
    roles = body["spec"]["template"]["roles"]
    roles[0]["entryTemplate"]["spec"]["containers"][0]["image"] = "registry.example/engine:v2"
    ms.patch("small", {"spec": {"template": {"roles": roles}}})  # a new generation, still no ServingGroup
    seen = ms.wait("status-updated", f"after a template change, {what}", observe, reported)
    assert seen["metadata.generation"] > 1, f"expected the template change to make a new generation; seen {seen}"
    ms.holds(f"after a template change, {what}, and no Pod", observe, lambda seen: reported(seen) and not seen["pods"])
