"""DeletionIdentityChanged: a Pod that reuses the identity of a Role instance being deleted."""

from __future__ import annotations

from typing import Any

from conformance.framework.catalog import behaviour
from conformance.framework.features import Feature
from conformance.framework.modelserving import ModelServings, env_of, expected_pod_count, member
from conformance.framework.outcomes import Inconclusive

from . import ENTRY_ADDRESS, USING_PLUGINS, entry_service_of, hold, pod_copy, read_service, release, wait_pod_gone


@behaviour(
    "dns/deletion/identity-changed",
    "When a new Pod reuses the identity of a Role instance whose deletion is pending, the controller MUST report "
    "DeletionIdentityChanged and MUST NOT delete, adopt or change that Pod nor remove the existing Services of the "
    "instance.",
    USING_PLUGINS,
    Feature.DELETION_IDENTITY,
)
def test_replacement_pod_during_scale_down_is_preserved(ms: ModelServings, manifest: Any) -> None:
    """Scale 2 ServingGroups to 1 while every Pod is held by a finalizer, so the Pods the
    implementation deletes stay Terminating whichever group it picks (the spec does not say).
    One terminating Pod (a worker if one is terminating) is let go and immediately replaced by a
    Pod of the same name, labels and ownerReferences (a new UID): the instance's deletion is still
    pending (the rest of the instance is held), so the replacement has reused its identity."""
    body = manifest("dns-pair")
    body["spec"]["replicas"] = 2
    name = body["metadata"]["name"]
    ms.create(body)
    pods = ms.wait_pods(name, expected_pod_count(body))
    ms.wait_settled(name)
    held = [p.metadata.name for p in pods]
    try:
        for pod in held:
            hold(ms, pod)
        ms.patch(name, {"spec": {"replicas": 1}})  # spec.replicas: /scale is an optional feature of its own

        def terminating() -> list[Any]:
            return [p for p in ms.pods(name) if p.metadata.deletion_timestamp]

        doomed = ms.wait("scale", f"a Pod of {ms.ns}/{name} to be Terminating after scaling to 1", terminating)
        # A worker when one is terminating already (the spec does not order a Role's deletion): the
        # rest of its instance stays held, so the instance's deletion is still pending.
        victim = next((p for p in doomed if member(p) == "worker"), doomed[0])
        pod_name, old_uid, labels = victim.metadata.name, victim.metadata.uid, dict(victim.metadata.labels or {})
        owners = [(r.kind, r.name, r.uid, bool(r.controller)) for r in victim.metadata.owner_references or []]
        replacement = pod_copy(ms, victim, keep_owners=True)
        services = {victim.spec.subdomain}
        if ENTRY_ADDRESS in env_of(victim):  # always on workers, optional on the entry (spec reading 7)
            services.add(entry_service_of(victim, ms.ns))
        services -= {None, ""}
        problems = release(ms, [pod_name])
        if problems:
            raise Inconclusive(f"could not release Pod {pod_name}: {problems}")
        wait_pod_gone(ms, pod_name, old_uid)
        new_uid = ms.kube.core.create_namespaced_pod(ms.ns, replacement).metadata.uid

        reported = ms.wait_reported(name, "DeletionIdentityChanged")
        # The instance's networking that still exists now must stay (the spec lets a deletion
        # remove auxiliary Services before the replacement appeared: those are not asserted).
        kept = {}
        for svc_name in sorted(services):
            svc = read_service(ms, svc_name)
            if svc is not None and not svc.metadata.deletion_timestamp:
                kept[svc_name] = svc.metadata.uid

        def observe() -> tuple[Any, dict[str, Any]]:
            pod = ms.kube.core.read_namespaced_pod(pod_name, ms.ns)
            now = {n: read_service(ms, n) for n in kept}
            return pod, now

        def preserved(seen: tuple[Any, dict[str, Any]]) -> bool:
            pod, now = seen
            same_pod = (
                pod.metadata.uid == new_uid
                and not pod.metadata.deletion_timestamp
                and dict(pod.metadata.labels or {}) == labels
                and [(r.kind, r.name, r.uid, bool(r.controller)) for r in pod.metadata.owner_references or []] == owners
            )
            same_services = all(
                s is not None and s.metadata.uid == kept[n] and not s.metadata.deletion_timestamp
                for n, s in now.items()
            )
            return same_pod and same_services

        ms.holds(
            f"replacement Pod {pod_name} (uid {new_uid}) kept unchanged with Services {sorted(kept)} "
            f"after DeletionIdentityChanged ({reported})",
            observe,
            preserved,
        )
        leftover = release(ms, held)
        if leftover:
            raise Inconclusive(f"could not release held Pods: {leftover}")
        # "resolve the conflicting workload identity before expecting deletion to finish": advice, not a
        # promise of when (or that) it finishes; the replacement is removed for the namespace's cleanup only.
        ms.kube.core.delete_namespaced_pod(pod_name, ms.ns, body={"preconditions": {"uid": new_uid}})
    finally:
        leftover = release(ms, held)
    if leftover:
        raise Inconclusive(f"could not release held Pods: {leftover}")
