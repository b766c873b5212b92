"""kind provider: generated cluster config, checked-in config drift, exact kind/crictl argv, Docker checks, faults."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from conformance.cluster.errors import HarnessError, UnsupportedOperation
from conformance.cluster.faults import Fault
from conformance.cluster.kind import (
    CONTAINERD_CDI_PATCH,
    DEFAULT_SPEC,
    GPU_LABEL,
    CrictlFaultInjector,
    KindProvider,
    create_command,
    crictl_restart_commands,
    delete_command,
    kind_config,
    kubeconfig_command,
    list_command,
    render_kind_config,
    require_docker,
    require_docker_engine,
)
from conformance.cluster.paths import repo_root
from conformance.cluster.provider import ClusterInfo
from conformance.cluster.spec import ClusterSpec, NodePool, Taint
from conformance.cluster.versions import KIND_NODE_IMAGE, PINNED

SPEC = ClusterSpec(
    name="demo",
    node_pools=[
        NodePool(name="cpu", count=2, labels={"tier": "cpu"}),
        NodePool(
            name="gpu", count=1, labels={GPU_LABEL: "gpu"}, taints=[Taint(key="gpu", value="true", effect="NoSchedule")]
        ),
        NodePool(name="none", count=0),
    ],
)


@pytest.fixture(scope="module")
def config() -> dict[str, Any]:
    return kind_config(SPEC)


def test_config_header(config: dict[str, Any]) -> None:
    assert config["kind"] == "Cluster"
    assert config["apiVersion"] == "kind.x-k8s.io/v1alpha4"
    assert config["name"] == "demo"
    assert config["networking"] == {"disableDefaultCNI": True}  # the harness sets up Pod networking


def test_kubelet_and_kubeadm_patches(config: dict[str, Any]) -> None:
    kubelet, init = (yaml.safe_load(p) for p in config["kubeadmConfigPatches"])
    assert kubelet == {"kind": "KubeletConfiguration", "failCgroupV1": False}
    assert init == {"kind": "InitConfiguration", "skipPhases": ["preflight", "addon/coredns"]}


def test_one_control_plane_and_one_worker_per_pool_node(config: dict[str, Any]) -> None:
    roles = [n["role"] for n in config["nodes"]]
    assert roles == ["control-plane", "worker", "worker", "worker"]
    assert roles.count("worker") == len(SPEC.node_names())


def test_every_node_uses_the_pinned_image(config: dict[str, Any]) -> None:
    assert {n["image"] for n in config["nodes"]} == {KIND_NODE_IMAGE}
    assert KIND_NODE_IMAGE == "kindest/node:v1.36.3"
    tag = KIND_NODE_IMAGE.rsplit(":", 1)[1]
    assert ".".join(tag.lstrip("v").split(".")[:2]) == PINNED.kubernetes_minor


def test_node_image_override() -> None:
    nodes = kind_config(SPEC, node_image="kindest/node:v1.36.9")["nodes"]
    assert {n["image"] for n in nodes} == {"kindest/node:v1.36.9"}


@pytest.mark.parametrize(
    ("index", "labels"),
    [
        (1, {"conformance.kthena.io/pool": "cpu", "tier": "cpu"}),
        (2, {"conformance.kthena.io/pool": "cpu", "tier": "cpu"}),
        (3, {"conformance.kthena.io/pool": "gpu", GPU_LABEL: "gpu"}),
    ],
)
def test_worker_labels(config: dict[str, Any], index: int, labels: dict[str, str]) -> None:
    assert config["nodes"][index]["labels"] == labels


def test_control_plane_has_no_labels_or_patches(config: dict[str, Any]) -> None:
    assert set(config["nodes"][0]) == {"role", "image"}


def test_untainted_workers_have_no_kubeadm_patch(config: dict[str, Any]) -> None:
    assert "kubeadmConfigPatches" not in config["nodes"][1]


def test_taints_become_a_join_configuration_patch(config: dict[str, Any]) -> None:
    (patch,) = config["nodes"][3]["kubeadmConfigPatches"]
    doc = yaml.safe_load(patch)
    assert doc == {
        "kind": "JoinConfiguration",
        "nodeRegistration": {"taints": [{"key": "gpu", "value": "true", "effect": "NoSchedule"}]},
    }


def test_containerd_cdi_patch(config: dict[str, Any]) -> None:
    assert config["containerdConfigPatches"] == [CONTAINERD_CDI_PATCH]
    assert "enable_cdi = true" in CONTAINERD_CDI_PATCH
    assert '[plugins."io.containerd.grpc.v1.cri"]' in CONTAINERD_CDI_PATCH


@pytest.mark.parametrize("port", [6443, 40000])
def test_apiserver_port(port: int) -> None:
    assert kind_config(ClusterSpec(apiserver_port=port))["networking"] == {
        "disableDefaultCNI": True,
        "apiServerPort": port,
    }


def test_checked_in_kind_config_matches_the_generator() -> None:
    checked_in = (repo_root() / "kind-configs" / "kthena.yaml").read_text()
    assert checked_in == render_kind_config(DEFAULT_SPEC), (
        "kind-configs/kthena.yaml is stale: regenerate with .venv/bin/python -m conformance.cluster.kind"
    )


def test_rendered_config_round_trips() -> None:
    assert yaml.safe_load(render_kind_config(DEFAULT_SPEC)) == kind_config(DEFAULT_SPEC)


def test_default_spec_layout() -> None:
    labels = [n.get("labels", {}) for n in kind_config(DEFAULT_SPEC)["nodes"][1:]]
    assert [lbl["conformance.kthena.io/pool"] for lbl in labels] == ["worker", "gpu", "npu"]
    assert labels[1]["gpu.fake.kthena-conformance.io/device-count"] == "4"
    assert labels[2]["npu.fake.kthena-conformance.io/device-count"] == "8"


# -- argv -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        pytest.param(
            create_command(SPEC, Path("/r/kind-config.yaml"), Path("/r/kubeconfig")),
            [
                "kind",
                "create",
                "cluster",
                "--name",
                "demo",
                "--config",
                "/r/kind-config.yaml",
                "--kubeconfig",
                "/r/kubeconfig",
                "--wait",
                "180s",
            ],
            id="create",
        ),
        pytest.param(
            create_command(SPEC, Path("/c.yaml"), Path("/k"), wait="5m"),
            [
                "kind",
                "create",
                "cluster",
                "--name",
                "demo",
                "--config",
                "/c.yaml",
                "--kubeconfig",
                "/k",
                "--wait",
                "5m",
            ],
            id="create-wait",
        ),
        pytest.param(delete_command("demo"), ["kind", "delete", "cluster", "--name", "demo"], id="delete"),
        pytest.param(kubeconfig_command("demo"), ["kind", "get", "kubeconfig", "--name", "demo"], id="kubeconfig"),
        pytest.param(list_command(), ["kind", "get", "clusters"], id="list"),
    ],
)
def test_kind_argv(argv: list[str], expected: list[str]) -> None:
    assert argv == expected


def test_crictl_restart_commands() -> None:
    find, stop = crictl_restart_commands("demo-worker2", "team-a", "server-0", "vllm")
    assert find == [
        "docker",
        "exec",
        "demo-worker2",
        "crictl",
        "ps",
        "--quiet",
        "--label",
        "io.kubernetes.pod.namespace=team-a",
        "--label",
        "io.kubernetes.pod.name=server-0",
        "--name",
        "^vllm$",
    ]
    assert stop == ["docker", "exec", "demo-worker2", "crictl", "stop", "--timeout", "0"]


# -- Docker and kind presence ---------------------------------------------------------------------


@pytest.fixture
def empty_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    empty = tmp_path / "empty-path"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    monkeypatch.setenv("KTHENA_CACHE_DIR", str(tmp_path / "cache"))  # no engine, no built kind
    monkeypatch.delenv("DOCKER_HOST", raising=False)
    monkeypatch.setattr("conformance.cluster.kind._KIND", [])
    return empty


def test_require_docker_names_kind(empty_path: Path) -> None:
    with pytest.raises(HarnessError) as info:
        require_docker()
    assert "kind" in info.value.message
    assert "`kind` on PATH" in info.value.message
    assert "--provider local" in info.value.hint


@pytest.mark.parametrize("provider", ["kind"])
def test_require_docker_engine_without_docker(empty_path: Path, provider: str) -> None:
    with pytest.raises(HarnessError) as info:
        require_docker_engine(provider)
    assert info.value.message == f"the {provider} provider needs `docker` on PATH"


def test_require_docker_with_kind_but_no_docker(empty_path: Path) -> None:
    kind = empty_path / "kind"
    kind.write_text("#!/bin/sh\nexit 0\n")
    kind.chmod(0o755)
    with pytest.raises(HarnessError, match="needs `docker` on PATH"):
        require_docker()


@pytest.mark.parametrize("docker_exit", [pytest.param(1, id="engine-down")])
def test_require_docker_engine_not_answering(empty_path: Path, docker_exit: int) -> None:
    docker = empty_path / "docker"
    docker.write_text(f"#!/bin/sh\nexit {docker_exit}\n")
    docker.chmod(0o755)
    with pytest.raises(HarnessError, match="needs a running Docker engine"):
        require_docker_engine("kind")


def test_status_and_down_without_an_engine_find_no_cluster(empty_path: Path, tmp_path: Path) -> None:
    provider = KindProvider(runs=tmp_path / "runs")
    assert provider.status("demo") is None
    assert provider.down("demo") is False


# -- fault injection ------------------------------------------------------------------------------


@pytest.fixture
def injector(tmp_path: Path) -> CrictlFaultInjector:
    info = ClusterInfo(
        provider="kind",
        name="demo",
        kubeconfig=tmp_path / "does-not-exist",
        context="kind-demo",
        kubernetes_version=PINNED.kubernetes,
        simulates=(),
    )
    return CrictlFaultInjector(info)


def test_crictl_injector_supports_only_restart(injector: CrictlFaultInjector) -> None:
    assert injector.supported_faults() == frozenset({Fault.RESTART})


@pytest.mark.parametrize("fault", [Fault.NOT_READY, Fault.FAIL, Fault.CLEAR])
def test_crictl_injector_rejects_other_faults_before_any_io(injector: CrictlFaultInjector, fault: Fault) -> None:
    with pytest.raises(UnsupportedOperation) as info:
        injector.inject("ns", "pod", fault)
    assert fault.value in info.value.message
    assert "local" in info.value.hint
    assert isinstance(info.value, HarnessError)


def test_kind_provider_fault_injector(injector: CrictlFaultInjector, tmp_path: Path) -> None:
    made = KindProvider(runs=tmp_path).fault_injector(injector.info)
    assert isinstance(made, CrictlFaultInjector)
    assert made.supported_faults() == frozenset({Fault.RESTART})


# -- real nodes: the workload images loaded, the declaration recorded ------------------------------


@pytest.fixture
def recording_kind(empty_path: Path, tmp_path: Path) -> Path:
    """A ``kind`` on PATH that logs its argv and keeps a copy of each archive it is asked to load
    (kind itself cannot run here: no Docker engine). Returns the directory of the copies."""
    saved = tmp_path / "loaded"
    saved.mkdir()
    kind = empty_path / "kind"
    kind.write_text(
        "#!/bin/sh\n"
        f'echo "$@" >> {tmp_path / "kind.log"}\n'
        f'if [ "$1" = load ]; then /bin/cp "$3" {saved}/; fi\n'
        'if [ "$1" = get ]; then echo "apiVersion: v1"; fi\n'
    )
    kind.chmod(0o755)
    return saved


def test_kind_loads_each_workload_image_and_declares_its_nodes_real(recording_kind: Path, tmp_path: Path) -> None:
    from conformance.cluster.declared import RealNodes
    from conformance.cluster.realnode import images

    try:
        images.read_busybox()
    except (FileNotFoundError, ValueError) as exc:
        pytest.skip(f"no static busybox on this host: {exc}")
    provider = KindProvider(runs=tmp_path / "runs")
    messages: list[str] = []
    real = provider.load_workload_images("demo", progress=messages.append)
    assert real == RealNodes({}, dict(images.WORKLOAD_IMAGES))
    log = (tmp_path / "kind.log").read_text().splitlines()
    assert len(log) == len(images.WORKLOAD_IMAGES) and all(
        line.startswith("load image-archive ") and line.endswith(" --name demo") for line in log
    ), log
    loaded = {}
    for archive in recording_kind.iterdir():
        data = archive.read_bytes()
        loaded[images.image_id(data)] = data
    wanted = {images.image_id(a) for a in images.workload_archives(images.read_busybox()).values()}
    assert set(loaded) == wanted, "each workload variant is loaded once, as the harness builds it"
    assert not (tmp_path / "runs" / "kind-demo" / "images").exists(), "the archives are removed once loaded"
    assert RealNodes.from_details(provider.info("demo").details) == real


def test_kind_without_a_static_busybox_declares_no_real_nodes_and_says_why(
    recording_kind: Path, tmp_path: Path
) -> None:
    provider = KindProvider(runs=tmp_path / "runs")
    messages: list[str] = []
    assert provider.load_workload_images("demo", progress=messages.append, busybox_path=tmp_path / "nope") is None
    assert not (tmp_path / "kind.log").exists(), "nothing is loaded"
    assert len(messages) == 1 and "real nodes not declared" in messages[0] and "busybox-static" in messages[0]
    assert "realNodes" not in provider.info("demo").details
