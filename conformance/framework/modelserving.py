"""What a conformance test does with ModelServings, in the words of the spec.

Tests never derive names the spec leaves open. A ModelServing's Pods are found by a label query
over Pods, as the spec's ``status.labelSelector`` ("a label query over pods") finds them, with a
label the suite itself puts on every template the ModelServing has (``conformance.kthena.io/
modelserving: <name>``, added when the test creates or patches the ModelServing): a template is
"the data a pod should have when created from a template", so its labels reach the Pods, whoever
owns them (the ModelServing, or an intermediate object of the implementation's). A Pod whose
controller ``ownerReference`` is the ModelServing counts too (the garbage-collection convention;
a converter's child ModelServing has templates the suite did not write). Which Pod is an entry or
a worker, and of which Role, is read from labels the test itself put on the templates
(``conformance.kthena.io/role`` and ``conformance.kthena.io/member``). Every
wait is named after an entry of :mod:`.timeouts`, so its maximum is documented, scaled and
reported.

Which ServingGroup and Role instance a Pod belongs to the spec does not say: where a test needs
it, the label keys come from the implementation's declaration (:class:`~.support.PodLabels`,
upstream Kthena's by default), never from a name.

Status counters (``replicas``, ``availableReplicas``, ...) omitted from status read as 0: a Go
implementation's ``omitempty`` drops them at 0, which says 0, not "not reported yet"
(``observedGeneration`` still tells whether the status is current).
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

from . import early_stop
from .support import PodLabels
from .timeouts import Timeouts
from .waits import WaitDecided, WaitTimeout, wait_for

GROUP, VERSION, PLURAL, KIND = "workload.serving.volcano.sh", "v1alpha1", "modelservings", "ModelServing"
ROLE_LABEL = "conformance.kthena.io/role"
MEMBER_LABEL = "conformance.kthena.io/member"  # "entry" | "worker"
RUN_LABEL = "conformance.kthena.io/run-id"
MS_LABEL = "conformance.kthena.io/modelserving"  # on every template of a test's ModelServing: its name
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")

T = TypeVar("T")


REFUSED = (400, 403, 422)  # how an API server refuses an invalid write (admission webhook, schema or CEL)
# Status counters: omitted (Go ``omitempty`` at 0) means 0.
COUNTERS = ("replicas", "currentReplicas", "updatedReplicas", "availableReplicas")


@dataclass(frozen=True)
class Rejection:
    """The API server refused a write (admission, schema or CEL): its HTTP status and message."""

    status: int
    reason: str
    message: str


def expect_refused(rejection: Rejection | None, what: str) -> Rejection:
    """``what`` was refused as invalid (HTTP 400/403/422). The message is not judged here: its
    wording differs between CEL, the OpenAPI schema and a webhook (see :func:`names_field`)."""
    assert rejection is not None, f"expected {what} to be rejected; it was accepted"
    assert rejection.status in REFUSED, (
        f"expected {what} to be refused with HTTP {'/'.join(map(str, REFUSED))}; seen {rejection.status}: "
        f"{rejection.message}"
    )
    return rejection


def names_field(rejection: Rejection, field: str) -> bool:
    """Whether a refusal's message names ``field`` (a path such as ``roles[0].name``; the message
    may give it with a prefix such as ``spec.template.``). Pure."""
    return field in rejection.message


def counters(status: dict[str, Any] | None) -> dict[str, Any]:
    """``status`` with every counter of :data:`COUNTERS` present (omitted reads as 0). Pure."""
    out = dict(status or {})
    for key in COUNTERS:
        if out.get(key) is None:
            out[key] = 0
    return out


class Manifest(dict[str, Any]):
    """A ModelServing body loaded from the suite's manifests; ``source`` names its file (failure
    messages say which manifest an implementation refused). Deep copies keep it."""

    def __init__(self, data: dict[str, Any] | None = None, *, source: str = "") -> None:
        super().__init__(data or {})
        self.source = source


class RefusedManifest(AssertionError):
    """The implementation refused a ModelServing (or a change) the spec allows: the test's own,
    valid manifest. An AssertionError, so the behaviour is non-conformant (not an error)."""


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
        """The API server refused it: any 4xx but 404 (the Pod gone). A PodDisruptionBudget answers
        429; an admission webhook on ``pods/eviction`` may answer 429 or another code (403 by
        default). Which code is the convention, not the refusal (spec reading: eviction refusals)."""
        return 400 <= self.status < 500 and self.status != 404

    @property
    def too_many_requests(self) -> bool:
        """Refused with HTTP 429 Too Many Requests, what PodDisruptionBudgets answer and ``kubectl
        drain`` retries."""
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


def label_templates(spec: Any, name: str) -> None:
    """Put ``MS_LABEL: name`` on every Pod template of a ModelServing ``spec`` (in place), where the
    spec has a well-formed Role list and ``name`` is a valid label value; anything else is left as
    it is (an admission test's malformed body stays malformed). Pure."""
    if not isinstance(spec, dict) or len(name) > 63 or not _LABEL_VALUE.match(name):
        return
    roles = (spec.get("template") or {}).get("roles") if isinstance(spec.get("template"), dict) else None
    for role in roles if isinstance(roles, list) else []:
        for kind in ("entryTemplate", "workerTemplate"):
            template = role.get(kind) if isinstance(role, dict) else None
            if not isinstance(template, dict):
                continue
            meta = template.setdefault("metadata", {})
            labels = meta.setdefault("labels", {}) if isinstance(meta, dict) else None
            if isinstance(labels, dict):
                labels.setdefault(MS_LABEL, name)


def belongs(meta: dict[str, Any], name: str, uid: str) -> bool:
    """Whether a Pod (its metadata as JSON) is ModelServing ``name``'s (uid ``uid``): it carries the
    suite's template label for it, or its controller ownerReference is it. Pure."""
    if (meta.get("labels") or {}).get(MS_LABEL) == name:
        return True
    return any(r.get("uid") == uid and r.get("controller") for r in meta.get("ownerReferences") or [])


def _meta_json(meta: Any) -> dict[str, Any]:
    """What :func:`belongs` reads of a client object's metadata, as JSON."""
    refs = [{"uid": r.uid, "controller": r.controller} for r in meta.owner_references or []]
    return {"labels": meta.labels or {}, "ownerReferences": refs}


def running_ready(pod: Any) -> bool:
    if pod.metadata.deletion_timestamp or not pod.status or pod.status.phase != "Running":
        return False
    return any(c.type == "Ready" and c.status == "True" for c in pod.status.conditions or [])


def pods_in_words(namespace: str, name: str, pods: list[Any]) -> str:
    """What ``pods`` (a ModelServing's) are, for a failure message. Pure."""
    if not pods:
        return (
            f"no Pod of ModelServing {namespace}/{name} exists (label {MS_LABEL}={name}, or a controller "
            "ownerReference to it)"
        )

    def state(pod: Any) -> str:
        if pod.metadata.deletion_timestamp:
            return "deleting"
        phase = pod.status.phase if pod.status and pod.status.phase else "no phase yet"
        return f"{phase}, {'Ready' if running_ready(pod) else 'not Ready'}"

    return f"{len(pods)} Pod(s): " + ", ".join(f"{p.metadata.name} ({state(p)})" for p in pods)


def member(pod: Any) -> str:
    return str((pod.metadata.labels or {}).get(MEMBER_LABEL, ""))


def role_of(pod: Any) -> str:
    return str((pod.metadata.labels or {}).get(ROLE_LABEL, ""))


ENGINE = "engine"  # the name of the main container in the suite's templates


def container_of(pod: Any, name: str = ENGINE) -> Any:
    """The Pod's container named ``name`` (the template's; an implementation may add containers,
    before or after it), else its only container. Raises Inconclusive when there is no such one."""
    from .outcomes import Inconclusive

    containers = pod.spec.containers or []
    found = next((c for c in containers if c.name == name), None)
    if found is None and len(containers) == 1:
        found = containers[0]
    if found is None:
        raise Inconclusive(
            f"Pod {pod.metadata.name} has no container named {name!r} (containers: {[c.name for c in containers]})"
        )
    return found


def env_of(pod: Any, container: int | str = ENGINE) -> dict[str, str]:
    """Env of the Pod's container ``container``: an index into spec.containers, or a name (the
    template's container, :func:`container_of`)."""
    chosen = pod.spec.containers[container] if isinstance(container, int) else container_of(pod, container)
    return {e.name: e.value for e in chosen.env or []}


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

    def __init__(
        self,
        kube: Any,
        namespace: str,
        timeouts: Timeouts,
        run_id: str = "",
        pod_labels: PodLabels | None = None,
        controller_log: Path | None = None,
    ) -> None:
        self.kube = kube
        self.ns = namespace
        self.timeouts = timeouts
        self.run_id = run_id
        self.pod_labels = pod_labels or PodLabels()  # the implementation's declared Pod label keys
        self.created: list[str] = []  # in creation order (cleanup goes in reverse)
        # the implementation's log from the test's start: what it says about this test's objects
        self._log = early_stop.LogTail.from_now(controller_log) if controller_log is not None else None
        self._log_lines: list[str] = []

    # -- writes ---------------------------------------------------------------------------------

    def _prepare(self, body: dict[str, Any]) -> dict[str, Any]:
        out = copy.deepcopy(body)
        meta = out.setdefault("metadata", {})
        label_templates(out.get("spec"), str(meta.get("name", "")))
        meta["namespace"] = self.ns
        if self.run_id:
            meta.setdefault("labels", {})[RUN_LABEL] = self.run_id
        out.setdefault("apiVersion", f"{GROUP}/{VERSION}")
        out.setdefault("kind", KIND)
        return out

    def create(self, body: dict[str, Any]) -> dict[str, Any]:
        """Create the test's own (valid) ModelServing; a refusal is :class:`RefusedManifest`."""
        try:
            return self._create(body)
        except Exception as exc:
            raise _refused_valid(exc, f"the creation of ModelServing {self.ns}/{_name(body)}{_source(body)}") from None

    def _create(self, body: dict[str, Any]) -> dict[str, Any]:
        obj = dict(
            self.kube.custom.create_namespaced_custom_object(GROUP, VERSION, self.ns, PLURAL, self._prepare(body))
        )
        self.created.append(obj["metadata"]["name"])
        return obj

    def try_create(self, body: dict[str, Any]) -> Rejection | None:
        """Create, expecting a possible refusal: the Rejection, or None when it was accepted."""
        try:
            self._create(body)
        except Exception as exc:
            return _rejection(exc)
        return None

    def refused_create(self, body: dict[str, Any], what: str) -> Rejection:
        """``body`` (invalid) must be refused at admission and not stored."""
        rejection = expect_refused(self.try_create(body), what)
        name = _name(body)
        stored = self.exists(name)
        assert not stored, f"{what} was answered HTTP {rejection.status} but ModelServing {self.ns}/{name} exists"
        return rejection

    def refused_patch(self, name: str, merge_patch: dict[str, Any], what: str) -> Rejection:
        """``merge_patch`` (an invalid change) must be refused and leave the stored spec unchanged."""
        before = self.get(name)
        rejection = expect_refused(self.try_patch(name, merge_patch), what)
        after = self.get(name)
        assert after.get("spec") == before.get("spec"), (
            f"{what} was answered HTTP {rejection.status} but the stored spec changed: before {before.get('spec')}, "
            f"after {after.get('spec')}"
        )
        return rejection

    def exists(self, name: str) -> bool:
        from kubernetes.client.exceptions import ApiException

        try:
            self.get(name)
        except ApiException as exc:
            if exc.status == 404:
                return False
            raise
        return True

    def get(self, name: str) -> dict[str, Any]:
        return dict(self.kube.custom.get_namespaced_custom_object(GROUP, VERSION, self.ns, PLURAL, name))

    def patch(self, name: str, merge_patch: dict[str, Any]) -> dict[str, Any]:
        """A JSON merge patch (never a read-modify-write: the controller writes status meanwhile) of
        a change the spec allows; a refusal is :class:`RefusedManifest`."""
        try:
            return self._patch(name, merge_patch)
        except Exception as exc:
            raise _refused_valid(exc, f"the change {merge_patch} of ModelServing {self.ns}/{name}") from None

    def _patch(self, name: str, merge_patch: dict[str, Any]) -> dict[str, Any]:
        merge_patch = copy.deepcopy(merge_patch)
        label_templates(merge_patch.get("spec"), name)  # a merge patch replaces the Role list whole
        return dict(
            self.kube.custom.patch_namespaced_custom_object(
                GROUP, VERSION, self.ns, PLURAL, name, merge_patch, _content_type="application/merge-patch+json"
            )
        )

    def try_patch(self, name: str, merge_patch: dict[str, Any]) -> Rejection | None:
        try:
            self._patch(name, merge_patch)
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
        """This ModelServing's Pods (:func:`belongs`), sorted by name."""
        uid = self.get(name)["metadata"]["uid"]
        items = self.kube.core.list_namespaced_pod(self.ns).items
        owned = [p for p in items if belongs(_meta_json(p.metadata), name, uid)]
        return sorted(owned, key=lambda p: p.metadata.name)

    def uids(self, name: str) -> dict[str, str]:
        return {p.metadata.name: p.metadata.uid for p in self.pods(name)}

    def events(self, name: str) -> list[Any]:
        """Events about the ModelServing or about one of its Pods (core/v1): the spec names Events
        ("reports ... via Kubernetes Events") without fixing their involved object, and an
        implementation may report an update of a Pod on that Pod."""
        items = self.kube.core.list_namespaced_event(self.ns).items
        about = [e for e in items if e.involved_object is not None]
        mine = [e for e in about if e.involved_object.kind == KIND and e.involved_object.name == name]
        if any(e.involved_object.kind == "Pod" for e in about):
            try:
                pods = {p.metadata.name for p in self.pods(name)}
            except Exception:  # the ModelServing is gone: Events about it still count
                pods = set()
            mine += [e for e in about if e.involved_object.kind == "Pod" and e.involved_object.name in pods]
        return mine

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

    def wait(
        self,
        wait: str,
        what: str,
        probe: Callable[[], T],
        until: Callable[[T], bool] = bool,
        describe: Callable[[T], str] | None = None,
    ) -> T:
        return wait_for(what, probe, until=until, timeout=self.timeouts.seconds(wait), interval=0.2, describe=describe)

    def wait_pods(self, name: str, count: int, *, ready: bool = True, wait: str = "pods-running") -> list[Any]:
        """Exactly ``count`` live Pods (all Running and Ready unless ``ready`` is False). On timeout
        the message says in words what there was (no Pod at all, or each Pod's state) and quotes
        the ModelServing's Warning Events, where an implementation reports why it created nothing."""

        def settled(pods: list[Any]) -> bool:
            live = [p for p in pods if not p.metadata.deletion_timestamp]
            return len(pods) == count and len(live) == count and (not ready or all(running_ready(p) for p in live))

        what = f"{count} Pods of {self.ns}/{name}{' Running and Ready' if ready else ''}"
        words = partial(pods_in_words, self.ns, name)
        seconds = self.timeouts.seconds(wait)
        try:
            return wait_for(what, lambda: self.pods(name), until=settled, timeout=seconds, interval=0.2,
                            describe=words, give_up=self._nothing_created(name))  # fmt: skip
        except WaitDecided:
            raise  # its message quotes the reports it gave up on
        except WaitTimeout as exc:
            raise WaitTimeout(f"{exc}{self._warnings(name)}") from None

    def _nothing_created(self, name: str) -> Callable[[list[Any], float], str | None]:
        """A ``give_up`` for :func:`wait_for` (see :mod:`.early_stop`): the wait for ``name``'s Pods
        ends early once nothing was created and the implementation keeps reporting an error about
        it. Events and the log are read at most once a second."""
        checked = [0.0]

        def give_up(pods: list[Any], elapsed: float) -> str | None:
            if pods or elapsed < early_stop.MIN_ELAPSED or elapsed - checked[0] < 1.0:
                return None
            checked[0] = elapsed
            if self._log is not None:
                self._log_lines.extend(line for line in self._log.new_lines() if self.ns in line)
            try:
                warnings = [early_stop.WarningEvent(e.reason or "", e.message or "", e.count or 1)
                            for e in self.events(name) if e.type == "Warning"]  # fmt: skip
            except Exception:  # an unreadable Event list only means no early stop
                warnings = []
            errors = early_stop.error_lines(self._log_lines, self.ns, name)
            return early_stop.decided(created=len(pods), elapsed=elapsed, warnings=warnings, log_errors=errors,
                                      namespace=self.ns, name=name)  # fmt: skip

        return give_up

    def _warnings(self, name: str) -> str:
        """``; Warning Events of ns/name: reason: message, ...`` (empty when there are none or
        they cannot be read): what an implementation says about a ModelServing it did not act on."""
        try:
            warnings = [e for e in self.events(name) if e.type == "Warning"]
        except Exception:  # the message must not hide the timeout behind an API error
            return ""
        if not warnings:
            return f"; no Warning Event about {self.ns}/{name}"
        shown = ", ".join(f"{e.reason}: {e.message}" for e in warnings[-3:])
        return f"; Warning Events of {self.ns}/{name}: {shown}"

    def status_summary(self, name: str) -> dict[str, Any]:
        """status without conditions, plus ``metadata.generation`` and ``spec.replicas``: what
        the status waits compare (and what a timeout shows)."""
        obj = self.get(name)
        seen = {k: v for k, v in counters(obj.get("status")).items() if k != "conditions"}
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

    def holds(
        self,
        what: str,
        probe: Callable[[], T],
        check: Callable[[T], bool],
        *,
        wait: str = "steady-state",
        settled: Callable[[], bool] | None = None,
    ) -> T:
        """``check`` holds on every observation for the whole ``wait`` window (a "must not change"
        assertion); fails at the first observation where it does not. ``settled`` (see
        :func:`.waits.holds_for`) ends the window early on an event the implementation shows."""
        from .waits import holds_for

        return holds_for(what, probe, check, seconds=self.timeouts.seconds(wait), settled=settled)


def _name(body: dict[str, Any]) -> str:
    return str((body.get("metadata") or {}).get("name", ""))


def _source(body: dict[str, Any]) -> str:
    """`` (manifest <file>)`` when the body came from the suite's manifests, else empty."""
    source = getattr(body, "source", "")
    return f" (manifest {source})" if source else ""


def _refused_valid(exc: Exception, what: str) -> Exception:
    """What a refused write of a valid object becomes: :class:`RefusedManifest` with the refusal
    text for an HTTP 4xx refusal (the implementation judged the spec wrongly), else ``exc``."""
    try:
        rejection = _rejection(exc)
    except Exception:
        return exc
    if not 400 <= rejection.status < 500 or rejection.status in (404, 409):
        return exc  # gone or conflicting: a harness or cluster problem, not a judgement of the spec
    return RefusedManifest(
        f"the implementation refused {what}, which the spec allows: HTTP {rejection.status}"
        f"{' ' + rejection.reason if rejection.reason else ''}: {rejection.message}"
    )


def rejection_of(exc: Exception) -> Rejection:
    """The :class:`Rejection` an ApiException carries (a server failure is raised again: not a refusal)."""
    return _rejection(exc)


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
