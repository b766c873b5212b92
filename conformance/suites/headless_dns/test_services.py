"""HeadlessServiceDNS: the Entry and Discovery Services of a Role instance and the Pods' DNS fields."""

from __future__ import annotations

import functools
from collections import defaultdict
from typing import Any

from conformance.cluster.faults import Fault
from conformance.framework.catalog import behaviour
from conformance.framework.features import Feature
from conformance.framework.modelserving import ModelServings, env_of, expected_pod_count, role_of
from conformance.framework.outcomes import Inconclusive

from . import (
    ENTRY_ADDRESS,
    USING_PLUGINS,
    entries,
    entry_service_of,
    hold,
    read_service,
    release,
    selects,
    wait_endpoints,
    wait_hostnames,
    wait_service,
    workers,
)


def _start(ms: ModelServings, body: dict[str, Any]) -> list[Any]:
    ms.create(body)
    return ms.wait_pods(body["metadata"]["name"], expected_pod_count(body))


def _one_instance(ms: ModelServings, pods: list[Any]) -> tuple[Any, list[Any], str, str]:
    """(entry Pod, worker Pods, Entry Service, Discovery Service) of a single Role instance."""
    entry, members = entries(pods), workers(pods)
    assert len(entry) == 1 and members, f"expected one entry Pod and workers, got {[p.metadata.name for p in pods]}"
    named = {w.metadata.name: entry_service_of(w, ms.ns) for w in members}
    assert len(set(named.values())) == 1, f"the workers of one Role instance name different Entry Services: {named}"
    subdomains = {p.metadata.name: p.spec.subdomain for p in pods}
    assert all(subdomains.values()) and len(set(subdomains.values())) == 1, (
        f"every Pod of one Role instance must name the same Discovery Service as spec.subdomain: {subdomains}"
    )
    return entry[0], members, next(iter(named.values())), next(iter(subdomains.values()))


@behaviour(
    "dns/entry-service/selects-entry-only",
    "For each Role instance with a workerTemplate the headless-service plugin MUST maintain a headless Entry "
    "Service selecting only the entry Pod, and every worker Pod MUST carry ENTRY_ADDRESS=<entry-service>.<namespace>.",
    USING_PLUGINS,
    Feature.HEADLESS_SERVICE,
)
def test_entry_service_selects_only_the_entry_pod(ms: ModelServings, manifest: Any) -> None:
    pods = _start(ms, manifest("dns-basic"))
    entry, members, entry_service, _ = _one_instance(ms, pods)
    svc = wait_service(ms, entry_service)
    assert svc.spec.cluster_ip == "None", (
        f"Entry Service {entry_service} is not headless: clusterIP {svc.spec.cluster_ip}"
    )
    if svc.spec.selector:  # a selectorless Service with managed EndpointSlices is judged by the slices alone
        assert selects(svc.spec.selector, entry.metadata.labels), (
            f"Entry Service selector {svc.spec.selector} does not select the entry Pod {entry.metadata.name}"
        )
        wrong = [w.metadata.name for w in members if selects(svc.spec.selector, w.metadata.labels)]
        assert not wrong, f"Entry Service selector {svc.spec.selector} also selects worker Pods {wrong}"
    wait_endpoints(ms, entry_service, [entry])


@behaviour(
    "dns/discovery-service/lists-members",
    "Every Pod of a Role instance with a workerTemplate MUST get hostname set to its Pod name and subdomain set to a "
    "headless Discovery Service, other than the Entry Service, whose EndpointSlices list the entry and every worker "
    "Pod with hostname set to the Pod name.",
    USING_PLUGINS,
    Feature.HEADLESS_SERVICE,
)
def test_discovery_service_lists_every_member_with_its_hostname(ms: ModelServings, manifest: Any) -> None:
    pods = _start(ms, manifest("dns-basic"))
    _, _, entry_service, discovery = _one_instance(ms, pods)
    hostnames = {p.metadata.name: p.spec.hostname for p in pods}
    assert all(name == host for name, host in hostnames.items()), f"spec.hostname must be the Pod name: {hostnames}"
    assert discovery != entry_service, (
        f"the Discovery Service (spec.subdomain {discovery}) must differ from the Entry Service in {ENTRY_ADDRESS}"
    )
    svc = wait_service(ms, discovery)
    assert svc.spec.cluster_ip == "None", (
        f"Discovery Service {discovery} is not headless: clusterIP {svc.spec.cluster_ip}"
    )
    wait_hostnames(ms, discovery, pods)


