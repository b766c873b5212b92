"""HeadlessServiceDNS: the life of a Role instance's Services beside the instance's own.

The spec: OnRoleSync "must be idempotent" (a resync keeps the Services, UIDs included); the
Services go with their Role instance (OnRoleDelete), whether a ServingGroup or a Role is scaled
down; they "are auxiliary resources: their presence, absence, or terminating state does not
establish whether a Role or ServingGroup exists" (a terminating one blocks nothing); "Cleanup must
check ownership and protect replacement UIDs" (a Service the ModelServing does not own is never
deleted); and "OnRoleDelete must retain a retry path for failed cleanup requests".

"No recreation" is asserted here across a forced resync (a metadata change and a scale-up of the
ModelServing); across a restart of the controller in :mod:`.test_controller_restart`. A failed Service deletion is made
with a ValidatingAdmissionPolicy that refuses it (no webhook server needed); a cluster without
that API makes that test inconclusive.
"""

from __future__ import annotations

import functools
import json
import secrets
from typing import Any

from conformance.framework.catalog import behaviour
from conformance.framework.features import Feature
from conformance.framework.modelserving import ModelServings, expected_pod_count
from conformance.framework.namespaces import cluster_scoped_labels
from conformance.framework.outcomes import Inconclusive
from conformance.framework.waits import WaitTimeout

from . import PLUGIN_DEVELOPMENT, USING_PLUGINS, hold, plain, release, workers
from .instances import Instance, instances, uids

RESYNC_ANNOTATION = "conformance.kthena.io/resync"


def _start(ms: ModelServings, body: dict[str, Any]) -> list[Instance]:
    name = body["metadata"]["name"]
    ms.create(body)
    pods = ms.wait_pods(name, expected_pod_count(body))
    ms.wait_settled(name)
    found = instances(ms, pods)
    for instance in found:
        assert instance.entry_service, f"the worker of the Role instance {instance.discovery} has no ENTRY_ADDRESS"
        ms.wait("services", f"Services {sorted(instance.services())} of {ms.ns}/{name}",
                functools.partial(uids, ms, instance.services()), lambda seen: all(seen.values()))  # fmt: skip
    return found


def _service_uids(ms: ModelServings, found: list[Instance]) -> dict[str, str | None]:
    return uids(ms, {s for i in found for s in i.services()})


def _removed(ms: ModelServings, name: str, before: list[Instance], count: int) -> tuple[Instance, Instance]:
    """After a scale-down from two Role instances to one: (the removed instance, the kept one),
    told apart by which instance's Pods are gone."""
    ms.wait_pods(name, count, wait="scale")
    live = {p.metadata.name for p in ms.pods(name)}
    gone = [i for i in before if not live & set(i.pods)]
    kept = [i for i in before if set(i.pods) <= live]
    assert len(gone) == 1 and len(kept) == 1, (
        f"expected one of the Role instances {[i.pods for i in before]} removed whole and one kept; live Pods {live}"
    )
    return gone[0], kept[0]


def _removed_with_instance(ms: ModelServings, name: str, before: list[Instance], count: int, what: str) -> None:
    uids_before = _service_uids(ms, before)
    gone, kept = _removed(ms, name, before, count)
    ms.wait("deletion", f"Services {sorted(gone.services())} of the Role instance removed by {what} to be deleted",
            lambda: uids(ms, gone.services()), lambda seen: not any(seen.values()))  # fmt: skip
    now = uids(ms, kept.services())
    expected = {s: uids_before[s] for s in kept.services()}
    assert now == expected, (
        f"the Services of the kept Role instance {kept.discovery} must stay (same UIDs) after {what}; "
        f"expected {expected}, seen {now}"
    )


