"""kind Pod networking and CoreDNS, as text: nodes read from the API, each node's CNI config and
routes, the DNS address and manifests."""

from __future__ import annotations

import json

import pytest
import yaml

from conformance.cluster.kindnet import (
    CNI_CONFIG_PATH,
    COREFILE,
    NodeAddress,
    cni_config,
    coredns_manifests,
    dns_address,
    node_network_script,
    nodes_from_json,
    render,
)


def _node(name: str, cidr: str | None, ip: str | None) -> dict[str, object]:
    addresses = [{"type": "Hostname", "address": name}] + ([{"type": "InternalIP", "address": ip}] if ip else [])
    spec = {"podCIDR": cidr} if cidr else {}
    return {"metadata": {"name": name}, "spec": spec, "status": {"addresses": addresses}}


def test_nodes_from_json_keeps_nodes_with_a_range_and_an_address() -> None:
    text = json.dumps({"items": [
        _node("demo-worker", "10.244.1.0/24", "172.18.0.3"),
        _node("demo-control-plane", "10.244.0.0/24", "172.18.0.2"),
        _node("demo-worker2", None, "172.18.0.4"),
        _node("demo-worker3", "10.244.3.0/24", None),
    ]})  # fmt: skip
    assert nodes_from_json(text) == [
        NodeAddress("demo-control-plane", "172.18.0.2", "10.244.0.0/24"),
        NodeAddress("demo-worker", "172.18.0.3", "10.244.1.0/24"),
    ]


def test_cni_config_is_ptp_with_the_nodes_range() -> None:
    doc = json.loads(cni_config("10.244.2.0/24"))
    ptp, portmap = doc["plugins"]
    assert ptp["type"] == "ptp" and ptp["ipMasq"] is False
    assert ptp["ipam"] == {"type": "host-local", "ranges": [[{"subnet": "10.244.2.0/24"}]],
                           "routes": [{"dst": "0.0.0.0/0"}]}  # fmt: skip
    assert portmap == {"type": "portmap", "capabilities": {"portMappings": True}}


def test_cni_config_refuses_a_malformed_range() -> None:
    with pytest.raises(ValueError):
        cni_config("10.244.2.0/33")


NODES = [
    NodeAddress("a", "172.18.0.2", "10.244.0.0/24"),
    NodeAddress("b", "172.18.0.3", "10.244.1.0/24"),
    NodeAddress("c", "172.18.0.4", "10.244.2.0/24"),
]


def test_node_network_script_routes_to_every_other_node() -> None:
    script = node_network_script(NODES[1], NODES)
    assert script.startswith("set -eu\n")
    assert f"mv {CNI_CONFIG_PATH}.tmp {CNI_CONFIG_PATH}" in script
    assert "ip route replace 10.244.0.0/24 via 172.18.0.2" in script
    assert "ip route replace 10.244.2.0/24 via 172.18.0.4" in script
    assert "10.244.1.0/24 via" not in script
    assert "-s 10.244.0.0/16 ! -d 10.244.0.0/16 -j MASQUERADE" in script
    body = script.split("<<'EOF'\n", 1)[1].split("\nEOF\n", 1)[0]
    assert json.loads(body) == json.loads(cni_config("10.244.1.0/24"))


@pytest.mark.parametrize(("subnet", "address"), [("10.96.0.0/16", "10.96.0.10"), ("10.0.0.0/12", "10.0.0.10")])
def test_dns_address(subnet: str, address: str) -> None:
    assert dns_address(subnet) == address


def test_coredns_manifests() -> None:
    docs = list(yaml.safe_load_all(render(coredns_manifests(image="img:1"))))
    kinds = [d["kind"] for d in docs]
    assert kinds == ["ServiceAccount", "ClusterRole", "ClusterRoleBinding", "ConfigMap", "Deployment", "Service"]
    service = docs[-1]
    assert service["metadata"]["name"] == "kube-dns" and service["spec"]["clusterIP"] == "10.96.0.10"
    pod = docs[4]["spec"]["template"]["spec"]
    assert pod["containers"][0]["image"] == "img:1"
    assert pod["containers"][0]["imagePullPolicy"] == "IfNotPresent"
    assert docs[3]["data"]["Corefile"] == COREFILE
    # only plugins the harness's CoreDNS build has (gomodules/coredns/main.go)
    for plugin in ("forward", "health", "prometheus", "loop", "reload", "cache"):
        assert f"    {plugin}" not in COREFILE