@behaviour(
    "dns/services/publish-not-ready",
    "The Entry and Discovery Services MUST publish their Pods' addresses as ready while those Pods are not Ready.",
    USING_PLUGINS,
    Feature.HEADLESS_SERVICE,
)
def test_addresses_are_published_before_readiness(ms: ModelServings, manifest: Any, faults: Any) -> None:
    pods = _start(ms, manifest("dns-pair"))
    entry, _, entry_service, discovery = _one_instance(ms, pods)
    wait_endpoints(ms, entry_service, [entry])
    wait_endpoints(ms, discovery, pods)
    names = [p.metadata.name for p in pods]
    try:
        for name in names:
            faults.inject(ms.ns, name, Fault.NOT_READY)

        def ready(name: str) -> bool:
            pod = ms.kube.core.read_namespaced_pod(name, ms.ns)
            return any(c.type == "Ready" and c.status == "True" for c in pod.status.conditions or [])

        ms.wait("pods-running", f"Pods {names} to be NotReady", lambda: [n for n in names if ready(n)], lambda r: not r)

        def published() -> dict[str, dict[str, Any]]:
            return {"entry": ms.endpoints(entry_service), "discovery": ms.endpoints(discovery)}

        def all_ready(seen: dict[str, dict[str, Any]]) -> bool:
            entry_ok = set(seen["entry"]) == {entry.metadata.name} and all(e["ready"] for e in seen["entry"].values())
            members_ok = set(seen["discovery"]) == set(names) and all(e["ready"] for e in seen["discovery"].values())
            return entry_ok and members_ok

        ms.holds(
            f"NotReady Pods {names} listed as ready endpoints of {entry_service} and {discovery}", published, all_ready
        )
    finally:
        for name in names:
            faults.inject(ms.ns, name, Fault.CLEAR)


@behaviour(
    "dns/scope/no-worker-template",
    "A Role without workerTemplate MUST get no hostname or subdomain on its Pods and no headless Service selecting "
    "them.",
    USING_PLUGINS,
    Feature.HEADLESS_SERVICE,
)
def test_role_without_worker_template_gets_no_dns(ms: ModelServings, manifest: Any) -> None:
    pods = _start(ms, manifest("dns-roles"))
    solo = next(p for p in pods if role_of(p) == "solo")
    zero = next(p for p in pods if role_of(p) == "zero")
    # The Role that qualifies has its Discovery Service listing its Pod: the plugin has acted.
    assert zero.spec.subdomain, f"pod {zero.metadata.name} of a Role with a workerTemplate has no subdomain"
    wait_endpoints(ms, zero.spec.subdomain, [zero])
    assert not solo.spec.hostname and not solo.spec.subdomain, (
        f"pod {solo.metadata.name} of a Role without workerTemplate got hostname={solo.spec.hostname!r} "
        f"subdomain={solo.spec.subdomain!r}"
    )
    services = ms.services()
    headless = {n for n, s in services.items() if s.spec.cluster_ip == "None"}
    selecting = sorted(n for n in headless if selects(services[n].spec.selector, solo.metadata.labels))
    assert not selecting, (
        f"headless Services {selecting} select pod {solo.metadata.name} of a Role without workerTemplate"
    )
    slices = ms.kube.discovery.list_namespaced_endpoint_slice(ms.ns).items
    listing = sorted(
        {
            service
            for s in slices
            if (service := (s.metadata.labels or {}).get("kubernetes.io/service-name")) in headless
            for ep in s.endpoints or []
            if ep.target_ref is not None and ep.target_ref.name == solo.metadata.name
        }
    )
    assert not listing, f"EndpointSlices of {listing} list pod {solo.metadata.name} of a Role without workerTemplate"


