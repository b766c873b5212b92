"""The ResourceSlice publisher: one pool per served node, kept in sync with the nodes.

:func:`plan` is pure: from the Nodes that carry the driver's count label and the driver's existing
ResourceSlices it computes the creates, updates and deletes that make the slices match the nodes,
plus the problems it skipped (bad label values). :class:`Publisher` is the thin loop around it:
list, plan, apply, then wait until a Node or ResourceSlice watch event (or the periodic resync)
says something changed. It is level-triggered: every round starts from a fresh list, so a missed
event, an expired watch or a slice deleted behind its back all converge on the next round.

Each served node gets exactly one slice, named ``<node>-<driver>`` (shortened with a hash when too
long), with ``spec.pool.name`` = the node name (devices are identified by driver/pool/device, so
pools must differ per node), ``spec.nodeName`` = the node, ``resourceSliceCount`` 1, and the Node
as its controlling owner (the garbage collector removes it if the publisher is not running when the
node goes). A slice whose content changes is updated in place with ``pool.generation`` + 1.

A node without the label, with ``0``, or with a value that is not a device count publishes nothing
(its slice, if any, is deleted); a bad value is logged once per node and value, never fatal.
Slices are left in place when the publisher stops, so a restart does not flap allocations.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .drivers import MANAGED_BY, MANAGED_BY_LABEL, DriverShape, parse_count

log = logging.getLogger("fake_devices.publisher")

Obj = dict[str, Any]
DRIVER_LABEL = "fake-devices.kthena.io/driver"
MAX_NAME = 253


@dataclass(frozen=True)
class Update:
    name: str
    body: Obj


@dataclass
class Plan:
    """What to do so the driver's slices match the served nodes."""

    creates: list[Obj] = field(default_factory=list)
    updates: list[Update] = field(default_factory=list)
    deletes: list[str] = field(default_factory=list)
    # (node, reason) for nodes whose label value was rejected.
    problems: list[tuple[str, str]] = field(default_factory=list)

    @property
    def empty(self) -> bool:
        return not (self.creates or self.updates or self.deletes)


def slice_name(node: str, driver: str) -> str:
    """The slice's name: ``<node>-<driver>``, or a hashed form when that exceeds 253 characters."""
    name = f"{node}-{driver}"
    if len(name) <= MAX_NAME:
        return name
    digest = hashlib.sha256(name.encode()).hexdigest()[:16]
    return f"{node[: MAX_NAME - len(driver) - 18]}-{digest}-{driver}"


def desired_slice(
    shape: DriverShape, node: Obj, count: int, generation: int, faults: frozenset[str] = frozenset()
) -> Obj:
    """The slice for ``node`` with ``count`` devices, at pool ``generation``.

    ``faults`` (self-validation only, see :data:`.drivers.FAULTS`): ``model-attribute-dropped``
    leaves out every device's ``model`` attribute; ``spare-device-published`` adds one device,
    ``<kind>-spare``, that the capability file does not declare."""
    name = node["metadata"]["name"]
    devices = shape.devices(name, count)
    if "spare-device-published" in faults and count:
        devices.append({**shape.make_device(name, count), "name": f"{shape.key}-spare"})
    if "model-attribute-dropped" in faults:
        for device in devices:
            device["attributes"].pop("model", None)
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {
            "name": slice_name(name, shape.driver),
            "labels": {MANAGED_BY_LABEL: MANAGED_BY, DRIVER_LABEL: shape.key},
            "ownerReferences": [
                {
                    "apiVersion": "v1",
                    "kind": "Node",
                    "name": name,
                    "uid": node["metadata"].get("uid", ""),
                    "controller": True,
                }
            ],
        },
        "spec": {
            "driver": shape.driver,
            "nodeName": name,
            "pool": {"name": name, "generation": generation, "resourceSliceCount": 1},
            "devices": devices,
        },
    }


