"""Applies a :class:`~kthena_ref.planner.plan.Plan` through the API: the imperative shell.

It decides nothing. Pods are created in slow-start batches (1, 2, 4, ... as kube-controller-
manager does) so a failing create, a quota say, costs one request rather than hundreds; an
AlreadyExists counts as done (names are deterministic). Deletions carry the Pod's UID as a
precondition, so a replacement that reused a name is never deleted by mistake. Status goes
through the status subresource; Events are written with source ``modelserving-controller``.
"""

from __future__ import annotations

import asyncio
import json
import logging
from dataclasses import dataclass, field
from typing import Any

from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from . import faults, variations
from .api.types import API_VERSION, GROUP, KIND, PLURAL, VERSION, ModelServing
from .events import event_body
from .planner.plan import EVENT_SOURCE, Event, Plan, PodPatch
from .runtime.informer import ensure_ok

log = logging.getLogger(__name__)

PODGROUP = ("scheduling.volcano.sh", "v1beta1", "podgroups")
SLOW_START_INITIAL = 1
MAX_BATCH = 64


@dataclass
class Outcome:
    """What happened when a plan was applied (the controller feeds expectations from it)."""

    created: list[str] = field(default_factory=list)
    failed_creates: list[str] = field(default_factory=list)
    deleted_uids: list[str] = field(default_factory=list)
    patched_uids: list[str] = field(default_factory=list)
    failed_patch_uids: list[str] = field(default_factory=list)
    failed_delete_uids: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