@behaviour(
    "dns/scope/zero-workers",
    "A Role with a workerTemplate and workerReplicas 0 MUST still get an Entry Service and a Discovery Service and "
    "its Pods MUST get hostname and subdomain.",
    USING_PLUGINS,
    Feature.HEADLESS_SERVICE,
)
def test_role_with_zero_workers_still_gets_both_services(ms: ModelServings, manifest: Any) -> None:
    pods = _start(ms, manifest("dns-roles"))
    zero = next(p for p in pods if role_of(p) == "zero")
    name = zero.metadata.name
    assert zero.spec.hostname == name, f"pod {name}: spec.hostname {zero.spec.hostname!r} is not the Pod name"
    discovery = zero.spec.subdomain
    assert discovery, f"pod {name} of a Role with a workerTemplate and workerReplicas 0 has no subdomain"
    assert wait_service(ms, discovery).spec.cluster_ip == "None", f"Discovery Service {discovery} is not headless"
    wait_hostnames(ms, discovery, [zero])
    # With no worker to carry ENTRY_ADDRESS, the Entry Service is the other headless Service listing the Pod.

    def listing() -> dict[str, set[str]]:
        out: dict[str, set[str]] = defaultdict(set)
        for s in ms.kube.discovery.list_namespaced_endpoint_slice(ms.ns).items:
            service = (s.metadata.labels or {}).get("kubernetes.io/service-name")
            for ep in s.endpoints or []:
                if service and ep.target_ref is not None:
                    out[service].add(ep.target_ref.name)
        return out

    def others(seen: dict[str, set[str]]) -> list[str]:
        return sorted(svc for svc, members in seen.items() if name in members and svc != discovery)

    def found(seen: dict[str, set[str]]) -> bool:
        return bool(others(seen))

    seen = ms.wait("services", f"a second Service (the Entry Service) listing pod {name}", listing, found)
    if ENTRY_ADDRESS in env_of(zero):  # optional on an entry Pod (spec reading 7); when there, it names it
        entry_service = entry_service_of(zero, ms.ns)
        assert entry_service in others(seen), (
            f"{ENTRY_ADDRESS} of {name} names {entry_service}, which is not a Service other than the Discovery "
            f"Service {discovery} listing it (those: {others(seen)})"
        )
        candidates = [entry_service]
    else:
        candidates = others(seen)
    headless = [c for c in candidates if (svc := read_service(ms, c)) is not None and svc.spec.cluster_ip == "None"]
    assert headless, f"no headless Entry Service among {candidates} lists pod {name}"
    assert seen[headless[0]] == {name}, f"Entry Service {headless[0]} lists {sorted(seen[headless[0]])}"


@behaviour(
    "dns/scope/target-all-only",
    "A headless-service plugin whose scope.target is Entry or Worker MUST be rejected at admission or reported in a "
    "Warning Event on the ModelServing, never silently accepted.",
    USING_PLUGINS,
    Feature.HEADLESS_SERVICE,
)
def test_scope_target_other_than_all_is_refused(ms: ModelServings, manifest: Any) -> None:
    for target in ("Entry", "Worker"):
        body = manifest("dns-basic")
        name = body["metadata"]["name"] = f"dns-{target.lower()}"
        body["spec"]["plugins"][0]["scope"] = {"target": target}
        rejection = ms.try_create(body)
        if rejection is not None:
            assert 400 <= rejection.status < 500, f"scope.target {target}: unexpected refusal {rejection}"
            continue
        ms.wait(
            "events",
            f"a Warning Event on {ms.ns}/{name}, accepted with headless-service scope.target {target}",
            functools.partial(_warnings, ms, name),
        )


