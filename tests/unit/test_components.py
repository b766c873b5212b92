"""The embedded cluster's components as data: command lines, scheduler/kwok configs, kubeconfigs, Nodes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from conformance.cluster.local.components import (
    KWOK_NODE_ANNOTATION,
    STAGES_FILE,
    Component,
    Ports,
    RunLayout,
    components,
    config_files,
    kwok_config,
    node_manifests,
    scheduler_config,
)
from conformance.cluster.spec import DEFAULT_CAPACITY, ClusterSpec, NodePool, Taint

ROOT = Path("/runs/kthena-test")
BIN = Path("/opt/kthena-bin")
PORTS = Ports(
    etcd_client=23791, etcd_peer=23801, apiserver=36443, controller_manager=31257, scheduler=31259, kwok=31247
)


@pytest.fixture(scope="module")
def by_name() -> dict[str, Component]:
    return {c.name: c for c in components(RunLayout(ROOT), BIN, PORTS)}


def _flags(component: Component) -> dict[str, str]:
    """``--flag=value`` arguments as a dict (a flag given twice would be a bug: asserted elsewhere)."""
    out = {}
    for arg in component.argv[1:]:
        assert arg.startswith("--"), arg
        key, _, value = arg.partition("=")
        out[key] = value
    return out


# -- command lines --------------------------------------------------------------------------------


def test_start_order() -> None:
    names = [c.name for c in components(RunLayout(ROOT), BIN, PORTS)]
    assert names == ["etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok"]


def test_dependencies_come_earlier_in_start_order() -> None:
    order = [c.name for c in components(RunLayout(ROOT), BIN, PORTS)]
    for index, component in enumerate(components(RunLayout(ROOT), BIN, PORTS)):
        for dep in component.after:
            assert dep in order[:index], f"{component.name} waits for {dep}, which starts later"


@pytest.mark.parametrize(
    ("name", "after"),
    [
        ("etcd", ()),
        ("kube-apiserver", ("etcd",)),
        ("kube-controller-manager", ("kube-apiserver",)),
        ("kube-scheduler", ("kube-apiserver",)),
        ("kwok", ("kube-apiserver",)),
    ],
)
def test_after(by_name: dict[str, Component], name: str, after: tuple[str, ...]) -> None:
    assert by_name[name].after == after


@pytest.mark.parametrize("name", ["etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok"])
def test_binary_comes_from_bin_dir_and_flags_are_unique(by_name: dict[str, Component], name: str) -> None:
    argv = by_name[name].argv
    assert argv[0] == str(BIN / name)
    keys = [a.partition("=")[0] for a in argv[1:]]
    assert len(keys) == len(set(keys)), f"repeated flags in {name}: {keys}"


@pytest.mark.parametrize(
    ("name", "flag", "value"),
    [
        ("etcd", "--unsafe-no-fsync", "true"),
        ("etcd", "--data-dir", str(ROOT / "etcd-data")),
        ("etcd", "--listen-client-urls", f"http://127.0.0.1:{PORTS.etcd_client}"),
        ("etcd", "--advertise-client-urls", f"http://127.0.0.1:{PORTS.etcd_client}"),
        ("etcd", "--listen-peer-urls", f"http://127.0.0.1:{PORTS.etcd_peer}"),
        ("etcd", "--initial-cluster", f"node0=http://127.0.0.1:{PORTS.etcd_peer}"),
        ("kube-apiserver", "--authorization-mode", "Node,RBAC"),
        ("kube-apiserver", "--secure-port", str(PORTS.apiserver)),
        ("kube-apiserver", "--etcd-servers", f"http://127.0.0.1:{PORTS.etcd_client}"),
        ("kube-apiserver", "--bind-address", "127.0.0.1"),
        ("kube-apiserver", "--client-ca-file", str(ROOT / "pki" / "ca.crt")),
        ("kube-apiserver", "--tls-cert-file", str(ROOT / "pki" / "apiserver.crt")),
        ("kube-apiserver", "--tls-private-key-file", str(ROOT / "pki" / "apiserver.key")),
        ("kube-apiserver", "--service-account-key-file", str(ROOT / "pki" / "sa.pub")),
        ("kube-apiserver", "--service-account-signing-key-file", str(ROOT / "pki" / "sa.key")),
        ("kube-controller-manager", "--controllers", "*"),
        ("kube-controller-manager", "--use-service-account-credentials", "true"),
        ("kube-controller-manager", "--secure-port", str(PORTS.controller_manager)),
        ("kube-controller-manager", "--kubeconfig", str(ROOT / "kubeconfigs" / "kube-controller-manager.yaml")),
        ("kube-controller-manager", "--service-account-private-key-file", str(ROOT / "pki" / "sa.key")),
        ("kube-controller-manager", "--root-ca-file", str(ROOT / "pki" / "ca.crt")),
        ("kube-scheduler", "--config", str(ROOT / "config" / "scheduler.yaml")),
        ("kube-scheduler", "--secure-port", str(PORTS.scheduler)),
        ("kwok", "--config", str(ROOT / "config" / "kwok.yaml")),
        ("kwok", "--kubeconfig", str(ROOT / "kubeconfigs" / "kwok.yaml")),
        ("kwok", "--server-address", f"127.0.0.1:{PORTS.kwok}"),
        ("kwok", "--node-port", str(PORTS.kwok)),
    ],
)
def test_flag_values(by_name: dict[str, Component], name: str, flag: str, value: str) -> None:
    assert _flags(by_name[name])[flag] == value


def test_apiserver_runtime_config_enables_resource_v1(by_name: dict[str, Component]) -> None:
    groups = _flags(by_name["kube-apiserver"])["--runtime-config"].split(",")
    assert "resource.k8s.io/v1=true" in groups


@pytest.mark.parametrize(
    "forbidden",
    [
        "--admission-control",
        "--disable-admission-plugins",
        "--authorization-mode=AlwaysAllow",
        "--anonymous-auth=true",
        "--insecure-port",
    ],
)
def test_apiserver_does_not_weaken_admission_or_auth(by_name: dict[str, Component], forbidden: str) -> None:
    assert not [a for a in by_name["kube-apiserver"].argv if a.startswith(forbidden)]


@pytest.mark.parametrize(
    ("name", "url"),
    [
        ("etcd", f"http://127.0.0.1:{PORTS.etcd_client}/health"),
        ("kube-apiserver", f"https://127.0.0.1:{PORTS.apiserver}/readyz"),
        ("kube-controller-manager", f"https://127.0.0.1:{PORTS.controller_manager}/healthz"),
        ("kube-scheduler", f"https://127.0.0.1:{PORTS.scheduler}/healthz"),
        ("kwok", f"http://127.0.0.1:{PORTS.kwok}/healthz"),
    ],
)
def test_health_urls_use_the_picked_ports(by_name: dict[str, Component], name: str, url: str) -> None:
    assert by_name[name].health_url == url


def test_every_path_lives_under_the_run_root(by_name: dict[str, Component]) -> None:
    seen = 0
    for component in by_name.values():
        for value in _flags(component).values():
            if value.startswith("/"):
                seen += 1
                assert Path(value).is_relative_to(ROOT), f"{component.name}: {value} is outside {ROOT}"
    assert seen >= 15  # the check above really looked at the file flags


def test_ports_are_taken_from_the_ports_argument() -> None:
    other = Ports(etcd_client=1001, etcd_peer=1002, apiserver=1003, controller_manager=1004, scheduler=1005, kwok=1006)
    text = " ".join(a for c in components(RunLayout(ROOT), BIN, other) for a in c.argv)
    for port in PORTS.as_dict().values():
        assert str(port) not in text
    for port in other.as_dict().values():
        assert str(port) in text


def test_ports_as_dict() -> None:
    assert PORTS.as_dict() == {
        "etcd_client": 23791,
        "etcd_peer": 23801,
        "apiserver": 36443,
        "controller_manager": 31257,
        "scheduler": 31259,
        "kwok": 31247,
    }


# -- scheduler configuration ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("extra", "profiles"),
    [
        pytest.param(["volcano"], ["default-scheduler", "volcano"], id="default-volcano"),
        pytest.param([], ["default-scheduler"], id="no-extra"),
        pytest.param(["default-scheduler", "volcano"], ["default-scheduler", "volcano"], id="dedup-default"),
        pytest.param(["volcano", "default-scheduler"], ["default-scheduler", "volcano"], id="dedup-default-last"),
        pytest.param(["a", "b"], ["default-scheduler", "a", "b"], id="two-extra-in-order"),
    ],
)
def test_scheduler_config_profiles(extra: list[str], profiles: list[str]) -> None:
    doc = yaml.safe_load(scheduler_config(Path("/k/sched.yaml"), extra))
    assert doc["apiVersion"] == "kubescheduler.config.k8s.io/v1"
    assert doc["kind"] == "KubeSchedulerConfiguration"
    assert [p["schedulerName"] for p in doc["profiles"]] == profiles
    assert doc["clientConnection"]["kubeconfig"] == "/k/sched.yaml"
    assert doc["leaderElection"] == {"leaderElect": False}


def test_scheduler_config_deduplicates_repeated_extra_profiles() -> None:
    doc = yaml.safe_load(scheduler_config(Path("/k"), ["volcano", "volcano"]))
    names = [p["schedulerName"] for p in doc["profiles"]]
    assert len(names) == len(set(names))


# -- kwok configuration ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def kwok_docs() -> list[dict[str, Any]]:
    return list(yaml.safe_load_all(kwok_config()))


def test_kwok_config_first_doc_is_options(kwok_docs: list[dict[str, Any]]) -> None:
    first = kwok_docs[0]
    assert first["apiVersion"] == "config.kwok.x-k8s.io/v1alpha1"
    assert first["kind"] == "KwokConfiguration"
    options = first["options"]
    assert options["manageAllNodes"] is False
    assert options["manageNodesWithAnnotationSelector"] == f"{KWOK_NODE_ANNOTATION}=fake"


@pytest.mark.parametrize(
    "option",
    ["podPlayStageParallelism", "nodePlayStageParallelism", "nodeLeaseParallelism", "podsOnNodeSyncParallelism"],
)
def test_kwok_parallelism_options_are_positive(kwok_docs: list[dict[str, Any]], option: str) -> None:
    value = kwok_docs[0]["options"][option]
    assert isinstance(value, int)
    assert value > 0


def test_kwok_config_rest_are_stages_with_unique_names(kwok_docs: list[dict[str, Any]]) -> None:
    stages = kwok_docs[1:]
    assert stages
    for doc in stages:
        assert doc["kind"] == "Stage"
        assert doc["apiVersion"] == "kwok.x-k8s.io/v1alpha1"
    names = [d["metadata"]["name"] for d in stages]
    assert len(names) == len(set(names)), names


@pytest.mark.parametrize(
    "stage",
    [
        "node-initialize",
        "node-heartbeat-with-lease",
        "pod-ready",
        "pod-complete",
        "pod-delete",
        "kthena-pod-fail",
        "kthena-pod-pull-fails",
        "kthena-pod-pull-back-off",
        "kthena-pod-image-change",
        "kthena-pod-restart",
        "kthena-pod-not-ready",
        "kthena-pod-ready-again",
        "kthena-pod-readiness-gates",
    ],
)
def test_kwok_config_has_stage(kwok_docs: list[dict[str, Any]], stage: str) -> None:
    assert stage in {d["metadata"]["name"] for d in kwok_docs[1:]}


def test_kwok_config_embeds_the_stages_file_verbatim() -> None:
    assert kwok_config().endswith(STAGES_FILE.read_text())


def test_stages_file_is_package_data() -> None:
    assert STAGES_FILE.name == "kwok-stages.yaml"
    assert STAGES_FILE.is_file()


# -- config files ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def files() -> dict[Path, str]:
    return config_files(RunLayout(ROOT), ClusterSpec(name="demo"), PORTS)


def test_config_files_paths(files: dict[Path, str]) -> None:
    assert set(files) == {
        ROOT / "kubeconfig",
        ROOT / "config" / "scheduler.yaml",
        ROOT / "config" / "kwok.yaml",
        ROOT / "kubeconfigs" / "kube-controller-manager.yaml",
        ROOT / "kubeconfigs" / "kube-scheduler.yaml",
        ROOT / "kubeconfigs" / "kwok.yaml",
    }


@pytest.mark.parametrize(
    ("relative", "context", "user"),
    [
        ("kubeconfig", "kthena-demo", "admin"),
        ("kubeconfigs/kube-controller-manager.yaml", "kube-controller-manager", "kube-controller-manager"),
        ("kubeconfigs/kube-scheduler.yaml", "kube-scheduler", "kube-scheduler"),
        ("kubeconfigs/kwok.yaml", "kwok", "kwok"),
    ],
)
def test_kubeconfigs(files: dict[Path, str], relative: str, context: str, user: str) -> None:
    doc = yaml.safe_load(files[ROOT / relative])
    assert doc["kind"] == "Config"
    assert doc["current-context"] == context
    (cluster,) = doc["clusters"]
    assert cluster["cluster"]["server"] == f"https://127.0.0.1:{PORTS.apiserver}"
    assert cluster["cluster"]["certificate-authority"] == str(ROOT / "pki" / "ca.crt")
    (entry,) = doc["users"]
    assert entry["user"] == {
        "client-certificate": str(ROOT / "pki" / f"{user}.crt"),
        "client-key": str(ROOT / "pki" / f"{user}.key"),
    }
    (ctx,) = doc["contexts"]
    assert ctx == {"name": context, "context": {"cluster": context, "user": context}}


def test_scheduler_config_file_uses_spec_profiles_and_component_kubeconfig() -> None:
    spec = ClusterSpec(extra_scheduler_names=["volcano", "gang"])
    doc = yaml.safe_load(config_files(RunLayout(ROOT), spec, PORTS)[ROOT / "config" / "scheduler.yaml"])
    assert [p["schedulerName"] for p in doc["profiles"]] == ["default-scheduler", "volcano", "gang"]
    assert doc["clientConnection"]["kubeconfig"] == str(ROOT / "kubeconfigs" / "kube-scheduler.yaml")


def test_kwok_config_file_is_kwok_config(files: dict[Path, str]) -> None:
    assert files[ROOT / "config" / "kwok.yaml"] == kwok_config()


# -- node manifests -------------------------------------------------------------------------------


SPEC = ClusterSpec(
    node_pools=[
        NodePool(name="worker", count=2),
        NodePool(
            name="gpu",
            count=1,
            labels={"conformance.kthena.io/accelerator": "gpu", "kubernetes.io/arch": "arm64"},
            capacity={"cpu": "8", "memory": "64Gi", "pods": "20"},
            taints=[Taint(key="gpu", value="true", effect="NoSchedule"), Taint(key="x", effect="NoExecute")],
        ),
    ]
)


@pytest.fixture(scope="module")
def nodes() -> dict[str, dict[str, Any]]:
    return {n["metadata"]["name"]: n for n in map(json.loads, node_manifests(SPEC))}


def test_one_manifest_per_node_in_order() -> None:
    names = [json.loads(m)["metadata"]["name"] for m in node_manifests(SPEC)]
    assert names == ["worker-0", "worker-1", "gpu-0"]


@pytest.mark.parametrize("name", ["worker-0", "worker-1", "gpu-0"])
def test_node_is_kwok_managed(nodes: dict[str, dict[str, Any]], name: str) -> None:
    node = nodes[name]
    assert (node["apiVersion"], node["kind"]) == ("v1", "Node")
    assert node["metadata"]["annotations"][KWOK_NODE_ANNOTATION] == "fake"
    assert KWOK_NODE_ANNOTATION == "kwok.x-k8s.io/node"
    assert node["metadata"]["labels"]["kubernetes.io/hostname"] == name
    assert node["metadata"]["labels"]["type"] == "kwok"


@pytest.mark.parametrize(
    ("name", "capacity"),
    [("worker-0", DEFAULT_CAPACITY), ("gpu-0", {"cpu": "8", "memory": "64Gi", "pods": "20"})],
)
def test_node_capacity_is_also_allocatable(
    nodes: dict[str, dict[str, Any]], name: str, capacity: dict[str, str]
) -> None:
    status = nodes[name]["status"]
    assert status["capacity"] == capacity
    assert status["allocatable"] == capacity


def test_pool_labels_override_defaults(nodes: dict[str, dict[str, Any]]) -> None:
    labels = nodes["gpu-0"]["metadata"]["labels"]
    assert labels["conformance.kthena.io/accelerator"] == "gpu"
    assert labels["kubernetes.io/arch"] == "arm64"
    assert nodes["worker-0"]["metadata"]["labels"]["kubernetes.io/arch"] == "amd64"
    assert "conformance.kthena.io/accelerator" not in nodes["worker-0"]["metadata"]["labels"]


@pytest.mark.parametrize(
    ("name", "taints"),
    [
        ("worker-0", None),
        (
            "gpu-0",
            [{"key": "gpu", "value": "true", "effect": "NoSchedule"}, {"key": "x", "value": "", "effect": "NoExecute"}],
        ),
    ],
)
def test_node_taints(nodes: dict[str, dict[str, Any]], name: str, taints: list[dict[str, str]] | None) -> None:
    assert nodes[name]["spec"].get("taints") == taints


def test_run_layout_paths() -> None:
    layout = RunLayout(ROOT)
    assert layout.pki == ROOT / "pki"
    assert layout.kubeconfig == ROOT / "kubeconfig"
    assert layout.log("etcd") == ROOT / "logs" / "etcd.log"
    assert layout.component_kubeconfig("kwok") == ROOT / "kubeconfigs" / "kwok.yaml"
    assert layout.config("x.yaml") == ROOT / "config" / "x.yaml"
    assert {layout.state, layout.spec, layout.lock} == {
        ROOT / "state.json",
        ROOT / "spec.json",
        ROOT / "supervisor.lock",
    }
