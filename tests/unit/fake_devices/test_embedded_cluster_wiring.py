"""How the embedded cluster runs the fake drivers (pure parts): which drivers and nodes a spec
asks for, the publishers' command lines, their RBAC and DeviceClasses, the CLI's device pools."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from conformance.cli import device_pools, main
from conformance.cluster.local.components import (
    KubeletPluginSite,
    RunLayout,
    fake_devices_components,
    fake_devices_objects,
    fake_devices_plugin_components,
    kubelet_plugin_ready_file,
)
from conformance.cluster.spec import ClusterSpec, NodePool
from fake_devices.cli import parser
from fake_devices.drivers import GPU, NPU


def pools(*items: tuple[str, int, dict[str, str]]) -> ClusterSpec:
    return ClusterSpec(node_pools=[NodePool(name=n, count=c, labels=labels) for n, c, labels in items])


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        pytest.param(ClusterSpec(), {}, id="default-no-devices"),
        pytest.param(pools(("gpu", 2, {GPU.count_label: "4"})), {"gpu": ["gpu-0", "gpu-1"]}, id="gpu-pool"),
        pytest.param(
            pools(("g", 1, {GPU.count_label: "1"}), ("n", 1, {NPU.count_label: "8"}), ("w", 1, {})),
            {"gpu": ["g-0"], "npu": ["n-0"]},
            id="gpu-and-npu",
        ),
        pytest.param(pools(("g", 1, {GPU.count_label: "0"})), {"gpu": []}, id="zero-still-runs-the-driver"),
        pytest.param(pools(("g", 1, {GPU.count_label: "lots"})), {"gpu": []}, id="bad-label-no-nodes"),
        pytest.param(pools(("g", 0, {GPU.count_label: "2"})), {"gpu": []}, id="empty-pool"),
        pytest.param(
            pools(("g", 1, {GPU.count_label: "2"})).model_copy(update={"fake_devices": False}), {}, id="switched-off"
        ),
    ],
)
def test_device_nodes(spec: ClusterSpec, expected: dict[str, list[str]]) -> None:
    assert spec.device_nodes() == expected


def test_publisher_components_are_valid_cli_commands(tmp_path: Path) -> None:
    layout = RunLayout(tmp_path)
    comps = fake_devices_components(layout, ["gpu", "npu"], python="/py")
    assert [c.name for c in comps] == ["fake-devices-gpu", "fake-devices-npu"]
    for comp in comps:
        assert comp.argv[:3] == ("/py", "-m", "fake_devices")
        args = parser().parse_args(list(comp.argv[3:]))
        assert args.command == "publish" and args.kubeconfig == str(layout.component_kubeconfig("fake-devices"))


def test_kubelet_plugin_components_are_valid_cli_commands(tmp_path: Path) -> None:
    layout = RunLayout(tmp_path)
    site = KubeletPluginSite("npu", "npu-0", tmp_path / "k" / "plugins", tmp_path / "k" / "reg", tmp_path / "cdi")
    (comp,) = fake_devices_plugin_components(layout, [site], python="/py")
    assert comp.name == "fake-devices-npu-plugin-npu-0"
    args = parser().parse_args(list(comp.argv[3:]))
    assert (args.command, args.driver, args.node_name) == ("kubelet-plugin", "npu", "npu-0")
    assert (args.plugin_dir, args.registry_dir, args.cdi_dir) == (site.plugin_dir, site.registry_dir, site.cdi_dir)
    assert args.ready_file == kubelet_plugin_ready_file(layout, "npu", "npu-0")
    assert args.kubeconfig == str(layout.component_kubeconfig("fake-devices"))


@pytest.mark.parametrize("plugins", [False, True])
def test_kubelet_plugins_may_read_claims_only_when_they_run(plugins: bool) -> None:
    role = fake_devices_objects(["gpu"], kubelet_plugins=plugins)[0][1]
    claims = [r for r in role["rules"] if "resourceclaims" in r["resources"]]
    assert claims == (
        [{"apiGroups": ["resource.k8s.io"], "resources": ["resourceclaims"], "verbs": ["get"]}] if plugins else []
    )


def test_objects_grant_least_privilege_and_create_device_classes() -> None:
    objects = fake_devices_objects(["npu"])
    kinds = [(path.rsplit("/", 1)[1], body["kind"], body["metadata"]["name"]) for path, body in objects]
    assert kinds == [
        ("clusterroles", "ClusterRole", "fake-devices"),
        ("clusterrolebindings", "ClusterRoleBinding", "fake-devices"),
        ("deviceclasses", "DeviceClass", "npu.fake.kthena-conformance.io"),
    ]
    role: dict[str, Any] = objects[0][1]
    verbs = {v for rule in role["rules"] for v in rule["verbs"]}
    assert "*" not in verbs and "patch" not in verbs
    assert objects[2][1] == NPU.device_class()


def test_cli_device_pools() -> None:
    assert device_pools(None, 4, None, 8) == []
    gpu, npu = device_pools(2, 3, 1, 16)
    assert (gpu["name"], gpu["count"], gpu["labels"][GPU.count_label]) == ("gpu", 2, "3")
    assert (npu["name"], npu["count"], npu["labels"][NPU.count_label]) == ("npu", 1, "16")


def test_cluster_up_rejects_bad_device_counts() -> None:
    result = CliRunner().invoke(main, ["cluster", "up", "--gpu-nodes", "1", "--gpus-per-node", "0"])
    assert result.exit_code == 2 and "gpus-per-node" in result.output