@behaviour(
    "dns/services/recreated",
    "A deleted Entry or Discovery Service of an existing Role instance MUST be recreated.",
    USING_PLUGINS,
    Feature.HEADLESS_SERVICE,
)
def test_deleted_services_are_recreated(ms: ModelServings, manifest: Any) -> None:
    pods = _start(ms, manifest("dns-pair"))
    entry, _, entry_service, discovery = _one_instance(ms, pods)
    before = {name: wait_service(ms, name).metadata.uid for name in (entry_service, discovery)}
    for name in before:
        ms.kube.core.delete_namespaced_service(name, ms.ns)
    for name, uid in before.items():
        wait_service(ms, name, other_than=uid)
    wait_endpoints(ms, entry_service, [entry])
    wait_hostnames(ms, discovery, pods)


@behaviour(
    "dns/services/auxiliary",
    "Deleting the Entry and Discovery Services, or holding one of them terminating, MUST NOT delete, recreate or add "
    "any Pod of the ModelServing nor change its ServingGroup count.",
    USING_PLUGINS,
    Feature.HEADLESS_SERVICE,
)
def test_services_do_not_decide_whether_pods_exist(ms: ModelServings, manifest: Any) -> None:
    body = manifest("dns-pair")
    name = body["metadata"]["name"]
    pods = _start(ms, body)
    ms.wait_settled(name)
    _, _, entry_service, discovery = _one_instance(ms, pods)
    for svc in (entry_service, discovery):
        wait_service(ms, svc)
    uids = ms.uids(name)
    hold(ms, entry_service, "service")
    try:
        for svc in (entry_service, discovery):
            ms.kube.core.delete_namespaced_service(svc, ms.ns)

        def observe() -> tuple[dict[str, str], list[str], Any]:
            pods = ms.pods(name)
            deleting = [p.metadata.name for p in pods if p.metadata.deletion_timestamp]
            return {p.metadata.name: p.metadata.uid for p in pods}, deleting, (ms.get(name).get("status") or {})

        ms.holds(
            f"Pods {sorted(uids)} unchanged and 1 ServingGroup while Service {entry_service} is terminating and "
            f"{discovery} was deleted",
            observe,
            lambda seen: seen[0] == uids and not seen[1] and seen[2].get("replicas") == 1,
        )
    finally:
        problems = release(ms, [entry_service], "service")
    if problems:
        raise Inconclusive(f"could not release Service {entry_service}: {problems}")


@behaviour(
    "dns/services/per-instance",
    "Every Role instance MUST get its own Entry Service and its own Discovery Service.",
    USING_PLUGINS,
    Feature.HEADLESS_SERVICE,
)
def test_each_role_instance_gets_its_own_pair(ms: ModelServings, manifest: Any) -> None:
    body = manifest("dns-pair")
    body["spec"]["template"]["roles"][0]["replicas"] = 2
    pods = _start(ms, body)
    by_subdomain: dict[str, list[Any]] = defaultdict(list)
    for pod in pods:
        assert pod.spec.subdomain, f"pod {pod.metadata.name} has no subdomain"
        by_subdomain[pod.spec.subdomain].append(pod)
    layout = {k: sorted(p.metadata.name for p in v) for k, v in by_subdomain.items()}
    assert len(by_subdomain) == 2, f"2 Role instances must use 2 Discovery Services; subdomains: {layout}"
    names: set[str] = set()
    for discovery, members in sorted(by_subdomain.items()):
        entry, _, entry_service, _ = _one_instance(ms, members)
        names |= {discovery, entry_service}
        wait_endpoints(ms, entry_service, [entry])
        wait_hostnames(ms, discovery, members)
    assert len(names) == 4, f"2 Role instances must have 4 distinct Services, got {sorted(names)} ({layout})"


def _warnings(ms: ModelServings, name: str) -> list[Any]:
    return [e for e in ms.events(name) if e.type == "Warning"]
