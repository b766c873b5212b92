"""The kind provider: real nodes in Docker containers, nightly CI's path and the one accelerator
vendors certify on.

``up`` works on a fresh machine of this project's kind with nothing installed by hand: it finds or
starts a Docker engine (:mod:`.docker_engine`: Debian's docker.io, a dockerd of the harness's own,
the host snapshotted and restored), builds kind, kubeadm, kubectl and kube-proxy from the Go module
proxy (:mod:`.binaries`), builds the node image locally (:mod:`.kindnode`; no registry, cached by
content), creates the cluster with kind, then sets up Pod networking and CoreDNS (:mod:`.kindnet`)
and waits for every node to be Ready. ``down`` deletes the cluster and, when no kind cluster is
left, stops the harness's dockerd and puts the host back as it was.

The cluster config is generated from a :class:`ClusterSpec` (pure, tested here) and the checked-in
``kind-configs/kthena.yaml`` is that generator's output for the default GPU/NPU layout (a unit
test keeps them equal). The kubelet is configured for this host through ``kubeadmConfigPatches``
(``failCgroupV1: false``: Kubernetes 1.36 refuses cgroup v1 by default), and containerd has CDI
on so DRA drivers can inject devices.

Every kind node runs containers for real, and the node image carries the harness's workload images
(:mod:`.realnode.images`), so a kind cluster declares :class:`~.declared.RealNodes`. The
declaration is also written into the cluster (:mod:`.declared`), so ``--provider existing`` finds it.

Fault injection uses real containers where it can: a restart is ``crictl stop`` of the Pod's
container inside the node container, after which the real kubelet restarts it. NotReady and
Failed cannot be caused generically in an arbitrary container image and are reported unsupported.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

import yaml

from .declared import RealNodes
from .errors import HarnessError, UnsupportedOperation
from .faults import Fault, FaultInjector
from .provider import ClusterInfo, Progress, Provider, quiet
from .runner_address import DETAILS_KEY as RUNNER_ADDRESS
from .runner_address import KIND_NETWORK, docker_network_gateway
from .spec import ClusterSpec, NodePool
from .versions import KIND_NODE_IMAGE, PINNED

# containerd 2.x enables CDI by default; older node images need it switched on.
CONTAINERD_CDI_PATCH = '[plugins."io.containerd.grpc.v1.cri"]\n  enable_cdi = true\n'
# The kubelet on a cgroup v1 host (Kubernetes 1.36 refuses v1 unless told not to), and kubeadm
# without its CoreDNS add-on (the harness installs CoreDNS: kubeadm's Corefile needs plugins the
# harness's CoreDNS build leaves out). Preflight stays skipped, as kind does.
KUBELET_PATCH = "kind: KubeletConfiguration\nfailCgroupV1: false\n"
INIT_PATCH = "kind: InitConfiguration\nskipPhases:\n- preflight\n- addon/coredns\n"
GPU_LABEL = "conformance.kthena.io/accelerator"

# The default layout for nightly CI and vendor certification: one GPU and one NPU worker, plus a
# plain worker. The device-count labels are read by the fake DRA drivers (issue 7).
DEFAULT_SPEC = ClusterSpec(
    name="kthena",
    node_pools=[
        NodePool(name="worker", count=1),
        NodePool(name="gpu", count=1, labels={GPU_LABEL: "gpu", "gpu.fake.kthena-conformance.io/device-count": "4"}),
        NodePool(name="npu", count=1, labels={GPU_LABEL: "npu", "npu.fake.kthena-conformance.io/device-count": "8"}),
    ],
)


def kind_config(spec: ClusterSpec, *, node_image: str = KIND_NODE_IMAGE) -> dict[str, Any]:
    """The kind ``Cluster`` config for ``spec`` (pure). ``KTHENA_KIND_NODE_IMAGE`` overrides the
    node image for kind releases that publish another v1.36 patch."""
    nodes: list[dict[str, Any]] = [{"role": "control-plane", "image": node_image}]
    for pool in spec.node_pools:
        for _ in range(pool.count):
            node: dict[str, Any] = {
                "role": "worker",
                "image": node_image,
                "labels": {"conformance.kthena.io/pool": pool.name, **pool.labels},
            }
            if pool.taints:
                node["kubeadmConfigPatches"] = [
                    yaml.safe_dump(
                        {
                            "kind": "JoinConfiguration",
                            "nodeRegistration": {"taints": [t.model_dump() for t in pool.taints]},
                        },
                        sort_keys=False,
                    )
                ]
            nodes.append(node)
    config: dict[str, Any] = {
        "kind": "Cluster",
        "apiVersion": "kind.x-k8s.io/v1alpha4",
        "name": spec.name,
        "nodes": nodes,
        # The harness sets up Pod networking itself (conformance/cluster/kindnet.py).
        "networking": {"disableDefaultCNI": True},
        "kubeadmConfigPatches": [KUBELET_PATCH, INIT_PATCH],
        "containerdConfigPatches": [CONTAINERD_CDI_PATCH],
    }
    if spec.apiserver_port is not None:
        config["networking"]["apiServerPort"] = spec.apiserver_port
    return config


def render_kind_config(spec: ClusterSpec) -> str:
    header = (
        "# Generated by conformance/cluster/kind.py (kind_config) for the default GPU/NPU layout.\n"
        "# Regenerate with: .venv/bin/python -m conformance.cluster.kind > kind-configs/kthena.yaml\n"
        f"# Node image pinned to Kubernetes {PINNED.kubernetes}, the embedded cluster's version.\n"
    )
    return header + yaml.safe_dump(kind_config(spec), sort_keys=False)


def create_command(spec: ClusterSpec, config_path: Path, kubeconfig: Path, *, wait: str = "180s") -> list[str]:
    return [
        "kind",
        "create",
        "cluster",
        "--name",
        spec.name,
        "--config",
        str(config_path),
        "--kubeconfig",
        str(kubeconfig),
        "--wait",
        wait,
    ]


def delete_command(name: str) -> list[str]:
    return ["kind", "delete", "cluster", "--name", name]


def kubeconfig_command(name: str) -> list[str]:
    return ["kind", "get", "kubeconfig", "--name", name]


def load_image_command(name: str, archive: Path) -> list[str]:
    """Load a docker-archive into every node of kind cluster ``name``."""
    return ["kind", "load", "image-archive", str(archive), "--name", name]


REAL_NODES_FILE = "real-nodes.json"  # in the cluster's directory: written once the images are loaded


def kind_real_nodes() -> RealNodes:
    """What a kind cluster declares once the workload images are loaded: every node (the
    control-plane node's own taint keeps test Pods off it), the harness's workload images."""
    from .realnode.images import WORKLOAD_IMAGES

    return RealNodes({}, dict(WORKLOAD_IMAGES))


def list_command() -> list[str]:
    return ["kind", "get", "clusters"]


def crictl_restart_commands(node: str, namespace: str, pod: str, container: str) -> tuple[list[str], list[str]]:
    """The commands that find a Pod's container inside a kind node and stop it (pure)."""
    find = [
        "docker",
        "exec",
        node,
        "crictl",
        "ps",
        "--quiet",
        "--label",
        f"io.kubernetes.pod.namespace={namespace}",
        "--label",
        f"io.kubernetes.pod.name={pod}",
        "--name",
        f"^{container}$",
    ]
    stop = ["docker", "exec", node, "crictl", "stop", "--timeout", "0"]  # + container id
    return find, stop


_KIND: list[str] = []  # the kind binary the harness built, once known (else `kind` from PATH)


def _docker_env() -> dict[str, str]:
    """The environment of every docker and kind command: ``DOCKER_HOST`` of the engine in use."""
    from .docker_engine import DockerEngine

    return DockerEngine().env()


def _run(argv: Sequence[str], *, timeout: float = 600, stdin: str | None = None) -> str:
    argv = list(argv)
    if argv[0] == "kind" and _KIND:
        argv[0] = _KIND[0]
    try:
        proc = subprocess.run(
            argv, check=False, capture_output=True, text=True, timeout=timeout, input=stdin, env=_docker_env()
        )
    except FileNotFoundError as exc:
        raise HarnessError(f"`{argv[0]}` is not installed", "install kind and Docker, or use --provider local") from exc
    except subprocess.TimeoutExpired as exc:
        raise HarnessError(f"`{' '.join(argv)}` did not finish in {timeout:.0f}s", "check the Docker engine") from exc
    if proc.returncode != 0:
        raise HarnessError(f"`{' '.join(argv)}` failed: {proc.stderr.strip()[-800:]}", "see the output above")
    return proc.stdout


def network_inspect_command(network: str) -> list[str]:
    return ["docker", "network", "inspect", network]


def network_gateway(network: str) -> str | None:
    """The gateway of Docker network ``network`` (an address of this host that its containers reach),
    or None when docker cannot say."""
    try:
        return docker_network_gateway(_run(network_inspect_command(network), timeout=30))
    except HarnessError:
        return None


def require_docker_engine(provider: str) -> None:
    """Fail with one clear message when no Docker engine answers."""
    if shutil.which("docker") is None:
        raise HarnessError(
            f"the {provider} provider needs `docker` on PATH",
            "install Docker, or use --provider local (the embedded cluster)",
        )
    probe = subprocess.run(
        ["docker", "info", "--format", "{{json .ServerVersion}}"],
        check=False,
        capture_output=True,
        text=True,
        timeout=30,
        env=_docker_env(),
    )
    if probe.returncode != 0:
        raise HarnessError(
            f"the {provider} provider needs a running Docker engine and none answered",
            "start Docker, or use --provider local (the embedded cluster)",
        )


def require_docker() -> None:
    """kind (the harness's build, or one on PATH) and a Docker engine answering."""
    if not _KIND and shutil.which("kind") is None:
        raise HarnessError(
            "the kind provider needs `kind` on PATH", "install kind, or use --provider local (the embedded cluster)"
        )
    require_docker_engine("kind")


def exec_command(node: str, *argv: str, interactive: bool = False) -> list[str]:
    """``docker exec`` of ``argv`` in node container ``node`` (pure)."""
    return ["docker", "exec", *(["-i"] if interactive else []), node, *argv]


def kubectl_in(node: str, *argv: str, interactive: bool = False) -> list[str]:
    """kubectl with the cluster's admin credentials inside the control-plane node (pure)."""
    return exec_command(node, "kubectl", "--kubeconfig=/etc/kubernetes/admin.conf", *argv, interactive=interactive)


def control_plane_container(name: str) -> str:
    """The control-plane node container of kind cluster ``name`` (kind's naming)."""
    return f"{name}-control-plane"


NODE_IMAGE_FILE = "node-image.json"  # in the cluster's directory: the node image it was made from
READY_TIMEOUT = "300s"


class KindProvider(Provider):
    name: ClassVar[str] = "kind"
    injects: ClassVar[frozenset[Fault]] = frozenset({Fault.RESTART})
    simulates: ClassVar[tuple[str, ...]] = (
        "nodes are containers on one machine (real kubelet, containerd, CNI and CoreDNS)",
        "accelerators: only what the installed DRA driver provides (fake drivers simulate devices)",
        "scheduler 'volcano': unless Volcano is installed, a kube-scheduler profile without gang semantics",
    )

    def __init__(self, runs: Path | None = None) -> None:
        from .docker_engine import kind_root

        self.runs = runs or kind_root() / "clusters"

    def _dir(self, name: str) -> Path:
        return self.runs / name

    def _tools(self, progress: Progress) -> Any:
        """The harness's binaries with kind's (built on first use); kind's path remembered for ``_run``."""
        from .binaries import KIND_BINARIES, BinaryCache

        built = BinaryCache().ensure(real_nodes=True, kind=True, retry_failed_extras=True, progress=progress)
        missing = [
            n
            for n in ("kind", "kubelet", "containerd", "crictl", "coredns", *KIND_BINARIES)
            if built.optional(n) is None
        ]
        if missing:
            raise HarnessError(
                f"the kind provider needs {', '.join(missing)} and the build did not produce them",
                f"see the build log under {built.directory.parent} (`kthena-conformance binaries build`)",
            )
        _KIND[:] = [str(built.optional("kind"))]
        return built

    def up(self, spec: ClusterSpec, *, progress: Progress = quiet, owner_pid: int | None = None) -> ClusterInfo:
        import time

        from .docker_engine import DockerEngine
        from .kindnode import NodeImageBuilder

        started = time.monotonic()
        engine = DockerEngine()
        engine_was_up = engine.external_host() is not None or engine.own_running()
        built = self._tools(progress)
        engine.ensure(progress=progress)
        directory = self._dir(spec.name)
        created = False
        try:
            if spec.name in _run(list_command()).split():
                if (directory / "kubeconfig").exists():
                    progress(f"kind cluster '{spec.name}' already exists")
                    return self.info(spec.name)
                raise HarnessError(
                    f"a kind cluster named '{spec.name}' exists and this harness did not make it",
                    f"choose another --name, or delete it with `kind delete cluster --name {spec.name}`",
                )
            digests = {n: str(e.get("sha256", "")) for n, e in dict(built.manifest.get("binaries", {})).items()}
            paths = {n: built.path(n) for n in ("kube-apiserver", "kube-controller-manager", "kube-scheduler", "etcd")}
            paths.update(
                {
                    n: p
                    for n in (
                        "kubelet",
                        "kubeadm",
                        "kubectl",
                        "kube-proxy",
                        "containerd",
                        "containerd-shim-runc-v2",
                        "ctr",
                        "crictl",
                        "coredns",
                    )
                    if (p := built.optional(n)) is not None
                }
            )
            node_image = NodeImageBuilder(paths, digests, _docker_env()).ensure(progress=progress)
            directory.mkdir(parents=True, exist_ok=True)
            config_path = directory / "kind-config.yaml"
            config_path.write_text(yaml.safe_dump(kind_config(spec, node_image=node_image.tag), sort_keys=False))
            progress(f"creating kind cluster '{spec.name}' ({len(spec.node_names())} workers, {node_image.tag})")
            created = True
            _run(create_command(spec, config_path, directory / "kubeconfig", wait="0s"), timeout=900)
            self._network(spec.name, progress)
            (directory / NODE_IMAGE_FILE).write_text(
                json.dumps(
                    {
                        "tag": node_image.tag,
                        "id": node_image.image_id,
                        "images": list(node_image.images),
                        "buildSeconds": node_image.build_seconds,
                    },
                    indent=1,
                )
                + "\n"
            )
            (directory / REAL_NODES_FILE).write_text(json.dumps(kind_real_nodes().as_details(), indent=1) + "\n")
            info = self.info(spec.name)
            info.details["timings"] = {"up_total": round(time.monotonic() - started, 1)}
            if node_image.build_seconds is not None:
                info.details["timings"]["node_image_build"] = round(node_image.build_seconds, 1)
            self._declare(info)
            return info
        except BaseException:
            if created:
                subprocess.run(
                    [_KIND[0], "delete", "cluster", "--name", spec.name],
                    env=_docker_env(),
                    capture_output=True,
                    check=False,
                    timeout=300,
                )
                shutil.rmtree(directory, ignore_errors=True)
            if not engine_was_up:
                left = engine.stop(progress=progress)
                for line in left:
                    progress(f"host differs from its snapshot: {line}")
            raise

    def _network(self, name: str, progress: Progress) -> None:
        """Pod networking on every node, CoreDNS, then every node Ready (:mod:`.kindnet`)."""
        import time

        from . import kindnet

        control = control_plane_container(name)
        expected = len([n for n in _run(["kind", "get", "nodes", "--name", name]).split() if n])
        deadline = time.monotonic() + 300
        while True:
            nodes = kindnet.nodes_from_json(_run(kubectl_in(control, "get", "nodes", "-o", "json"), timeout=60))
            if len(nodes) >= expected:
                break
            if time.monotonic() > deadline:
                raise HarnessError(
                    f"only {len(nodes)} of {expected} nodes of kind cluster '{name}' got a Pod range (podCIDR)",
                    "see `kind export logs` of the cluster",
                )
            time.sleep(1)
        progress(f"setting up Pod networking on {len(nodes)} nodes and CoreDNS")
        for node in nodes:
            _run(
                exec_command(node.name, "sh", interactive=True),
                stdin=kindnet.node_network_script(node, nodes),
                timeout=60,
            )
        _run(
            kubectl_in(control, "apply", "-f", "-", interactive=True),
            stdin=kindnet.render(kindnet.coredns_manifests()),
            timeout=120,
        )
        progress("waiting for every node to be Ready and CoreDNS to answer")
        _run(
            kubectl_in(control, "wait", "--for=condition=Ready", "nodes", "--all", f"--timeout={READY_TIMEOUT}"),
            timeout=360,
        )
        _run(
            kubectl_in(
                control, "-n", "kube-system", "rollout", "status", "deployment/coredns", f"--timeout={READY_TIMEOUT}"
            ),
            timeout=360,
        )

    def load_workload_images(
        self, name: str, *, progress: Progress = quiet, busybox_path: Path | None = None
    ) -> RealNodes | None:
        """Load the workload images into the nodes of cluster ``name`` (a cluster made from another
        node image) and record the real nodes it then declares; None (and no declaration) when this
        host has no static busybox to make them (``busybox_path``, default ``/bin/busybox``)."""
        from .realnode import images

        directory = self._dir(name)
        marker = directory / REAL_NODES_FILE
        marker.unlink(missing_ok=True)
        try:
            busybox = images.read_busybox(busybox_path or images.BUSYBOX_PATH)
        except (FileNotFoundError, ValueError) as exc:
            progress(f"real nodes not declared (the in-container behaviours will be inconclusive): {exc}")
            return None
        staging = directory / "images"
        staging.mkdir(parents=True, exist_ok=True)
        try:
            for number, (reference, data) in enumerate(sorted(images.workload_archives(busybox).items())):
                archive = staging / f"workload-{number}.tar"
                images.write_archive(archive, data)
                progress(f"loading {reference} into the nodes of kind cluster '{name}'")
                _run(load_image_command(name, archive))
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        real = kind_real_nodes()
        marker.write_text(json.dumps(real.as_details(), indent=1) + "\n")
        return real

    def _declare(self, info: ClusterInfo) -> None:
        """Write what this cluster can do into it (:mod:`.declared`), for ``--provider existing``."""
        from kubernetes import client

        from .declared import Declared, publish
        from .kube import api_client

        declared = Declared(
            self.injects,
            None,
            f"kthena-conformance kind provider, cluster '{info.name}'",
            RealNodes.from_details(info.details),
        )
        publish(client.CoreV1Api(api_client(info.kubeconfig, info.context)), declared)

    def _find_kind(self) -> None:
        if not _KIND:
            from .binaries import BinaryCache

            try:
                found = BinaryCache().load(PINNED)
            except HarnessError:
                found = None
            kind = found.optional("kind") if found is not None else None
            if kind is not None:
                _KIND[:] = [str(kind)]

    def down(self, name: str) -> bool:
        from .docker_engine import DockerEngine

        engine = DockerEngine()
        own = engine.own_running() and engine.external_host() is None
        if not own and engine.external_host() is None:
            if engine.paths.snapshot.exists():  # a crashed engine: put the host back
                self._restore(engine)
            shutil.rmtree(self._dir(name), ignore_errors=True)
            return False
        self._find_kind()
        require_docker()
        existed = name in _run(list_command()).split()
        if existed:
            _run(delete_command(name), timeout=300)
        shutil.rmtree(self._dir(name), ignore_errors=True)
        if own and not _run(list_command()).split():
            self._restore(engine)
        return existed

    @staticmethod
    def _restore(engine: Any) -> None:
        left = engine.stop()
        if left:
            raise HarnessError(
                "after stopping the harness's Docker engine the host still differs from its snapshot: "
                + "; ".join(left),
                f"undo these by hand (the list is in {engine.paths.run_dir / 'host-diff.json'})",
            )

    def status(self, name: str) -> dict[str, Any] | None:
        from .docker_engine import DockerEngine

        engine = DockerEngine()
        if engine.external_host() is None and not engine.own_running():
            return None
        self._find_kind()
        require_docker()
        if name not in _run(list_command()).split():
            return None
        return {"phase": "ready", "kubeconfig": str(self._dir(name) / "kubeconfig"), "dockerHost": engine.host()}

    def info(self, name: str) -> ClusterInfo:
        self._find_kind()
        directory = self._dir(name)
        directory.mkdir(parents=True, exist_ok=True)
        kubeconfig = directory / "kubeconfig"
        kubeconfig.write_text(_run(kubeconfig_command(name)))
        image: dict[str, Any] = {"tag": KIND_NODE_IMAGE}
        if (directory / NODE_IMAGE_FILE).exists():
            image = json.loads((directory / NODE_IMAGE_FILE).read_text())
        details: dict[str, Any] = {
            "versions": {
                "kubernetes": PINNED.kubernetes,
                "nodeImage": image.get("tag"),
                "nodeImageId": image.get("id"),
                "images": image.get("images", []),
            },
        }
        marker = directory / REAL_NODES_FILE
        if marker.exists():
            details["realNodes"] = json.loads(marker.read_text())
        gateway = network_gateway(KIND_NETWORK)
        if gateway is not None:
            details[RUNNER_ADDRESS] = gateway
        return ClusterInfo(
            provider=self.name,
            name=name,
            kubeconfig=kubeconfig,
            context=f"kind-{name}",
            kubernetes_version=PINNED.kubernetes,
            simulates=self.simulates,
            details=details,
        )

    def fault_injector(self, info: ClusterInfo) -> FaultInjector:
        return CrictlFaultInjector(info)


class CrictlFaultInjector:
    """Restarts a Pod's first container for real, through crictl in the kind node container."""

    def __init__(self, info: ClusterInfo) -> None:
        self.info = info

    def supported_faults(self) -> frozenset[Fault]:
        return frozenset({Fault.RESTART})

    def inject(self, namespace: str, pod: str, fault: Fault) -> None:
        if fault is not Fault.RESTART:
            raise UnsupportedOperation(
                f"the kind provider cannot make an arbitrary container '{fault.value}'",
                "run tests that need NotReady or Failed pods on the local (embedded) provider",
            )
        from kubernetes import client

        from .kube import api_client

        api = client.CoreV1Api(api_client(self.info.kubeconfig, self.info.context))
        obj: Any = api.read_namespaced_pod(pod, namespace)
        names = [c.name for c in obj.spec.containers]  # the suite's template container first (a sidecar may lead)
        container = "engine" if "engine" in names else names[0]
        find, stop = crictl_restart_commands(obj.spec.node_name, namespace, pod, container)
        ids = _run(find, timeout=60).split()
        if not ids:
            raise HarnessError(f"no running container found for pod {namespace}/{pod}", "is the pod Running?")
        _run([*stop, ids[0]], timeout=60)


if __name__ == "__main__":  # pragma: no cover - regenerates kind-configs/kthena.yaml
    print(render_kind_config(DEFAULT_SPEC), end="")
