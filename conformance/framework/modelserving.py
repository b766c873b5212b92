"""What a conformance test does with ModelServings, in the words of the spec.

Tests never derive names the spec leaves open: a ModelServing's Pods are the Pods whose
controller ``ownerReference`` is that ModelServing (the Kubernetes convention every controller
follows for garbage collection); which Pod is an entry or a worker, and of which Role, is read
from labels the test itself put on the templates (``conformance.kthena.io/role`` and
``conformance.kthena.io/member``), which the API reference says Pods are created from. Every
wait is named after an entry of :mod:`.timeouts`, so its maximum is documented, scaled and
reported.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from .timeouts import Timeouts
from .waits import wait_for

GROUP, VERSION, PLURAL, KIND = "workload.serving.volcano.sh", "v1alpha1", "modelservings", "ModelServing"
ROLE_LABEL = "conformance.kthena.io/role"
MEMBER_LABEL = "conformance.kthena.io/member"  # "entry" | "worker"
RUN_LABEL = "conformance.kthena.io/run-id"

T = TypeVar("T")


REFUSED = (400, 403, 422)  # how an API server refuses an invalid write (admission webhook, schema or CEL)


@dataclass(frozen=True)
class Rejection:
    """The API server refused a write (admission, schema or CEL): its HTTP status and message."""

    status: int
    reason: str
    message: str


def expect_refused(rejection: Rejection | None, what: str, field: str | None = None) -> Rejection:
    """``what`` was refused as invalid (HTTP 400/403/422), naming ``field`` when given."""
    assert rejection is not None, f"expected {what} to be rejected; it was accepted"
    assert rejection.status in REFUSED, (
        f"expected {what} to be refused with HTTP {'/'.join(map(str, REFUSED))}; seen {rejection.status}: "
        f"{rejection.message}"
    )
    if field is not None:
        assert field in rejection.message, (
            f"expected the rejection of {what} to name the field {field!r}; message: {rejection.message!r}"
        )
    return rejection


@dataclass(frozen=True)
class EvictionAnswer:
    """The Eviction API's answer to one ``policy/v1`` Eviction: its HTTP status and message."""

    pod: str
    status: int
    message: str

    @property
    def allowed(self) -> bool:
        """The API server evicted the Pod (201 Created; 200 from older servers)."""
        return self.status in (200, 201)

    @property
    def refused(self) -> bool:
        """The budget refused it (HTTP 429 Too Many Requests, what ``kubectl drain`` retries)."""
        return self.status == 429

    def describe(self) -> str:
        return f"{self.pod}: HTTP {self.status}{': ' + self.message if self.message else ''}"


def evict(kube: Any, namespace: str, pod: str) -> EvictionAnswer:
    """POST a ``policy/v1`` Eviction for ``pod`` (the ``pods/eviction`` subresource, as ``kubectl
    drain`` does) and return the answer. 404 (the Pod is gone) and every 4xx are answers; a 5xx
    that no admission webhook gave, or no HTTP answer at all, raises :class:`~.outcomes.Inconclusive`."""
    import json

    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    from .outcomes import Inconclusive

    body = client.V1Eviction(metadata=client.V1ObjectMeta(name=pod, namespace=namespace))
    try:
        response = kube.core.create_namespaced_pod_eviction(pod, namespace, body, _preload_content=False)
    except ApiException as exc:
        if exc.status is None or (exc.status >= 500 and "admission webhook" not in str(exc.body or "")):
            raise Inconclusive(
                f"the Eviction of {namespace}/{pod} failed on the server: {exc.status} {exc.reason}"
            ) from exc
        try:
            payload = json.loads(exc.body or "{}")
        except ValueError:
            payload = {}
        message = payload.get("message") if isinstance(payload, dict) else None
        return EvictionAnswer(pod, int(exc.status), str(message or exc.reason or ""))
    return EvictionAnswer(pod, int(response.status), "")


def running_ready(pod: Any) -> bool:
    if pod.metadata.deletion_timestamp or not pod.status or pod.status.phase != "Running":
        return False
    return any(c.type == "Ready" and c.status == "True" for c in pod.status.conditions or [])


def member(pod: Any) -> str:
    return str((pod.metadata.labels or {}).get(MEMBER_LABEL, ""))


def role_of(pod: Any) -> str:
    return str((pod.metadata.labels or {}).get(ROLE_LABEL, ""))


def env_of(pod: Any, container: int = 0) -> dict[str, str]:
    return {e.name: e.value for e in pod.spec.containers[container].env or []}


def expected_pod_count(body: dict[str, Any], replicas: int | None = None) -> int:
    """Pods a ModelServing asks for: replicas x sum over roles of replicas x (1 + workerReplicas)."""
    spec = body["spec"]
    groups = spec.get("replicas", 1) if replicas is None else replicas
    per_group = sum(r.get("replicas", 1) * (1 + r.get("workerReplicas", 0)) for r in spec["template"]["roles"])
    return int(groups * per_group)


def condition(obj: dict[str, Any], kind: str) -> dict[str, Any] | None:
    return next((c for c in (obj.get("status") or {}).get("conditions") or [] if c.get("type") == kind), None)


