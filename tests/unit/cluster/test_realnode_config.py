"""A real node's configuration: every path under the node's directory, subnets clear of host routes,
containerd's and the kubelet's settings from the feasibility run (shared/notes/real-node.md)."""

from __future__ import annotations

import ipaddress
import tomllib
from pathlib import Path

import pytest

from conformance.cluster.errors import HarnessError
from conformance.cluster.realnode.config import (
    BRIDGE_PREFIX,
    DISABLED_CONTAINERD_PLUGINS,
    NODE_KIND_LABEL,
    KubeletPorts,
    NodeDirs,
    NodeNetwork,
    cni_conflist,
    containerd_argv,
    containerd_config,
    containerd_toml,
    kubelet_argv,
    kubelet_config,
    node_identity,
    plan_networks,
)
from conformance.cluster.realnode.images import SANDBOX_IMAGE

ROOT = Path("/run/kthena/c1/realnodes/real-gpu-0")
DIRS = NodeDirs(ROOT)
NET = NodeNetwork("kthena0", ipaddress.IPv4Network("10.244.3.0/24"))
RUNC = Path("/usr/sbin/runc")


def net(text: str) -> ipaddress.IPv4Network:
    return ipaddress.IPv4Network(text)


def strings(value: object) -> list[str]:
    """Every string anywhere in a nested configuration value."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in (*strings(k), *strings(v))]
    if isinstance(value, list | tuple):
        return [s for v in value for s in strings(v)]
    return []


# -- directories ---------------------------------------------------------------------------------


def test_every_directory_is_under_the_node_root() -> None:
    paths = [*DIRS.all(), DIRS.containerd_socket, DIRS.containerd_config, DIRS.kubelet_config, DIRS.kubelet_kubeconfig]
    assert all(p.is_relative_to(ROOT) for p in paths), [p for p in paths if not p.is_relative_to(ROOT)]
    assert len(set(paths)) == len(paths), "no two roles share a path"


def test_two_nodes_share_no_directory() -> None:
    a, b = NodeDirs(ROOT), NodeDirs(ROOT.with_name("real-npu-0"))
    assert not set(a.all()) & set(b.all())


# -- networks ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("count", "routes", "subnets"),
    [
        (1, [], ["10.244.0.0/24"]),
        (2, [], ["10.244.0.0/24", "10.244.1.0/24"]),
        (1, [net("10.244.0.0/24")], ["10.244.1.0/24"]),  # a route on the first /24: skipped
        (2, [net("10.244.0.0/23"), net("10.244.3.0/24")], ["10.244.2.0/24", "10.244.4.0/24"]),
        (1, [net("0.0.0.0/0"), net("192.168.1.0/24")], ["10.244.0.0/24"]),  # the default route is not in the way
        (1, [net("10.245.0.0/16"), net("172.17.0.0/16")], ["10.244.0.0/24"]),  # routes beside the pool
    ],
)
def test_subnets_avoid_host_routes(count: int, routes: list[ipaddress.IPv4Network], subnets: list[str]) -> None:
    planned = plan_networks(count, routes)
    assert [str(n.subnet) for n in planned] == subnets
    assert [n.bridge for n in planned] == [f"{BRIDGE_PREFIX}{i}" for i in range(count)]
    assert all(len(n.bridge) <= 15 for n in planned), "Linux interface names are at most 15 bytes"


def test_a_pool_taken_by_host_routes_is_an_error_naming_them() -> None:
    with pytest.raises(HarnessError) as caught:
        plan_networks(1, [net("10.0.0.0/8")])
    assert "10.0.0.0/8" in caught.value.message and "0 free" in caught.value.message
    assert caught.value.hint


def test_the_node_ip_is_the_bridge_gateway() -> None:
    assert NET.node_ip == "10.244.3.1" == str(NET.gateway)


# -- containerd ----------------------------------------------------------------------------------


def test_containerd_config_round_trips_as_toml_version_3() -> None:
    config = containerd_config(DIRS, runc=RUNC)
    assert tomllib.loads(containerd_toml(config)) == config
    assert config["version"] == 3 and config["imports"] == []


def test_containerd_writes_only_under_the_node_root() -> None:
    config = containerd_config(DIRS, runc=RUNC)
    paths = [s for s in strings(config) if s.startswith("/")]
    outside = [p for p in paths if not Path(p).is_relative_to(ROOT)]
    assert sorted(outside) == sorted([str(RUNC), "/usr/lib/cni"]), (
        "only the runc binary and the CNI plugins live elsewhere"
    )


@pytest.mark.parametrize(
    ("path", "value"),
    [
        (("plugins", "io.containerd.cri.v1.runtime", "restrict_oom_score_adj"), True),
        (("plugins", "io.containerd.cri.v1.runtime", "netns_mounts_under_state_dir"), True),
        (("plugins", "io.containerd.cri.v1.runtime", "cdi_spec_dirs"), [str(ROOT / "cdi")]),
        (("plugins", "io.containerd.cri.v1.runtime", "cni", "conf_dir"), str(ROOT / "cni/net.d")),
        (("plugins", "io.containerd.cri.v1.runtime", "cni", "bin_dirs"), ["/usr/lib/cni"]),
        (
            ("plugins", "io.containerd.cri.v1.runtime", "containerd", "runtimes", "runc", "options", "BinaryName"),
            str(RUNC),
        ),
        (
            ("plugins", "io.containerd.cri.v1.runtime", "containerd", "runtimes", "runc", "options", "SystemdCgroup"),
            False,
        ),
        (("plugins", "io.containerd.cri.v1.images", "pinned_images", "sandbox"), SANDBOX_IMAGE),
        (("grpc", "address"), str(ROOT / "containerd/containerd.sock")),
        (("disabled_plugins",), list(DISABLED_CONTAINERD_PLUGINS)),
    ],
)
def test_containerd_settings(path: tuple[str, ...], value: object) -> None:
    node: object = containerd_config(DIRS, runc=RUNC)
    for key in path:
        assert isinstance(node, dict) and key in node, f"{'.'.join(path)}: {key} missing"
        node = node[key]
    assert node == value


def test_nri_is_disabled() -> None:
    assert "io.containerd.nri.v1.nri" in containerd_config(DIRS, runc=RUNC)["disabled_plugins"]


def test_containerd_argv_names_its_config() -> None:
    assert containerd_argv(Path("/cache/containerd"), DIRS) == [
        "/cache/containerd",
        f"--config={DIRS.containerd_config}",
    ]


# -- CNI -----------------------------------------------------------------------------------------


def test_cni_bridge_uses_the_node_subnet_and_bridge() -> None:
    conf = cni_conflist(NET)
    bridge = conf["plugins"][0]
    assert (bridge["type"], bridge["bridge"], bridge["isGateway"]) == ("bridge", "kthena0", True)
    assert bridge["ipam"]["ranges"] == [[{"subnet": "10.244.3.0/24", "gateway": "10.244.3.1"}]]
    assert [p["type"] for p in conf["plugins"]] == ["bridge", "portmap"]


# -- kubelet -------------------------------------------------------------------------------------

PORTS = KubeletPorts(api=20250, healthz=20248)


def kubelet() -> dict[str, object]:
    return kubelet_config("real-gpu-0", NET, DIRS, PORTS, client_ca=Path("/pki/ca.crt"), cluster_dns=["10.244.3.1"])


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("failCgroupV1", False),
        ("failSwapOn", False),
        ("cgroupDriver", "cgroupfs"),
        ("cgroupRoot", "/kthena-real-gpu-0"),
        ("readOnlyPort", 0),
        ("address", "10.244.3.1"),
        ("port", 20250),
        ("healthzPort", 20248),
        ("healthzBindAddress", "127.0.0.1"),
        ("containerRuntimeEndpoint", f"unix://{ROOT}/containerd/containerd.sock"),
        ("clusterDNS", ["10.244.3.1"]),
        ("clusterDomain", "cluster.local"),
        ("authorization", {"mode": "Webhook"}),
        ("imageGCHighThresholdPercent", 100),
        ("podLogsDir", str(ROOT / "pod-logs")),
        ("volumePluginDir", str(ROOT / "volume-plugins")),
    ],
)
def test_kubelet_settings(key: str, value: object) -> None:
    assert kubelet()[key] == value


def test_the_kubelet_serves_the_certificate_it_is_given_or_signs_its_own() -> None:
    assert "tlsCertFile" not in kubelet() and "tlsPrivateKeyFile" not in kubelet()
    given = kubelet_config("real-gpu-0", NET, DIRS, PORTS, client_ca=Path("/pki/ca.crt"), cluster_dns=[],
                           serving=(Path("/pki/s.crt"), Path("/pki/s.key")))  # fmt: skip
    assert (given["tlsCertFile"], given["tlsPrivateKeyFile"]) == ("/pki/s.crt", "/pki/s.key")


def test_kubelet_authenticates_by_the_cluster_ca_and_never_anonymously() -> None:
    auth = kubelet()["authentication"]
    assert auth == {
        "anonymous": {"enabled": False},
        "webhook": {"enabled": True},
        "x509": {"clientCAFile": "/pki/ca.crt"},
    }


def test_kubelet_image_gc_low_threshold_is_below_the_high_one() -> None:
    config = kubelet()
    assert config["imageGCLowThresholdPercent"] < config["imageGCHighThresholdPercent"]  # type: ignore[operator]


def test_kubelet_argv_keeps_the_node_in_its_directory_and_labels_it_real() -> None:
    argv = kubelet_argv(Path("/cache/kubelet"), "real-gpu-0", NET, DIRS, {"gpu.example/count": "2"})
    assert argv[0] == "/cache/kubelet"
    flags = dict(a.removeprefix("--").split("=", 1) for a in argv[1:])
    assert flags["root-dir"] == str(ROOT / "kubelet") and flags["cert-dir"] == str(ROOT / "pki")
    assert flags["hostname-override"] == "real-gpu-0" and flags["node-ip"] == "10.244.3.1"
    assert flags["node-labels"] == f"gpu.example/count=2,{NODE_KIND_LABEL}=real"


def test_a_node_is_known_to_the_node_authorizer() -> None:
    assert node_identity("real-gpu-0") == ("system:node:real-gpu-0", "system:nodes")


def test_the_api_server_route_stands_in_for_kube_proxy_for_the_kubernetes_service() -> None:
    from conformance.cluster.realnode.config import NodeNetwork, api_server_route, route_localnet_path

    node = NodeNetwork("kthena1", net("10.244.1.0/24"))
    match = ["-d", "10.96.0.1/32", "-p", "tcp", "-m", "tcp", "--dport", "443"]
    dnat = ["-j", "DNAT", "--to-destination", "127.0.0.1:6443"]
    assert api_server_route(node, "10.96.0.1", "https://127.0.0.1:6443") == [
        ["iptables", "-w", "-t", "nat", "-A", "PREROUTING", "-i", "kthena1", *match, *dnat],
        ["iptables", "-w", "-t", "nat", "-A", "OUTPUT", *match, *dnat],
    ]
    assert route_localnet_path(node) == Path("/proc/sys/net/ipv4/conf/kthena1/route_localnet")
    with pytest.raises(HarnessError, match="has no host and port"):
        api_server_route(node, "10.96.0.1", "https://127.0.0.1")
