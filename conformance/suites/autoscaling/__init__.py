"""Autoscaling: what an AutoscalingPolicy does to its ModelServing, driven by a real Prometheus.

**The signal.** The suite runs a metrics endpoint it sets and a real Prometheus server scraping
it every second (``conformance.cluster.local.prometheus``; the binary from the binary cache). Each
test's policy uses a Prometheus metric source whose ``serverURL`` is that server and whose query
sums the test's own series (``conformance_load{namespace="<ns>", name="<name>"}``), so tests never
see each other's signal. The server runs on the machine running the suite, at the address the
cluster's workloads reach it at (``conformance.cluster.runner_address``): ``--runner-address``, else
the provider's (kind: its Docker network's gateway), else 127.0.0.1 (a controller on the same host,
the embedded cluster's default). Without the binary, or when it does not start there, the test is
inconclusive, never a pass.

**Timing.** The spec gives no loop period, no averaging window and no stabilisation: the waits
cover upstream Kthena's (15 s loops, a 60 s panic hold, a 300 s scale-down stabilisation) as well
as the reference's (2 s loops, a 60 s stable window) and are named waits a user can scale:
``autoscale`` (a scale up), ``autoscale-down`` (a scale down) and ``autoscale-steady`` (how long a
"must not change" observation lasts at most: two 15 s loops). The suite never waits out a loop
period it does not know: a "must not change" observation ends early on an event, the policy's
status (of its current generation) reporting that the autoscaler wants the replicas the unit has
(``currentReplicas`` and ``desiredReplicas`` both equal to them, :func:`settled_homogeneous`,
:func:`settled_roles`, :func:`settled_groups`); an implementation that reports no such status gets
the whole ``autoscale-steady`` window instead (reading A24, docs/autoscaling-readings.md).

**Readings** (docs/autoscaling-readings.md). Only loads whose replica count is exact are used
(30 for a target of 10 is 3 replicas under any rounding); the tolerance boundary, panic mode and
which side of a ratio moves are never asserted; a metric that cannot be read must change nothing.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from conformance.framework.modelserving import ModelServings
from conformance.framework.outcomes import Inconclusive

API = "api-reference-workload-v1alpha1.txt"
GROUP, VERSION, POLICIES = "workload.serving.volcano.sh", "v1alpha1", "autoscalingpolicies"
SERIES = "conformance_load"
TARGET_VALUE = 10  # every policy's metric target: a load of 10 per replica


class Signal:
    """The suite's metrics endpoint and the Prometheus server scraping it."""

    def __init__(self, endpoint: Any, prometheus: Any) -> None:
        self.endpoint = endpoint
        self.prometheus = prometheus

    @property
    def url(self) -> str:
        return str(self.prometheus.url)

    def set(self, ms: ModelServings, name: str, value: float) -> None:
        """Set the test's series ``name`` (in its namespace) to ``value``."""
        self.endpoint.set(SERIES, value, {"namespace": ms.ns, "name": name})

    def query(self, ms: ModelServings, name: str) -> str:
        return f'sum({SERIES}{{namespace="{ms.ns}",name="{name}"}})'

    def source(
        self, ms: ModelServings, name: str, *, query: str | None = None, url: str | None = None
    ) -> dict[str, Any]:
        """A MetricSource reading the test's series ``name`` from the suite's Prometheus."""
        return {"prometheus": {"serverURL": url or self.url, "query": query or self.query(ms, name)}}

    def seen(self, ms: ModelServings, name: str, value: float) -> None:
        """Wait until Prometheus answers the test's query with ``value`` (the signal is in place)."""
        query = self.query(ms, name)
        ms.wait("autoscale", f"Prometheus to report {query} = {value:g}", lambda: self.prometheus.query_value(query),
                until=lambda v: v is not None and abs(float(v) - value) < 1e-9)  # fmt: skip


_lock = threading.Lock()
_started: list[Signal] = []


@pytest.fixture(scope="session")
def signal(suite: Any) -> Iterator[Signal]:
    """The suite's metrics endpoint and Prometheus server, started once per test process at the
    runner address (see the module's description)."""
    from conformance.cluster.errors import HarnessError
    from conformance.cluster.local.prometheus import MetricsEndpoint, Prometheus, prometheus_binary

    address, origin = suite.runner_address()
    with _lock:
        try:
            binary = prometheus_binary()
        except HarnessError as exc:
            raise Inconclusive(f"no Prometheus server for the autoscaling tests: {exc}") from None
        endpoint = MetricsEndpoint().start()
        try:
            prometheus = Prometheus(binary, targets=[endpoint.address], advertise=address).start()
        except Exception as exc:
            endpoint.stop()
            raise Inconclusive(
                f"the autoscaling tests' Prometheus server did not start at the runner address {address} "
                f"(from {origin}): {exc}"
            ) from None
    try:
        yield Signal(endpoint, prometheus)
    finally:
        prometheus.stop()
        endpoint.stop()


# -- objects ----------------------------------------------------------------------------------


def target(name: str, replicas: int = 1, roles: dict[str, int] | None = None) -> dict[str, Any]:
    """A ModelServing of single-Pod Roles (``roles``: name -> replicas; one Role ``server`` by default)."""
    pod = {"spec": {"containers": [{"name": "engine", "image": "registry.example/engine:v1"}]}}
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "ModelServing",
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "schedulerName": "default-scheduler",
            "template": {
                "roles": [
                    {"name": r, "replicas": n, "workerReplicas": 0, "entryTemplate": pod}
                    for r, n in (roles or {"server": 1}).items()
                ]
            },
        },
    }


