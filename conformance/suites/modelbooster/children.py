"""A converter's child: the ModelServing a source object (a ModelBooster, a LeaderWorkerSet) is given.

The spec leaves the child's name, labels and Role names open, so the suite never derives them: a
source's child is the ModelServing in the source's namespace whose ``metadata.ownerReferences``
hold a *controller* reference to the source's uid (the Kubernetes convention that garbage
collection and every controller follow). Its Pods are then found as any ModelServing's are (their
controller ownerReference to the child, :meth:`ModelServings.pods`).

:class:`Sources` reads and writes one source kind in the test namespace. A cluster that does not
serve the kind (its CRD absent) makes the test inconclusive, with the CRD named, never a failure.
Shared by the ModelBooster and LWSConversion suites.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from conformance.framework.modelserving import GROUP as MS_GROUP
from conformance.framework.modelserving import PLURAL as MS_PLURAL
from conformance.framework.modelserving import VERSION as MS_VERSION
from conformance.framework.modelserving import ModelServings, Rejection, rejection_of
from conformance.framework.outcomes import Inconclusive

HEADLESS_SERVICE = "headless-service"


@dataclass(frozen=True)
class Kind:
    """A source kind: its API group, version, plural, kind and CRD name."""

    group: str
    version: str
    plural: str
    kind: str
    crd: str
    profile: str

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}"


class Sources:
    """Objects of one source kind in the test's namespace (deleted with it)."""

    def __init__(self, ms: ModelServings, kind: Kind) -> None:
        self.ms = ms
        self.kind = kind

    def _absent(self) -> Inconclusive:
        return Inconclusive(
            f"the cluster does not serve {self.kind.kind} ({self.kind.api_version}): the CRD {self.kind.crd} is not "
            f"installed, so the {self.kind.profile} profile cannot be observed (`kthena-conformance install "
            f"prerequisites --profile {self.kind.profile}` says what it needs)"
        )

    def _not_served(self, exc: Any) -> bool:
        text = f"{exc.body or ''} {exc.reason or ''}"
        return bool(exc.status == 404 and (self.kind.plural in text or "page not found" in text.lower()))

    def body(self, body: dict[str, Any]) -> dict[str, Any]:
        out = dict(body)
        out.setdefault("apiVersion", self.kind.api_version)
        out.setdefault("kind", self.kind.kind)
        out["metadata"] = {**(body.get("metadata") or {}), "namespace": self.ms.ns}
        return out

    def create(self, body: dict[str, Any]) -> dict[str, Any]:
        """Create the test's own valid object; a refusal is a failure that quotes it."""
        from kubernetes.client.exceptions import ApiException

        k = self.kind
        try:
            return dict(self.ms.kube.custom.create_namespaced_custom_object(k.group, k.version, self.ms.ns, k.plural,
                                                                           self.body(body)))  # fmt: skip
        except ApiException as exc:
            if self._not_served(exc):
                raise self._absent() from None
            raise AssertionError(
                f"the valid {k.kind} {body['metadata']['name']} was refused: HTTP {exc.status} {exc.reason}: "
                f"{rejection_message(exc)}"
            ) from None

    def create_with_headers(self, body: dict[str, Any], *, dry_run: bool = True) -> tuple[int, dict[str, str]]:
        """Create (a dry run by default) and return the HTTP status and the response headers, where
        the API server puts its ``Warning`` headers."""
        from kubernetes.client.exceptions import ApiException

        k = self.kind
        try:
            _, status, headers = self.ms.kube.custom.create_namespaced_custom_object_with_http_info(
                k.group, k.version, self.ms.ns, k.plural, self.body(body), dry_run="All" if dry_run else None,
                _return_http_data_only=False,
            )  # fmt: skip
        except ApiException as exc:
            if self._not_served(exc):
                raise self._absent() from None
            raise AssertionError(
                f"the valid {k.kind} {body['metadata']['name']} was refused: HTTP {exc.status} {exc.reason}: "
                f"{rejection_message(exc)}"
            ) from None
        return int(status), {str(key): str(value) for key, value in (headers or {}).items()}

    def dry_create(self, body: dict[str, Any]) -> Rejection | None:
        """A dry-run create (every admission step, nothing stored): the refusal, or None when accepted."""
        from kubernetes.client.exceptions import ApiException

        k = self.kind
        try:
            self.ms.kube.custom.create_namespaced_custom_object(k.group, k.version, self.ms.ns, k.plural,
                                                                self.body(body), dry_run="All")  # fmt: skip
        except ApiException as exc:
            if self._not_served(exc):
                raise self._absent() from None
            return rejection_of(exc)
        return None

    def dry_stored(self, body: dict[str, Any]) -> dict[str, Any]:
        """The object as a dry-run create would store it (defaults applied); a refusal fails."""
        from kubernetes.client.exceptions import ApiException

        k = self.kind
        try:
            custom = self.ms.kube.custom
            return dict(custom.create_namespaced_custom_object(k.group, k.version, self.ms.ns, k.plural,
                                                               self.body(body), dry_run="All"))  # fmt: skip
        except ApiException as exc:
            if self._not_served(exc):
                raise self._absent() from None
            raise AssertionError(
                f"the valid {k.kind} {body['metadata']['name']} was refused: HTTP {exc.status} {exc.reason}: "
                f"{rejection_message(exc)}"
            ) from None

    def get(self, name: str) -> dict[str, Any]:
        k = self.kind
        return dict(self.ms.kube.custom.get_namespaced_custom_object(k.group, k.version, self.ms.ns, k.plural, name))

    def patch(self, name: str, merge_patch: dict[str, Any]) -> dict[str, Any]:
        """A JSON merge patch of a change the spec allows; a refusal is a failure that quotes it."""
        from kubernetes.client.exceptions import ApiException

        k = self.kind
        try:
            return dict(self.ms.kube.custom.patch_namespaced_custom_object(
                k.group, k.version, self.ms.ns, k.plural, name, merge_patch,
                _content_type="application/merge-patch+json",
            ))  # fmt: skip
        except ApiException as exc:
            raise AssertionError(
                f"the change {merge_patch} of {k.kind} {self.ms.ns}/{name}, which the spec allows, was refused: "
                f"HTTP {exc.status} {exc.reason}: {rejection_message(exc)}"
            ) from None

    def events(self, name: str) -> list[Any]:
        items = self.ms.kube.core.list_namespaced_event(self.ms.ns).items
        return [e for e in items if e.involved_object and e.involved_object.name == name
                and e.involved_object.kind == self.kind.kind]  # fmt: skip

    def warnings(self, name: str) -> str:
        """``; Warning Events of <kind> ns/name: ...`` (or that there is none): what an implementation
        says about a source it made no child for."""
        try:
            warnings = [e for e in self.events(name) if e.type == "Warning"]
        except Exception:
            return ""
        if not warnings:
            return f"; no Warning Event about {self.kind.kind} {self.ms.ns}/{name}"
        return f"; Warning Events of {self.kind.kind} {self.ms.ns}/{name}: " + ", ".join(
            f"{e.reason}: {e.message}" for e in warnings[-3:]
        )


