"""DNSResolution: the names the headless-service plugin promises resolve through cluster DNS.

The DNS server is the one the cluster's provider reports (``details["dns"]`` of the cluster info the
runner passes: the embedded cluster's CoreDNS). Without one reachable from the suite the test is
inconclusive, never a pass: names are then only checked through EndpointSlices (HeadlessService).
Names are read from the objects, never derived: a member's address is its Pod's
``<spec.hostname>.<spec.subdomain>.<namespace>``, the entry address is a Pod's ``ENTRY_ADDRESS``.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

from conformance.framework.catalog import behaviour
from conformance.framework.features import Feature
from conformance.framework.modelserving import ModelServings, env_of, expected_pod_count
from conformance.framework.outcomes import Inconclusive

from . import ENTRY_ADDRESS, USING_PLUGINS, entries

CLUSTER_SUFFIX = "svc.cluster.local"
Server = tuple[str, int]


def dns_server(suite: Any) -> Server:
    """The cluster's DNS server (host, port), or :class:`Inconclusive` when there is none."""
    from conformance.cluster.provider import ClusterInfo

    if not suite.cluster_info:
        raise Inconclusive("no cluster DNS server reachable from the suite: no --cluster-info was given")
    info = ClusterInfo.from_json(Path(suite.cluster_info).read_text())
    address = info.details.get("dns")
    if not address:
        raise Inconclusive(
            f"no cluster DNS server reachable from the suite: the {info.provider} cluster '{info.name}' reports none"
        )
    host, _, port = str(address).rpartition(":")
    server = (host, int(port))
    try:  # a server that does not answer at all is cluster trouble, not the implementation's
        lookup(server, f"kubernetes.default.{CLUSTER_SUFFIX}")
    except Exception as exc:
        raise Inconclusive(
            f"no cluster DNS server reachable from the suite: {address} does not answer ({exc})"
        ) from exc
    return server


def lookup(server: Server, name: str) -> tuple[str, list[str]]:
    """(rcode, sorted A addresses) for ``name``, asked of ``server`` directly (no search path).

    Over TCP, which every DNS server serves too: it also works through a TCP-only forward (a
    ``kubectl port-forward`` to an in-cluster DNS server) and never loses a datagram."""
    import dns.message
    import dns.query
    import dns.rcode
    import dns.rdatatype

    response = dns.query.tcp(dns.message.make_query(name, "A"), server[0], port=server[1], timeout=2)
    addresses = sorted(rd.to_text() for rrset in response.answer if rrset.rdtype == dns.rdatatype.A for rd in rrset)
    return dns.rcode.to_text(response.rcode()), addresses


@behaviour(
    "dns/resolution/member-and-entry-addresses",
    "Every member's address <pod-hostname>.<discovery-service>.<namespace> and ENTRY_ADDRESS MUST resolve to the "
    "Pods' IPs through cluster DNS.",
    USING_PLUGINS,
    Feature.DNS_RESOLUTION,
)
def test_member_and_entry_addresses_resolve(ms: ModelServings, manifest: Any, suite: Any) -> None:
    server = dns_server(suite)
    body = manifest("dns-resolution")
    ms.create(body)
    pods = ms.wait_pods(body["metadata"]["name"], expected_pod_count(body))

    instances: dict[str, list[Any]] = defaultdict(list)
    for pod in pods:
        assert pod.spec.hostname and pod.spec.subdomain, (
            f"pod {pod.metadata.name} has hostname={pod.spec.hostname!r} subdomain={pod.spec.subdomain!r}: "
            "no member address to resolve"
        )
        assert pod.status.pod_ip, f"pod {pod.metadata.name} is Running without an IP"
        instances[pod.spec.subdomain].append(pod)

    # Member addresses: <pod-hostname>.<discovery-service>.<namespace> -> that Pod's IP.
    want = {f"{p.spec.hostname}.{p.spec.subdomain}.{ms.ns}.{CLUSTER_SUFFIX}": [p.status.pod_ip] for p in pods}

    # ENTRY_ADDRESS (<entry-service>.<namespace>) -> the entry Pod of the same Role instance.
    for discovery, members in sorted(instances.items()):
        entry = entries(members)
        assert len(entry) == 1, (
            f"Role instance with Discovery Service {discovery} has entry Pods {[p.metadata.name for p in entry]}"
        )
        carriers = [p for p in members if env_of(p).get(ENTRY_ADDRESS)]
        assert carriers, f"no Pod of the Role instance with Discovery Service {discovery} carries {ENTRY_ADDRESS}"
        for pod in carriers:
            name = f"{env_of(pod)[ENTRY_ADDRESS]}.{CLUSTER_SUFFIX}"
            assert want.get(name, [entry[0].status.pod_ip]) == [entry[0].status.pod_ip], (
                f"{ENTRY_ADDRESS} of pod {pod.metadata.name} ({name}) is also the address of IPs {want[name]}"
            )
            want[name] = [entry[0].status.pod_ip]

    def answers() -> dict[str, tuple[str, list[str]]]:
        return {name: lookup(server, name) for name in sorted(want)}

    def resolved(seen: dict[str, tuple[str, list[str]]]) -> bool:
        return all(seen[name] == ("NOERROR", sorted(ips)) for name, ips in want.items())

    ms.wait("endpoints", f"DNS ({server[0]}:{server[1]}) to answer {want}", answers, resolved)
