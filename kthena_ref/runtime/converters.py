"""The converters' shell: ModelBoosters and LeaderWorkerSets in, their child ModelServings out.

Each source kind has an informer; a source's events, and the events of the ModelServings it
controls (read from the ModelServing controller's informer cache), enqueue the source; a worker
asks :func:`kthena_ref.convert.plan.plan` (pure) what to write and writes it: the child (create or
update), the deletion of a child of another name (a renamed backend), a ModelBooster's
``status.observedGeneration``, and Events on the source for what it cannot convert (no child is
made) or does not honour.

A source kind whose CRD is not served (no ModelBooster CRD, LWS not installed) only keeps its
informer retrying, every :data:`RETRY_SECONDS` at most: installing the CRD later is picked up
without a restart, and the ModelServing controller never waits for it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from .. import faults
from ..api.types import GROUP, VERSION
from ..api.types import PLURAL as MS_PLURAL
from ..convert import Conversion, Problem
from ..convert.plan import Actions, controlled_by, plan
from ..events import event_body
from . import scope
from .informer import Handler, Informer, InformerConfig, Obj, key_of
from .workqueue import WorkQueue

log = logging.getLogger(__name__)

RETRY_SECONDS = 5.0  # a source informer's longest backoff (its CRD may be installed any time)
EVENT_SOURCE = "kthena-ref-converter"


@dataclass(frozen=True)
class Source:
    """A kind of object that makes a ModelServing, and its converter."""

    kind: str
    group: str
    version: str
    plural: str
    convert: Callable[[Obj, Obj | None], Conversion]
    writes_status: bool  # whether the source's status is ours to write (observedGeneration)

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}"


def sources() -> tuple[Source, ...]:
    from ..convert import lws, modelbooster

    return (
        Source("ModelBooster", GROUP, VERSION, "modelboosters", modelbooster.convert, writes_status=True),
        # The LWS status belongs to the LWS controller when one runs: never written here.
        Source("LeaderWorkerSet", "leaderworkerset.x-k8s.io", "v1", "leaderworkersets", lws.convert, False),
    )


def _reason(exc: ApiException) -> str:
    """The API server's message of a refusal (its Status body), else the HTTP reason."""
    import json

    try:
        return str(json.loads(exc.body or "{}").get("message") or exc.reason)
    except (ValueError, AttributeError):
        return str(exc.reason)


