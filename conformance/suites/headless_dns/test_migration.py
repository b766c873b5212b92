"""MigrationRequired: an instance whose Pods already use an all-member Service as their subdomain."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kubernetes.client.exceptions import ApiException

from conformance.framework.catalog import behaviour
from conformance.framework.features import Feature
from conformance.framework.modelserving import (
    GROUP,
    KIND,
    MEMBER_LABEL,
    ROLE_LABEL,
    VERSION,
    ModelServings,
    expected_pod_count,
)

from . import MIGRATION, entries, entry_service_of, pod_copy, read_service, wait_service, workers


def _delete(call: Any, name: str, namespace: str) -> None:
    try:
        call(name, namespace)
    except ApiException as exc:
        if exc.status != 404:
            raise


def _gone(ms: ModelServings, name: str) -> bool:
    try:
        ms.get(name)
    except ApiException as exc:
        if exc.status == 404:
            return True
        raise
    return False


@dataclass
class Legacy:
    """A ModelServing met by an upgraded controller with its Pods in the older layout."""

    name: str
    service: str  # the entry-named all-member Service every Pod uses as subdomain
    uid: str
    selector: dict[str, str]
    pods: list[dict[str, Any]]  # as recreated by the test

    def observe(self, ms: ModelServings) -> dict[str, Any]:
        svc = read_service(ms, self.service)
        live = ms.kube.core.list_namespaced_pod(ms.ns).items
        service = None
        if svc is not None:
            deleting = bool(svc.metadata.deletion_timestamp)
            service = {"uid": svc.metadata.uid, "selector": svc.spec.selector, "deleting": deleting}
        subdomains = {p.metadata.name: p.spec.subdomain for p in live if not p.metadata.deletion_timestamp}
        return {"service": service, "subdomains": subdomains}

    def preserved(self, seen: dict[str, Any]) -> bool:
        """The Service kept its UID and selector; no live Pod uses another subdomain."""
        svc = seen["service"]
        return (
            svc is not None
            and svc["uid"] == self.uid
            and not svc["deleting"]
            and dict(svc["selector"] or {}) == self.selector
            and all(sub == self.service for sub in seen["subdomains"].values())
        )

    def hold(self, ms: ModelServings, when: str) -> None:
        ms.holds(
            f"all-member Service {self.service} (uid {self.uid}, selector {self.selector}) unchanged and no Pod "
            f"with a subdomain other than {self.service} {when}",
            lambda: self.observe(ms),
            self.preserved,
        )


def upgrade_from_legacy_layout(ms: ModelServings, manifest: Any) -> Legacy:
    """Simulate an upgrade from an older controller whose layout used the entry-named all-member
    Service as the Pods' subdomain.

    The ModelServing is made, its Pods and Entry Service recorded, and it is deleted with
    everything it owns. While nothing manages them, the old layout is rebuilt: a headless Service
    with the Entry Service's name and labels selecting *all* members (by the suite's template
    label), and the Pods recreated with the same names, labels and spec except ``subdomain`` =
    that Service. The same ModelServing is then created again and the Pods and the Service are
    given its controller ownerReference, which is what an upgraded controller finds.
    (Deleting with ``propagationPolicy: Orphan`` instead would need the garbage collector to
    patch every owned object, which fails for ControllerRevisions whose ``data`` is not stored as
    canonical JSON; nothing of the first ModelServing is reused, so a plain deletion is
    equivalent.)

    This relies on the implementation picking up existing Pods that carry its own labels and its
    ModelServing's controller ownerReference (what an upgrade looks like). An implementation that
    cannot should declare MigrationRequired unsupported.
    """
    body = manifest("dns-pair")
    name = body["metadata"]["name"]
    ms.create(body)
    pods = ms.wait_pods(name, expected_pod_count(body))
    ms.wait_settled(name)
    assert len(entries(pods)) == 1 and workers(pods), f"unexpected Pods {[p.metadata.name for p in pods]}"
    legacy = entry_service_of(workers(pods)[0], ms.ns)
    discovery = workers(pods)[0].spec.subdomain
    recorded_service = wait_service(ms, legacy)
    recorded = [pod_copy(ms, p, keep_owners=False) for p in pods]

    # The ModelServing and everything it made go; nothing manages this Role instance any more.
    ms.delete(name)
    ms.wait("deletion", f"ModelServing {ms.ns}/{name} to be gone", lambda: _gone(ms, name))
    for pod in pods:
        _delete(ms.kube.core.delete_namespaced_pod, pod.metadata.name, ms.ns)
    for svc in {legacy, discovery} - {None, ""}:
        _delete(ms.kube.core.delete_namespaced_service, svc, ms.ns)
    ms.wait(
        "deletion",
        f"every Pod of {ms.ns} and Services {legacy}, {discovery} to be gone",
        lambda: (
            [p.metadata.name for p in ms.kube.core.list_namespaced_pod(ms.ns).items]
            + [s for s in (legacy, discovery) if s and read_service(ms, s) is not None]
        ),
        lambda left: not left,
    )

    # The older layout: the entry-named Service selects every member and is every Pod's subdomain.
    selector = {ROLE_LABEL: "server"}
    old = ms.kube.core.create_namespaced_service(
        ms.ns,
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": legacy, "labels": dict(recorded_service.metadata.labels or {})},
            "spec": {"clusterIP": "None", "publishNotReadyAddresses": True, "selector": selector},
        },
    )
    for pod in recorded:
        pod["spec"]["subdomain"] = legacy
        ms.kube.core.create_namespaced_pod(ms.ns, pod)

    # The upgraded controller meets them: the same ModelServing, owning them.
    uid = ms.create(body)["metadata"]["uid"]
    owner = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": KIND,
        "name": name,
        "uid": uid,
        "controller": True,
        "blockOwnerDeletion": True,
    }
    adopt = {"metadata": {"ownerReferences": [owner]}}
    for pod in recorded:
        ms.kube.core.patch_namespaced_pod(pod["metadata"]["name"], ms.ns, adopt)
    ms.kube.core.patch_namespaced_service(legacy, ms.ns, adopt)

    return Legacy(name, legacy, old.metadata.uid, selector, recorded)


@behaviour(
    "dns/migration/legacy-layout-preserved",
    "When the Pods of a Role instance already use the all-member Service named as the Entry Service as their "
    "subdomain, the controller MUST report MigrationRequired, MUST keep that Service's UID and selector and MUST NOT "
    "create Pods using another subdomain.",
    MIGRATION,
    Feature.MIGRATION_REQUIRED,
)
def test_legacy_all_member_subdomain_is_preserved(ms: ModelServings, manifest: Any) -> None:
    """See :func:`upgrade_from_legacy_layout` for how the older layout is made."""
    legacy = upgrade_from_legacy_layout(ms, manifest)
    reported = ms.wait_reported(legacy.name, "MigrationRequired")
    legacy.hold(ms, f"after MigrationRequired ({reported})")


@behaviour(
    "dns/migration/lost-pod-keeps-layout",
    "When a Pod of a Role instance in the older all-member Service layout is lost, the controller MUST NOT replace "
    "it, or rebuild the instance, with Pods using another subdomain and MUST keep that Service's UID and selector.",
    MIGRATION,
    Feature.MIGRATION_REQUIRED,
)
def test_lost_pod_of_legacy_instance_keeps_the_layout(ms: ModelServings, manifest: Any) -> None:
    """After MigrationRequired, a worker of the older layout is deleted. Recovery (the default
    RoleRecreate rebuilds the whole instance) may recreate Pods, or an implementation may leave
    the instance as it is: either way no Pod may use the new layout (spec reading 10)."""
    legacy = upgrade_from_legacy_layout(ms, manifest)
    ms.wait_reported(legacy.name, "MigrationRequired")
    worker = next(p for p in legacy.pods if p["metadata"]["labels"].get(MEMBER_LABEL) == "worker")
    ms.kube.core.delete_namespaced_pod(worker["metadata"]["name"], ms.ns)
    legacy.hold(ms, f"after worker {worker['metadata']['name']} was deleted")