def delete_all(ms: ModelServings, kind: Kind) -> None:
    """Delete every object of ``kind`` in the test namespace (none when the kind is not served).

    The namespace cleanup deletes the ModelServings a test created and then waits for every Pod to
    be gone; a converted child is not the test's, and deleting it would only have the converter make
    it again. Deleting the sources lets garbage collection remove their children and the children's
    Pods, which the namespace cleanup then waits for."""
    from kubernetes.client.exceptions import ApiException

    custom = ms.kube.custom
    try:
        listing = custom.list_namespaced_custom_object(kind.group, kind.version, ms.ns, kind.plural)
    except ApiException as exc:
        if exc.status == 404:
            return
        raise
    for item in listing.get("items") or []:
        try:
            name = item["metadata"]["name"]
            custom.delete_namespaced_custom_object(kind.group, kind.version, ms.ns, kind.plural, name,
                                                   propagation_policy="Background")  # fmt: skip
        except ApiException as exc:
            if exc.status != 404:
                raise


def rejection_message(exc: Any) -> str:
    try:
        return rejection_of(exc).message
    except Exception:
        return str(getattr(exc, "body", "") or exc)[:300]


def controlled_by(obj: dict[str, Any], uid: str) -> bool:
    """Does ``obj`` (a JSON object) carry a controller ownerReference to ``uid``? Pure."""
    refs = (obj.get("metadata") or {}).get("ownerReferences") or []
    return any(r.get("uid") == uid and r.get("controller") for r in refs)