class Converters:
    """Runs every :class:`Source`'s conversion; ``children`` is the ModelServing informer (shared)."""

    def __init__(self, api: client.ApiClient, children: Informer, namespace: str | None = None) -> None:
        self.custom: Any = client.CustomObjectsApi(api)
        self.core: Any = client.CoreV1Api(api)
        self.children = children
        self.queue = WorkQueue()
        self.sources = {s.kind: s for s in sources()}
        self.informers: dict[str, Informer] = {}
        config = InformerConfig(backoff_max=RETRY_SECONDS)
        for source in self.sources.values():
            kwargs: dict[str, Any] = {"group": source.group, "version": source.version, "plural": source.plural}
            if namespace:
                informer = Informer(source.plural, self.custom.list_namespaced_custom_object, config,
                                    namespace=namespace, **kwargs)  # fmt: skip
            else:
                informer = Informer(source.plural, self.custom.list_cluster_custom_object, config, **kwargs)
            informer.add_handler(self._source_handler(source.kind))
            self.informers[source.kind] = informer
        children.add_handler(self._on_child)
        self.reported: dict[str, str] = {}  # source uid -> the last report (one Event per change)
        self.reconciles = 0

    # -- events ----------------------------------------------------------------------------------

    def _source_handler(self, source_kind: str) -> Handler:
        def handle(kind: str, obj: Obj, old: Obj | None) -> None:
            if kind == "DELETED":
                self.reported.pop(str((obj.get("metadata") or {}).get("uid")), None)
            self.queue.add(f"{source_kind}|{key_of(obj)}")

        return handle

    def _on_child(self, kind: str, obj: Obj, old: Obj | None) -> None:
        meta = obj.get("metadata") or {}
        for ref in meta.get("ownerReferences") or []:
            if ref.get("controller") and ref.get("kind") in self.sources:
                self.queue.add(f"{ref['kind']}|{meta.get('namespace')}/{ref.get('name')}")

    # -- reconcile -------------------------------------------------------------------------------

    async def reconcile(self, item: str) -> None:
        kind, key = item.split("|", 1)
        source = self.sources[kind]
        obj = self.informers[kind].cache.get(key)
        if obj is None or (obj.get("metadata") or {}).get("deletionTimestamp"):
            return  # gone: garbage collection removes the children it controlled
        self.reconciles += 1
        meta = obj["metadata"]
        ns, uid = meta["namespace"], meta["uid"]
        owned = [
            c for c in self.children.cache.values() if c["metadata"].get("namespace") == ns and controlled_by(c, uid)
        ]
        actions = plan(obj, owned, source.convert)
        await self._report(source, obj, actions)
        if not actions.converted:
            return
        try:
            if actions.create is not None:
                await self.custom.create_namespaced_custom_object(GROUP, VERSION, ns, MS_PLURAL, actions.create)
            if actions.update is not None:
                name = actions.update["metadata"]["name"]
                await self.custom.replace_namespaced_custom_object(GROUP, VERSION, ns, MS_PLURAL, name, actions.update)
        except ApiException as exc:
            if exc.status in (409, 429) or exc.status >= 500:
                raise  # a stale read or a busy server: retried with backoff
            # Refused (the ModelServing admission, RBAC): retrying cannot help until the source changes.
            refused = Actions(problems=(Problem("spec", f"the ModelServing was refused: HTTP {exc.status} "
                                                        f"{_reason(exc)}"),))  # fmt: skip
            await self._report(source, obj, refused)
            return
        for name in actions.delete:
            with contextlib.suppress(ApiException):
                await self.custom.delete_namespaced_custom_object(GROUP, VERSION, ns, MS_PLURAL, name)
        if faults.active("booster-no-observed-generation"):
            return
        if source.writes_status and (obj.get("status") or {}).get("observedGeneration") != meta.get("generation"):
            with contextlib.suppress(ApiException):
                await self.custom.patch_namespaced_custom_object_status(
                    source.group, source.version, ns, source.plural, meta["name"],
                    {"status": {"observedGeneration": meta.get("generation")}},
                    _content_type="application/merge-patch+json",
                )  # fmt: skip

    async def _report(self, source: Source, obj: Obj, actions: Actions) -> None:
        """One Event per new report: a source that cannot be converted (Warning ConversionFailed), or
        fields it sets that are not honoured (Warning FieldsIgnored)."""
        meta = obj["metadata"]
        if actions.problems:
            reason, what = "ConversionFailed", "cannot be converted into a ModelServing (none is made)"
            listed: tuple[Problem, ...] = actions.problems
        elif actions.ignored:
            reason, what = "FieldsIgnored", "sets fields the ModelServing conversion does not honour"
            listed = actions.ignored
        else:
            self.reported.pop(meta["uid"], None)
            return
        message = f"{source.kind} {meta['name']} {what}: " + "; ".join(str(p) for p in listed[:8])
        if self.reported.get(meta["uid"]) == message:
            return
        self.reported[meta["uid"]] = message
        await self._event(source, obj, reason, message)

    async def _event(self, source: Source, obj: Obj, reason: str, message: str) -> None:
        meta = obj["metadata"]
        involved = {"apiVersion": source.api_version, "kind": source.kind,
                    **{k: meta.get(k) for k in ("name", "namespace", "uid", "resourceVersion")}}  # fmt: skip
        body = event_body(involved, "Warning", reason, message, EVENT_SOURCE)
        try:
            await self.core.create_namespaced_event(meta["namespace"], body)
        except ApiException as exc:  # events are best effort
            log.warning("event %s for %s %s not recorded: %s", reason, source.kind, meta["name"], exc.status)

    # -- run -------------------------------------------------------------------------------------

    async def _worker(self) -> None:
        while True:
            item = await self.queue.get()
            if item is None:
                return
            try:
                async with scope.namespace(item.partition("|")[2].partition("/")[0]):  # scoped faults
                    await self.reconcile(item)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                delay = self.queue.add_rate_limited(item)
                log.warning("conversion of %s failed (%s); retrying in %.2fs", item, exc, delay)
            else:
                self.queue.forget(item)
            finally:
                self.queue.done(item)

    async def run(self, stop: asyncio.Event) -> None:
        """Until ``stop`` is set: the source informers and one worker (conversions are few and cheap)."""
        tasks = [asyncio.create_task(i.run(), name=f"informer-{i.name}") for i in self.informers.values()]
        tasks.append(asyncio.create_task(self._worker(), name="converter-worker"))
        try:
            await stop.wait()
        finally:
            await self.queue.shutdown()
            for task in tasks:
                task.cancel()
            for task in tasks:
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
