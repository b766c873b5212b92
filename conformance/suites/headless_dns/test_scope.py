"""HeadlessServiceDNS: which Pods get the plugin's Services and DNS settings, and how many Services.

"For each in-scope Role instance with a workerTemplate, the plugin maintains two Headless
Services": the Entry Service (only the entry Pod) and the Discovery Service (the entry and all
workers "in the same Role instance"); "The plugin accepts scope.roles". So a Role outside
scope.roles gets nothing, every qualifying instance (also one with workerReplicas 0) exactly two
Services, and an instance's Services reach no Pod of another instance, in particular of another
ServingGroup. Instances and Services are read from the objects (see :mod:`.instances`).
"""

from __future__ import annotations

import functools
from typing import Any

from conformance.framework.catalog import behaviour
from conformance.framework.features import Feature
from conformance.framework.modelserving import ModelServings, env_of, expected_pod_count, member, role_of

from . import ENTRY_ADDRESS, USING_PLUGINS, entries, wait_endpoints
from .instances import confined, instances, reaching


def _start(ms: ModelServings, body: dict[str, Any]) -> list[Any]:
    ms.create(body)
    return ms.wait_pods(body["metadata"]["name"], expected_pod_count(body))


@behaviour(
    "dns/scope/roles",
    "A headless-service plugin whose scope.roles lists Roles MUST give Services and hostname, subdomain and "
    "ENTRY_ADDRESS to the Pods of those Roles only: no Service reaches a Pod of another Role and its Pods get none "
    "of these settings.",
    USING_PLUGINS,
    Feature.HEADLESS_SERVICE,
)
def test_scope_roles_limits_services_and_dns(ms: ModelServings, manifest: Any) -> None:
    body = manifest("plugins-two-roles")  # Roles alpha and beta, each an entry Pod and a worker
    body["spec"]["plugins"] = [{"name": "headless-service", "type": "BuiltIn", "scope": {"roles": ["alpha"]}}]
    pods = _start(ms, body)
    alpha = [p for p in pods if role_of(p) == "alpha"]
    beta = [p for p in pods if role_of(p) == "beta"]
    # The plugin has acted on the Role in scope: its instance's Services list its Pods.
    (inside,) = instances(ms, alpha)
    assert inside.entry_service, f"the worker of Role alpha carries no {ENTRY_ADDRESS}"
    wait_endpoints(ms, inside.discovery, alpha)
    wait_endpoints(ms, inside.entry_service, entries(alpha))
    settings = {}
    for pod in beta:
        found = [f"hostname={pod.spec.hostname!r}"] if pod.spec.hostname else []
        found += [f"subdomain={pod.spec.subdomain!r}"] if pod.spec.subdomain else []
        found += [f"{ENTRY_ADDRESS} in container {c}" for c in range(len(pod.spec.containers))
                  if ENTRY_ADDRESS in env_of(pod, c)]  # fmt: skip
        if found:
            settings[f"{member(pod)} Pod {pod.metadata.name}"] = found
    assert not settings, f"Pods of Role beta (not in scope.roles [alpha]) got the plugin's DNS settings: {settings}"
    ms.holds(
        f"no Service selecting or listing the Pods of Role beta {sorted(p.metadata.name for p in beta)} "
        "(not in scope.roles [alpha])",
        lambda: reaching(ms, beta),
        lambda seen: not seen,
    )


@behaviour(
    "dns/scope/target-all-accepted",
    "A headless-service plugin whose scope.target is explicitly All MUST be accepted and act as with no scope: "
    "hostname and subdomain on every Pod and a Discovery Service listing them.",
    USING_PLUGINS,
    Feature.HEADLESS_SERVICE,
)
def test_explicit_target_all_is_accepted(ms: ModelServings, manifest: Any) -> None:
    body = manifest("dns-pair")
    body["spec"]["plugins"][0]["scope"] = {"target": "All"}
    pods = _start(ms, body)
    hostnames = {p.metadata.name: p.spec.hostname for p in pods}
    assert all(name == host for name, host in hostnames.items()), f"spec.hostname must be the Pod name: {hostnames}"
    (instance,) = instances(ms, pods)
    wait_endpoints(ms, instance.discovery, pods)