@behaviour(
    "dns/services/kept-on-resync",
    "The Entry and Discovery Services of an existing Role instance MUST keep their UIDs across a resync of the "
    "ModelServing (a metadata change, a scale-up adding a ServingGroup).",
    PLUGIN_DEVELOPMENT,
    Feature.HEADLESS_SERVICE,
)
def test_services_are_kept_across_a_resync(ms: ModelServings, manifest: Any) -> None:
    body = manifest("dns-pair")
    name = body["metadata"]["name"]
    before = _start(ms, body)
    original = _service_uids(ms, before)
    ms.patch(name, {"metadata": {"annotations": {RESYNC_ANNOTATION: secrets.token_hex(4)}}})
    ms.patch(name, {"spec": {"replicas": 2}})
    ms.wait_pods(name, expected_pod_count(body, 2), wait="scale")
    ms.wait_settled(name, wait="scale")
    ms.holds(
        f"Services {sorted(original)} of the first Role instance keeping their UIDs {original} after a metadata "
        "change and a scale-up",
        lambda: _service_uids(ms, before),
        lambda seen: seen == original,
    )


@behaviour(
    "dns/services/removed-with-servinggroup",
    "When a scale-down removes a ServingGroup, the Entry and Discovery Services of its Role instances MUST be "
    "deleted, and those of the kept ServingGroups MUST stay.",
    USING_PLUGINS,
    Feature.HEADLESS_SERVICE,
)
def test_services_go_with_their_servinggroup(ms: ModelServings, manifest: Any) -> None:
    body = manifest("dns-pair")
    body["spec"]["replicas"] = 2
    name = body["metadata"]["name"]
    before = _start(ms, body)
    ms.patch(name, {"spec": {"replicas": 1}})
    _removed_with_instance(ms, name, before, expected_pod_count(body, 1), "scaling spec.replicas from 2 to 1")


@behaviour(
    "dns/services/removed-with-role-instance",
    "When a Role is scaled down, the Entry and Discovery Services of the removed Role instance MUST be deleted, and "
    "those of the kept instances MUST stay.",
    USING_PLUGINS,
    Feature.HEADLESS_SERVICE,
)
def test_services_go_with_their_role_instance(ms: ModelServings, manifest: Any) -> None:
    body = manifest("dns-pair")
    roles = body["spec"]["template"]["roles"]
    roles[0]["replicas"] = 2
    name = body["metadata"]["name"]
    before = _start(ms, body)
    roles[0]["replicas"] = 1
    ms.patch(name, {"spec": {"template": {"roles": roles}}})  # a merge patch replaces the whole list
    _removed_with_instance(ms, name, before, expected_pod_count(body), "scaling the Role's replicas from 2 to 1")


@behaviour(
    "dns/services/terminating-does-not-block-role",
    "While the Entry and Discovery Services of a Role instance are terminating, a deleted Pod of that instance MUST "
    "still be replaced and its ServingGroup MUST become available again.",
    USING_PLUGINS,
    Feature.HEADLESS_SERVICE,
    requires=(Feature.RECOVERY,),
)
def test_terminating_services_do_not_block_the_role(ms: ModelServings, manifest: Any) -> None:
    body = manifest("dns-pair")
    name = body["metadata"]["name"]
    (instance,) = _start(ms, body)
    held = sorted(instance.services())
    count = expected_pod_count(body)
    try:
        for service in held:
            hold(ms, service, "service")
            ms.kube.core.delete_namespaced_service(service, ms.ns)
        ms.wait("services", f"Services {held} terminating (held by the test's finalizer)",
                lambda: _terminating(ms, held), lambda seen: seen == set(held))  # fmt: skip
        before = ms.uids(name)
        (worker, *_) = workers(ms.pods(name))
        ms.kube.core.delete_namespaced_pod(worker.metadata.name, ms.ns)

        def replaced(pods: list[Any]) -> bool:
            live = [p for p in pods if not p.metadata.deletion_timestamp]
            return len(live) == len(pods) == count and any(p.metadata.uid not in before.values() for p in live)

        what = f"{count} Pods, at least one new, after deleting {worker.metadata.name} while {held} are terminating"
        ms.wait("recovery", what, lambda: ms.pods(name), replaced)
        ms.wait_pods(name, count, wait="recovery")
        ms.wait_settled(name, wait="recovery")
        still = _terminating(ms, held)
        if still != set(held):
            raise Inconclusive(f"the Services {held} were meant to stay terminating during the test; only {still} did")
    finally:
        problems = release(ms, held, "service")
    if problems:
        raise Inconclusive(f"could not release Services {problems}")


def _terminating(ms: ModelServings, names: list[str]) -> set[str]:
    services = ms.services()
    return {n for n in names if n in services and services[n].metadata.deletion_timestamp}