def policy_object(name: str, target: dict[str, Any]) -> dict[str, Any]:
    """An AutoscalingPolicy ``name`` with ``target`` (one of the three target fields) on one metric ``load`` of
    target value :data:`TARGET_VALUE`."""
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "AutoscalingPolicy",
        "metadata": {"name": name},
        "spec": {"metrics": [{"name": "load", "targetValue": TARGET_VALUE}], **target},
    }


def homogeneous(name: str, ms_name: str, source: dict[str, Any], low: int, high: int) -> dict[str, Any]:
    """A policy scaling ModelServing ``ms_name`` on one metric ``load`` (target :data:`TARGET_VALUE`)."""
    target = {"targetRef": {"kind": "ModelServing", "name": ms_name}, "metricSources": {"load": source}}
    return policy_object(name, {"homogeneousTarget": {"minReplicas": low, "maxReplicas": high, "target": target}})


class Policies:
    """AutoscalingPolicies in the test's namespace (deleted with it)."""

    def __init__(self, ms: ModelServings) -> None:
        self.ms = ms
        self.custom = ms.kube.custom

    def create(self, body: dict[str, Any]) -> dict[str, Any]:
        from kubernetes.client.exceptions import ApiException

        try:
            return dict(self.custom.create_namespaced_custom_object(GROUP, VERSION, self.ms.ns, POLICIES, body))
        except ApiException as exc:
            if exc.status == 404:
                raise Inconclusive("the cluster does not serve AutoscalingPolicy (its CRD is not installed)") from None
            raise AssertionError(
                f"the valid AutoscalingPolicy {body['metadata']['name']} was refused: HTTP {exc.status} {exc.body}"
            ) from None

    def try_create(self, body: dict[str, Any]) -> Any:
        """The refusal (an ApiException) or None when stored."""
        from kubernetes.client.exceptions import ApiException

        try:
            self.custom.create_namespaced_custom_object(GROUP, VERSION, self.ms.ns, POLICIES, body)
        except ApiException as exc:
            if exc.status == 404 and "autoscalingpolicies" in str(exc.body or ""):
                raise Inconclusive("the cluster does not serve AutoscalingPolicy (its CRD is not installed)") from None
            return exc
        return None

    def get(self, name: str) -> dict[str, Any]:
        return dict(self.custom.get_namespaced_custom_object(GROUP, VERSION, self.ms.ns, POLICIES, name))

    def exists(self, name: str) -> bool:
        from kubernetes.client.exceptions import ApiException

        try:
            self.get(name)
        except ApiException as exc:
            if exc.status == 404:
                return False
            raise
        return True

    def patch(self, name: str, merge_patch: dict[str, Any]) -> None:
        self.custom.patch_namespaced_custom_object(
            GROUP, VERSION, self.ms.ns, POLICIES, name, merge_patch, _content_type="application/merge-patch+json"
        )

    def status(self, name: str) -> dict[str, Any]:
        return dict(self.get(name).get("status") or {})


def replicas_of(ms: ModelServings, name: str) -> Callable[[], int]:
    return lambda: int(ms.get(name)["spec"].get("replicas", 1))


def role_replicas_of(ms: ModelServings, name: str) -> Callable[[], dict[str, int]]:
    def read() -> dict[str, int]:
        roles = ms.get(name)["spec"]["template"]["roles"]
        return {r["name"]: int(r.get("replicas", 1)) for r in roles}

    return read


# -- the event that ends a "must not change" observation (see the module's description) ----------


def _wants(entry: Any, replicas: int) -> bool:
    """A TargetScalingStatus saying the autoscaler saw ``replicas`` and wants them."""
    return isinstance(entry, dict) and entry.get("currentReplicas") == replicas == entry.get("desiredReplicas")


def _status_now(ms: ModelServings, policy: str) -> dict[str, Any] | None:
    """The policy's status when it is of the policy's current generation, else None."""
    obj = Policies(ms).get(policy)
    status = obj.get("status") or {}
    return status if status.get("observedGeneration") == obj["metadata"].get("generation") else None


def settled_homogeneous(ms: ModelServings, policy: str, target: str) -> Callable[[], bool]:
    """The homogeneousStatus reports that the autoscaler wants the replicas ``target`` has."""

    def event() -> bool:
        status = _status_now(ms, policy)
        return status is not None and _wants(status.get("homogeneousStatus"), replicas_of(ms, target)())

    return event


def settled_roles(ms: ModelServings, policy: str, target: str, roles: tuple[str, ...]) -> Callable[[], bool]:
    """The disaggregatedStatus reports that the autoscaler wants the replicas each of ``roles`` of ``target`` has."""

    def event() -> bool:
        status = _status_now(ms, policy)
        if status is None:
            return False
        entries = (status.get("disaggregatedStatus") or {}).get("roles") or []
        named = {e.get("name"): e for e in entries if isinstance(e, dict)}
        have = role_replicas_of(ms, target)()
        return all(r in have and _wants(named.get(r), have[r]) for r in roles)

    return event


def settled_groups(ms: ModelServings, policy: str, targets: tuple[str, ...]) -> Callable[[], bool]:
    """The heterogeneousStatus reports that the autoscaler wants the replicas each of ``targets`` has."""

    def event() -> bool:
        status = _status_now(ms, policy)
        if status is None:
            return False
        named = {e.get("name"): e for e in status.get("heterogeneousStatus") or [] if isinstance(e, dict)}
        return all(_wants(named.get(t), replicas_of(ms, t)()) for t in targets)

    return event
