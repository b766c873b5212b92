"""k3s provider: container settings (image, host gateway, labels, server command) and missing-cluster errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from conformance.cluster.errors import HarnessError
from conformance.cluster.k3s import (
    CLUSTER_LABEL,
    WEBHOOK_HOST,
    K3sProvider,
    container_settings,
    server_command,
    webhook_host,
)
from conformance.cluster.spec import ClusterSpec, NodePool, Taint
from conformance.cluster.versions import K3S_IMAGE, PINNED

SPEC = ClusterSpec(
    name="demo",
    node_pools=[
        NodePool(
            name="gpu",
            count=1,
            labels={"z.example.com/last": "1", "a.example.com/first": "x"},
            taints=[Taint(key="gpu", value="true", effect="NoSchedule"), Taint(key="dedicated", effect="NoExecute")],
        ),
        NodePool(name="other", labels={"ignored": "yes"}, taints=[Taint(key="ignored", effect="NoSchedule")]),
    ],
)


def test_image_is_pinned_to_the_kubernetes_minor() -> None:
    settings = container_settings(SPEC)
    assert settings["image"] == K3S_IMAGE == "rancher/k3s:v1.36.3-k3s1"
    tag = settings["image"].rsplit(":", 1)[1]
    assert tag.startswith(PINNED.kubernetes + "-k3s")
    assert ".".join(tag.lstrip("v").split(".")[:2]) == PINNED.kubernetes_minor


def test_image_override() -> None:
    assert container_settings(SPEC, image="rancher/k3s:v1.36.4-k3s1")["image"] == "rancher/k3s:v1.36.4-k3s1"


def test_extra_hosts_map_the_webhook_host_to_the_gateway() -> None:
    assert container_settings(SPEC)["extra_hosts"] == {"host.docker.internal": "host-gateway"}
    assert webhook_host() == WEBHOOK_HOST == "host.docker.internal"


@pytest.mark.parametrize("name", ["demo", "kthena", "a-1"])
def test_labels_and_name_carry_the_cluster_name(name: str) -> None:
    settings = container_settings(ClusterSpec(name=name))
    assert settings["labels"] == {CLUSTER_LABEL: name}
    assert CLUSTER_LABEL == "conformance.kthena.io/k3s-cluster"
    assert settings["name"] == f"kthena-k3s-{name}"


def test_command_disables_bundled_addons() -> None:
    args = container_settings(SPEC)["command"].split()
    assert args[0] == "server"
    for addon in ("traefik", "servicelb", "metrics-server"):
        assert f"--disable={addon}" in args


def test_command_carries_first_pool_labels_sorted_and_taints_in_order() -> None:
    args = server_command(SPEC).split()
    assert [a for a in args if a.startswith("--node-label=")] == [
        "--node-label=a.example.com/first=x",
        "--node-label=z.example.com/last=1",
    ]
    assert [a for a in args if a.startswith("--node-taint=")] == [
        "--node-taint=gpu=true:NoSchedule",
        "--node-taint=dedicated=:NoExecute",
    ]
    assert "ignored" not in server_command(SPEC)


@pytest.mark.parametrize(
    ("spec", "command"),
    [
        pytest.param(
            ClusterSpec(node_pools=[]),
            "server --disable=traefik --disable=servicelb --disable=metrics-server",
            id="no-pools",
        ),
        pytest.param(
            ClusterSpec(),
            "server --disable=traefik --disable=servicelb --disable=metrics-server",
            id="default-pool-has-nothing",
        ),
        pytest.param(
            ClusterSpec(node_pools=[NodePool(labels={"k": "v"})]),
            "server --disable=traefik --disable=servicelb --disable=metrics-server --node-label=k=v",
            id="one-label",
        ),
    ],
)
def test_server_command_exact(spec: ClusterSpec, command: str) -> None:
    assert server_command(spec) == command
    assert container_settings(spec)["command"] == command


def test_status_and_info_without_a_cluster(tmp_path: Path) -> None:
    provider = K3sProvider(runs=tmp_path)
    assert provider.status("nope") is None
    with pytest.raises(HarnessError) as info:
        provider.info("nope")
    assert info.value.message == "no k3s cluster named 'nope'"
    assert "cluster up --provider k3s --name nope" in info.value.hint


def test_status_and_info_with_a_kubeconfig(tmp_path: Path) -> None:
    (tmp_path / "k3s-demo").mkdir()
    (tmp_path / "k3s-demo" / "kubeconfig").write_text("apiVersion: v1\n")
    provider = K3sProvider(runs=tmp_path)
    assert provider.status("demo") == {"phase": "ready", "kubeconfig": str(tmp_path / "k3s-demo" / "kubeconfig")}
    info = provider.info("demo")
    assert info.provider == "k3s"
    assert info.kubernetes_version == PINNED.kubernetes
    assert info.details["webhookHost"] == WEBHOOK_HOST
    assert info.details["versions"]["image"] == K3S_IMAGE
