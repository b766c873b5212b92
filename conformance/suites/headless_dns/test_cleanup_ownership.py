"""HeadlessServiceDNS: cleanup deletes only what the ModelServing owns, and only the original UIDs.

The spec: "Cleanup must check ownership and protect replacement UIDs" and "Deletion retries
retain the original Pod and Service UIDs". ``dns/services/foreign-service-kept`` covers a
Service someone else created after the cleanup; here the two other ways a Service under an
instance's name stops being the one the ModelServing made: a user removes its ownerReferences
(the same UID, no longer owned), or someone deletes and recreates it (a new UID, even with the
original's labels and ownerReferences) while the instance's deletion is pending.
"""

from __future__ import annotations

import secrets
from typing import Any

from kubernetes.client.exceptions import ApiException

from conformance.framework.catalog import behaviour
from conformance.framework.features import Feature
from conformance.framework.modelserving import ModelServings, expected_pod_count
from conformance.framework.outcomes import Inconclusive
from conformance.framework.waits import WaitTimeout

from . import PLUGIN_DEVELOPMENT, USING_PLUGINS, hold, plain, read_service, release
from .instances import uids
from .test_service_lifecycle import RESYNC_ANNOTATION, _removed, _start

JSON_PATCH = "application/json-patch+json"


def _resync(ms: ModelServings, name: str) -> None:
    ms.patch(name, {"metadata": {"annotations": {RESYNC_ANNOTATION: secrets.token_hex(4)}}})


def _owned_by(svc: Any, owner_uid: str) -> bool:
    return any(ref.uid == owner_uid for ref in svc.metadata.owner_references or [])


def _release_ownership(ms: ModelServings, service: str, owner_uid: str) -> None:
    """Remove the ownerReferences to the ModelServing from a Service (as a user would), keeping
    any other; a JSON patch guarded by the Service's UID."""
    svc = ms.kube.core.read_namespaced_service(service, ms.ns)
    if not _owned_by(svc, owner_uid):
        raise Inconclusive(
            f"Service {service} carries no ownerReference to its ModelServing (uid {owner_uid}); ownership cannot "
            f"be released by a user (ownerReferences: {plain(ms, svc)['metadata'].get('ownerReferences')})"
        )
    others = [ref for ref in plain(ms, svc)["metadata"]["ownerReferences"] if ref.get("uid") != owner_uid]
    patch = [
        {"op": "test", "path": "/metadata/uid", "value": svc.metadata.uid},
        {"op": "replace", "path": "/metadata/ownerReferences", "value": others},
    ]
    ms.kube.core.patch_namespaced_service(service, ms.ns, patch, _content_type=JSON_PATCH)


@behaviour(
    "dns/services/released-service-kept",
    "A Service of a Role instance that a user released from the ModelServing's ownership (its ownerReferences "
    "removed) MUST NOT be deleted when that Role instance is removed.",
    PLUGIN_DEVELOPMENT,
    Feature.HEADLESS_SERVICE,
)
def test_a_released_service_outlives_its_instance(ms: ModelServings, manifest: Any) -> None:
    """Two ServingGroups; every Service of both is released (which group a scale-down removes is
    the implementation's choice), then the ModelServing is scaled to 1. An implementation may take
    a released Service back (adopt it, as controllers adopt orphans): then cleanup is not tested
    and the outcome is inconclusive."""
    body = manifest("dns-pair")
    body["spec"]["replicas"] = 2
    name = body["metadata"]["name"]
    before = _start(ms, body)
    owner = str(ms.get(name)["metadata"]["uid"])
    services = sorted(s for i in before for s in i.services())
    original = uids(ms, services)
    for service in services:
        _release_ownership(ms, service, owner)

    def observe() -> dict[str, tuple[str | None, bool]]:
        now = ms.services()
        return {
            s: (now[s].metadata.uid, _owned_by(now[s], owner)) if s in now and not now[s].metadata.deletion_timestamp
            else (None, False)
            for s in services
        }  # fmt: skip

    def released(seen: dict[str, tuple[str | None, bool]]) -> bool:
        return all(uid == original[s] and not owned for s, (uid, owned) in seen.items())

    _resync(ms, name)
    try:
        ms.holds(f"Services {services} kept (uids {original}) and left without an ownerReference to {name}",
                 observe, released)  # fmt: skip
    except WaitTimeout as exc:
        seen = observe()
        if any(owned for _, owned in seen.values()):
            raise Inconclusive(f"the implementation took the released Services back ({exc}); cleanup of a Service "
                               "it does not own cannot be observed") from exc  # fmt: skip
        raise AssertionError(
            f"a Service the ModelServing does not own (released by the test) was deleted or replaced while its Role "
            f"instance runs: {exc}"
        ) from exc
    ms.patch(name, {"spec": {"replicas": 1}})
    gone, _ = _removed(ms, name, before, expected_pod_count(body, 1))
    ms.wait_settled(name, wait="scale")
    _resync(ms, name)
    ms.holds(
        f"Services {sorted(gone.services())} of the removed Role instance, released from {name}'s ownership by the "
        f"test, not deleted by its cleanup (uids {original}); the kept instance's stay too",
        observe,
        released,
    )