class ModelServings:
    """ModelServings and what they own, in one test namespace."""

    def __init__(self, kube: Any, namespace: str, timeouts: Timeouts, run_id: str = "") -> None:
        self.kube = kube
        self.ns = namespace
        self.timeouts = timeouts
        self.run_id = run_id
        self.created: list[str] = []  # in creation order (cleanup goes in reverse)

    # -- writes ---------------------------------------------------------------------------------

    def _prepare(self, body: dict[str, Any]) -> dict[str, Any]:
        out = copy.deepcopy(body)
        meta = out.setdefault("metadata", {})
        meta["namespace"] = self.ns
        if self.run_id:
            meta.setdefault("labels", {})[RUN_LABEL] = self.run_id
        out.setdefault("apiVersion", f"{GROUP}/{VERSION}")
        out.setdefault("kind", KIND)
        return out

    def create(self, body: dict[str, Any]) -> dict[str, Any]:
        obj = dict(
            self.kube.custom.create_namespaced_custom_object(GROUP, VERSION, self.ns, PLURAL, self._prepare(body))
        )
        self.created.append(obj["metadata"]["name"])
        return obj

    def try_create(self, body: dict[str, Any]) -> Rejection | None:
        """Create, expecting a possible refusal: the Rejection, or None when it was accepted."""
        try:
            self.create(body)
        except Exception as exc:
            return _rejection(exc)
        return None

    def get(self, name: str) -> dict[str, Any]:
        return dict(self.kube.custom.get_namespaced_custom_object(GROUP, VERSION, self.ns, PLURAL, name))

    def patch(self, name: str, merge_patch: dict[str, Any]) -> dict[str, Any]:
        """A JSON merge patch (never a read-modify-write: the controller writes status meanwhile)."""
        return dict(
            self.kube.custom.patch_namespaced_custom_object(
                GROUP, VERSION, self.ns, PLURAL, name, merge_patch, _content_type="application/merge-patch+json"
            )
        )

    def try_patch(self, name: str, merge_patch: dict[str, Any]) -> Rejection | None:
        try:
            self.patch(name, merge_patch)
        except Exception as exc:
            return _rejection(exc)
        return None

    def scale(self, name: str, replicas: int) -> dict[str, Any]:
        """Through the scale subresource, as an autoscaler or ``kubectl scale`` would."""
        return dict(
            self.kube.custom.patch_namespaced_custom_object_scale(
                GROUP, VERSION, self.ns, PLURAL, name, {"spec": {"replicas": replicas}},
                _content_type="application/merge-patch+json",
            )
        )  # fmt: skip

    def get_scale(self, name: str) -> dict[str, Any]:
        return dict(self.kube.custom.get_namespaced_custom_object_scale(GROUP, VERSION, self.ns, PLURAL, name))

    def delete(self, name: str, propagation: str = "Background") -> None:
        self.kube.custom.delete_namespaced_custom_object(
            GROUP, VERSION, self.ns, PLURAL, name, propagation_policy=propagation
        )

    # -- reads ----------------------------------------------------------------------------------

    def pods(self, name: str) -> list[Any]:
        """The Pods this ModelServing controls (by controller ownerReference), sorted by name."""
        uid = self.get(name)["metadata"]["uid"]
        items = self.kube.core.list_namespaced_pod(self.ns).items
        owned = [p for p in items if any(r.uid == uid and r.controller for r in p.metadata.owner_references or [])]
        return sorted(owned, key=lambda p: p.metadata.name)

    def uids(self, name: str) -> dict[str, str]:
        return {p.metadata.name: p.metadata.uid for p in self.pods(name)}

    def events(self, name: str) -> list[Any]:
        """Events about the ModelServing (core/v1, as ``kubectl describe`` shows them)."""
        items = self.kube.core.list_namespaced_event(self.ns).items
        return [e for e in items if e.involved_object and e.involved_object.name == name
                and e.involved_object.kind == KIND]  # fmt: skip

    def services(self) -> dict[str, Any]:
        return {s.metadata.name: s for s in self.kube.core.list_namespaced_service(self.ns).items}

    def endpoints(self, service: str) -> dict[str, dict[str, Any]]:
        """EndpointSlice endpoints of ``service``: pod name -> {hostname, ready}."""
        slices = self.kube.discovery.list_namespaced_endpoint_slice(
            self.ns, label_selector=f"kubernetes.io/service-name={service}"
        ).items
        out: dict[str, dict[str, Any]] = {}
        for s in slices:
            for ep in s.endpoints or []:
                if ep.target_ref is not None:
                    ready = bool(ep.conditions.ready) if ep.conditions and ep.conditions.ready is not None else True
                    out[ep.target_ref.name] = {"hostname": ep.hostname, "ready": ready}
        return out

    def evict(self, pod: str) -> EvictionAnswer:
        """A ``policy/v1`` Eviction of ``pod`` in this namespace (see :func:`evict`)."""
        return evict(self.kube, self.ns, pod)

    # -- waits (each named after a documented timeout) ------------------------------------------

    def wait(self, wait: str, what: str, probe: Callable[[], T], until: Callable[[T], bool] = bool) -> T:
        return wait_for(what, probe, until=until, timeout=self.timeouts.seconds(wait), interval=0.2)

    def wait_pods(self, name: str, count: int, *, ready: bool = True, wait: str = "pods-running") -> list[Any]:
        """Exactly ``count`` live Pods (all Running and Ready unless ``ready`` is False)."""

        def settled(pods: list[Any]) -> bool:
            live = [p for p in pods if not p.metadata.deletion_timestamp]
            return len(pods) == count and len(live) == count and (not ready or all(running_ready(p) for p in live))

        return self.wait(wait, f"{count} Pods of {self.ns}/{name}{' Running and Ready' if ready else ''}",
                         lambda: self.pods(name), settled)  # fmt: skip

    def status_summary(self, name: str) -> dict[str, Any]:
        """status without conditions, plus ``metadata.generation`` and ``spec.replicas``: what
        the status waits compare (and what a timeout shows)."""
        obj = self.get(name)
        seen = {k: v for k, v in (obj.get("status") or {}).items() if k != "conditions"}
        seen["metadata.generation"] = obj["metadata"].get("generation")
        seen["spec.replicas"] = obj["spec"].get("replicas", 1)
        return seen

    def wait_observed(self, name: str, *, wait: str = "status-updated") -> dict[str, Any]:
        """status reports the current generation and status.replicas == spec.replicas
        (availability not included); returns the summary."""

        def done(seen: dict[str, Any]) -> bool:
            return bool(
                seen.get("observedGeneration") == seen["metadata.generation"]
                and seen.get("replicas") == seen["spec.replicas"]
            )

        return self.wait(wait, f"status of {self.ns}/{name} to report the current generation and spec.replicas",
                         lambda: self.status_summary(name), done)  # fmt: skip

    def wait_settled(self, name: str, *, wait: str = "servinggroups-ready") -> dict[str, Any]:
        """status caught up with the spec: observedGeneration current, every ServingGroup available."""

        def done(seen: dict[str, Any]) -> bool:
            return bool(
                seen.get("observedGeneration") == seen["metadata.generation"]
                and seen.get("replicas") == seen["spec.replicas"]
                and seen.get("availableReplicas") == seen["spec.replicas"]
            )

        self.wait(wait, f"{self.ns}/{name} status to settle at spec.replicas", lambda: self.status_summary(name), done)
        return self.get(name)

    def wait_updated(self, name: str, updated: int | None = None, *, wait: str = "status-updated") -> dict[str, Any]:
        """status reports the current generation, status.replicas == spec.replicas and
        status.updatedReplicas == ``updated`` (spec.replicas when None); returns the summary."""

        def done(seen: dict[str, Any]) -> bool:
            want = seen["spec.replicas"] if updated is None else updated
            return bool(
                seen.get("observedGeneration") == seen["metadata.generation"]
                and seen.get("replicas") == seen["spec.replicas"]
                and seen.get("updatedReplicas") == want
            )

        what = "spec.replicas" if updated is None else str(updated)
        return self.wait(wait, f"status of {self.ns}/{name} to report the current generation and updatedReplicas "
                         f"= {what}", lambda: self.status_summary(name), done)  # fmt: skip

    def wait_event(self, name: str, reason: str, *, wait: str = "events") -> Any:
        return self.wait(
            wait, f"an Event with reason {reason} on {self.ns}/{name}",
            lambda: [e for e in self.events(name) if e.reason == reason], bool,
        )[0]  # fmt: skip

    def wait_reported(self, name: str, reason: str, *, wait: str = "events") -> str:
        """An Event with ``reason`` or a status condition of that type/reason (spec reading 11)."""

        def found() -> str:
            events = [e for e in self.events(name) if e.reason == reason]
            if events:
                return f"Event: {events[0].message}"
            obj = self.get(name)
            for c in (obj.get("status") or {}).get("conditions") or []:
                if reason in (c.get("type"), c.get("reason")) and c.get("status") == "True":
                    return f"condition: {c.get('message', '')}"
            return ""

        return self.wait(wait, f"{reason} reported for {self.ns}/{name}", found, bool)

    def holds(self, what: str, probe: Callable[[], T], check: Callable[[T], bool], *, wait: str = "steady-state") -> T:
        """``check`` holds on every observation for the whole ``steady-state`` window (a "must
        not change" assertion); fails at the first observation where it does not."""
        from .waits import holds_for

        return holds_for(what, probe, check, seconds=self.timeouts.seconds(wait))


def _rejection(exc: Exception) -> Rejection:
    from kubernetes.client.exceptions import ApiException

    if not isinstance(exc, ApiException):
        raise exc
    if exc.status is None or (exc.status >= 500 and "admission webhook" not in str(exc.body or "")):
        raise exc  # the server failed: inconclusive, not a refusal
    import json

    try:
        body = json.loads(exc.body or "{}")
    except ValueError:
        body = {}
    return Rejection(int(exc.status), str(body.get("reason", "")), str(body.get("message", exc.reason or "")))
