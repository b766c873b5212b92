"""Revisions and the Pods of a ServingGroup, built from the ModelServing template (pure).

A revision is a hash of ``spec.template.roles`` without the fields that only scale or pace a
rollout (role ``replicas``, ``maxUnavailable``, ``maxSurge``, ``partition``), as upstream computes
it: changing those never rolls Pods, changing a pod template or ``workerReplicas`` does. The
hash strings are ours (upstream's are not reproducible across languages); tests compare
behaviour, never hash values.

Why this module exists: what a revision is and what Pod a Role instance gets must be one answer
everywhere: Pod creation (:mod:`.create`), PodGroup sizes (:mod:`.podgroups`), ControllerRevisions
(:mod:`.revisions`) and the in-place eligibility check (:mod:`.eligibility`) all build on it.
"""

from __future__ import annotations

import copy
import hashlib
import json
from typing import Any

from .. import faults, variations
from ..api.types import API_VERSION, KIND, ModelServing, Role
from .names import (
    ANNOTATION_PODGROUP,
    ANNOTATION_TASK_SPEC,
    LABEL_ENTRY,
    LABEL_GROUP,
    LABEL_NAME,
    LABEL_REVISION,
    LABEL_ROLE,
    LABEL_ROLE_ID,
    LABEL_ROLE_TEMPLATE_HASH,
    PodId,
    group_name,
    pod_name,
)

PACING_FIELDS = ("replicas", "maxUnavailable", "maxSurge", "partition")


def _digest(data: object) -> str:
    text = json.dumps(data, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:10]


def role_template(role: Role) -> dict[str, Any]:
    """The part of a Role that defines its Pods."""
    data = role.model_dump(by_alias=True, exclude_none=True, mode="json")
    for field in PACING_FIELDS:
        if not (faults.active("replicas-in-revision") and field == "replicas"):
            data.pop(field, None)
    return data


def revision_of(roles: list[Role]) -> str:
    return _digest([role_template(r) for r in roles])


def role_template_hash(role: Role) -> str:
    return _digest(role_template(role))


def owner_reference(ms: ModelServing) -> dict[str, Any]:
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "name": ms.metadata.name,
        "uid": ms.metadata.uid or "",
        "controller": True,
        "blockOwnerDeletion": True,
    }


def _inject_env(containers: list[dict[str, Any]], env: dict[str, str]) -> None:
    """Append ``env`` to every container, replacing entries of the same name."""
    for container in containers:
        kept = [e for e in container.get("env") or [] if e.get("name") not in env]
        container["env"] = kept + [{"name": k, "value": v} for k, v in env.items()]


