"""The autoscaler's shell: every period, for each AutoscalingPolicy, fetch metrics, plan, write.

Everything it decides is decided by :mod:`.plan` (pure); this module only reads (the policies from
the API server, the target ModelServings and their Pods from the controller's informer caches,
metric values from the Pods or a Prometheus server through :mod:`.metrics`) and writes (the
target's replicas, the policy's status subresource, Events). A policy the API server holds but
that does not parse, a target that does not exist, and a metric that cannot be read are reported
as Events on the policy (the spec's status has no conditions); none of them stops the loop or the
other policies, and none of them changes any replicas.

Readings (docs/autoscaling-readings.md): the loop runs every :data:`LOOP_SECONDS` (the spec gives no
period; upstream uses 15 s; 2 s here, a little more than the suite's 1 s Prometheus scrape, so a
changed metric is acted on within seconds: a loop lists the policies and reads informer caches, a
few milliseconds of CPU when nothing changes); a metric that cannot be fetched is missing for that loop; the Pods
scraped for a pod source are chosen by :func:`.plan.pods_to_scrape`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from decimal import Decimal
from typing import Any, Protocol

import aiohttp
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException
from pydantic import ValidationError

from .. import faults
from ..api.autoscaling import KIND, PLURAL, AutoscalingPolicySpec
from ..api.types import GROUP, VERSION
from ..api.types import PLURAL as MS_PLURAL
from ..events import event_body
from . import metrics
from .decision import Memory
from .plan import Fetch, Observed, Outcome, Write, pods_to_scrape, reconcile, units

log = logging.getLogger(__name__)

LOOP_SECONDS = 2.0
FETCH_TIMEOUT_SECONDS = 3.0
EVENT_SOURCE = "kthena-ref-autoscaler"
Obj = dict[str, Any]


class Targets(Protocol):
    """Where the shell reads target ModelServings and their Pods (the controller's caches)."""

    def modelserving(self, namespace: str, name: str) -> Obj | None: ...

    def pods(self, namespace: str, name: str) -> list[Obj]: ...


class Autoscaler:
    def __init__(
        self, api: client.ApiClient, targets: Targets, namespace: str | None = None, period: float = LOOP_SECONDS
    ) -> None:
        self.custom: Any = client.CustomObjectsApi(api)  # raw dicts and _content_type: untyped on purpose
        self.core: Any = client.CoreV1Api(api)
        self.targets = targets
        self.namespace = namespace
        self.period = period
        self.memory: dict[str, dict[str, Memory]] = {}  # policy UID -> unit key -> memory
        self.reported: dict[str, frozenset[str]] = {}  # policy UID -> problems last told as Events
        self.loops = 0
        self.forbidden = False

    async def run(self, stop: asyncio.Event) -> None:
        async with aiohttp.ClientSession() as session:
            while not stop.is_set():
                started = time.monotonic()
                try:
                    await self.loop_once(session)
                except asyncio.CancelledError:
                    raise
                except Exception:  # one bad loop must never end the autoscaler
                    log.exception("autoscaler loop failed")
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), max(0.0, self.period - (time.monotonic() - started)))

    async def loop_once(self, session: aiohttp.ClientSession) -> None:
        policies = await self._policies()
        if policies is None:
            return
        live = {p["metadata"]["uid"] for p in policies}
        for uid in set(self.memory) - live:
            self.memory.pop(uid, None)
            self.reported.pop(uid, None)
        await asyncio.gather(*(self._reconcile_in_scope(session, p) for p in policies))
        self.loops += 1

    async def _policies(self) -> list[Obj] | None:
        try:
            if self.namespace:
                got = await self.custom.list_namespaced_custom_object(GROUP, VERSION, self.namespace, PLURAL)
            else:
                got = await self.custom.list_cluster_custom_object(GROUP, VERSION, PLURAL)
        except ApiException as exc:
            if exc.status == 404:  # the AutoscalingPolicy CRD is not installed: nothing to do
                return None
            if exc.status in (429, 500, 503):  # e.g. a CRD's storage still initialising: the next loop retries
                log.info("listing AutoscalingPolicies: HTTP %s, retrying next loop", exc.status)
                return None
            if exc.status == 403:  # installed without the autoscaler's RBAC: say so once, keep trying
                if not self.forbidden:
                    log.warning("cannot list AutoscalingPolicies (HTTP 403): the autoscaler idles until allowed")
                self.forbidden = True
                return None
            raise
        self.forbidden = False
        items: list[Obj] = got.get("items", [])
        return items

    async def _reconcile_in_scope(self, session: aiohttp.ClientSession, policy: Obj) -> None:
        from ..runtime import scope

        async with scope.namespace(policy["metadata"].get("namespace")):  # the faults scoped to it (self-validation)
            await self._reconcile(session, policy)

    async def _reconcile(self, session: aiohttp.ClientSession, policy: Obj) -> None:
        meta = policy["metadata"]
        uid, ns = meta["uid"], meta["namespace"]
        try:
            spec = AutoscalingPolicySpec.model_validate(policy.get("spec") or {})
        except ValidationError as exc:
            await self._tell(policy, {f"spec is invalid: {_first_error(exc)}"}, "InvalidPolicy")
            return
        observed = self._observe(ns, spec)
        values, failures = await self._fetch_all(session, ns, spec)
        outcome = reconcile(
            spec, meta.get("generation", 0), observed, values, time.monotonic(), self.memory.get(uid, {})
        )
        self.memory[uid] = outcome.memory
        for write in outcome.writes:
            await self._write(ns, write)
        await self._status(policy, outcome)
        await self._tell(policy, set(outcome.problems) | failures, "AutoscalingProblem")

    def _observe(self, ns: str, spec: AutoscalingPolicySpec) -> Observed:
        replicas: dict[str, int] = {}
        roles: dict[str, dict[str, int]] = {}
        for unit in units(spec):
            ms = self.targets.modelserving(ns, unit.target)
            if ms is None or ms.get("metadata", {}).get("deletionTimestamp"):
                continue
            ms_spec = ms.get("spec") or {}
            replicas[unit.target] = int(ms_spec.get("replicas", 1))
            roles[unit.target] = {
                r["name"]: int(r.get("replicas", 1)) for r in (ms_spec.get("template") or {}).get("roles") or []
            }
        return Observed(replicas, roles)

    async def _fetch_all(
        self, session: aiohttp.ClientSession, ns: str, spec: AutoscalingPolicySpec
    ) -> tuple[dict[str, dict[str, Decimal]], set[str]]:
        jobs: list[tuple[str, Fetch]] = [(u.key, f) for u in units(spec) for f in u.fetches]
        results = await asyncio.gather(*(self._fetch(session, ns, f) for _, f in jobs), return_exceptions=True)
        values: dict[str, dict[str, Decimal]] = {}
        failures: set[str] = set()
        for (key, fetch), result in zip(jobs, results, strict=True):
            if isinstance(result, Decimal):
                values.setdefault(key, {})[fetch.metric] = result
            elif isinstance(result, metrics.MetricError):
                failures.add(
                    f"metric {fetch.metric!r} of {fetch.target}{'/' + fetch.role if fetch.role else ''}: {result}"
                )
            elif isinstance(result, BaseException):
                failures.add(f"metric {fetch.metric!r} of {fetch.target}: {type(result).__name__}: {result}")
        return values, failures

    async def _fetch(self, session: aiohttp.ClientSession, ns: str, fetch: Fetch) -> Decimal:
        if fetch.source.prometheus is not None:
            return await metrics.query_prometheus(session, fetch.source.prometheus, FETCH_TIMEOUT_SECONDS)
        source = fetch.source.pod
        assert source is not None  # the CRD's CEL: exactly one backend
        pods = pods_to_scrape(self.targets.pods(ns, fetch.target), fetch.role, source)
        return await metrics.scrape_pods(session, pods, source, fetch.metric, FETCH_TIMEOUT_SECONDS)

    async def _write(self, ns: str, write: Write) -> None:
        replicas = write.replicas
        try:
            if write.role is None:
                await self.custom.patch_namespaced_custom_object(
                    GROUP, VERSION, ns, MS_PLURAL, write.target, {"spec": {"replicas": replicas}},
                    _content_type="application/merge-patch+json",
                )  # fmt: skip
                return
            ms = self.targets.modelserving(ns, write.target) or {}
            names = [r.get("name") for r in ((ms.get("spec") or {}).get("template") or {}).get("roles") or []]
            if write.role not in names:
                return
            index = names.index(write.role)
            patch = [
                {"op": "test", "path": f"/spec/template/roles/{index}/name", "value": write.role},
                {"op": "add", "path": f"/spec/template/roles/{index}/replicas", "value": replicas},
            ]
            await self.custom.patch_namespaced_custom_object(
                GROUP, VERSION, ns, MS_PLURAL, write.target, patch, _content_type="application/json-patch+json"
            )
        except ApiException as exc:  # the next loop tries again from what it then observes
            log.warning("scaling %s/%s to %d failed: HTTP %s %s", ns, write.target, replicas, exc.status, exc.reason)

    async def _status(self, policy: Obj, outcome: Outcome) -> None:
        if faults.active("autoscaler-no-status"):
            return
        status: dict[str, Any] = {
            "homogeneousStatus": None,
            "heterogeneousStatus": None,
            "disaggregatedStatus": None,
            **outcome.status,
        }
        old = policy.get("status") or {}
        if all(old.get(k) == v for k, v in status.items() if v is not None) and all(
            k not in old for k, v in status.items() if v is None
        ):
            return
        meta = policy["metadata"]
        try:
            await self.custom.patch_namespaced_custom_object_status(
                GROUP, VERSION, meta["namespace"], PLURAL, meta["name"], {"status": status},
                _content_type="application/merge-patch+json",
            )  # fmt: skip
        except ApiException as exc:
            if exc.status != 404:
                log.warning("status of AutoscalingPolicy %s/%s: HTTP %s", meta["namespace"], meta["name"], exc.status)

    async def _tell(self, policy: Obj, problems: set[str], reason: str) -> None:
        """An Event per problem not already told for this policy (problems that went away are forgotten)."""
        meta = policy["metadata"]
        uid = meta["uid"]
        new = frozenset(problems)
        told = self.reported.get(uid, frozenset())
        self.reported[uid] = new
        for problem in sorted(new - told):
            await self._event(policy, reason, problem)

    async def _event(self, policy: Obj, reason: str, message: str) -> None:
        meta = policy["metadata"]
        involved = {"apiVersion": f"{GROUP}/{VERSION}", "kind": KIND, "name": meta["name"],
                    "namespace": meta["namespace"], "uid": meta["uid"]}  # fmt: skip
        body = event_body(involved, "Warning", reason, message, EVENT_SOURCE)
        try:
            await self.core.create_namespaced_event(meta["namespace"], body)
        except ApiException as exc:  # events are best effort
            log.warning("event %s for AutoscalingPolicy %s not recorded: HTTP %s", reason, meta["name"], exc.status)


def _first_error(exc: ValidationError) -> str:
    err = exc.errors()[0]
    return f"spec.{'.'.join(str(p) for p in err['loc'])}: {err['msg']}"