@behaviour(
    "dns/services/held-services-do-not-hold-the-instance",
    "When a scale-down removes a ServingGroup whose Services are held by a finalizer, the controller MUST request "
    "their deletion and MUST still remove the ServingGroup's Pods and report the smaller spec.replicas in status, "
    "without waiting for the Services to go.",
    PLUGIN_DEVELOPMENT,
    Feature.HEADLESS_SERVICE,
)
def test_held_services_do_not_hold_a_removed_instance(ms: ModelServings, manifest: Any) -> None:
    body = manifest("dns-pair")
    body["spec"]["replicas"] = 2
    name = body["metadata"]["name"]
    before = _start(ms, body)
    held = sorted(s for i in before for s in i.services())  # which ServingGroup goes is the implementation's choice
    try:
        for service in held:
            hold(ms, service, "service")
        ms.patch(name, {"spec": {"replicas": 1}})
        gone, kept = _removed(ms, name, before, expected_pod_count(body, 1))
        status = ms.wait_settled(name, wait="scale").get("status") or {}
        assert status.get("replicas") == 1, f"expected status.replicas 1 after scaling to 1; status {status}"
        ms.wait("deletion", f"the deletion of Services {sorted(gone.services())} of the removed Role instance to be "
                "requested (they are held by the test's finalizer)", lambda: _terminating(ms, held),
                lambda seen: seen == gone.services())  # fmt: skip
        still = uids(ms, kept.services())
        assert all(still.values()), f"the Services of the kept Role instance must stay; seen {still}"
    finally:
        problems = release(ms, held, "service")
    if problems:
        raise Inconclusive(f"could not release Services {problems}")


@behaviour(
    "dns/services/foreign-service-kept",
    "A Service the ModelServing does not own MUST NOT be deleted by its cleanup, also when it has the name and labels "
    "of a Service of a removed Role instance.",
    PLUGIN_DEVELOPMENT,
    Feature.HEADLESS_SERVICE,
)
def test_services_it_does_not_own_are_not_deleted(ms: ModelServings, manifest: Any) -> None:
    body = manifest("dns-pair")
    body["spec"]["replicas"] = 2
    name = body["metadata"]["name"]
    before = _start(ms, body)
    originals = {s: plain(ms, ms.kube.core.read_namespaced_service(s, ms.ns)) for i in before for s in i.services()}
    ms.patch(name, {"spec": {"replicas": 1}})
    gone, _ = _removed(ms, name, before, expected_pod_count(body, 1))
    ms.wait("deletion", f"Services {sorted(gone.services())} of the removed Role instance to be deleted",
            lambda: uids(ms, gone.services()), lambda seen: not any(seen.values()))  # fmt: skip
    foreign = {}
    for service in sorted(gone.services()):
        meta, spec = originals[service]["metadata"], originals[service]["spec"]
        copy = {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": service, "labels": meta.get("labels") or {}},  # no ownerReferences
            "spec": {"clusterIP": "None", "selector": spec.get("selector") or {}},
        }
        foreign[service] = ms.kube.core.create_namespaced_service(ms.ns, copy).metadata.uid
    ms.patch(name, {"metadata": {"annotations": {RESYNC_ANNOTATION: secrets.token_hex(4)}}})  # a reconcile
    ms.holds(
        f"the test's own Services {foreign}, named and labelled like the removed instance's, kept (same UIDs)",
        lambda: uids(ms, foreign),
        lambda seen: seen == foreign,
    )


