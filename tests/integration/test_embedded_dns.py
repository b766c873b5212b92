"""The embedded cluster's CoreDNS answers, for real, what cluster DNS answers: headless Services'
per-Pod records, Service names and Pod records, straight from the API objects, over UDP and TCP.

Every answer is polled (the kubernetes plugin follows the API through watches), never slept for.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import dns.message
import dns.query
import dns.rcode
import dns.rdatatype
import dns.reversename
import pytest
from kubernetes import client

from conformance.cluster.local.provider import LocalProvider, dns_enabled
from conformance.cluster.provider import ClusterInfo
from conformance.framework.waits import wait_for

pytestmark = pytest.mark.cluster

IMAGE = "registry.example/model-server:v1"
DOMAIN = "svc.cluster.local"

Answer = tuple[str, frozenset[str]]  # (rcode, answers as text)


@pytest.fixture(scope="session")
def dns_server(cluster: ClusterInfo) -> tuple[str, int]:
    address = cluster.details.get("dns")
    if not address:
        if cluster.provider != "local" or not dns_enabled():
            pytest.skip(f"the {cluster.provider} cluster exposes no DNS server to this machine")
        pytest.fail("the embedded cluster runs no DNS server: build CoreDNS with `make binaries` (see its log)")
    host, _, port = str(address).rpartition(":")
    return host, int(port)


def query(server: tuple[str, int], name: str, rdtype: str = "A", *, tcp: bool = False) -> Answer:
    request = dns.message.make_query(name, rdtype)
    send = dns.query.tcp if tcp else dns.query.udp
    response = send(request, server[0], port=server[1], timeout=2)
    answers = frozenset(
        rd.to_text() for rrset in response.answer if rrset.rdtype == dns.rdatatype.from_text(rdtype) for rd in rrset
    )
    return dns.rcode.to_text(response.rcode()), answers


def resolves_to(server: tuple[str, int], name: str, want: set[str], rdtype: str = "A", *, tcp: bool = False) -> Answer:
    return wait_for(
        f"{name} {rdtype} -> {sorted(want)}",
        lambda: query(server, name, rdtype, tcp=tcp),
        until=lambda a: a == ("NOERROR", frozenset(want)),
        timeout=30,
    )


@pytest.fixture
def core(api_client: Any) -> client.CoreV1Api:
    return client.CoreV1Api(api_client)


def headless(core: client.CoreV1Api, namespace: str, name: str, app: str) -> None:
    body = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name},
        "spec": {
            "clusterIP": "None",
            "selector": {"app": app},
            "publishNotReadyAddresses": True,
            "ports": [{"name": "http", "port": 8000}],
        },
    }
    core.create_namespaced_service(namespace, body)


def member(core: client.CoreV1Api, namespace: str, name: str, app: str, subdomain: str) -> str:
    """A Pod with hostname = its name and the given subdomain; returns its IP once it has one."""
    body = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": app}},
        "spec": {"hostname": name, "subdomain": subdomain, "containers": [{"name": "main", "image": IMAGE}]},
    }
    core.create_namespaced_pod(namespace, body)
    pod = wait_for(
        f"pod {namespace}/{name} to get an IP",
        lambda: core.read_namespaced_pod(name, namespace),
        until=lambda p: bool(p.status and p.status.pod_ip),
    )
    return str(pod.status.pod_ip)


@pytest.fixture
def group(core: client.CoreV1Api, namespace: str) -> Iterator[dict[str, str]]:
    """A headless Service ``grp`` selecting two Pods ``m-0`` and ``m-1`` (hostname + subdomain)."""
    headless(core, namespace, "grp", "grp")
    yield {name: member(core, namespace, name, "grp", "grp") for name in ("m-0", "m-1")}


def test_cluster_info_names_the_dns_server(cluster: ClusterInfo, dns_server: tuple[str, int]) -> None:
    assert dns_server[0] == "127.0.0.1"
    assert any(line.startswith("DNS: CoreDNS") for line in cluster.simulates)
    assert cluster.as_report()["dns"] == f"127.0.0.1:{dns_server[1]}"


def test_pod_hostname_under_its_headless_service_resolves_to_the_pod_ip(
    dns_server: tuple[str, int], namespace: str, group: dict[str, str]
) -> None:
    assert len(set(group.values())) == 2, f"kwok must give each Pod its own IP: {group}"
    for name, ip in group.items():
        resolves_to(dns_server, f"{name}.grp.{namespace}.{DOMAIN}", {ip})
        resolves_to(dns_server, f"{name}.grp.{namespace}.{DOMAIN}", {ip}, tcp=True)


def test_headless_service_name_resolves_to_every_selected_pod(
    dns_server: tuple[str, int], namespace: str, group: dict[str, str]
) -> None:
    resolves_to(dns_server, f"grp.{namespace}.{DOMAIN}", set(group.values()))
    srv = {f"0 50 8000 {name}.grp.{namespace}.{DOMAIN}." for name in group}
    resolves_to(dns_server, f"_http._tcp.grp.{namespace}.{DOMAIN}", srv, "SRV")


def test_records_follow_the_api(
    core: client.CoreV1Api, dns_server: tuple[str, int], namespace: str, group: dict[str, str]
) -> None:
    resolves_to(dns_server, f"grp.{namespace}.{DOMAIN}", set(group.values()))
    core.delete_namespaced_pod("m-1", namespace, grace_period_seconds=0)
    resolves_to(dns_server, f"grp.{namespace}.{DOMAIN}", {group["m-0"]})
    wait_for(
        f"m-1.grp.{namespace} to be gone from DNS",
        lambda: query(dns_server, f"m-1.grp.{namespace}.{DOMAIN}"),
        until=lambda a: a[0] == "NXDOMAIN",
        timeout=30,
    )


def test_pod_and_reverse_records(dns_server: tuple[str, int], namespace: str, group: dict[str, str]) -> None:
    ip = group["m-0"]
    resolves_to(dns_server, f"{ip.replace('.', '-')}.{namespace}.pod.cluster.local", {ip})
    resolves_to(dns_server, dns.reversename.from_address(ip).to_text(), {f"m-0.grp.{namespace}.{DOMAIN}."}, "PTR")
    # `pods verified`: an address no Pod in the namespace has gets no record.
    assert query(dns_server, f"10-255-255-254.{namespace}.pod.cluster.local")[0] == "NXDOMAIN"


def test_cluster_ip_service_and_names_outside_the_cluster(
    core: client.CoreV1Api, dns_server: tuple[str, int], namespace: str
) -> None:
    body = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web"}, "spec": {"ports": [{"port": 80}]}}
    ip = core.create_namespaced_service(namespace, body).spec.cluster_ip
    resolves_to(dns_server, f"web.{namespace}.{DOMAIN}", {ip})
    resolves_to(dns_server, f"kubernetes.default.{DOMAIN}", {"10.96.0.1"})
    assert query(dns_server, f"missing.{namespace}.{DOMAIN}")[0] == "NXDOMAIN"
    assert query(dns_server, "example.com")[0] == "REFUSED"  # it is nobody's resolver: no forwarding


@pytest.mark.serial
def test_coredns_restarts_on_the_same_port(
    cluster: ClusterInfo, dns_server: tuple[str, int], namespace: str, group: dict[str, str]
) -> None:
    if cluster.provider != "local":
        pytest.skip("restarting a component is a local-provider operation")
    name = f"m-0.grp.{namespace}.{DOMAIN}"
    resolves_to(dns_server, name, {group["m-0"]})
    provider = LocalProvider()
    before = provider.status(cluster.name) or {}
    provider.restart_component(cluster.name, "coredns")
    after = provider.status(cluster.name) or {}
    assert after["components"]["coredns"] != before["components"]["coredns"]
    assert after["dns"] == before["dns"] == f"127.0.0.1:{dns_server[1]}"
    resolves_to(dns_server, name, {group["m-0"]})
