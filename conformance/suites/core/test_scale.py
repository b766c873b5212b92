"""Core: the scale subresource (what an autoscaler or ``kubectl scale`` uses)."""

from __future__ import annotations

from typing import Any

from conformance.framework.catalog import behaviour
from conformance.framework.features import Feature
from conformance.framework.modelserving import ModelServings, expected_pod_count, member

API = "api-reference-workload-v1alpha1.txt"


@behaviour(
    "core/scale/subresource-up",
    "Setting replicas through the scale subresource MUST change spec.replicas and add whole ServingGroups, "
    "and the subresource MUST then report spec.replicas, status.replicas and status.labelSelector as its selector.",
    f"{API}#ModelServingStatus",
    Feature.SCALE_SUBRESOURCE,
)
def test_scale_subresource_adds_servinggroups(ms: ModelServings, manifest: Any) -> None:
    body = manifest("core-small")
    ms.create(body)
    before = {p.metadata.uid for p in ms.wait_pods("small", expected_pod_count(body))}
    ms.scale("small", 3)
    spec_replicas = ms.get("small")["spec"].get("replicas")
    assert spec_replicas == 3, f"expected spec.replicas 3 after scaling through /scale; seen {spec_replicas}"
    pods = ms.wait_pods("small", expected_pod_count(body, 3), wait="scale")
    members = sorted(member(p) for p in pods)
    assert members == ["entry"] * 3 + ["worker"] * 3, f"expected 3 whole ServingGroups; seen {members}"
    kept = {p.metadata.uid for p in pods} & before
    assert kept == before, f"expected the existing ServingGroup's Pods to keep their UIDs; lost {before - kept}"
    status = ms.wait_observed("small", wait="scale")
    scale = ms.get_scale("small")
    seen = {
        "spec.replicas": (scale.get("spec") or {}).get("replicas"),
        "status.replicas": (scale.get("status") or {}).get("replicas"),
        "status.selector": (scale.get("status") or {}).get("selector"),
    }
    expected = {"spec.replicas": 3, "status.replicas": 3, "status.selector": status.get("labelSelector")}
    assert seen == expected and seen["status.selector"], (
        f"expected /scale to report {expected} (selector = status.labelSelector, non-empty); seen {seen}"
    )