@behaviour(
    "dns/deletion/replacement-service-kept",
    "While the deletion of a Role instance is pending, a Service recreated with a new UID under the name of one of "
    "its deleted Services MUST NOT be deleted, also when it carries the original's labels and ownerReferences: "
    "deletion retries delete only the original UIDs.",
    USING_PLUGINS,
    Feature.DELETION_IDENTITY,
)
def test_a_service_recreated_during_a_pending_deletion_is_kept(ms: ModelServings, manifest: Any) -> None:
    """Two ServingGroups with every Pod held by a finalizer; scaling to 1 leaves the removed
    group's Pods Terminating, so its Role instance's deletion stays pending. Its Services go (the
    implementation deletes them, or the test does when it has not yet) and the test creates each
    again: the original's name, labels, ownerReferences and spec, a new UID."""
    body = manifest("dns-pair")
    body["spec"]["replicas"] = 2
    name = body["metadata"]["name"]
    before = _start(ms, body)
    originals = {s: plain(ms, ms.kube.core.read_namespaced_service(s, ms.ns)) for i in before for s in i.services()}
    held = [p.metadata.name for p in ms.pods(name)]
    try:
        for pod in held:
            hold(ms, pod)
        ms.patch(name, {"spec": {"replicas": 1}})

        def terminating() -> list[str]:
            return [p.metadata.name for p in ms.pods(name) if p.metadata.deletion_timestamp]

        doomed = ms.wait("scale", f"a Pod of {ms.ns}/{name} to be Terminating after scaling to 1", terminating)
        instance = next(i for i in before if set(doomed) & set(i.pods))
        services = sorted(instance.services())
        for service in services:
            _delete_original(ms, service, originals[service]["metadata"]["uid"])

        def present() -> dict[str, str]:
            return {s: svc.metadata.uid for s in services if (svc := read_service(ms, s)) is not None}

        ms.wait("deletion", f"the original Services {services} of the Role instance being removed to be gone",
                lambda: [s for s, uid in present().items() if uid == originals[s]["metadata"]["uid"]],
                lambda left: not left)  # fmt: skip
        _observed_after(ms, name)
        remade = present()
        if remade:
            raise Inconclusive(f"the implementation made the Services {remade} of a Role instance being removed "
                               "again; a replacement by someone else cannot be created")  # fmt: skip
        replacements = {s: _recreate(ms, originals[s]) for s in services}
        _resync(ms, name)

        def observe() -> tuple[dict[str, str | None], list[str]]:
            return uids(ms, services), terminating()

        ms.holds(
            f"Services {services} recreated by the test with new uids {replacements} kept while the deletion of "
            f"their Role instance is pending (its Pods {sorted(instance.pods)} held Terminating)",
            observe,
            lambda seen: seen[0] == replacements and bool(set(seen[1]) & set(instance.pods)),
        )
    finally:
        problems = release(ms, held)
    if problems:
        raise Inconclusive(f"could not release held Pods: {problems}")


def _observed_after(ms: ModelServings, name: str) -> None:
    """Make the implementation reconcile after the Services are gone, and wait until it has: a
    spec change that touches no Pod (revisionHistoryLimit, one more) and status.observedGeneration
    reaching it. Without it the replacement may appear before the implementation saw the original
    go, and be taken for the original still being deleted (protected either way, but then the
    test would not tell a controller that forgets the original UIDs once they are gone)."""
    limit = ms.get(name)["spec"].get("revisionHistoryLimit", 10)
    generation = ms.patch(name, {"spec": {"revisionHistoryLimit": limit + 1}})["metadata"]["generation"]
    ms.wait("status-updated", f"status.observedGeneration of {ms.ns}/{name} to reach {generation}",
            lambda: (ms.get(name).get("status") or {}).get("observedGeneration"),
            lambda seen: seen is not None and seen >= generation)  # fmt: skip


def _delete_original(ms: ModelServings, service: str, uid: str) -> None:
    """Delete the Service if it is still the original (its UID as a precondition)."""
    try:
        ms.kube.core.delete_namespaced_service(service, ms.ns, body={"preconditions": {"uid": uid}})
    except ApiException as exc:
        if exc.status not in (404, 409):  # gone already, or no longer the original
            raise


def _recreate(ms: ModelServings, original: dict[str, Any]) -> str:
    """A Service with ``original``'s name, labels, annotations, ownerReferences and spec (its
    cluster IPs dropped); returns the new UID."""
    meta, spec = original["metadata"], original["spec"]
    keys = ("name", "labels", "annotations", "ownerReferences")
    dropped = ("clusterIP", "clusterIPs", "ipFamilies", "ipFamilyPolicy")
    body = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {k: meta[k] for k in keys if meta.get(k)},
        "spec": {**{k: v for k, v in spec.items() if k not in dropped}, "clusterIP": "None"},
    }
    return str(ms.kube.core.create_namespaced_service(ms.ns, body).metadata.uid)
