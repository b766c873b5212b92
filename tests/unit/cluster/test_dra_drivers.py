"""Vendors' DRA drivers on real nodes, without a cluster: the spec's ``dra_drivers`` field and its
checks, the environment each node's command gets, the components the supervisor launches, the
kubelet metrics that say a plugin is registered, what a report certifies, and the fake driver
started the vendor way (under a name of its own)."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import pytest
import yaml

from conformance.cluster import declared
from conformance.cluster.errors import HarnessError
from conformance.cluster.local import dra_drivers
from conformance.cluster.local.dra_drivers import NodePluginDirs
from conformance.cluster.spec import ClusterSpec, DraDriver
from conformance.framework.capabilities import load_capabilities
from conformance.run.accelerators import certified_drivers, uninstalled
from fake_devices import cli as fake_cli
from fake_devices.drivers import GPU, NPU
from fake_devices.publisher import plan, with_count

VENDOR = "gpu.vendor.example"


def _spec(**extra: Any) -> ClusterSpec:
    return ClusterSpec.parse(
        {
            "node_pools": [{"name": "worker"}, {"name": "real", "kind": "real", "count": 2}],
            "dra_drivers": [{"name": VENDOR, "command": ["/opt/vendor/plugin", "-v", "4"], **extra}],
        }
    )


def test_a_driver_runs_on_every_real_node_unless_pools_narrow_it() -> None:
    spec = _spec()
    assert spec.driver_nodes(spec.dra_drivers[0]) == ["real-0", "real-1"]
    assert spec.driver_problems() == []
    narrowed = ClusterSpec.parse(
        {
            "node_pools": [{"name": "a", "kind": "real", "count": 1}, {"name": "b", "kind": "real", "count": 1}],
            "dra_drivers": [{"name": VENDOR, "command": ["x"], "pools": ["b"]}],
        }
    )
    assert narrowed.driver_nodes(narrowed.dra_drivers[0]) == ["b-0"]


@pytest.mark.parametrize(
    ("driver", "reason"),
    [
        ({"name": "GPU.Vendor", "command": ["x"]}, "is not a DRA driver name"),
        ({"name": "a" * 64, "command": ["x"]}, "is not a DRA driver name"),
        ({"name": "gpu.fake.kthena-conformance.io", "command": ["x"]}, "the fake drivers' domain"),
        ({"name": "x.gpu.fake.kthena-conformance.io", "command": ["x"]}, "the fake drivers' domain"),
        ({"name": VENDOR, "command": []}, "at least 1 item"),
        ({"name": VENDOR, "command": [" "]}, "the program) is empty"),
        ({"name": VENDOR, "command": ["x"], "env": {"1BAD": "v"}}, "not an environment variable name"),
        ({"name": VENDOR, "command": ["x"], "image": "y"}, "Extra inputs are not permitted"),
    ],
)
def test_bad_drivers_are_refused_naming_the_field(driver: dict[str, Any], reason: str) -> None:
    with pytest.raises(HarnessError, match="dra_drivers") as err:
        ClusterSpec.parse({"dra_drivers": [driver]})
    assert reason in err.value.message


def test_a_driver_named_twice_is_refused() -> None:
    with pytest.raises(HarnessError, match=r"each driver once, repeated: gpu\.vendor\.example"):
        ClusterSpec.parse({"dra_drivers": [{"name": VENDOR, "command": ["a"]}, {"name": VENDOR, "command": ["b"]}]})


def test_drivers_without_real_nodes_or_on_unknown_pools_are_problems() -> None:
    no_real = ClusterSpec.parse({"dra_drivers": [{"name": VENDOR, "command": ["x"]}]})
    assert no_real.driver_problems() == [
        f"dra_drivers[0] ({VENDOR}) needs real nodes: add a node pool of kind real (or cluster up --real-nodes N); "
        "kwok nodes run no kubelet plugin"
    ]
    unknown = _spec(pools=["worker", "real"])
    assert unknown.driver_problems() == [
        "dra_drivers[0].pools: worker: no pool of kind real with nodes has that name (real pools: real)"
    ]
    with pytest.raises(HarnessError, match="needs real nodes"):
        dra_drivers.check_drivers(no_real)


def test_manifests_are_relative_to_the_spec_file(tmp_path: Path) -> None:
    (tmp_path / "spec.yaml").write_text(
        yaml.safe_dump({"dra_drivers": [{"name": VENDOR, "command": ["x"], "manifests": ["dc.yaml", "/abs.yaml"]}]})
    )
    spec = ClusterSpec.from_file(tmp_path / "spec.yaml")
    assert spec.dra_drivers[0].manifests == [tmp_path / "dc.yaml", Path("/abs.yaml")]


def _dirs(node: str) -> NodePluginDirs:
    base = Path("/tmp/kthena-rn-0123456789") / node / "kubelet"
    return NodePluginDirs(node, base / "plugins", base / "plugins_registry", base.parent / "cdi")


def test_each_node_gets_the_daemonset_variables_and_the_harness_values_win() -> None:
    driver = DraDriver(name=VENDOR, command=["x"], env={"NODE_NAME": "wrong", "LOG_LEVEL": "4"})
    env = dra_drivers.driver_environment(driver, _dirs("real-0"), Path("/run/admin.kubeconfig"))
    assert env == {
        "LOG_LEVEL": "4",
        "NODE_NAME": "real-0",
        "KUBECONFIG": "/run/admin.kubeconfig",
        "KUBELET_PLUGINS_DIRECTORY_PATH": "/tmp/kthena-rn-0123456789/real-0/kubelet/plugins",
        "KUBELET_REGISTRAR_DIRECTORY_PATH": "/tmp/kthena-rn-0123456789/real-0/kubelet/plugins_registry",
        "CDI_ROOT": "/tmp/kthena-rn-0123456789/real-0/cdi",
    }


def test_one_component_per_driver_and_node_with_the_resolved_program() -> None:
    spec = _spec()
    comps = dra_drivers.driver_components(
        spec, {n: _dirs(n) for n in ("real-0", "real-1")}, Path("/k"), {VENDOR: "/opt/vendor/bin/plugin"}
    )
    assert [c.name for c in comps] == [f"dra-driver-{VENDOR}-real-0", f"dra-driver-{VENDOR}-real-1"]
    assert comps[0].argv == ("/opt/vendor/bin/plugin", "-v", "4")
    assert dict(comps[1].env)["NODE_NAME"] == "real-1" and comps[1].after == ("kube-apiserver",)


METRICS = f"""# HELP plugin_manager_total_plugins [ALPHA] Number of plugins in Plugin Manager
# TYPE plugin_manager_total_plugins gauge
plugin_manager_total_plugins{{socket_path="{_dirs("real-0").registry}/{VENDOR}-reg.sock",state="actual_state_of_world"}} 1
plugin_manager_total_plugins{{socket_path="{_dirs("real-0").registry}/{VENDOR}-reg.sock",state="desired_state_of_world"}} 1
plugin_manager_total_plugins{{socket_path="{_dirs("real-0").registry}/other.example-reg.sock",state="desired_state_of_world"}} 1
plugin_manager_total_plugins{{socket_path="/elsewhere/{VENDOR}-reg.sock",state="actual_state_of_world"}} 1
plugin_manager_total_plugins{{socket_path="{_dirs("real-0").registry}/zero.example-reg.sock",state="actual_state_of_world"}} 0
kubelet_running_pods 3
"""


def test_registered_sockets_are_the_plugin_managers_actual_state() -> None:
    registry = _dirs("real-0").registry
    assert dra_drivers.registered_sockets(METRICS) == {f"{registry}/{VENDOR}-reg.sock", f"/elsewhere/{VENDOR}-reg.sock"}
    assert dra_drivers.registered_sockets("") == frozenset()


@pytest.mark.parametrize(
    ("driver", "node", "metrics", "waiting"),
    [
        (VENDOR, "real-0", METRICS, []),
        ("other.example", "real-0", METRICS, ["other.example on real-0"]),  # desired, not yet registered
        ("zero.example", "real-0", METRICS, ["zero.example on real-0"]),
        (VENDOR, "real-1", METRICS, [f"{VENDOR} on real-1"]),  # another node's kubelet: its own registry
        ("gpu.vendor", "real-0", METRICS, ["gpu.vendor on real-0"]),  # a prefix of another driver's name
    ],
)
def test_pending_until_the_nodes_kubelet_registered_the_driver(
    driver: str, node: str, metrics: str, waiting: list[str]
) -> None:
    assert dra_drivers.pending([(driver, _dirs(node))], {"real-0": metrics, "real-1": metrics}) == waiting


def test_the_program_is_resolved_and_its_build_recorded(tmp_path: Path) -> None:
    program = tmp_path / "plugin"
    program.write_bytes(b"#!/bin/sh\nexit 0\n")
    program.chmod(0o755)
    driver = DraDriver(name=VENDOR, command=[str(program)])
    assert dra_drivers.resolve_program(driver) == program
    assert dra_drivers.resolve_program(DraDriver(name=VENDOR, command=["plugin"]), str(tmp_path)) == program
    spec = ClusterSpec.parse(
        {"node_pools": [{"name": "real", "kind": "real", "count": 1}], "dra_drivers": [driver.model_dump()]}
    )
    [record] = dra_drivers.records(spec, {VENDOR: program})
    assert record == {
        "name": VENDOR,
        "installedBy": "cluster spec dra_drivers (a command per real node)",
        "command": [str(program)],
        "nodes": ["real-0"],
        "executable": str(program),
        "size": 17,
        "sha256": hashlib.sha256(b"#!/bin/sh\nexit 0\n").hexdigest(),
    }
    link = tmp_path / "python3"  # a virtualenv's python: runs as the link, the venv found through it
    link.symlink_to(program)
    assert dra_drivers.resolve_program(DraDriver(name=VENDOR, command=[str(link)])) == link
    assert dra_drivers.executable_record(link)["sha256"] == record["sha256"]
    (tmp_path / "data").write_text("x")
    for command, reason in (
        ([str(tmp_path / "absent")], "is not an executable file"),
        ([str(tmp_path / "data")], "is not an executable file"),
        (["no-such-plugin"], "is not on PATH"),
    ):
        with pytest.raises(HarnessError, match=reason):
            dra_drivers.resolve_program(DraDriver(name=VENDOR, command=command), str(tmp_path))


def test_manifests_load_as_objects_or_fail_in_one_line(tmp_path: Path) -> None:
    good = tmp_path / "dc.yaml"
    good.write_text("---\napiVersion: resource.k8s.io/v1\nkind: DeviceClass\nmetadata: {name: a}\n---\n")
    assert dra_drivers.load_manifests(DraDriver(name=VENDOR, command=["x"], manifests=[good])) == [
        (f"{good} document 1", {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "a"}})
    ]
    bad = tmp_path / "bad.yaml"
    for text, reason in (("a: [", "is not valid YAML"), ("- 1\n", "document 1 is not a Kubernetes object")):
        bad.write_text(text)
        with pytest.raises(HarnessError, match=reason):
            dra_drivers.load_manifests(DraDriver(name=VENDOR, command=["x"], manifests=[bad]))
    with pytest.raises(HarnessError, match="cannot read"):
        dra_drivers.load_manifests(DraDriver(name=VENDOR, command=["x"], manifests=[tmp_path / "absent.yaml"]))


def test_the_cluster_declares_its_drivers_and_a_run_reads_them_back() -> None:
    drivers = ({"name": VENDOR, "installedBy": "x", "executable": "/p", "sha256": "ab"},)
    made = declared.Declared(frozenset(), None, "test", None, drivers)
    assert declared.parse(declared.record(made)["data"]) == made
    assert declared.parse({"draDrivers": "not json", "madeBy": "t"}) == declared.Declared(frozenset(), None, "t")


def _caps(tmp_path: Path, driver: str, version: str | None = None) -> Any:
    path = tmp_path / f"{driver}.yaml"
    text = (Path(__file__).parents[3] / "fake-devices/fake_devices/capabilities/gpu.yaml").read_text()
    text = text.replace(GPU.driver, driver)
    text = text.replace('driverVersion: "1.0.0"\n', f'driverVersion: "{version}"\n' if version else "")
    path.write_text(text)
    return load_capabilities(path)


def test_the_report_names_the_build_it_certified(tmp_path: Path) -> None:
    fake, vendor, unknown = _caps(tmp_path, GPU.driver), _caps(tmp_path, VENDOR), _caps(tmp_path, "b.example", "2.1")
    declared_drivers = [{"name": VENDOR, "installedBy": "cluster spec", "executable": "/p", "sha256": "ab", "x": 1}]
    build = {"version": "fake_devices (kthena-conformance 0.1)", "sha256": "cd"}
    assert certified_drivers([fake, vendor, unknown], declared_drivers, build) == [
        {"driver": GPU.driver, "fake": True, "installedBy": "the harness (fake-devices)", **build},
        {"driver": VENDOR, "fake": False, "installedBy": "cluster spec", "executable": "/p", "sha256": "ab"},
        {
            "driver": "b.example",
            "fake": False,
            "installedBy": "outside the harness (the cluster declares no build of it)",
            "version": "2.1",
        },
    ]


def test_a_driver_that_publishes_nothing_is_named_in_one_line(tmp_path: Path) -> None:
    fake, vendor = _caps(tmp_path, GPU.driver), _caps(tmp_path, VENDOR)
    assert uninstalled([fake, vendor], {GPU.driver, NPU.driver}) == [
        f"{vendor.path}: driver {VENDOR} publishes no ResourceSlice in the cluster: it is not installed (or has no "
        "devices); install it, or pass the capability file of the driver the cluster runs"
    ]
    assert uninstalled([fake], {GPU.driver}) == []


def test_the_fake_started_the_vendor_way_publishes_under_its_own_name() -> None:
    shape = fake_cli.named_shape("gpu", VENDOR)
    assert (shape.driver, shape.count_label, shape.cdi_kind) == (VENDOR, f"{VENDOR}/device-count", f"{VENDOR}/gpu")
    assert shape.device_class()["spec"]["selectors"][0]["cel"]["expression"] == f'device.driver == "{VENDOR}"'
    assert fake_cli.named_shape("npu", None) is NPU
    for bad in ("Bad_Name", "gpu.fake.kthena-conformance.io", "x.npu.fake.kthena-conformance.io"):
        with pytest.raises(ValueError, match=bad.replace(".", r"\.")):
            fake_cli.named_shape("gpu", bad)
    node = {"metadata": {"name": "real-0", "uid": "u", "labels": {"a": "b"}}}
    todo = plan(shape, [with_count(node, shape, 3)], [])
    [created] = todo.creates
    assert created["spec"]["driver"] == VENDOR and created["spec"]["nodeName"] == "real-0"
    assert [d["name"] for d in created["spec"]["devices"]] == ["gpu-0", "gpu-1", "gpu-2"]
    assert node["metadata"]["labels"] == {"a": "b"}  # the Node read is not changed


def test_the_fake_kubelet_plugin_reads_the_daemonset_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KUBELET_PLUGINS_DIRECTORY_PATH", "/p")
    monkeypatch.setenv("KUBELET_REGISTRAR_DIRECTORY_PATH", "/r")
    monkeypatch.setenv("CDI_ROOT", "/c")
    monkeypatch.setenv("NODE_NAME", "real-0")
    args = fake_cli.parser().parse_args(["kubelet-plugin", "--driver", "gpu", "--driver-name", VENDOR])
    assert (args.plugin_dir, args.registry_dir, args.cdi_dir, args.node_name) == (
        Path("/p"),
        Path("/r"),
        Path("/c"),
        "real-0",
    )
    assert fake_cli.main(["device-classes", "--driver-name", VENDOR]) == 2
    assert fake_cli.main(["kubelet-plugin", "--driver", "gpu", "--driver-name", "gpu.fake.kthena-conformance.io"]) == 2
