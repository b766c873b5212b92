"""LWSConversion: the child of a LeaderWorkerSet, its plugin chain and its Role DNS.

Size 1 is the case the spec singles out: "LWS keeps its worker template at size 1, so its
single-Pod Role still receives the two Services and generated DNS settings" (a Role with a
workerTemplate and workerReplicas 0, which the headless-service plugin serves: "A non-nil
workerTemplate still qualifies when workerReplicas is zero"). Size 3 is a group of a leader and two
workers: one Role instance of three Pods (reading C17).
"""

from __future__ import annotations

from typing import Any

from conformance.framework.catalog import behaviour
from conformance.framework.features import Feature
from conformance.framework.modelserving import ModelServings, env_of
from conformance.suites.headless_dns import (
    ENTRY_ADDRESS,
    entry_service_of,
    selects,
    wait_endpoints,
    wait_hostnames,
    wait_service,
)
from conformance.suites.headless_dns.instances import reaching
from conformance.suites.modelbooster.children import (
    Sources,
    declares_headless_service,
    plugin_chain,
    roles,
    wait_child,
)

from . import CONVERTERS, LEADER_IMAGE, LWS, WORKER_IMAGE, followers, leader_worker_set, leaders


def start(
    ms: ModelServings, body: dict[str, Any], count: int, *, ready: bool = True
) -> tuple[dict[str, Any], list[Any]]:
    """Create the LeaderWorkerSet; its one child and the child's ``count`` Pods."""
    sets = Sources(ms, LWS)
    sets.create(body)
    child = wait_child(ms, sets, body["metadata"]["name"])
    return child, ms.wait_pods(child["metadata"]["name"], count, ready=ready)


def _one_role(child: dict[str, Any]) -> dict[str, Any]:
    found = roles(child)
    layout = [(r.get("name"), r.get("workerTemplate") is not None, r.get("workerReplicas")) for r in found]
    assert len(found) == 1, (
        f"a LeaderWorkerSet group must be one Role; the child {child['metadata']['name']} has (name, workerTemplate "
        f"set, workerReplicas) {layout}"
    )
    return found[0]


def _discovery(pods: list[Any]) -> str:
    """The one Discovery Service (spec.subdomain) of a Role instance's Pods; hostnames are Pod names."""
    settings = {p.metadata.name: (p.spec.hostname, p.spec.subdomain) for p in pods}
    wrong = {n: s for n, s in settings.items() if s[0] != n or not s[1]}
    assert not wrong, (
        f"every Pod of the child's Role instance must get hostname = its Pod name and a subdomain (the "
        f"headless-service plugin's DNS settings); (hostname, subdomain) seen: {wrong}"
    )
    subdomains = {s[1] for s in settings.values()}
    assert len(subdomains) == 1, f"the Pods of one Role instance name different subdomains: {settings}"
    return str(next(iter(subdomains)))


@behaviour(
    "lws/convert/headless-service-declared",
    "A new ModelServing a LeaderWorkerSet is converted into MUST declare the headless-service plugin.",
    CONVERTERS,
    Feature.LWS_CONVERSION,
    requires=(Feature.HEADLESS_SERVICE,),
)
def test_a_new_child_declares_headless_service(ms: ModelServings) -> None:
    child, _ = start(ms, leader_worker_set("lws-plugin", 1), 1, ready=False)
    assert declares_headless_service(child), (
        f"the new child {child['metadata']['name']} does not declare headless-service (spec.plugins: "
        f"{child['spec'].get('plugins')}); the spec: LWS converters declare headless-service when creating new "
        "ModelServings"
    )


@behaviour(
    "lws/convert/size-one-keeps-worker-template",
    "A LeaderWorkerSet of size 1 MUST become a child whose single Role keeps a workerTemplate with workerReplicas 0.",
    CONVERTERS,
    Feature.LWS_CONVERSION,
)
def test_size_one_keeps_the_worker_template(ms: ModelServings) -> None:
    child, _ = start(ms, leader_worker_set("lws-one", 1), 1, ready=False)
    role = _one_role(child)
    assert role.get("workerTemplate") is not None and int(role.get("workerReplicas") or 0) == 0, (
        f"size 1 must keep the worker template with workerReplicas 0; the Role of {child['metadata']['name']} has "
        f"workerTemplate {'set' if role.get('workerTemplate') is not None else 'absent'}, workerReplicas "
        f"{role.get('workerReplicas')!r}"
    )


