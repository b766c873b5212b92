"""Rollout: rolling updates of ServingGroups and Roles, judged from a timeline of the Pods.

A test creates a ModelServing, waits for it to settle, starts a
:class:`~conformance.framework.rollout_watch.RolloutWatch` and only then changes the template, so
every state the Pods pass through during the update is on the timeline (see that module for what
counts as an existing, available or ready ServingGroup or Role instance). Budgets are asserted as
bounds every reading shares: "never fewer than replicas - maxUnavailable ready" and "never more
than replicas + maxSurge existing"; how fast or in which order an implementation uses its budget
is its own business (spec reading 19). Images are the observable of a revision: the manifests run
one image per Role, so "at the target" means "available on the target image".

The helpers here are shared with the InPlaceUpdate suite.
"""

from __future__ import annotations

import copy
from typing import Any

from conformance.framework.modelserving import ModelServings, expected_pod_count
from conformance.framework.rollout_watch import Layout, PodState, Snapshot, Timeline, ordinal

API = "api-reference-workload-v1alpha1.txt"


def roles_of(body: dict[str, Any]) -> list[dict[str, Any]]:
    roles: list[dict[str, Any]] = body["spec"]["template"]["roles"]
    return roles


def role(body: dict[str, Any], name: str) -> dict[str, Any]:
    return next(r for r in roles_of(body) if r["name"] == name)


def with_image(body: dict[str, Any], image: str, *names: str) -> list[dict[str, Any]]:
    """The Roles of ``body`` with every container of the named Roles (all when none is named) on
    ``image``; ``body`` is changed too, so later patches build on it."""
    for r in roles_of(body):
        if names and r["name"] not in names:
            continue
        for kind in ("entryTemplate", "workerTemplate"):
            for container in (r.get(kind) or {}).get("spec", {}).get("containers", []):
                container["image"] = image
    return copy.deepcopy(roles_of(body))


def patch_roles(ms: ModelServings, body: dict[str, Any], roles: list[dict[str, Any]]) -> None:
    """Send the whole Role list (a merge patch replaces lists)."""
    ms.patch(body["metadata"]["name"], {"spec": {"template": {"roles": roles}}})


def start(ms: ModelServings, body: dict[str, Any], *, created: bool = False) -> Layout:
    """Create ``body`` (unless it was ``created`` already) and wait until every Pod runs and status
    reports every ServingGroup available."""
    name = body["metadata"]["name"]
    if not created:
        ms.create(body)
    ms.wait_pods(name, expected_pod_count(body))
    ms.wait_settled(name)
    return Layout.of(body)


def expect_min_ready_groups(timeline: Timeline, layout: Layout, minimum: int, what: str) -> None:
    value, at = timeline.min_ready_groups(layout)
    assert value >= minimum, (
        f"{what}: expected at least {minimum} ready ServingGroups at every moment; only {value} "
        f"({sorted(at.ready_groups(layout))}) were at {at.describe()}"
    )


def expect_max_groups(timeline: Timeline, maximum: int, what: str) -> None:
    value, at = timeline.max_groups()
    assert value <= maximum, (
        f"{what}: expected at most {maximum} ServingGroups to exist at once (Pods being deleted not counted); "
        f"{value} existed at {at.describe()}"
    )


def expect_status_updated(ms: ModelServings, name: str, what: str) -> None:
    """status: current generation, updatedReplicas = spec.replicas and, when both are set,
    currentRevision = updateRevision (a finished rollout)."""
    status = ms.wait_updated(name, wait="status-updated")
    current, update = status.get("currentRevision") or "", status.get("updateRevision") or ""
    assert not current or not update or current == update, (
        f"{what}: once every ServingGroup is updated, status.currentRevision must equal status.updateRevision; "
        f"seen currentRevision={current!r}, updateRevision={update!r}"
    )


def by_ordinal(snapshot: Snapshot) -> list[str]:
    """The ServingGroups of ``snapshot`` in ascending ordinal order."""
    return sorted(snapshot.existing_groups(), key=ordinal)


def uids_of(pods: list[PodState]) -> dict[str, str]:
    return {p.name: p.uid for p in pods if not p.terminating}


def group_pods(snapshot: Snapshot, group: str) -> list[PodState]:
    return [p for p in snapshot.pods if p.group == group]


def never_gone(timeline: Timeline, uids: dict[str, str], what: str) -> None:
    """None of ``uids`` (name -> uid) was ever deleted or terminating on the timeline."""
    for name, uid in sorted(uids.items()):
        gone = timeline.gone_at(uid)
        assert gone is None, f"{what}: Pod {name} (uid {uid}) must be kept, but was deleted at {gone.describe()}"