@behaviour(
    "dns/scope/two-services-per-instance",
    "Every in-scope Role instance with a workerTemplate, also one with workerReplicas 0, MUST have exactly two "
    "headless Services of its own reaching its Pods (the Entry and the Discovery Service).",
    USING_PLUGINS,
    Feature.HEADLESS_SERVICE,
)
def test_each_instance_has_exactly_two_services(ms: ModelServings, manifest: Any) -> None:
    pods = _start(ms, manifest("dns-count"))  # Role pair (one worker) and Role zero (workerReplicas 0)
    by_role = {role: [p for p in pods if role_of(p) == role] for role in ("pair", "zero")}
    names = {role: {p.metadata.name for p in members} for role, members in by_role.items()}

    def per_role() -> dict[str, dict[str, set[str]]]:
        reach = reaching(ms, pods)
        return {role: confined(reach, members) for role, members in names.items()}

    for role, members in by_role.items():
        (instance,) = instances(ms, members)
        wait_endpoints(ms, instance.discovery, members)
        ms.wait("services", f"two Services reaching the Pods {list(instance.pods)} of Role {role}",
                per_role, functools.partial(lambda r, seen: len(seen[r]) >= 2, role))  # fmt: skip

    def exactly_two(seen: dict[str, dict[str, set[str]]]) -> bool:
        return all(len(services) == 2 for services in seen.values())

    ms.holds(
        "exactly two headless Services (Entry and Discovery) reaching the Pods of each Role instance and no other "
        "Pod, for Role pair (one worker) and Role zero (workerReplicas 0)",
        per_role,
        exactly_two,
    )


@behaviour(
    "dns/scope/no-cross-group-leakage",
    "The Entry and Discovery Services of a Role instance MUST reach only the Pods of that instance in its own "
    "ServingGroup, never the same Role's Pods in another ServingGroup.",
    USING_PLUGINS,
    Feature.HEADLESS_SERVICE,
)
def test_services_do_not_reach_other_servinggroups(ms: ModelServings, manifest: Any) -> None:
    body = manifest("dns-pair")
    body["spec"]["replicas"] = 2  # two ServingGroups, one instance of Role server each
    pods = _start(ms, body)
    found = instances(ms, pods)
    layout = {i.discovery: i.pods for i in found}
    assert len(found) == 2 and all(len(i.pods) == 2 for i in found), (
        f"2 ServingGroups of one Role instance (an entry and a worker) must use 2 Discovery Services of 2 Pods each; "
        f"subdomains: {layout}"
    )
    by_name = {p.metadata.name: p for p in pods}
    want: dict[str, set[str]] = {}
    for instance in found:
        assert instance.entry_service, f"the worker of the Role instance {instance.discovery} has no {ENTRY_ADDRESS}"
        members = [by_name[n] for n in instance.pods]
        want[instance.discovery] = set(instance.pods)
        want[instance.entry_service] = {p.metadata.name for p in entries(members)}
    for service, names in want.items():
        listed = functools.partial(lambda svc: set(ms.endpoints(svc)), service)
        ms.wait("endpoints", f"EndpointSlices of {ms.ns}/{service} to list {sorted(names)}", listed,
                functools.partial(lambda expected, seen: seen >= expected, names))  # fmt: skip

    def seen() -> dict[str, set[str]]:
        out: dict[str, set[str]] = {s: set() for s in want}
        for service, reached in reaching(ms, pods).items():
            if service in out:
                out[service] |= reached
        return out

    ms.holds(
        f"each Entry and Discovery Service reaching only its own Role instance's Pods: {want}",
        seen,
        lambda now: now == want,
    )