@behaviour(
    "lws/convert/size-one-dns",
    "The single Pod of a size-1 LeaderWorkerSet's child MUST get hostname and subdomain, be listed by its headless "
    "Discovery Service and by a second headless Service (the Entry Service).",
    CONVERTERS,
    Feature.LWS_CONVERSION,
    requires=(Feature.HEADLESS_SERVICE,),
)
def test_size_one_gets_both_services_and_dns(ms: ModelServings) -> None:
    _, pods = start(ms, leader_worker_set("lws-dns", 1), 1)
    (pod,) = pods
    discovery = _discovery(pods)
    assert wait_service(ms, discovery).spec.cluster_ip == "None", f"Discovery Service {discovery} is not headless"
    wait_hostnames(ms, discovery, pods)

    def entry_candidates() -> list[str]:
        services = ms.services()
        return sorted(n for n in reaching(ms, pods) if n != discovery and n in services
                      and services[n].spec.cluster_ip == "None")  # fmt: skip

    found = ms.wait("services", f"a headless Service other than the Discovery Service {discovery} listing pod "
                    f"{pod.metadata.name} (the Entry Service)", entry_candidates)  # fmt: skip
    if ENTRY_ADDRESS in env_of(pod):  # optional on an entry Pod (spec reading 7); when there, it names it
        named = entry_service_of(pod, ms.ns)
        assert named in found, f"{ENTRY_ADDRESS} of {pod.metadata.name} names {named}, not one of {found}"


@behaviour(
    "lws/convert/size-three-layout",
    "A LeaderWorkerSet of size 3 MUST become one Role with workerReplicas 2 whose instance runs the leader as entry "
    "and two workers, with an Entry Service selecting the leader only and a Discovery Service listing all three.",
    CONVERTERS,
    Feature.LWS_CONVERSION,
    requires=(Feature.HEADLESS_SERVICE,),
)
def test_size_three_is_one_instance_of_three_pods(ms: ModelServings) -> None:
    child, pods = start(ms, leader_worker_set("lws-three", 3), 3)
    role = _one_role(child)
    assert role.get("workerTemplate") is not None and role.get("workerReplicas") == 2, (
        f"size 3 must be a Role with a workerTemplate and workerReplicas 2; seen workerReplicas "
        f"{role.get('workerReplicas')!r}"
    )
    lead, members = leaders(pods), followers(pods)
    assert len(lead) == 1 and len(members) == 2, (
        f"a group of size 3 must run one leader ({LEADER_IMAGE}) and two workers ({WORKER_IMAGE}); Pods: "
        f"{ {p.metadata.name: sorted(c.image for c in p.spec.containers) for p in pods} }"
    )
    discovery = _discovery(pods)
    wait_hostnames(ms, discovery, pods)
    named = {w.metadata.name: entry_service_of(w, ms.ns) for w in members}
    assert len(set(named.values())) == 1, f"the workers name different Entry Services: {named}"
    entry_service = next(iter(named.values()))
    assert entry_service != discovery, f"the Entry Service {entry_service} must differ from the Discovery Service"
    svc = wait_service(ms, entry_service)
    assert svc.spec.cluster_ip == "None", f"Entry Service {entry_service} is not headless"
    if svc.spec.selector:
        wrong = [w.metadata.name for w in members if selects(svc.spec.selector, w.metadata.labels)]
        assert not wrong, f"Entry Service selector {svc.spec.selector} also selects the workers {wrong}"
    wait_endpoints(ms, entry_service, lead)


@behaviour(
    "lws/convert/plugins-stable-on-size-change",
    "When a LeaderWorkerSet's size changes (3 to 2) its child MUST carry the new group size with exactly the plugin "
    "chain it had.",
    CONVERTERS,
    Feature.LWS_CONVERSION,
    requires=(Feature.HEADLESS_SERVICE,),
)
def test_the_plugin_chain_is_kept_when_the_size_changes(ms: ModelServings) -> None:
    sets = Sources(ms, LWS)
    child, _ = start(ms, leader_worker_set("lws-resize", 3), 3, ready=False)
    before = plugin_chain(child)
    sets.patch("lws-resize", {"spec": {"leaderWorkerTemplate": {"size": 2}}})

    def carried(c: dict[str, Any]) -> bool:
        live = [p for p in ms.pods(c["metadata"]["name"]) if not p.metadata.deletion_timestamp]
        return len(live) == 2 and len(live) == len(ms.pods(c["metadata"]["name"]))

    after = plugin_chain(wait_child(ms, sets, "lws-resize", until=carried, wait="scale",
                                    what=" with 2 Pods after the size went from 3 to 2"))  # fmt: skip
    assert after == before, (
        f"the child's plugin chain changed when the LeaderWorkerSet's size went from 3 to 2: before {before}, after "
        f"{after} (the spec: converters keep the declaration stable as worker counts change)"
    )