def children(ms: ModelServings, uid: str) -> list[dict[str, Any]]:
    """The ModelServings of the test namespace controlled by the object with ``uid``, by name."""
    listing = ms.kube.custom.list_namespaced_custom_object(MS_GROUP, MS_VERSION, ms.ns, MS_PLURAL)
    found = [dict(o) for o in listing.get("items") or [] if controlled_by(o, uid)]
    return sorted(found, key=lambda o: str(o["metadata"]["name"]))


def describe(found: list[dict[str, Any]]) -> str:
    if not found:
        return "no ModelServing with a controller ownerReference to it"

    def one(o: dict[str, Any]) -> str:
        meta = o["metadata"]
        return f"{meta['name']} (uid {meta['uid']}{', deleting' if meta.get('deletionTimestamp') else ''})"

    return ", ".join(one(o) for o in found)


def wait_child(
    ms: ModelServings,
    sources: Sources,
    name: str,
    *,
    until: Callable[[dict[str, Any]], bool] | None = None,
    what: str = "",
    wait: str = "pods-created",
) -> dict[str, Any]:
    """The one live child of the source ``name`` (exactly one ModelServing controlled by it, not
    being deleted), once ``until`` holds on it. On timeout the message quotes the source's Warning
    Events, where an implementation says why it made no child."""
    from conformance.framework.waits import WaitTimeout

    uid = str(sources.get(name)["metadata"]["uid"])

    def probe() -> list[dict[str, Any]]:
        return children(ms, uid)

    def ok(found: list[dict[str, Any]]) -> bool:
        live = [o for o in found if not o["metadata"].get("deletionTimestamp")]
        return len(found) == 1 and len(live) == 1 and (until is None or until(live[0]))

    label = f"exactly one ModelServing controlled by {sources.kind.kind} {ms.ns}/{name}{what}"
    try:
        found = ms.wait(wait, label, probe, ok, describe=describe)
    except WaitTimeout as exc:
        hint = "" if probe() else NO_CHILD_HINT.format(kind=sources.kind.kind)
        raise WaitTimeout(f"{exc}{sources.warnings(name)}{hint}") from None
    return found[0]


NO_CHILD_HINT = (
    "; no child ModelServing appeared at all: a converter that waits for cluster objects the suite does not install "
    "(another component's CRDs, say) makes none. Install them (or list them in the support file's launch.manifests) "
    "and read the implementation's log for what its {kind} controller waits on"
)


def plugin_chain(child: dict[str, Any]) -> list[tuple[str, str, Any, Any]]:
    """The child's plugin chain as (name, type, config, scope), an omitted type read as BuiltIn (the
    spec: "Equivalent representations such as an omitted type and BuiltIn do not change the
    plugin's meaning"). Pure."""
    out = []
    for p in (child.get("spec") or {}).get("plugins") or []:
        out.append((str(p.get("name")), str(p.get("type") or "BuiltIn"), p.get("config"), p.get("scope")))
    return out


def declares_headless_service(child: dict[str, Any]) -> bool:
    return any(name == HEADLESS_SERVICE and kind == "BuiltIn" for name, kind, _, _ in plugin_chain(child))


def roles(child: dict[str, Any]) -> list[dict[str, Any]]:
    return list(((child.get("spec") or {}).get("template") or {}).get("roles") or [])


def templates(child: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """Every Pod template of the child: (``roles[i].entryTemplate`` or ``.workerTemplate``, the
    template), the workerTemplate only where it is set. Pure."""
    out = []
    for i, role in enumerate(roles(child)):
        for key in ("entryTemplate", "workerTemplate"):
            if role.get(key) is not None:
                out.append((f"roles[{i}].{key}", dict(role[key])))
    return out


def plain(ms: ModelServings, obj: Any) -> dict[str, Any]:
    out: dict[str, Any] = ms.kube.api.sanitize_for_serialization(obj)
    return out
