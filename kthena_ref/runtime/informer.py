"""A list-watch informer over raw JSON: the cache every reconcile reads from.

No well-kept Python library offers client-go's informer semantics (see the python-stack notes:
lightkube and kr8s lose deletions on 410), so this is ours, small and tested:

- list (paginated), then watch from the list's resourceVersion with bookmarks on, tracking the
  resourceVersion from every event including BOOKMARK, and resuming from it after a disconnect;
- on 410 Gone (or a watch ERROR event) re-list and diff against the cache, so deletions that
  happened while no watch was open are delivered as deletions;
- a server-side watch timeout plus a client-side inactivity timeout (bookmarks arrive about every
  minute), with capped exponential backoff between failures;
- objects stay plain dicts as the API server sent them: the planner reads dicts, and no model
  drift between client versions can drop a field.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol

from kubernetes_asyncio.client.exceptions import ApiException

log = logging.getLogger(__name__)

Obj = dict[str, Any]


class Handler(Protocol):
    def __call__(self, kind: str, obj: Obj, old: Obj | None) -> None: ...


ListCall = Callable[..., Awaitable[Any]]  # a kubernetes_asyncio list_* function (bound)


class Gone(Exception):
    """The watch's resourceVersion is too old (HTTP 410): the informer must re-list."""


async def ensure_ok(resp: Any) -> None:
    """Raise for a non-2xx response: with ``_preload_content=False`` the client does not, and a
    Status body must never be read as an empty list (that would delete the whole cache)."""
    status = getattr(resp, "status", 200)
    if 200 <= status <= 299:
        return
    try:
        body = await resp.read()
    finally:
        resp.release()
    error = ApiException(status=status, reason=getattr(resp, "reason", ""))
    error.body = body
    raise error


def _slim(obj: Obj) -> Obj:
    """Drop ``managedFields``: nothing reads them, and they are ~40% of a cached Pod."""
    meta = obj.get("metadata")
    if isinstance(meta, dict):
        meta.pop("managedFields", None)
    return obj


def key_of(obj: Obj) -> str:
    meta = obj.get("metadata") or {}
    ns = meta.get("namespace")
    return f"{ns}/{meta['name']}" if ns else str(meta["name"])


@dataclass
class InformerConfig:
    page_size: int = 500
    watch_timeout: int = 300  # server side, seconds
    inactivity_timeout: float = 150.0  # client side: no event nor bookmark for this long
    backoff_initial: float = 0.2
    backoff_max: float = 30.0


class Informer:
    """Keeps ``cache`` equal to the server's view of one resource and tells handlers what changed."""

    def __init__(
        self, name: str, list_call: ListCall, config: InformerConfig | None = None, **list_kwargs: Any
    ) -> None:
        self.name = name
        self.list_call = list_call
        self.list_kwargs = list_kwargs
        self.config = config or InformerConfig()
        self.cache: dict[str, Obj] = {}
        self.resource_version: str | None = None
        self.handlers: list[Handler] = []
        self.synced = asyncio.Event()
        self.relists = 0  # observable for tests and metrics

    def add_handler(self, handler: Handler) -> None:
        self.handlers.append(handler)

    def _emit(self, kind: str, obj: Obj, old: Obj | None) -> None:
        for handler in self.handlers:
            try:
                handler(kind, obj, old)
            except Exception:  # a handler bug must not stop the informer
                log.exception("%s informer: handler failed on %s %s", self.name, kind, key_of(obj))

    async def _list(self) -> None:
        items: dict[str, Obj] = {}
        cont: str | None = None
        while True:
            kwargs = dict(self.list_kwargs, limit=self.config.page_size, _preload_content=False)
            if cont:
                kwargs["_continue"] = cont
            resp = await self.list_call(**kwargs)
            await ensure_ok(resp)
            try:
                body = json.loads(await resp.read())
            finally:
                resp.release()
            for item in body.get("items") or []:
                items[key_of(item)] = _slim(item)
            cont = (body.get("metadata") or {}).get("continue")
            if not cont:
                self.resource_version = (body.get("metadata") or {}).get("resourceVersion")
                break
        old_cache, self.cache = self.cache, items
        for key, obj in items.items():
            before = old_cache.get(key)
            if before is None:
                self._emit("ADDED", obj, None)
            elif before.get("metadata", {}).get("resourceVersion") != obj.get("metadata", {}).get("resourceVersion"):
                self._emit("MODIFIED", obj, before)
        for key, before in old_cache.items():
            if key not in items:  # deleted while we were not watching
                self._emit("DELETED", before, before)
        self.relists += 1
        self.synced.set()

    async def _watch(self) -> None:
        kwargs = dict(
            self.list_kwargs,
            watch=True,
            allow_watch_bookmarks=True,
            resource_version=self.resource_version,
            timeout_seconds=self.config.watch_timeout,
            _preload_content=False,
        )
        resp = await self.list_call(**kwargs)
        await ensure_ok(resp)
        try:
            while True:
                line = await asyncio.wait_for(resp.content.readline(), timeout=self.config.inactivity_timeout)
                if not line:
                    return  # server closed the watch (its timeout): resume from resource_version
                if line.strip():
                    self._handle(json.loads(line))
        finally:
            resp.release()

    def _handle(self, event: Obj) -> None:
        kind = event.get("type")
        obj = _slim(event.get("object") or {})
        if kind == "ERROR":
            if obj.get("code") == 410:
                raise Gone(obj.get("message", "resource version too old"))
            raise RuntimeError(f"watch error: {obj.get('message')}")
        rv = (obj.get("metadata") or {}).get("resourceVersion")
        if rv:
            self.resource_version = rv
        if kind == "BOOKMARK":
            return
        key = key_of(obj)
        old = self.cache.get(key)
        if kind == "DELETED":
            self.cache.pop(key, None)
            self._emit("DELETED", obj, old)
        else:
            self.cache[key] = obj
            self._emit("ADDED" if old is None else "MODIFIED", obj, old)

    async def run(self) -> None:
        """List, then watch forever; re-list on 410; back off on errors. Cancel to stop."""
        delay = self.config.backoff_initial
        need_list = True
        while True:
            try:
                if need_list:
                    await self._list()
                    need_list = False
                await self._watch()
                delay = self.config.backoff_initial
            except asyncio.CancelledError:
                raise
            except Gone:
                log.info("%s informer: resourceVersion expired, re-listing", self.name)
                need_list = True
            except Exception as exc:
                status = getattr(exc, "status", None)
                if status == 410:
                    need_list = True
                    continue
                log.warning("%s informer: %s: %s; retrying in %.1fs", self.name, type(exc).__name__, exc, delay)
                await asyncio.sleep(delay + random.uniform(0, delay / 2))
                delay = min(delay * 2, self.config.backoff_max)
                if isinstance(exc, TimeoutError):
                    continue  # inactivity: reconnect from the last resourceVersion
                if status is None or status >= 500 or status == 429:
                    continue
                need_list = True


async def run_until_cancelled(*informers: Informer) -> None:
    tasks = [asyncio.create_task(i.run(), name=f"informer-{i.name}") for i in informers]
    try:
        await asyncio.gather(*tasks)
    finally:
        for t in tasks:
            t.cancel()
        for t in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await t