class Executor:
    # The typed API classes accept plain dicts as bodies (they are serialised as they are); the
    # handles are Any so the planner's dicts pass without a model round trip that could drop fields.
    def __init__(self, api: client.ApiClient) -> None:
        self.core: Any = client.CoreV1Api(api)
        self.apps: Any = client.AppsV1Api(api)
        self.custom: Any = client.CustomObjectsApi(api)
        self.coordination: Any = client.CoordinationV1Api(api)

    async def apply(self, ms: ModelServing, plan: Plan) -> Outcome:
        outcome = Outcome()
        ns = ms.metadata.namespace
        for revision in plan.create_revisions:
            # Sent as YAML so the API server stores `data` (a RawExtension) in its canonical form:
            # JSON with the client's spacing is stored byte for byte, and the garbage collector's
            # later metadata patches (orphaning) then fail with "data: field is immutable".
            raw = json.dumps(revision).encode()
            call = self.apps.create_namespaced_controller_revision(
                ns, raw, _headers={"Content-Type": "application/yaml"}
            )
            await self._create(call, outcome, "revision")
        for svc in plan.create_services:  # before the Pods: their DNS names exist when they start
            await self._create(self.core.create_namespaced_service(ns, svc), outcome, "service")
        pods = plan.create_pods
        if pods and variations.active("intermediate-owner"):
            pods = await self._owned_through_lease(ms, pods)
        await self._create_pods(ns, pods, outcome)
        await asyncio.gather(*(self._delete_pod(ns, d.name, d.uid, outcome) for d in plan.delete_pods))
        await asyncio.gather(*(self._patch_pod(ns, p, outcome) for p in plan.patch_pods))
        for name, uid in plan.delete_services:
            body = client.V1DeleteOptions(preconditions=client.V1Preconditions(uid=uid)) if uid else None
            await self._ignore_missing(self.core.delete_namespaced_service(name, ns, body=body), outcome)
        for name in plan.delete_revisions:
            await self._ignore_missing(self.apps.delete_namespaced_controller_revision(name, ns), outcome)
        for pg in plan.apply_podgroups:
            await self._apply_podgroup(ns, pg, outcome)
        for name in plan.delete_podgroups:
            await self._ignore_missing(
                self.custom.delete_namespaced_custom_object(*PODGROUP[:2], ns, PODGROUP[2], name), outcome
            )
        for event in plan.events:
            await self.event(ms, event)
        if plan.status and not (faults.active("no-status-at-zero-replicas") and ms.spec.replicas == 0):
            await self.write_status(ms, plan.status, outcome)
        return outcome

    async def _owned_through_lease(self, ms: ModelServing, pods: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The variation ``intermediate-owner``: ``pods`` with a per-ModelServing Lease (owned by the
        ModelServing, made here when missing) as their controller owner instead of the ModelServing."""
        ns, name = ms.metadata.namespace, variations.owner_lease_name(ms.metadata.name)
        try:
            lease = await self.coordination.read_namespaced_lease(name, ns)
            uid = lease.metadata.uid
        except ApiException as exc:
            if exc.status != 404:
                raise
            owner = {"apiVersion": API_VERSION, "kind": KIND, "name": ms.metadata.name, "uid": ms.metadata.uid,
                     "controller": True, "blockOwnerDeletion": True}  # fmt: skip
            body = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                    "metadata": {"name": name, "namespace": ns, "ownerReferences": [owner]}}  # fmt: skip
            uid = (await self.coordination.create_namespaced_lease(ns, body)).metadata.uid
        ref = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "name": name, "uid": uid,
               "controller": True, "blockOwnerDeletion": True}  # fmt: skip
        return [{**pod, "metadata": {**pod["metadata"], "ownerReferences": [ref]}} for pod in pods]

    async def _create_pods(self, ns: str, pods: list[dict[str, Any]], outcome: Outcome) -> None:
        batch, i = SLOW_START_INITIAL, 0
        while i < len(pods):
            chunk = pods[i : i + batch]
            results = await asyncio.gather(*(self._create_pod(ns, p) for p in chunk), return_exceptions=True)
            failed = False
            for pod, result in zip(chunk, results, strict=True):
                name = pod["metadata"]["name"]
                if isinstance(result, ApiException) and result.status == 409:
                    outcome.created.append(name)
                elif isinstance(result, BaseException):
                    failed = True
                    outcome.failed_creates.append(name)
                    outcome.errors.append(f"create pod {name}: {_describe(result)}")
                else:
                    outcome.created.append(name)
            i += len(chunk)
            if failed:
                outcome.failed_creates.extend(p["metadata"]["name"] for p in pods[i:])  # skipped: retried later
                return
            batch = min(batch * 2, MAX_BATCH)

    async def _create_pod(self, ns: str, pod: dict[str, Any]) -> None:
        # The informer delivers the created Pod; decoding the response into a model would be
        # thrown away (a fifth of the controller's CPU at 2,000 Pods, measured with py-spy).
        resp = await self.core.create_namespaced_pod(ns, pod, _preload_content=False)
        await ensure_ok(resp)  # raises ApiException (409 AlreadyExists included) like the decoded path
        resp.release()

    async def _delete_pod(self, ns: str, name: str, uid: str, outcome: Outcome) -> None:
        body = client.V1DeleteOptions(preconditions=client.V1Preconditions(uid=uid)) if uid else None
        try:
            await self.core.delete_namespaced_pod(name, ns, body=body)
            outcome.deleted_uids.append(uid)
        except ApiException as exc:
            if exc.status in (404, 409):  # gone, or a replacement with another UID: not ours to delete
                outcome.deleted_uids.append(uid)
            else:
                outcome.failed_delete_uids.append(uid)
                outcome.errors.append(f"delete pod {name}: {_describe(exc)}")

    async def _patch_pod(self, ns: str, patch: PodPatch, outcome: Outcome) -> None:
        try:
            await self.core.patch_namespaced_pod(
                patch.name, ns, patch.body, _content_type="application/strategic-merge-patch+json"
            )
            outcome.patched_uids.append(patch.uid)
        except ApiException as exc:
            outcome.failed_patch_uids.append(patch.uid)
            if exc.status not in (404, 409, 422):  # gone, or a replacement (the UID precondition)
                outcome.errors.append(f"patch pod {patch.name} ({patch.reason}): {_describe(exc)}")

    async def _create(self, call: Any, outcome: Outcome, what: str) -> None:
        try:
            await call
        except ApiException as exc:
            if exc.status != 409:
                outcome.errors.append(f"create {what}: {_describe(exc)}")

    async def _ignore_missing(self, call: Any, outcome: Outcome) -> None:
        try:
            await call
        except ApiException as exc:
            if exc.status != 404:
                outcome.errors.append(_describe(exc))

    async def _apply_podgroup(self, ns: str, pg: dict[str, Any], outcome: Outcome) -> None:
        name = pg["metadata"]["name"]
        try:
            current = await self.custom.get_namespaced_custom_object(*PODGROUP[:2], ns, PODGROUP[2], name)
        except ApiException as exc:
            if exc.status != 404:
                outcome.errors.append(f"read PodGroup {name}: {_describe(exc)}")
                return
            await self._create(
                self.custom.create_namespaced_custom_object(*PODGROUP[:2], ns, PODGROUP[2], pg), outcome, "PodGroup"
            )
            return
        current["spec"] = {**current.get("spec", {}), **pg["spec"]}
        try:
            await self.custom.replace_namespaced_custom_object(*PODGROUP[:2], ns, PODGROUP[2], name, current)
        except ApiException as exc:
            outcome.errors.append(f"update PodGroup {name}: {_describe(exc)}")

    async def write_status(self, ms: ModelServing, status: dict[str, Any], outcome: Outcome | None = None) -> None:
        try:
            await self.custom.patch_namespaced_custom_object_status(
                GROUP,
                VERSION,
                ms.metadata.namespace,
                PLURAL,
                ms.metadata.name,
                {"status": status},
                _content_type="application/merge-patch+json",
            )
        except ApiException as exc:
            if exc.status != 404 and outcome is not None:
                outcome.errors.append(f"status: {_describe(exc)}")

    async def event(self, ms: ModelServing, event: Event) -> None:
        involved = {"apiVersion": f"{GROUP}/{VERSION}", "kind": "ModelServing", "name": ms.metadata.name,
                    "namespace": ms.metadata.namespace, "uid": ms.metadata.uid,
                    "resourceVersion": ms.metadata.resource_version}  # fmt: skip
        body = event_body(involved, event.type, event.reason, event.message, EVENT_SOURCE)
        try:
            await self.core.create_namespaced_event(ms.metadata.namespace, body)
        except ApiException as exc:  # events are best effort
            log.warning("event %s for %s not recorded: %s", event.reason, ms.metadata.name, _describe(exc))


def _describe(exc: BaseException) -> str:
    if isinstance(exc, ApiException):
        body = exc.body.decode(errors="replace") if isinstance(exc.body, bytes) else str(exc.body or "")
        return f"HTTP {exc.status} {exc.reason}: {body[:300]}"
    return f"{type(exc).__name__}: {exc}"
