"""The embedded cluster's DNS server as data: Corefile, CoreDNS's files, flags, RBAC, ports, and the
wrapper module that builds it (pure, no Go, no cluster)."""

from __future__ import annotations

import io
import os
import re
import socket
import subprocess
from pathlib import Path

import pytest
import yaml

from conformance.cluster.binaries import EXTRAS, MIN_GO, extras_plan
from conformance.cluster.local import provider as local_provider
from conformance.cluster.local.components import (
    CLUSTER_DOMAIN,
    COREDNS_RBAC,
    COREDNS_USER,
    Ports,
    RunLayout,
    components,
    corefile,
    dns_component,
    dns_files,
)
from conformance.cluster.local.supervisor import Supervisor, free_dns_port
from conformance.cluster.paths import go_modules_root
from conformance.cluster.provider import ClusterInfo
from conformance.cluster.spec import ClusterSpec
from conformance.cluster.versions import COREDNS

ROOT = Path("/runs/kthena-test")
BIN = Path("/opt/kthena-bin")
PORTS = Ports(
    etcd_client=23791,
    etcd_peer=23801,
    apiserver=36443,
    controller_manager=31257,
    scheduler=31259,
    kwok=31247,
    dns=31053,
    dns_ready=31181,
)
MODULE = go_modules_root() / "coredns"
KUBECONFIG = ROOT / "kubeconfigs" / "coredns.yaml"


def _blocks(text: str) -> list[tuple[str, list[str]]]:
    """(header, body lines) of each ``{ ... }`` block, nested ones flattened in order, comments dropped."""
    out: list[tuple[str, list[str]]] = []
    stack: list[tuple[str, list[str]]] = []
    for raw in text.splitlines():
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        if line.endswith("{"):
            stack.append((line[:-1].strip(), []))
        elif line == "}":
            out.append(stack.pop())
        else:
            stack[-1][1].append(line)
    assert not stack, "unbalanced braces"
    return out


@pytest.fixture(scope="module")
def blocks() -> dict[str, tuple[str, list[str]]]:
    """The Corefile's server block and its kubernetes plugin block: (header, body lines)."""
    text = corefile(port=31053, ready_port=31181, kubeconfig=KUBECONFIG, context="coredns")
    found = _blocks(text)
    assert len(found) == 2
    return {"kubernetes" if header.startswith("kubernetes") else "server": (header, body) for header, body in found}


def _words(blocks: dict[str, tuple[str, list[str]]]) -> set[str]:
    return {line.split()[0] for _, body in blocks.values() for line in body}


# -- Corefile ---------------------------------------------------------------------------------------


def test_server_block_serves_the_cluster_zones_on_the_picked_port(blocks: dict[str, tuple[str, list[str]]]) -> None:
    assert blocks["server"][0].split() == ["cluster.local:31053", "in-addr.arpa:31053", "ip6.arpa:31053"]


def test_kubernetes_plugin_is_authoritative_for_the_same_zones(blocks: dict[str, tuple[str, list[str]]]) -> None:
    assert blocks["kubernetes"][0].split() == ["kubernetes", CLUSTER_DOMAIN, "in-addr.arpa", "ip6.arpa"]


@pytest.mark.parametrize(
    "line",
    [
        pytest.param("bind 127.0.0.1", id="loopback-only"),
        pytest.param("ready 127.0.0.1:31181", id="ready-endpoint"),
        pytest.param("errors", id="errors"),
        pytest.param("log", id="query-log"),
    ],
)
def test_server_block_lines(blocks: dict[str, tuple[str, list[str]]], line: str) -> None:
    assert line in blocks["server"][1]


@pytest.mark.parametrize(
    "line",
    [
        pytest.param(f"kubeconfig {KUBECONFIG} coredns", id="own-kubeconfig-and-context"),
        pytest.param("pods verified", id="pods-verified"),
    ],
)
def test_kubernetes_block_lines(blocks: dict[str, tuple[str, list[str]]], line: str) -> None:
    assert line in blocks["kubernetes"][1]


@pytest.mark.parametrize("directive", ["forward", "cache", "health", "reload", "loop", "fallthrough", "endpoint"])
def test_corefile_has_no(blocks: dict[str, tuple[str, list[str]]], directive: str) -> None:
    assert directive not in _words(blocks)


def test_every_server_directive_is_compiled_into_the_wrapper(blocks: dict[str, tuple[str, list[str]]]) -> None:
    used = {line.split()[0] for line in blocks["server"][1]} | {"kubernetes"}
    assert used <= set(_wrapper_directives())


# -- files, command line, ports -----------------------------------------------------------------------


def test_dns_files_paths() -> None:
    assert set(dns_files(RunLayout(ROOT), PORTS)) == {ROOT / "config" / "Corefile", KUBECONFIG}