def build_pod(ms: ModelServing, roles: list[Role], revision: str, pid: PodId, *, gang: bool) -> dict[str, Any]:
    """The Pod at ``pid`` for ``ms``, from ``roles`` (the template at ``revision``)."""
    role = next(r for r in roles if r.name == pid.role)
    template = role.entry_template if pid.is_entry or role.worker_template is None else role.worker_template
    if faults.active("worker-template-ignored"):
        template = role.entry_template  # the fault: worker Pods are built from the entryTemplate too
    meta = template.metadata
    labels = dict(meta.labels or {}) if meta else {}
    annotations = dict(meta.annotations or {}) if meta else {}
    labels.update(
        {
            LABEL_NAME: ms.metadata.name,
            LABEL_GROUP: group_name(ms.metadata.name, pid.ordinal),
            LABEL_ROLE: pid.role,
            LABEL_ROLE_ID: pid.role_id,
            LABEL_REVISION: revision,
            LABEL_ROLE_TEMPLATE_HASH: role_template_hash(role),
        }
    )
    if pid.is_entry and not faults.active("no-entry-label"):
        labels[LABEL_ENTRY] = "true"
    if gang:
        ordinal = 0 if faults.active("podgroup-named-by-group-zero") else pid.ordinal
        annotations[ANNOTATION_PODGROUP] = group_name(ms.metadata.name, ordinal)
        annotations[ANNOTATION_TASK_SPEC] = pid.role_id
    spec = copy.deepcopy(template.spec)
    if not (faults.active("template-scheduler-name-wins") and spec.get("schedulerName")):
        spec["schedulerName"] = ms.spec.scheduler_name
    if faults.active("container-resources-dropped"):
        for container in spec.get("containers") or []:
            container.pop("resources", None)
    if faults.active("resource-claims-dropped"):
        spec.pop("resourceClaims", None)
        for container in [*(spec.get("containers") or []), *(spec.get("initContainers") or [])]:
            (container.get("resources") or {}).pop("claims", None)
    if faults.active("repeated-env-collapsed"):  # the first env entry of each name only
        for container in spec.get("containers") or []:
            first: dict[str, Any] = {}
            for entry in container.get("env") or []:
                first.setdefault(entry["name"], entry)
            if container.get("env"):
                container["env"] = list(first.values())
    if variations.active("sidecar-first"):  # the implementation's own container, first (a conformant choice)
        spec["containers"] = [variations.sidecar(), *(spec.get("containers") or [])]
    env = {"GROUP_SIZE": str(role.worker_replicas + 1), "WORKER_INDEX": str(pid.k)}
    if faults.active("wrong-group-size"):
        env["GROUP_SIZE"] = str(role.worker_replicas)
    if faults.active("wrong-worker-index") and not pid.is_entry:
        env["WORKER_INDEX"] = str(pid.k + 1)
    _inject_env(spec.get("containers") or [], env)
    _inject_env(spec.get("initContainers") or [], env)
    metadata: dict[str, Any] = {
        "name": pod_name(ms.metadata.name, pid.ordinal, pid.role, pid.index, pid.k),
        "namespace": ms.metadata.namespace,
        "labels": labels,
        "ownerReferences": [owner_reference(ms)],
    }
    if annotations:
        metadata["annotations"] = annotations
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}


def expected_pods(roles: list[Role], ordinal: int) -> list[PodId]:
    """Every Pod a ServingGroup at ``ordinal`` should have under ``roles``."""
    return [
        PodId(ordinal, role.name, index, k)
        for role in roles
        for index in range(role.replicas)
        for k in range(role.worker_replicas + 1)
    ]


def group_settings(ms: ModelServing) -> dict[str, Any]:
    """The ServingGroup settings outside the Roles that an in-place update cannot change
    (``gangPolicy``, ``networkTopology``; each key only when set), as API JSON. They are not part of
    a revision's hash, but each ControllerRevision records them as they were when it was made, so
    :mod:`.fallback` can tell a unit whose revision was made under other settings."""
    template = ms.spec.template
    out: dict[str, Any] = {}
    for key, value in (("gangPolicy", template.gang_policy), ("networkTopology", template.network_topology)):
        if value is not None:
            out[key] = value.model_dump(by_alias=True, exclude_none=True, mode="json")
    return out


def controller_revision(ms: ModelServing, revision: str, roles: list[Role], number: int) -> dict[str, Any]:
    """The ControllerRevision that preserves ``roles`` under ``revision`` (and the ServingGroup
    settings of ``ms``, :func:`group_settings`)."""
    return {
        "apiVersion": "apps/v1",
        "kind": "ControllerRevision",
        "metadata": {
            "name": f"{ms.metadata.name}-{revision}",
            "namespace": ms.metadata.namespace,
            "labels": {LABEL_NAME: ms.metadata.name, LABEL_REVISION: revision},
            "ownerReferences": [] if faults.active("revision-not-owned") else [owner_reference(ms)],
        },
        "data": {
            "roles": [r.model_dump(by_alias=True, exclude_none=True, mode="json") for r in roles],
            "servingGroup": group_settings(ms),
        },
        "revision": number,
    }
