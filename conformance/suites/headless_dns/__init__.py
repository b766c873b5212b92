"""HeadlessServiceDNS: the headless-service plugin's Entry and Discovery Services and Pod DNS fields.

What the spec leaves to the implementation is read from the objects, never derived from names:
the Discovery Service is the Pod's ``spec.subdomain`` ("Inspect the Pod's spec.subdomain for the
generated discovery name rather than deriving it from ENTRY_ADDRESS"), the Entry Service is the
first label of a worker's ``ENTRY_ADDRESS`` (``<entry-service>.<namespace>``; workers carry it in
every reading, the entry Pod may or may not: spec reading 7), the ModelServing's Pods are those
it controls (ownerReference), and entry vs worker comes from the suite's own template labels.

The helpers here are shared by the package's tests; they only read and write through the
test's ``kube`` / ``ms`` handles.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from conformance.framework.modelserving import ModelServings, env_of, member
from conformance.framework.waits import wait_for

SPEC = "plugin-framework-and-headless-service.txt"
USING_PLUGINS = f"{SPEC}#Using Plugins"
MIGRATION = f"{SPEC}#Upgrade and migration"
PLUGIN_DEVELOPMENT = f"{SPEC}#Developing a Custom Plugin"

ENTRY_ADDRESS = "ENTRY_ADDRESS"
HOLD_FINALIZER = "conformance.kthena.io/hold"  # keeps an object Terminating until the test lets it go
STRATEGIC = "application/strategic-merge-patch+json"


def entries(pods: Iterable[Any]) -> list[Any]:
    return [p for p in pods if member(p) == "entry"]


def workers(pods: Iterable[Any]) -> list[Any]:
    return [p for p in pods if member(p) == "worker"]


def entry_service_of(pod: Any, namespace: str) -> str:
    """The Entry Service a Pod's ENTRY_ADDRESS names; asserts the ``<service>.<namespace>`` form."""
    address = env_of(pod).get(ENTRY_ADDRESS)
    assert address, f"pod {pod.metadata.name} has no {ENTRY_ADDRESS} (env: {sorted(env_of(pod))})"
    service, _, rest = address.partition(".")
    assert service and rest == namespace, (
        f"pod {pod.metadata.name}: {ENTRY_ADDRESS}={address!r} is not <entry-service>.{namespace}"
    )
    return service


def selects(selector: dict[str, str] | None, labels: dict[str, str] | None) -> bool:
    """Does a Service ``selector`` select an object with ``labels`` (an empty selector selects nothing)?"""
    if not selector:
        return False
    have = labels or {}
    return all(have.get(k) == v for k, v in selector.items())


def read_service(ms: ModelServings, name: str) -> Any | None:
    """The Service ``name`` in the test namespace, or None when there is none."""
    from kubernetes.client.exceptions import ApiException

    try:
        return ms.kube.core.read_namespaced_service(name, ms.ns)
    except ApiException as exc:
        if exc.status == 404:
            return None
        raise


def wait_service(ms: ModelServings, name: str, *, other_than: str | None = None) -> Any:
    """The Service ``name`` once it exists and is not terminating (with a UID other than
    ``other_than`` when given: a recreated one)."""

    def ok(svc: Any) -> bool:
        return (
            svc is not None
            and not svc.metadata.deletion_timestamp
            and (other_than is None or svc.metadata.uid != other_than)
        )

    what = f"Service {ms.ns}/{name}" + (f" recreated (uid other than {other_than})" if other_than else "")
    return ms.wait("services", what, lambda: read_service(ms, name), ok)


def wait_hostnames(ms: ModelServings, service: str, pods: Iterable[Any]) -> dict[str, Any]:
    """EndpointSlices of ``service`` list exactly ``pods``, each with hostname = its Pod name."""
    want = {p.metadata.name: p.metadata.name for p in pods}
    return ms.wait(
        "endpoints",
        f"EndpointSlices of {ms.ns}/{service} to list exactly {sorted(want)}, each with hostname = its Pod name",
        lambda: {name: ep["hostname"] for name, ep in ms.endpoints(service).items()},
        lambda seen: seen == want,
    )


def wait_endpoints(ms: ModelServings, service: str, pods: Iterable[Any]) -> dict[str, Any]:
    """EndpointSlices of ``service`` list exactly ``pods`` (hostnames not checked)."""
    want = {p.metadata.name for p in pods}
    return ms.wait(
        "endpoints",
        f"EndpointSlices of {ms.ns}/{service} to list exactly {sorted(want)}",
        lambda: ms.endpoints(service),
        lambda seen: set(seen) == want,
    )


def plain(ms: ModelServings, obj: Any) -> dict[str, Any]:
    """An API object from the typed client as the JSON the API server would return (camelCase)."""
    out: dict[str, Any] = ms.kube.api.sanitize_for_serialization(obj)
    return out


def pod_copy(ms: ModelServings, pod: Any, *, keep_owners: bool) -> dict[str, Any]:
    """A new Pod with ``pod``'s name, labels, annotations and spec (nodeName dropped so it is
    scheduled again), and its ownerReferences when ``keep_owners``; no finalizers, UID,
    resourceVersion or status."""
    raw = plain(ms, pod)
    meta = raw["metadata"]
    keys = ("name", "labels", "annotations", *(("ownerReferences",) if keep_owners else ()))
    spec = {k: v for k, v in raw["spec"].items() if k != "nodeName"}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {k: meta[k] for k in keys if meta.get(k)}, "spec": spec}


def hold(ms: ModelServings, name: str, kind: str = "pod") -> None:
    """Add the suite's finalizer to a Pod or Service (a strategic merge: its own finalizers stay)."""
    patch = getattr(ms.kube.core, f"patch_namespaced_{kind}")
    patch(name, ms.ns, {"metadata": {"finalizers": [HOLD_FINALIZER]}}, _content_type=STRATEGIC)


def release(ms: ModelServings, names: Iterable[str], kind: str = "pod") -> list[str]:
    """Remove the suite's finalizer from every Pod (or Service) named, gone ones ignored; returns
    what could not be released."""
    from kubernetes.client.exceptions import ApiException

    patch = getattr(ms.kube.core, f"patch_namespaced_{kind}")
    body = {"metadata": {"$deleteFromPrimitiveList/finalizers": [HOLD_FINALIZER]}}
    problems = []
    for name in names:
        try:
            patch(name, ms.ns, body, _content_type=STRATEGIC)
        except ApiException as exc:
            if exc.status != 404:
                problems.append(f"{kind} {name}: {exc.status} {exc.reason}")
    return problems


def wait_pod_gone(ms: ModelServings, name: str, uid: str) -> None:
    """The Pod ``name`` with ``uid`` no longer exists (absent, or present with another UID)."""
    from kubernetes.client.exceptions import ApiException

    def gone() -> bool:
        try:
            pod = ms.kube.core.read_namespaced_pod(name, ms.ns)
        except ApiException as exc:
            if exc.status == 404:
                return True
            raise
        return bool(pod.metadata.uid != uid)

    wait_for(f"Pod {ms.ns}/{name} (uid {uid}) to be gone", gone, timeout=ms.timeouts.seconds("deletion"), interval=0.1)