def test_dns_kubeconfig_uses_the_coredns_certificate() -> None:
    doc = yaml.safe_load(dns_files(RunLayout(ROOT), PORTS)[KUBECONFIG])
    assert doc["current-context"] == "coredns"
    (cluster,) = doc["clusters"]
    assert cluster["cluster"]["server"] == f"https://127.0.0.1:{PORTS.apiserver}"
    (user,) = doc["users"]
    assert user["user"] == {
        "client-certificate": str(ROOT / "pki" / "coredns.crt"),
        "client-key": str(ROOT / "pki" / "coredns.key"),
    }


def test_dns_files_corefile_names_the_kubeconfig_it_writes() -> None:
    files = dns_files(RunLayout(ROOT), PORTS)
    assert f"kubeconfig {KUBECONFIG} coredns" in files[ROOT / "config" / "Corefile"]
    assert "cluster.local:31053 " in files[ROOT / "config" / "Corefile"]


def test_dns_component() -> None:
    comp = dns_component(RunLayout(ROOT), BIN / "coredns", PORTS)
    assert comp.name == "coredns"
    assert comp.argv == (str(BIN / "coredns"), f"-conf={ROOT / 'config' / 'Corefile'}")
    assert comp.health_url == "http://127.0.0.1:31181/ready"
    assert comp.after == ("kube-apiserver",)


@pytest.mark.parametrize("missing", [{"dns": None}, {"dns_ready": None}, {"dns": None, "dns_ready": None}])
def test_dns_needs_both_ports(missing: dict[str, None]) -> None:
    ports = Ports(**{**PORTS.__dict__, **missing})
    with pytest.raises(ValueError, match="DNS ports"):
        dns_component(RunLayout(ROOT), BIN / "coredns", ports)
    with pytest.raises(ValueError, match="DNS ports"):
        dns_files(RunLayout(ROOT), ports)


def test_control_plane_components_are_unchanged_by_dns() -> None:
    names = [c.name for c in components(RunLayout(ROOT), BIN, PORTS)]
    assert names == ["etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok"]


def test_ports_as_dict_lists_dns_ports_only_when_picked() -> None:
    assert PORTS.as_dict()["dns"] == 31053
    assert PORTS.as_dict()["dns_ready"] == 31181
    without = Ports(**{**PORTS.__dict__, "dns": None, "dns_ready": None})
    assert "dns" not in without.as_dict()
    assert "dns_ready" not in without.as_dict()


def test_free_dns_port_is_free_for_udp_and_tcp() -> None:
    port = free_dns_port()
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as udp, socket.socket() as tcp:
        udp.bind(("127.0.0.1", port))
        tcp.bind(("127.0.0.1", port))


def test_free_dns_port_skips_excluded_ports() -> None:
    seen = {free_dns_port() for _ in range(5)}
    assert free_dns_port(exclude=seen) not in seen


@pytest.mark.parametrize(("coredns", "dns"), [(Path("/bin/coredns"), True), (None, False)])
def test_supervisor_picks_distinct_ports(tmp_path: Path, coredns: Path | None, dns: bool) -> None:
    sup = Supervisor(RunLayout(tmp_path), ClusterSpec(), BIN, None, io.StringIO(), coredns=coredns)
    ports = sup.pick_ports()
    values = list(ports.as_dict().values())
    assert len(values) == len(set(values)) == (8 if dns else 6)
    assert (ports.dns is not None) is dns
    assert (ports.dns_ready is not None) is dns


# -- RBAC -------------------------------------------------------------------------------------------


def test_coredns_role_reads_what_the_kubernetes_plugin_watches() -> None:
    (_, role), _ = COREDNS_RBAC
    rules = role["rules"]
    granted = {(group, resource) for rule in rules for group in rule["apiGroups"] for resource in rule["resources"]}
    assert {("", "services"), ("", "pods"), ("", "namespaces"), ("discovery.k8s.io", "endpointslices")} <= granted
    for rule in rules:
        assert rule["verbs"] == ["list", "watch"]  # read-only


def test_coredns_binding_binds_the_certificate_user_to_the_role() -> None:
    (role_path, role), (binding_path, binding) = COREDNS_RBAC
    assert role_path.endswith("/clusterroles") and binding_path.endswith("/clusterrolebindings")
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "ClusterRole",
        "name": role["metadata"]["name"],
    }
    assert binding["subjects"] == [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": COREDNS_USER}]


# -- provider: DNS in ClusterInfo -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "enabled"),
    [(None, True), ("1", True), ("yes", True), ("0", False), ("false", False), ("OFF", False), (" no ", False)],
)
def test_dns_enabled(monkeypatch: pytest.MonkeyPatch, value: str | None, enabled: bool) -> None:
    if value is None:
        monkeypatch.delenv(local_provider.DNS_ENV, raising=False)
    else:
        monkeypatch.setenv(local_provider.DNS_ENV, value)
    assert local_provider.dns_enabled() is enabled