def _projection(obj: Obj) -> Obj:
    """The parts of a slice the publisher owns, for comparing desired and existing ones."""
    spec = obj.get("spec") or {}
    meta = obj.get("metadata") or {}
    devices = [
        {
            "name": d.get("name"),
            "attributes": d.get("attributes") or {},
            "capacity": {k: {"value": (v or {}).get("value")} for k, v in (d.get("capacity") or {}).items()},
        }
        for d in spec.get("devices") or []
    ]
    owners = [
        (o.get("kind"), o.get("name"), o.get("uid"), bool(o.get("controller")))
        for o in meta.get("ownerReferences") or []
    ]
    pool = spec.get("pool") or {}
    return {
        "nodeName": spec.get("nodeName"),
        "pool": (pool.get("name"), pool.get("resourceSliceCount")),
        "devices": devices,
        "owners": owners,
        "labels": {k: v for k, v in (meta.get("labels") or {}).items() if k in (MANAGED_BY_LABEL, DRIVER_LABEL)},
    }


def _generation(obj: Obj) -> int:
    gen = ((obj.get("spec") or {}).get("pool") or {}).get("generation")
    return gen if isinstance(gen, int) else 0


def served_nodes(
    shape: DriverShape, nodes: Iterable[Obj], faults: frozenset[str] = frozenset()
) -> tuple[dict[str, tuple[Obj, int]], list[tuple[str, str]]]:
    """The nodes that should have devices (name -> (node, count)) and the rejected label values.

    ``faults`` (self-validation only, see :data:`.drivers.FAULTS`): ``device-count-off-by-one``
    publishes one device fewer per node."""
    served: dict[str, tuple[Obj, int]] = {}
    problems: list[tuple[str, str]] = []
    for node in nodes:
        meta = node.get("metadata") or {}
        name = meta.get("name")
        if not isinstance(name, str) or meta.get("deletionTimestamp"):
            continue
        value = (meta.get("labels") or {}).get(shape.count_label)
        count, problem = parse_count(value)
        if problem is not None:
            problems.append((name, f"label {shape.count_label}={value!r}: {problem}; publishing no devices"))
        elif count:
            if "device-count-off-by-one" in faults:
                count -= 1
            if count:
                served[name] = (node, count)
    return served, problems


def plan(shape: DriverShape, nodes: Iterable[Obj], slices: Iterable[Obj], faults: frozenset[str] = frozenset()) -> Plan:
    """What to create, update and delete so ``slices`` (this driver's) match ``nodes`` (pure)."""
    served, problems = served_nodes(shape, nodes, faults)
    out = Plan(problems=problems)
    by_pool: dict[str, list[Obj]] = {}
    for s in slices:
        spec = s.get("spec") or {}
        if spec.get("driver") != shape.driver:
            continue  # not ours (the caller's field selector normally keeps them out)
        pool = (spec.get("pool") or {}).get("name") or spec.get("nodeName") or ""
        by_pool.setdefault(pool, []).append(s)
    for pool, existing in sorted(by_pool.items()):
        if pool not in served:
            out.deletes.extend(sorted(s["metadata"]["name"] for s in existing))
    for name, (node, count) in sorted(served.items()):
        existing = by_pool.get(name, [])
        want = slice_name(name, shape.driver)
        keep = next((s for s in existing if s["metadata"]["name"] == want), None)
        out.deletes.extend(sorted(s["metadata"]["name"] for s in existing if s is not keep))
        top = max((_generation(s) for s in existing), default=0)
        if keep is None:
            out.creates.append(desired_slice(shape, node, count, top + 1 if existing else 1, faults))
            continue
        desired = desired_slice(shape, node, count, _generation(keep), faults)
        if _projection(desired) == _projection(keep) and len(existing) == 1:
            continue
        desired = desired_slice(shape, node, count, top + 1, faults)
        desired["metadata"]["resourceVersion"] = keep["metadata"].get("resourceVersion")
        out.updates.append(Update(want, desired))
    return out


# -- the loop ---------------------------------------------------------------------------------------


