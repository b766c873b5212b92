"""The eviction budget's webhook side: read the cluster, keep the ledger, ask the pure decision.

The API server calls ``POST /validate-pod-eviction`` for every Eviction (``pods/eviction``
CREATE, policy/v1) before it carries it out. :class:`EvictionGuard` answers it:

1. GET the Pod. Not found, not controlled by a ModelServing, or already terminating: allowed.
2. Under a per-ModelServing lock (one process) and optimistic concurrency on a Lease (every
   replica), read the ledger, then the ModelServing, its Pods and ControllerRevisions, afresh
   from the API server (consistent reads, never a lagging cache), and call
   :func:`kthena_ref.planner.eviction.decide`.
3. Refused: ``allowed: false`` with ``status {code: 429, reason: TooManyRequests}``; the API
   server answers the Eviction with that status, which ``kubectl drain`` retries.
4. Allowed: the target's UID goes into the ledger before the answer, so a concurrent Eviction
   that has not yet seen the Pod terminate still counts it. The ledger is the annotation
   :data:`LEDGER_ANNOTATION` of the Lease ``<ms>-eviction-budget`` in the ModelServing's
   namespace (owned by the ModelServing, so it goes with it), written with the resourceVersion
   it was read at: two replicas approving at once conflict (409) and the loser decides again with
   the winner's approval in view. A Lease, not a ConfigMap: the controller may already write
   Leases (leader election), so no new permission is needed, and no data store is opened.

Dry-run Evictions are decided but never recorded (``sideEffects: NoneOnDryRun``). Anything that
prevents a decision (an API error, persistent contention) refuses with 429 too: the budget fails
closed, and the caller retries.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Callable
from typing import Any

from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from . import faults
from .api.types import GROUP, PLURAL, VERSION, ModelServing
from .planner.eviction import Decision, decide, owner_of, prune
from .planner.names import LABEL_NAME
from .runtime.informer import ensure_ok

log = logging.getLogger(__name__)

PATH = "/validate-pod-eviction"
LEDGER_ANNOTATION = "kthena-ref.serving.volcano.sh/approved-evictions"
LEDGER_TTL_SECONDS = 30.0  # an approved Eviction the API server did not carry out stops counting
ATTEMPTS = 8  # lost write races before giving up with 429
RETRY_AFTER_SECONDS = 5  # what ``kubectl drain`` waits between attempts anyway


def lease_name(ms: str) -> str:
    return f"{ms}-eviction-budget"


def refused(message: str) -> dict[str, Any]:
    """The AdmissionResponse fields that make the Eviction API answer HTTP 429 TooManyRequests."""
    if faults.active("eviction-refused-forbidden"):  # refused, but not with the PodDisruptionBudget convention
        return {"allowed": False, "status": {"code": 403, "reason": "Forbidden", "message": message}}
    return {
        "allowed": False,
        "status": {
            "status": "Failure",
            "code": 429,
            "reason": "TooManyRequests",
            "message": message,
            "details": {"retryAfterSeconds": RETRY_AFTER_SECONDS},  # the API server sends Retry-After
        },
    }


class EvictionGuard:
    def __init__(self, api: client.ApiClient, clock: Callable[[], float] = time.time) -> None:
        self.core = client.CoreV1Api(api)
        self.apps = client.AppsV1Api(api)
        self.custom = client.CustomObjectsApi(api)
        self.leases: Any = client.CoordinationV1Api(api)  # raw dicts in and out (_preload_content=False)
        self.clock = clock
        self._locks: dict[str, asyncio.Lock] = {}

    async def review(self, request: dict[str, Any]) -> dict[str, Any]:
        """``allowed`` (and ``status`` when refused) for the AdmissionRequest of an Eviction."""
        ns, name = request.get("namespace"), request.get("name")
        if not ns or not name:
            return {"allowed": True}
        try:
            return await self._review(str(ns), str(name), bool(request.get("dryRun")))
        except Exception as exc:  # fail closed, retryably
            log.warning("eviction of pod %s/%s: cannot check the budget: %s", ns, name, exc)
            return refused(f"cannot check the eviction budget of pod {name} now ({_short(exc)}); retry")

    async def _review(self, ns: str, name: str, dry_run: bool) -> dict[str, Any]:
        pod = await self._get(self.core.read_namespaced_pod, name, ns)
        owner = owner_of(pod) if pod else None
        if pod is None or owner is None or (pod.get("metadata") or {}).get("deletionTimestamp"):
            return {"allowed": True}
        lock = self._locks.setdefault(f"{ns}/{owner}", asyncio.Lock())
        async with lock:
            for _ in range(ATTEMPTS):
                lease = await self._get(self.leases.read_namespaced_lease, lease_name(owner), ns)
                raw = await self._get(self.custom.get_namespaced_custom_object, GROUP, VERSION, ns, PLURAL, owner)
                if raw is None:
                    return {"allowed": True}
                ms = ModelServing.model_validate(raw)
                strategy = ms.spec.rollout_strategy.eviction_strategy if ms.spec.rollout_strategy else None
                if strategy is None:
                    return {"allowed": True}
                selector = f"{LABEL_NAME}={owner}"
                pods = await self._list(self.core.list_namespaced_pod, ns, label_selector=selector)
                revisions = await self._list(self.apps.list_namespaced_controller_revision, ns, label_selector=selector)
                target = next((p for p in pods if p["metadata"]["name"] == name), None)
                if target is None or target["metadata"].get("uid") != pod["metadata"].get("uid"):
                    return {"allowed": True}  # gone or replaced since the GET: the API server answers it
                now = self.clock()
                ledger = prune(_ledger(lease), pods, now)
                decision = decide(ms, pods, target, ledger, revisions)
                if not decision.allowed:
                    log.info("eviction of pod %s/%s refused: %s", ns, name, decision.message)
                    return refused(decision.message)
                if dry_run or not decision.record:
                    return {"allowed": True}
                ledger[str(target["metadata"]["uid"])] = now + LEDGER_TTL_SECONDS
                if await self._write(ns, ms, lease, ledger):
                    log.info("eviction of pod %s/%s approved: %s", ns, name, decision.message)
                    return {"allowed": True}
            return refused(f"too many concurrent evictions of {ns}/{owner}'s Pods to decide; retry")

    async def _write(self, ns: str, ms: ModelServing, lease: dict[str, Any] | None, ledger: dict[str, float]) -> bool:
        """Store ``ledger`` at the resourceVersion it was read at; False when someone wrote first."""
        note = json.dumps({uid: round(expiry, 3) for uid, expiry in sorted(ledger.items())})
        try:
            if lease is None:
                body = {
                    "apiVersion": "coordination.k8s.io/v1",
                    "kind": "Lease",
                    "metadata": {
                        "name": lease_name(ms.metadata.name),
                        "namespace": ns,
                        "labels": {LABEL_NAME: ms.metadata.name},
                        "annotations": {LEDGER_ANNOTATION: note},
                        "ownerReferences": [
                            {
                                "apiVersion": f"{GROUP}/{VERSION}",
                                "kind": "ModelServing",
                                "name": ms.metadata.name,
                                "uid": ms.metadata.uid,
                            }
                        ],
                    },
                    "spec": {},
                }
                await ensure_ok(resp := await self.leases.create_namespaced_lease(ns, body, _preload_content=False))
            else:
                lease["metadata"].setdefault("annotations", {})[LEDGER_ANNOTATION] = note
                name = lease["metadata"]["name"]
                await ensure_ok(
                    resp := await self.leases.replace_namespaced_lease(name, ns, lease, _preload_content=False)
                )
            resp.release()
        except ApiException as exc:
            if exc.status == 409:  # AlreadyExists or a stale resourceVersion: decide again
                return False
            raise
        return True

    @staticmethod
    async def _get(call: Any, *args: Any) -> dict[str, Any] | None:
        try:
            resp = await call(*args, _preload_content=False)
            await ensure_ok(resp)
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise
        try:
            return dict(json.loads(await resp.read()))
        finally:
            resp.release()

    @staticmethod
    async def _list(call: Any, ns: str, **kwargs: Any) -> list[dict[str, Any]]:
        resp = await call(ns, _preload_content=False, **kwargs)
        await ensure_ok(resp)
        try:
            return list(json.loads(await resp.read()).get("items") or [])
        finally:
            resp.release()


def _ledger(lease: dict[str, Any] | None) -> dict[str, float]:
    raw = ((lease or {}).get("metadata") or {}).get("annotations", {}).get(LEDGER_ANNOTATION, "{}")
    try:
        parsed = json.loads(raw)
        return {str(k): float(v) for k, v in parsed.items()} if isinstance(parsed, dict) else {}
    except (ValueError, TypeError):
        return {}  # damaged: what is in flight is still visible on the Pods within a moment


def _short(exc: Exception) -> str:
    if isinstance(exc, ApiException):
        return f"HTTP {exc.status} {exc.reason}"
    return type(exc).__name__


__all__ = ["PATH", "Decision", "EvictionGuard", "refused"]
