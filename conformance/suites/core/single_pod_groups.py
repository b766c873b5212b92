"""ModelServings whose ServingGroups are one Pod each, and a rollout held by a partition.

Shared by the status-counter and revision tests: with one Pod per ServingGroup the suite counts
ServingGroups by counting Pods and tells a ServingGroup's template by its Pod's image, without a
name or label the spec leaves open. A partition holds a ServingGroupRollingUpdate half way, which
is a moment the test controls: some ServingGroups on the new template, the others on the old one,
for as long as the test wants.
"""

from __future__ import annotations

import copy
import json
from typing import Any

from conformance.framework.modelserving import ModelServings, container_of, running_ready

V1, V2, V3, V4 = (f"registry.example/engine:v{i}" for i in range(1, 5))


def roles_with_image(body: dict[str, Any], image: str) -> list[dict[str, Any]]:
    """Put every container of ``body`` on ``image`` (``body`` changes too); the Role list to patch."""
    for role in body["spec"]["template"]["roles"]:
        for kind in ("entryTemplate", "workerTemplate"):
            for container in (role.get(kind) or {}).get("spec", {}).get("containers", []):
                container["image"] = image
    roles: list[dict[str, Any]] = copy.deepcopy(body["spec"]["template"]["roles"])
    return roles


def images(ms: ModelServings, name: str) -> dict[str, int]:
    """image -> number of live, Running and Ready Pods on it."""
    out: dict[str, int] = {}
    for pod in ms.pods(name):
        if running_ready(pod):
            image = container_of(pod).image
            out[image] = out.get(image, 0) + 1
    return out


def start(ms: ModelServings, body: dict[str, Any]) -> dict[str, Any]:
    """Create ``body``; wait for every Pod to run and status to settle; the settled status summary."""
    name = body["metadata"]["name"]
    ms.create(body)
    replicas = int(body["spec"].get("replicas", 1))
    ms.wait_pods(name, replicas)
    ms.wait_settled(name)
    return ms.wait_updated(name)


def partitioned(body: dict[str, Any], partition: int) -> dict[str, Any]:
    body["spec"]["rolloutStrategy"] = {
        "type": "ServingGroupRollingUpdate",
        "rollingUpdateConfiguration": {"partition": partition},
    }
    return body


def roll_to(
    ms: ModelServings, body: dict[str, Any], image: str, *, updated: int, old: dict[str, int]
) -> dict[str, Any]:
    """Change the template to ``image`` and wait until ``updated`` ServingGroups run it and the
    ``old`` ones (image -> count) still run theirs, all Ready, and status reports the current
    generation with updatedReplicas ``updated``; the status summary then."""
    name = body["metadata"]["name"]
    ms.patch(name, {"spec": {"template": {"roles": roles_with_image(body, image)}}})
    want = {image: updated, **old}
    want = {k: v for k, v in want.items() if v}

    def observe() -> dict[str, Any]:
        return {"images": images(ms, name), "pods": len(ms.pods(name)), "status": ms.status_summary(name)}

    def done(seen: dict[str, Any]) -> bool:
        status = seen["status"]
        return bool(
            seen["images"] == want
            and seen["pods"] == sum(want.values())
            and status.get("observedGeneration") == status["metadata.generation"]
            and status.get("updatedReplicas") == updated
        )

    seen = ms.wait(
        "rollout",
        f"{name}: Ready Pods per image {want} (no other Pod) and status.updatedReplicas {updated} at the current "
        "generation",
        observe,
        done,
    )
    status: dict[str, Any] = seen["status"]
    return status


def owned_revisions(ms: ModelServings, kube: Any, name: str) -> list[Any]:
    """The ControllerRevisions in the namespace with an ownerReference to ModelServing ``name``."""
    uid = ms.get(name)["metadata"]["uid"]
    items = kube.apps.list_namespaced_controller_revision(ms.ns).items
    return [r for r in items if any(o.uid == uid for o in r.metadata.owner_references or [])]


def named_by(revisions: list[Any], value: str) -> list[Any]:
    """The ControllerRevisions a status revision value identifies (docs/spec-readings.md,
    "revisions"): named by it, named ``<prefix>-<value>``, or labelled with it as a value."""
    return [
        r
        for r in revisions
        if value
        and (
            r.metadata.name == value
            or r.metadata.name.endswith(f"-{value}")
            or value in (r.metadata.labels or {}).values()
        )
    ]


def records(revision: Any, image: str) -> bool:
    """Whether a ControllerRevision's data records a template with ``image``."""
    return image in json.dumps(revision.data, default=str)


def describe(revisions: list[Any]) -> list[dict[str, Any]]:
    return [
        {"name": r.metadata.name, "labels": r.metadata.labels, "revision": r.revision, "data": _short(r.data)}
        for r in revisions
    ]


def _short(data: object, limit: int = 200) -> str:
    text = json.dumps(data, default=str)
    return text if len(text) <= limit else text[:limit] + "..."