def test_simulated_dns_line_replaces_the_no_dns_line() -> None:
    assert local_provider.DNS_LINE.startswith(f"DNS: CoreDNS {COREDNS} ")
    assert "forwards nothing" in local_provider.DNS_LINE
    assert local_provider.NO_DNS in local_provider.SIMULATED


def test_cluster_info_carries_dns_through_json_and_into_the_report() -> None:
    info = ClusterInfo("local", "x", Path("/k"), None, "v1.36.3", (), {"dns": "127.0.0.1:31053", "ports": {}})
    again = ClusterInfo.from_json(info.to_json())
    assert again.details["dns"] == "127.0.0.1:31053"
    assert again.as_report()["dns"] == "127.0.0.1:31053"
    assert "ports" not in again.as_report()


# -- the wrapper module ------------------------------------------------------------------------------


def _wrapper_directives() -> list[str]:
    text = (MODULE / "main.go").read_text()
    block = re.search(r"var directives = \[\]string\{(.*?)\}", text, re.DOTALL)
    assert block, "main.go has no directives list"
    return re.findall(r'"([a-z0-9_]+)"', block[1])


def test_wrapper_imports_exactly_the_plugins_it_orders() -> None:
    imported = re.findall(r'_ "github.com/coredns/coredns/plugin/([a-z0-9_]+)"', (MODULE / "main.go").read_text())
    assert sorted(imported) == sorted(_wrapper_directives())
    assert "kubernetes" in imported


def test_wrapper_directive_order_follows_coredns() -> None:
    # CoreDNS's order (core/dnsserver/zdirectives.go), for the plugins the wrapper uses.
    upstream = ["bind", "ready", "health", "errors", "log", "cache", "kubernetes", "forward"]
    mine = _wrapper_directives()
    assert mine == [d for d in upstream if d in mine]


def test_wrapper_go_mod_requires_the_pinned_coredns_without_replaces() -> None:
    text = (MODULE / "go.mod").read_text()
    assert re.search(rf"^require github.com/coredns/coredns {re.escape(COREDNS)}$", text, re.MULTILINE)
    assert "replace" not in text
    match = re.search(r"^go (\d+)\.(\d+)", text, re.MULTILINE)
    assert match and (int(match[1]), int(match[2])) <= MIN_GO


def test_extras_plan_builds_coredns_stamped_with_its_version() -> None:
    (step,) = extras_plan()
    assert step.module == "coredns" and step.outputs == ("coredns",) == EXTRAS
    argv = step.argv(Path("/out"))
    assert argv[argv.index("-o") + 1] == "/out/coredns"
    assert argv[-1] == "."
    assert f"-X github.com/coredns/coredns/coremain.GitCommit={COREDNS}" in argv[argv.index("-ldflags") + 1]


# -- run directories being started are not swept ----------------------------------------------------
# (Found while running DNS tests beside other clusters: a concurrent `up` sweeps first, and used to
# take a run directory whose supervisor had not yet locked it for a stale one.)


def _dead_pid() -> int:
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


@pytest.mark.parametrize(("starter", "swept"), [("self", False), ("dead", True), (None, True), ("garbage", True)])
def test_sweep_spares_a_run_directory_being_started(tmp_path: Path, starter: str | None, swept: bool) -> None:
    run = tmp_path / "runs" / "starting"
    run.mkdir(parents=True)
    if starter is not None:
        pid = {"self": str(os.getpid()), "dead": str(_dead_pid()), "garbage": "x"}[starter]
        (run / local_provider.STARTING).write_text(pid)
    removed = local_provider.LocalProvider(runs=tmp_path / "runs").sweep()
    assert (removed == ["starting"]) is swept
    assert run.exists() is not swept


# -- real nodes' Pods -------------------------------------------------------------------------------


def test_without_real_nodes_only_loopback_is_served() -> None:
    headers = [h for h, _ in _blocks(corefile(port=31053, ready_port=31181, kubeconfig=KUBECONFIG, context="c"))]
    assert not any(":53 " in f"{h} " for h in headers)


def test_real_nodes_bridges_are_served_on_port_53_with_the_same_zones() -> None:
    text = corefile(
        port=31053, ready_port=31181, kubeconfig=KUBECONFIG, context="c", pod_facing=["10.244.0.1", "10.244.1.1"]
    )
    servers = [(h, body) for h, body in _blocks(text) if not h.startswith("kubernetes")]
    assert [h for h, _ in servers] == [
        "cluster.local:31053 in-addr.arpa:31053 ip6.arpa:31053",
        "cluster.local:53 in-addr.arpa:53 ip6.arpa:53",
    ]
    pod_facing = servers[1][1]
    assert "bind 10.244.0.1 10.244.1.1" in pod_facing
    assert not any(line.startswith(("ready", "forward")) for line in pod_facing), "one ready endpoint; no forwarding"
    plugins = [body for h, body in _blocks(text) if h.startswith("kubernetes")]
    assert len(plugins) == 2 and plugins[0] == plugins[1], "both answer from the same API with the same identity"