class ApiError(Exception):
    """A non-2xx answer (with ``_preload_content=False`` the client may not raise by itself)."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(f"HTTP {status} {reason}".strip())
        self.status = status
        self.reason = reason


def checked(resp: Any) -> Obj:
    """The JSON body of a raw response, raising :class:`ApiError` for a non-2xx status."""
    status = getattr(resp, "status", 200)
    if isinstance(status, int) and not 200 <= status <= 299:
        raise ApiError(status, str(getattr(resp, "reason", "") or ""))
    data = json.loads(resp.data) if resp.data else {}
    return data if isinstance(data, dict) else {}


class KubeApi:
    """The few API calls the publisher makes, on raw JSON (no client models)."""

    def __init__(self, api_client: Any, shape: DriverShape, *, timeout: float = 30.0) -> None:
        from kubernetes import client

        self.core: Any = client.CoreV1Api(api_client)
        self.resource: Any = client.ResourceV1Api(api_client)
        self.shape = shape
        self.timeout = timeout

    @property
    def node_selector(self) -> str:
        return self.shape.count_label  # nodes that carry the label at all

    @property
    def slice_selector(self) -> str:
        return f"spec.driver={self.shape.driver}"

    def list_nodes(self) -> list[Obj]:
        resp = self.core.list_node(
            label_selector=self.node_selector, _preload_content=False, _request_timeout=self.timeout
        )
        return list(checked(resp).get("items") or [])

    def list_slices(self) -> list[Obj]:
        resp = self.resource.list_resource_slice(
            field_selector=self.slice_selector, _preload_content=False, _request_timeout=self.timeout
        )
        return list(checked(resp).get("items") or [])

    def create(self, body: Obj) -> None:
        checked(self.resource.create_resource_slice(body, _preload_content=False, _request_timeout=self.timeout))

    def replace(self, name: str, body: Obj) -> None:
        checked(self.resource.replace_resource_slice(name, body, _preload_content=False, _request_timeout=self.timeout))

    def delete(self, name: str) -> None:
        checked(self.resource.delete_resource_slice(name, _preload_content=False, _request_timeout=self.timeout))

    def watches(self) -> list[tuple[str, Callable[..., Any], dict[str, Any]]]:
        return [
            ("nodes", self.core.list_node, {"label_selector": self.node_selector}),
            ("resourceslices", self.resource.list_resource_slice, {"field_selector": self.slice_selector}),
        ]


class NodeApi(KubeApi):
    """The calls of a publisher for one node only, as a real driver's kubelet plugin publishes its
    own node's devices: the Node read by name and given ``count`` devices (a real driver finds its
    devices on the node; this one is told how many, whatever the Node's labels say), and only this
    driver's slices of that node listed (so other nodes' slices are never deleted)."""

    def __init__(self, api_client: Any, shape: DriverShape, node: str, count: int, *, timeout: float = 30.0) -> None:
        super().__init__(api_client, shape, timeout=timeout)
        self.node = node
        self.count = count

    @property
    def slice_selector(self) -> str:
        return f"spec.driver={self.shape.driver},spec.nodeName={self.node}"

    def list_nodes(self) -> list[Obj]:
        resp = self.core.list_node(
            field_selector=f"metadata.name={self.node}", _preload_content=False, _request_timeout=self.timeout
        )
        return [with_count(node, self.shape, self.count) for node in checked(resp).get("items") or []]

    def watches(self) -> list[tuple[str, Callable[..., Any], dict[str, Any]]]:
        return [
            ("nodes", self.core.list_node, {"field_selector": f"metadata.name={self.node}"}),
            ("resourceslices", self.resource.list_resource_slice, {"field_selector": self.slice_selector}),
        ]


def with_count(node: Obj, shape: DriverShape, count: int) -> Obj:
    """``node`` as the planner reads it when it has ``count`` devices of ``shape`` (pure)."""
    meta = dict(node.get("metadata") or {})
    meta["labels"] = {**(meta.get("labels") or {}), shape.count_label: str(count)}
    return {**node, "metadata": meta}


def _status(exc: BaseException) -> int | None:
    status = getattr(exc, "status", None)
    return status if isinstance(status, int) else None


class Publisher:
    """List, plan, apply; then wait for a watch event or the resync period. Never raises from
    :meth:`run` for API trouble: it logs and retries with a capped backoff until ``stop`` is set."""

    def __init__(
        self,
        shape: DriverShape,
        api: KubeApi,
        *,
        resync: float = 30.0,
        debounce: float = 0.05,
        faults: frozenset[str] = frozenset(),
    ) -> None:
        self.shape = shape
        self.faults = faults
        self.api = api
        self.resync = resync
        self.debounce = debounce
        self.dirty = threading.Event()
        self.rounds = 0
        self._reported: dict[str, str] = {}

    def reconcile_once(self) -> Plan:
        """One round: list nodes and slices, plan, apply. API errors propagate (the loop retries)."""
        nodes = self.api.list_nodes()
        slices = self.api.list_slices()
        todo = plan(self.shape, nodes, slices, self.faults)
        self._report(todo.problems)
        for name in todo.deletes:
            log.info("%s: deleting ResourceSlice %s", self.shape.driver, name)
            self._tolerate(lambda n=name: self.api.delete(n), 404)  # type: ignore[misc]
        for update in todo.updates:
            log.info(
                "%s: updating ResourceSlice %s (pool generation %s)",
                self.shape.driver,
                update.name,
                update.body["spec"]["pool"]["generation"],
            )
            self._tolerate(lambda u=update: self.api.replace(u.name, u.body), 409, 404)  # type: ignore[misc]
        for body in todo.creates:
            log.info(
                "%s: creating ResourceSlice %s (%d devices)",
                self.shape.driver,
                body["metadata"]["name"],
                len(body["spec"]["devices"]),
            )
            self._tolerate(lambda b=body: self.api.create(b), 409)  # type: ignore[misc]
        self.rounds += 1
        return todo

    def _tolerate(self, call: Callable[[], None], *statuses: int) -> None:
        """Run ``call``; a conflict or a vanished object only means "look again next round"."""
        try:
            call()
        except Exception as exc:
            if _status(exc) not in statuses:
                raise
            self.dirty.set()

    def _report(self, problems: list[tuple[str, str]]) -> None:
        current = dict(problems)
        for node, reason in problems:
            if self._reported.get(node) != reason:
                log.warning("%s: node %s: %s", self.shape.driver, node, reason)
        self._reported = current

    def run(self, stop: threading.Event) -> None:
        """Serve until ``stop`` is set."""
        threads = [
            threading.Thread(target=self._watch, args=(what, func, kwargs, stop), name=f"watch-{what}", daemon=True)
            for what, func, kwargs in self.api.watches()
        ]
        for t in threads:
            t.start()
        backoff = 0.5
        while not stop.is_set():
            self.dirty.clear()
            try:
                self.reconcile_once()
                backoff = 0.5
            except Exception as exc:
                log.warning("%s: reconcile failed (retrying in %.1fs): %s", self.shape.driver, backoff, _short(exc))
                stop.wait(backoff)
                backoff = min(backoff * 2, 10.0)
                continue
            self._wait_for_change(stop)
        for t in threads:
            t.join(timeout=0.2)

    def _wait_for_change(self, stop: threading.Event) -> None:
        deadline = time.monotonic() + self.resync
        while not stop.is_set() and time.monotonic() < deadline:
            if self.dirty.wait(timeout=min(0.2, max(0.0, deadline - time.monotonic()))):
                stop.wait(self.debounce)  # let a burst of events land in one round
                return

    def _watch(self, what: str, func: Callable[..., Any], kwargs: Mapping[str, Any], stop: threading.Event) -> None:
        """Set ``dirty`` on every event; restart the watch when it ends or fails (each restart
        replays the current objects as ADDED, so nothing changed in the gap is missed)."""
        from kubernetes import watch

        make_watch: Any = watch.Watch
        backoff = 0.5
        while not stop.is_set():
            w = make_watch()
            try:
                for _event in w.stream(
                    func, timeout_seconds=30, _request_timeout=(10, 60), deserialize=False, **kwargs
                ):
                    self.dirty.set()
                    if stop.is_set():
                        w.stop()
                        break
                backoff = 0.5
            except Exception as exc:
                if stop.is_set():
                    return
                log.info("%s: %s watch ended (%s); restarting", self.shape.driver, what, _short(exc))
                stop.wait(backoff)
                backoff = min(backoff * 2, 10.0)
            self.dirty.set()


def _short(exc: BaseException) -> str:
    status = _status(exc)
    reason = getattr(exc, "reason", None)
    if status is not None:
        return f"HTTP {status} {reason or ''}".strip()
    return f"{type(exc).__name__}: {exc}"[:300]
