"""In-place updates: the image patch, and whether a patched Pod has arrived (pure).

Under ``rolloutStrategy.updateMethod: InPlace`` an outdated unit (a ServingGroup, or a Role
instance under RoleRollingUpdate) whose change is image-only (:mod:`.eligibility`) is not
recreated: each of its Pods gets one strategic-merge patch that sets the new images, moves the
revision labels to the update revision and records when the update started (an annotation, so a
restarted controller knows it too). The patch carries the Pod's UID, so it can never land on a
replacement that reused the name.

A patched Pod has arrived when it is Running and Ready *and* its container statuses report the
new images (kubelet restarted the containers); until then it counts as unavailable, whatever its
Ready condition still says. When it has arrived the annotation is removed. If it has not arrived
``progressDeadlineSeconds`` (default 1800) after the update started, the update of its unit has
failed: a Warning ``ProgressDeadlineExceeded`` is reported and the RecoveryPolicy takes over.

Why this module exists: these mechanics are shared by observation (:mod:`.observe`), both rollouts
(:mod:`.group_rollout`, :mod:`.role_rollout`) and recovery (:func:`.recovery.in_place_progress`);
whether a unit may be patched at all is decided by :mod:`.fallback`.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from .. import faults
from ..api.types import ModelServing, Role
from .names import LABEL_REVISION, LABEL_ROLE_TEMPLATE_HASH, PREFIX, PodId
from .pods import role_template_hash

ANNOTATION_IN_PLACE_SINCE = f"{PREFIX}/in-place-update-started"
DEFAULT_PROGRESS_DEADLINE = 1800


def progress_deadline(ms: ModelServing) -> dt.timedelta:
    strategy = ms.spec.rollout_strategy
    seconds = strategy.progress_deadline_seconds if strategy else None
    if seconds is None and faults.active("progress-deadline-default-minimum"):
        seconds = 60  # the fault: the minimum taken for the default
    return dt.timedelta(seconds=seconds if seconds is not None else DEFAULT_PROGRESS_DEADLINE)


def normalize_image(image: str) -> str:
    """An image reference as a container runtime reports it: ``nginx`` is
    ``docker.io/library/nginx:latest``; a digest is kept as it is."""
    name, at, digest = image.partition("@")
    first, slash, _ = name.partition("/")
    if not slash:
        name = f"docker.io/library/{name}"
    elif "." not in first and ":" not in first and first != "localhost":
        name = f"docker.io/{name}"
    if at:
        return f"{name}@{digest}"
    last = name.rsplit("/", 1)[-1]
    return name if ":" in last else f"{name}:latest"


def images_match(spec_image: str, status_image: str) -> bool:
    return spec_image == status_image or normalize_image(spec_image) == normalize_image(status_image)


def images_current(pod: dict[str, Any]) -> bool:
    """Every regular container's status reports the image its spec names."""
    statuses = {s.get("name"): s.get("image", "") for s in (pod.get("status") or {}).get("containerStatuses") or []}
    for container in (pod.get("spec") or {}).get("containers") or []:
        seen = statuses.get(container.get("name"))
        if seen is None or not images_match(container.get("image", ""), seen):
            return False
    return True


def started(pod: dict[str, Any]) -> dt.datetime | None:
    """When the in-place update of ``pod`` started (None: it is not being updated in place)."""
    value = ((pod.get("metadata") or {}).get("annotations") or {}).get(ANNOTATION_IN_PLACE_SINCE)
    if not value:
        return None
    try:
        moment = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=dt.UTC)


def target_images(role: Role, pid: PodId) -> dict[str, str]:
    """Container name -> image of the template ``pid`` is built from."""
    template = role.entry_template if pid.is_entry or role.worker_template is None else role.worker_template
    return {c.get("name", ""): c.get("image", "") for c in template.spec.get("containers") or []}


def pod_patch(pod: dict[str, Any], role: Role, pid: PodId, revision: str, now: dt.datetime) -> dict[str, Any]:
    """The strategic-merge patch that takes ``pod`` to ``role`` at ``revision`` by images alone."""
    want = target_images(role, pid)
    changed = [
        {"name": c["name"], "image": want[c["name"]]}
        for c in (pod.get("spec") or {}).get("containers") or []
        if c.get("name") in want and c.get("image") != want[c["name"]]
    ]
    meta: dict[str, Any] = {
        "uid": pod["metadata"]["uid"],  # a precondition: never patch a replacement
        "labels": {LABEL_REVISION: revision, LABEL_ROLE_TEMPLATE_HASH: role_template_hash(role)},
    }
    body: dict[str, Any] = {"metadata": meta}
    if changed:
        meta["annotations"] = {ANNOTATION_IN_PLACE_SINCE: now.strftime("%Y-%m-%dT%H:%M:%SZ")}
        body["spec"] = {"containers": changed}
    return body


def finished_patch(pod: dict[str, Any]) -> dict[str, Any]:
    """Removes the in-place annotation of a Pod that arrived."""
    return {"metadata": {"uid": pod["metadata"]["uid"], "annotations": {ANNOTATION_IN_PLACE_SINCE: None}}}
