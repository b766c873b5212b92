"""The namespace scope of scoped faults (self-validation only; see :mod:`kthena_ref.faults`).

Each entry point of the controller (a reconcile, an admission request, an autoscaler pass over
one policy, a conversion) does its work inside :func:`namespace`, which enters the fault scope of
that namespace: the scoped faults whose patterns match the namespace's label
:data:`kthena_ref.faults.SCOPE_LABEL`. The label is read once per namespace (a GET on first use,
kept for the life of the process: the suite sets it when it creates the namespace and never
changes it) and only when scoped faults are configured; without them this is a no-op and the
controller makes no extra request. A namespace that cannot be read counts as unlabelled: its
scoped faults are off there, never on everywhere.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from .. import faults

log = logging.getLogger(__name__)


class _Labels:
    """The process's API client (set at start by :func:`use`) and the labels read so far."""

    def __init__(self) -> None:
        self.api: client.ApiClient | None = None
        self.labels: dict[str, str | None] = {}
        self.reading: dict[str, asyncio.Future[str | None]] = {}


_LABELS = _Labels()


def use(api: client.ApiClient | None) -> None:
    """Read namespace labels through ``api`` from now on (None: forget it and every label read)."""
    _LABELS.api = api
    _LABELS.labels.clear()
    _LABELS.reading.clear()


async def label(name: str) -> str | None:
    """The scope label of namespace ``name`` (None: none, unreadable, or no scoped fault configured)."""
    if not faults.scoped() or _LABELS.api is None or not name:
        return None
    if name in _LABELS.labels:
        return _LABELS.labels[name]
    pending = _LABELS.reading.get(name)
    if pending is not None:  # another task is reading it: one GET per namespace
        return await asyncio.shield(pending)
    future: asyncio.Future[str | None] = asyncio.get_running_loop().create_future()
    _LABELS.reading[name] = future
    value: str | None = None
    try:
        ns: Any = await client.CoreV1Api(_LABELS.api).read_namespace(name)
        value = ((ns.metadata and ns.metadata.labels) or {}).get(faults.SCOPE_LABEL)
        _LABELS.labels[name] = value
    except ApiException as exc:  # not cached: a later request may succeed
        log.warning("scoped faults: cannot read namespace %s (HTTP %s): its scoped faults are off", name, exc.status)
    except Exception as exc:  # a lookup must never break the work it scopes
        log.warning("scoped faults: cannot read namespace %s (%s): its scoped faults are off", name, exc)
    finally:
        _LABELS.reading.pop(name, None)
        future.set_result(value)
    return value


@asynccontextmanager
async def namespace(name: str | None) -> AsyncIterator[frozenset[str]]:
    """Inside the block, the scoped faults of namespace ``name`` are on (none outside a namespace)."""
    if not faults.scoped():
        yield frozenset()
        return
    with faults.in_scope(await label(name) if name else None) as on:
        yield on
