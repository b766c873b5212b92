"""Pod networking and cluster DNS for the harness's kind clusters, set up from the host.

kind's default CNI (kindnetd) and kubeadm's CoreDNS add-on both need images this machine cannot
pull. So the cluster is made with ``disableDefaultCNI`` and kubeadm's ``addon/coredns`` phase
skipped, and the harness does their work itself once the nodes have joined:

- networking: on each node a CNI config for the ``ptp`` plugin (a veth and a host route per Pod,
  so every Pod packet is routed through the node's iptables, which Services need; Debian's CNI
  plugins in ``/usr/lib/cni``) with ``host-local`` addresses from the node's ``podCIDR``; a route
  to every other node's ``podCIDR`` through that node's address on the kind network; masquerade
  for Pod traffic leaving the Pod network. What kindnetd does, written once, since kind nodes keep
  their addresses for the cluster's life;
- DNS: a CoreDNS Deployment (the harness's CoreDNS build, preloaded in the node image) behind the
  ``kube-dns`` Service at the address kubelets are configured with (the tenth of the Service
  range), answering cluster names only (the build has no ``forward`` plugin).

Everything here is pure text; :mod:`.kind` runs it through ``docker exec`` in the nodes.
"""

from __future__ import annotations

import ipaddress
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import yaml

from .kindnode import COREDNS_IMAGE

POD_SUBNET = "10.244.0.0/16"  # kind's default podSubnet
SERVICE_SUBNET = "10.96.0.0/16"  # kind's default serviceSubnet
CNI_CONFIG_PATH = "/etc/cni/net.d/10-kthena.conflist"


@dataclass(frozen=True)
class NodeAddress:
    """A node's name, its address on the kind network and its Pod range (``spec.podCIDR``)."""

    name: str
    address: str
    pod_cidr: str


def nodes_from_json(text: str) -> list[NodeAddress]:
    """The nodes of a ``kubectl get nodes -o json`` answer that have a podCIDR and an InternalIP (pure)."""
    found = []
    for item in json.loads(text).get("items", []):
        cidr = (item.get("spec") or {}).get("podCIDR")
        addresses = (item.get("status") or {}).get("addresses") or []
        internal = [a["address"] for a in addresses if a.get("type") == "InternalIP" and ":" not in a["address"]]
        if cidr and internal:
            found.append(NodeAddress(item["metadata"]["name"], internal[0], cidr))
    return sorted(found, key=lambda n: n.name)


def cni_config(pod_cidr: str) -> str:
    """The CNI config list of a node whose Pods take addresses from ``pod_cidr`` (pure)."""
    ipaddress.ip_network(pod_cidr)  # refuses a malformed range
    doc = {
        "cniVersion": "1.0.0",
        "name": "kthena",
        "plugins": [
            {
                "type": "ptp",
                "ipMasq": False,
                "mtu": 1500,
                "ipam": {"type": "host-local", "ranges": [[{"subnet": pod_cidr}]], "routes": [{"dst": "0.0.0.0/0"}]},
            },
            {"type": "portmap", "capabilities": {"portMappings": True}},
        ],
    }
    return json.dumps(doc, indent=1) + "\n"


def node_network_script(node: NodeAddress, others: Sequence[NodeAddress], pod_subnet: str = POD_SUBNET) -> str:
    """The shell script that sets up one node's Pod network (pure; idempotent)."""
    lines = [
        "set -eu",
        "mkdir -p /etc/cni/net.d",
        f"cat > {CNI_CONFIG_PATH}.tmp <<'EOF'",
        cni_config(node.pod_cidr).rstrip("\n"),
        "EOF",
        f"mv {CNI_CONFIG_PATH}.tmp {CNI_CONFIG_PATH}",
    ]
    for other in others:
        if other.name != node.name:
            ipaddress.ip_address(other.address)
            ipaddress.ip_network(other.pod_cidr)
            lines.append(f"ip route replace {other.pod_cidr} via {other.address}")
    rule = f"POSTROUTING -s {pod_subnet} ! -d {pod_subnet} -j MASQUERADE"
    lines.append(f"iptables -t nat -C {rule} 2>/dev/null || iptables -t nat -A {rule}")
    return "\n".join(lines) + "\n"


def dns_address(service_subnet: str = SERVICE_SUBNET) -> str:
    """The cluster DNS address kubeadm configures kubelets with: the tenth address of the range."""
    return str(ipaddress.ip_network(service_subnet)[10])


COREFILE = """.:53 {
    errors
    ready :8181
    kubernetes cluster.local in-addr.arpa ip6.arpa {
        pods insecure
        fallthrough in-addr.arpa ip6.arpa
        ttl 30
    }
}
"""


def coredns_manifests(image: str = COREDNS_IMAGE, service_subnet: str = SERVICE_SUBNET) -> list[dict[str, Any]]:
    """CoreDNS for a kind cluster: RBAC, Corefile, Deployment, the ``kube-dns`` Service (pure)."""
    labels = {"k8s-app": "kube-dns"}
    meta: dict[str, Any] = {
        "namespace": "kube-system",
        "labels": {**labels, "app.kubernetes.io/managed-by": "kthena-conformance"},
    }
    rules = [
        {"apiGroups": [""], "resources": ["endpoints", "services", "pods", "namespaces"], "verbs": ["list", "watch"]},
        {"apiGroups": ["discovery.k8s.io"], "resources": ["endpointslices"], "verbs": ["list", "watch"]},
    ]
    container = {
        "name": "coredns",
        "image": image,
        "imagePullPolicy": "IfNotPresent",
        "args": ["-conf", "/etc/coredns/Corefile"],
        "ports": [
            {"name": "dns", "containerPort": 53, "protocol": "UDP"},
            {"name": "dns-tcp", "containerPort": 53, "protocol": "TCP"},
        ],
        "readinessProbe": {"httpGet": {"path": "/ready", "port": 8181}, "periodSeconds": 2},
        "resources": {"requests": {"cpu": "50m", "memory": "40Mi"}},
        "volumeMounts": [{"name": "config", "mountPath": "/etc/coredns", "readOnly": True}],
    }
    return [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "coredns", **meta}},
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": "system:coredns"},
            "rules": rules,
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": "system:coredns"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "system:coredns"},
            "subjects": [{"kind": "ServiceAccount", "name": "coredns", "namespace": "kube-system"}],
        },
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "coredns", **meta},
            "data": {"Corefile": COREFILE},
        },
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "coredns", **meta},
            "spec": {
                "replicas": 1,
                "selector": {"matchLabels": labels},
                "template": {
                    "metadata": {"labels": labels},
                    "spec": {
                        "serviceAccountName": "coredns",
                        "priorityClassName": "system-cluster-critical",
                        "dnsPolicy": "Default",
                        "tolerations": [{"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"}],
                        "containers": [container],
                        "volumes": [{"name": "config", "configMap": {"name": "coredns"}}],
                    },
                },
            },
        },
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": "kube-dns", **meta, "labels": {**meta["labels"], "kubernetes.io/name": "CoreDNS"}},
            "spec": {
                "clusterIP": dns_address(service_subnet),
                "selector": labels,
                "ports": [
                    {"name": "dns", "port": 53, "protocol": "UDP"},
                    {"name": "dns-tcp", "port": 53, "protocol": "TCP"},
                ],
            },
        },
    ]


def render(manifests: Sequence[Mapping[str, Any]]) -> str:
    return yaml.safe_dump_all([dict(m) for m in manifests], sort_keys=False)
