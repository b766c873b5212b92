"""Role instances and their Services as an outside observer finds them (no implementation labels).

Why this module exists: the scope and Service-lifecycle tests need, for every Role instance, its
Pods and its two Services, and, for any set of Pods, every Service that reaches them. The spec
gives no labels for that, so an instance is read from its Pods' ``spec.subdomain`` (its
Discovery Service: "Inspect the Pod's spec.subdomain for the generated discovery name"), its
Entry Service from a worker's ``ENTRY_ADDRESS``; a Service reaches a Pod when its selector selects
the Pod or its EndpointSlices list it (a selectorless Service with managed slices counts too).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from conformance.framework.modelserving import ModelServings, member

from . import entry_service_of, selects, workers


@dataclass(frozen=True)
class Instance:
    """One Role instance: its Pods (by name), its Discovery Service and, when it has a worker to
    carry ENTRY_ADDRESS, its Entry Service (else None)."""

    pods: tuple[str, ...]
    discovery: str
    entry_service: str | None

    def services(self) -> set[str]:
        return {self.discovery, *([self.entry_service] if self.entry_service else [])}


def instances(ms: ModelServings, pods: Iterable[Any]) -> list[Instance]:
    """The Role instances of ``pods`` (every Pod must have a subdomain), by Discovery Service."""
    by_subdomain: dict[str, list[Any]] = defaultdict(list)
    for pod in pods:
        assert pod.spec.subdomain, (
            f"pod {pod.metadata.name} ({member(pod)}) of a Role with a workerTemplate has no spec.subdomain"
        )
        by_subdomain[pod.spec.subdomain].append(pod)
    out = []
    for discovery, members in sorted(by_subdomain.items()):
        named = {entry_service_of(w, ms.ns) for w in workers(members)}
        assert len(named) <= 1, f"the workers of the Role instance {discovery} name different Entry Services: {named}"
        out.append(Instance(tuple(sorted(p.metadata.name for p in members)), discovery, next(iter(named), None)))
    return out


def reaching(ms: ModelServings, pods: Iterable[Any]) -> dict[str, set[str]]:
    """Every headless Service (``clusterIP: None``, what the plugin "maintains") in the namespace that
    selects one of ``pods`` or whose EndpointSlices list one of them: Service name -> the names of
    those Pods it reaches. A Service with a cluster IP (a user's, a mesh's or an implementation's own
    load-balancing Service) is no plugin Service and is not counted."""
    wanted = {p.metadata.name: p for p in pods}
    services = ms.services()
    headless = {name for name, svc in services.items() if (svc.spec.cluster_ip or "") == "None"}
    out: dict[str, set[str]] = defaultdict(set)
    for name in headless:
        for pod_name, pod in wanted.items():
            if selects(services[name].spec.selector, pod.metadata.labels):
                out[name].add(pod_name)
    for s in ms.kube.discovery.list_namespaced_endpoint_slice(ms.ns).items:
        service = (s.metadata.labels or {}).get("kubernetes.io/service-name")
        for ep in s.endpoints or []:
            if service in headless and ep.target_ref is not None and ep.target_ref.name in wanted:
                out[service].add(ep.target_ref.name)
    return dict(out)


def confined(reach: dict[str, set[str]], members: Iterable[str]) -> dict[str, set[str]]:
    """The Services of ``reach`` (over every Pod of the ModelServing) that reach some of ``members``
    and nothing else: a plugin Service is one Role instance's (an Entry or a Discovery Service), so a
    headless Service spanning instances is the implementation's own, not counted as the plugin's."""
    names = set(members)
    return {svc: reached for svc, reached in reach.items() if reached & names and reached <= names}


def uids(ms: ModelServings, names: Iterable[str]) -> dict[str, str | None]:
    """Service name -> its UID (None when it does not exist or is terminating)."""
    services = ms.services()
    out: dict[str, str | None] = {}
    for name in names:
        svc = services.get(name)
        out[name] = svc.metadata.uid if svc is not None and not svc.metadata.deletion_timestamp else None
    return out
