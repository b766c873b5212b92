"""The ModelServing controller: informers feed a work queue, workers plan and execute.

Watches ModelServings, the Pods and ControllerRevisions they own (by label), and Volcano
PodGroups when that CRD is served. Every event enqueues the owning ModelServing's key; a worker
takes a key, waits for the informer caches to have seen the controller's own writes
(expectations), plans from the caches and applies the plan. Errors retry through the queue with
per-key backoff; a ModelServing that is invalid is reported (Event and status condition) and never
stops the others.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import logging
from dataclasses import dataclass
from typing import Any

from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from ..admission.rules import FieldError, validate
from ..api.types import GROUP, PLURAL, VERSION, ModelServing
from ..autoscaler.loop import LOOP_SECONDS, Autoscaler
from ..executor import Executor
from ..planner.names import LABEL_NAME
from ..planner.plan import Event, InstanceKey, Observed, PendingDeletion, plan
from . import scope
from .expectations import Expectations
from .informer import Informer, Obj, key_of
from .workqueue import WorkQueue

log = logging.getLogger(__name__)

PODGROUP_CRD = "podgroups.scheduling.volcano.sh"


@dataclass
class ControllerConfig:
    workers: int = 4
    namespace: str | None = None  # None: every namespace
    resync_seconds: float = 300.0
    autoscale: bool = True  # run the AutoscalingPolicy loop (idle while its CRD is not served)
    autoscale_period: float = LOOP_SECONDS
    convert: bool = True  # convert ModelBoosters and LeaderWorkerSets (idle while their CRDs are not served)


class Controller:
    def __init__(self, api: client.ApiClient, config: ControllerConfig | None = None) -> None:
        self.api = api
        self.config = config or ControllerConfig()
        self.queue = WorkQueue()
        self.expectations = Expectations()
        self.executor = Executor(api)
        core, apps, custom = client.CoreV1Api(api), client.AppsV1Api(api), client.CustomObjectsApi(api)
        ns = self.config.namespace
        selector = LABEL_NAME
        if ns:
            self.ms_informer = Informer(
                "modelservings",
                custom.list_namespaced_custom_object,
                group=GROUP,
                version=VERSION,
                namespace=ns,
                plural=PLURAL,
            )
            self.pod_informer = Informer("pods", core.list_namespaced_pod, namespace=ns, label_selector=selector)
            self.rev_informer = Informer(
                "controllerrevisions", apps.list_namespaced_controller_revision, namespace=ns, label_selector=selector
            )
            self.svc_informer = Informer(
                "services", core.list_namespaced_service, namespace=ns, label_selector=selector
            )
        else:
            self.ms_informer = Informer(
                "modelservings", custom.list_cluster_custom_object, group=GROUP, version=VERSION, plural=PLURAL
            )
            self.pod_informer = Informer("pods", core.list_pod_for_all_namespaces, label_selector=selector)
            self.rev_informer = Informer(
                "controllerrevisions", apps.list_controller_revision_for_all_namespaces, label_selector=selector
            )
            self.svc_informer = Informer("services", core.list_service_for_all_namespaces, label_selector=selector)
        self.pg_informer: Informer | None = None
        self._custom = custom
        self.pods_by_owner: dict[str, dict[str, Obj]] = {}
        self.running: dict[str, frozenset[str]] = {}  # role instances last seen running, per key
        self.ready: dict[str, frozenset[str]] = {}  # Pods whose OnPodReady hooks ran, per key
        self.lost: dict[str, set[str]] = {}
        # Deletions in progress per key, with the UIDs they were decided for (deletion identity).
        self.pending: dict[str, dict[InstanceKey, PendingDeletion]] = {}
        self.pending_services: dict[str, dict[str, str]] = {}
        self._our_deletions: set[str] = set()
        self.ms_informer.add_handler(self._on_modelserving)
        self.pod_informer.add_handler(self._on_pod)
        self.rev_informer.add_handler(self._on_owned)
        self.svc_informer.add_handler(self._on_owned)
        self.reconciles = 0

    # -- event handlers (synchronous, cheap) ----------------------------------------------------

    def _on_modelserving(self, kind: str, obj: Obj, old: Obj | None) -> None:
        key = key_of(obj)
        if kind == "DELETED":
            self.expectations.forget(key)
            self.lost.pop(key, None)
            self.running.pop(key, None)
            self.ready.pop(key, None)
            self.pending.pop(key, None)
            self.pending_services.pop(key, None)
        self.queue.add(key)

    @staticmethod
    def _owner_key(obj: Obj) -> str | None:
        meta = obj.get("metadata") or {}
        name = (meta.get("labels") or {}).get(LABEL_NAME)
        return f"{meta.get('namespace')}/{name}" if name else None

    def _on_pod(self, kind: str, obj: Obj, old: Obj | None) -> None:
        key = self._owner_key(obj)
        if key is None:
            return
        meta = obj["metadata"]
        name, uid = meta["name"], meta.get("uid", "")
        pods = self.pods_by_owner.setdefault(key, {})
        if kind == "DELETED":
            pods.pop(name, None)
            self.expectations.deleted(key, uid)
            if uid in self._our_deletions:
                self._our_deletions.discard(uid)
            else:
                self.lost.setdefault(key, set()).add(name)
        else:
            pods[name] = obj
            self.expectations.created(key, name)
            self.expectations.seen(key, uid, meta.get("resourceVersion", ""))
            if meta.get("deletionTimestamp"):
                self.expectations.deleted(key, uid)
            elif kind == "ADDED":
                self.lost.get(key, set()).discard(name)
        self.queue.add(key)

    def _on_owned(self, kind: str, obj: Obj, old: Obj | None) -> None:
        key = self._owner_key(obj)
        if key:
            self.queue.add(key)

    # -- reconcile ------------------------------------------------------------------------------

    def observed(self, ms: ModelServing, key: str) -> Observed:

        def owned(objects: dict[str, Obj]) -> list[Obj]:
            return [o for o in objects.values() if self._owner_key(o) == key]

        revisions = owned(self.rev_informer.cache)
        services = owned(self.svc_informer.cache)
        podgroups = owned(self.pg_informer.cache) if self.pg_informer is not None else None
        return Observed(
            ms=ms,
            pods=list(self.pods_by_owner.get(key, {}).values()),
            revisions=revisions,
            podgroups=podgroups,
            lost=frozenset(self.lost.get(key, set())),
            previously_running=self.running.get(key),
            previously_ready=self.ready.get(key),
            services=services,
            pending=self.pending.get(key),
            pending_services=self.pending_services.get(key, {}),
            now=dt.datetime.now(dt.UTC),
        )

    async def reconcile(self, key: str) -> float | None:
        """One reconcile of ``key``; returns seconds until it should run again, if any."""
        raw = self.ms_informer.cache.get(key)
        if raw is None or (raw.get("metadata") or {}).get("deletionTimestamp"):
            return None  # gone: garbage collection removes what it owned
        if not self.expectations.satisfied(key):
            return None  # the informer events that satisfy them enqueue the key again
        problems = validate(raw)  # the webhook may have been down when this object was written
        if problems:
            await self._report_invalid(raw, problems)
            return None
        ms = ModelServing.model_validate(raw)
        self.reconciles += 1
        result = plan(self.observed(ms, key))
        self.expectations.expect(
            key,
            creates=[p["metadata"]["name"] for p in result.create_pods],
            deletes=[d.uid for d in result.delete_pods],
            patches=[(p.uid, p.resource_version) for p in result.patch_pods],
        )
        self._our_deletions.update(d.uid for d in result.delete_pods)
        self.pending[key] = result.pending
        self.pending_services[key] = result.pending_services
        outcome = await self.executor.apply(ms, result)
        self.running[key] = result.running_instances
        self.ready[key] = result.ready_pods
        for name in outcome.failed_creates:
            self.expectations.created(key, name)  # nothing will arrive for these
        for uid in outcome.failed_patch_uids:
            self.expectations.seen(key, uid, "")
        for uid in outcome.failed_delete_uids:  # nor for these: the retry must not wait for the TTL
            self.expectations.deleted(key, uid)
            self._our_deletions.discard(uid)
        if outcome.errors or result.plugin_errors:
            raise ReconcileError("; ".join([*outcome.errors, *result.plugin_errors][:5]))
        return result.requeue_after

    async def _report_invalid(self, raw: Obj, errors: list[FieldError]) -> None:
        problems = "; ".join(str(e) for e in errors[:5])
        meta = raw.get("metadata") or {}
        stub = ModelServing.model_construct(metadata=_meta(meta))
        await self.executor.event(stub, Event("Warning", "InvalidSpec", f"spec is invalid: {problems}"))
        status = {
            "observedGeneration": meta.get("generation"),
            "conditions": [
                {
                    "type": "Progressing",
                    "status": "False",
                    "reason": "InvalidSpec",
                    "message": f"spec is invalid: {problems}",
                    "lastTransitionTime": dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
                }
            ],
        }
        await self.executor.write_status(stub, status)

    async def _worker(self) -> None:
        while True:
            key = await self.queue.get()
            if key is None:
                return
            try:
                async with scope.namespace(key.partition("/")[0]):  # the faults scoped to it (self-validation)
                    again = await self.reconcile(key)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                delay = self.queue.add_rate_limited(key)
                log.warning("reconcile %s failed (%s); retrying in %.2fs", key, exc, delay)
            else:
                self.queue.forget(key)
                if again is not None:
                    self.queue.add_after(key, again)
            finally:
                self.queue.done(key)

    async def _podgroups_served(self) -> bool:
        try:
            await client.ApiextensionsV1Api(self.api).read_custom_resource_definition(PODGROUP_CRD)
        except ApiException as exc:
            if exc.status in (403, 404):
                return False
            raise
        return True

    async def run(self, stop: asyncio.Event | None = None) -> None:
        """Run until ``stop`` is set (or the task is cancelled); shuts down cleanly either way."""
        informers = [self.ms_informer, self.pod_informer, self.rev_informer, self.svc_informer]
        if await self._podgroups_served():
            ns = self.config.namespace
            call = self._custom.list_namespaced_custom_object if ns else self._custom.list_cluster_custom_object
            kwargs: dict[str, Any] = {
                "group": "scheduling.volcano.sh",
                "version": "v1beta1",
                "plural": "podgroups",
                "label_selector": LABEL_NAME,
            }
            if ns:
                kwargs["namespace"] = ns
            self.pg_informer = Informer("podgroups", call, **kwargs)
            self.pg_informer.add_handler(self._on_owned)
            informers.append(self.pg_informer)
        tasks = [asyncio.create_task(i.run(), name=f"informer-{i.name}") for i in informers]
        await asyncio.gather(*(i.synced.wait() for i in informers))
        log.info("caches synced; starting %d workers", self.config.workers)
        tasks += [asyncio.create_task(self._worker(), name=f"worker-{n}") for n in range(self.config.workers)]
        tasks.append(asyncio.create_task(self._resync(), name="resync"))
        loops_stop = asyncio.Event()
        if self.config.autoscale:
            autoscaler = Autoscaler(self.api, self, self.config.namespace, self.config.autoscale_period)
            tasks.append(asyncio.create_task(autoscaler.run(loops_stop), name="autoscaler"))
        if self.config.convert:
            from .converters import Converters

            converters = Converters(self.api, self.ms_informer, self.config.namespace)
            tasks.append(asyncio.create_task(converters.run(loops_stop), name="converters"))
        try:
            if stop is None:
                await asyncio.gather(*tasks)
            else:
                await stop.wait()
        finally:
            loops_stop.set()
            await self.queue.shutdown()
            for task in tasks:
                task.cancel()
            for task in tasks:
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task

    # -- what the autoscaler reads (its Targets protocol) -----------------------------------------

    def modelserving(self, namespace: str, name: str) -> Obj | None:
        return self.ms_informer.cache.get(f"{namespace}/{name}")

    def pods(self, namespace: str, name: str) -> list[Obj]:
        return list(self.pods_by_owner.get(f"{namespace}/{name}", {}).values())

    async def _resync(self) -> None:
        while True:
            await asyncio.sleep(self.config.resync_seconds)
            for key in list(self.ms_informer.cache):
                self.queue.add(key)


class ReconcileError(Exception):
    """Some actions of a plan failed; the key is retried with backoff."""


def _meta(meta: dict[str, Any]) -> Any:
    from ..api.types import ObjectMeta

    return ObjectMeta.model_validate(meta)