@behaviour(
    "dns/services/failed-delete-retried",
    "When the deletion of a removed Role instance's Service fails, the controller MUST retry it: once the deletion "
    "can succeed, the Service MUST be deleted (at the latest after the next change of the ModelServing).",
    PLUGIN_DEVELOPMENT,
    Feature.HEADLESS_SERVICE,
)
def test_a_failed_service_deletion_is_retried(ms: ModelServings, manifest: Any) -> None:
    body = manifest("dns-pair")
    body["spec"]["replicas"] = 2
    name = body["metadata"]["name"]
    before = _start(ms, body)
    services = sorted(s for i in before for s in i.services())
    refusal = _RefusedDeletes(ms, services)
    try:
        refusal.install()
        ms.patch(name, {"spec": {"replicas": 1}})
        # The controller tries to delete the removed instance's Services meanwhile, and fails.
        try:
            ms.holds(f"Services {services} not deleted while deleting them is refused",
                     lambda: uids(ms, services), lambda seen: all(seen.values()))  # fmt: skip
        except WaitTimeout as exc:
            raise Inconclusive(f"the ValidatingAdmissionPolicy did not refuse every deletion: {exc}") from exc
    finally:
        refusal.remove()
    # A controller's own retry may wait out a long backoff after many failures (client-go's
    # reaches 1000 s): a change of the ModelServing makes it reconcile now. A controller that
    # forgot the failed deletion (no retry path) still leaves the Service behind.
    ms.patch(name, {"metadata": {"annotations": {RESYNC_ANNOTATION: secrets.token_hex(4)}}})
    gone, _ = _removed(ms, name, before, expected_pod_count(body, 1))
    what = f"Services {sorted(gone.services())} of the removed Role instance deleted once that is no longer refused"
    ms.wait("deletion", what, lambda: uids(ms, gone.services()), lambda seen: not any(seen.values()))


class _RefusedDeletes:
    """A ValidatingAdmissionPolicy (and its binding, for the test namespace only) refusing the
    deletion of the Services named; cluster-scoped, labelled so the sweeper finds it."""

    def __init__(self, ms: ModelServings, services: list[str]) -> None:
        from kubernetes import client

        self.ms = ms
        self.services = services
        self.api = client.AdmissionregistrationV1Api(ms.kube.api)
        self.name = f"kc-refuse-delete-{secrets.token_hex(4)}"

    def install(self) -> None:
        from kubernetes.client.exceptions import ApiException

        labels = cluster_scoped_labels(self.ms.run_id)
        names = ", ".join(json.dumps(s) for s in self.services)
        rule = {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["DELETE"], "resources": ["services"]}
        message = "refused on purpose by a conformance test (a failed Service deletion)"
        policy = {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingAdmissionPolicy",
            "metadata": {"name": self.name, "labels": labels},
            "spec": {
                "failurePolicy": "Fail",
                "matchConstraints": {"resourceRules": [rule]},
                "validations": [{"expression": f"!(oldObject.metadata.name in [{names}])", "message": message}],
            },
        }
        binding = {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingAdmissionPolicyBinding",
            "metadata": {"name": self.name, "labels": labels},
            "spec": {
                "policyName": self.name,
                "validationActions": ["Deny"],
                "matchResources": {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": self.ms.ns}}},
            },
        }
        try:
            self.api.create_validating_admission_policy(policy)  # type: ignore[arg-type]  # a dict body is sent as is
            self.api.create_validating_admission_policy_binding(binding)  # type: ignore[arg-type]
        except ApiException as exc:
            raise Inconclusive(
                f"cannot make a Service deletion fail: creating a ValidatingAdmissionPolicy was answered "
                f"{exc.status} {exc.reason}"
            ) from exc

        def refused() -> bool:
            try:
                self.ms.kube.core.delete_namespaced_service(self.services[0], self.ms.ns, dry_run="All")
            except ApiException as exc:
                return exc.status is not None and 400 <= exc.status < 500 and exc.status != 404
            return False

        try:
            self.ms.wait("admission", f"a dry-run deletion of Service {self.services[0]} to be refused by the policy "
                         f"{self.name}", refused)  # fmt: skip
        except WaitTimeout as exc:
            raise Inconclusive(f"cannot make a Service deletion fail: {exc}") from exc

    def remove(self) -> None:
        from kubernetes.client.exceptions import ApiException

        api = self.api
        for delete in (api.delete_validating_admission_policy_binding, api.delete_validating_admission_policy):
            try:
                delete(self.name)
            except ApiException as exc:
                if exc.status != 404:
                    raise
        self.ms.wait("admission", f"deletions of Services {self.services} to be allowed again",
                     self._allowed, bool)  # fmt: skip

    def _allowed(self) -> bool:
        from kubernetes.client.exceptions import ApiException

        try:
            self.ms.kube.core.delete_namespaced_service(self.services[0], self.ms.ns, dry_run="All")
        except ApiException as exc:
            return bool(exc.status == 404)
        return True
