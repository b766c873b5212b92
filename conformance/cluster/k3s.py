"""The k3s provider: a throwaway single-node k3s in Docker, through testcontainers.

The lightest Docker-based option: one container, pinned to the embedded cluster's Kubernetes
minor. The container maps ``host.docker.internal`` to the Docker host, so a webhook served by the
reference controller on the host (``https://host.docker.internal:<port>``) is reachable from the
k3s API server; :func:`webhook_host` names that address for the controller's certificates.

Lifetime: a cluster started inside a test run is removed by testcontainers' reaper when the run
ends; ``cluster up --provider k3s`` starts a labelled container that lives until ``cluster down``.

k3s cannot start on the machines this project is developed on (no Docker engine); only the
container settings are tested here, and nothing claims it ran.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any, ClassVar

from .errors import HarnessError
from .paths import runs_root
from .provider import ClusterInfo, Progress, Provider, quiet
from .spec import ClusterSpec
from .versions import K3S_IMAGE, PINNED

CLUSTER_LABEL = "conformance.kthena.io/k3s-cluster"
WEBHOOK_HOST = "host.docker.internal"


def webhook_host() -> str:
    """The host name under which the k3s API server reaches webhooks served on the Docker host."""
    return WEBHOOK_HOST


def server_command(spec: ClusterSpec) -> str:
    """k3s server arguments: no bundled ingress or service LB, node labels and taints from the
    first node pool (k3s runs a single node)."""
    args = ["server", "--disable=traefik", "--disable=servicelb", "--disable=metrics-server"]
    pool = spec.node_pools[0] if spec.node_pools else None
    if pool is not None:
        args += [f"--node-label={k}={v}" for k, v in sorted(pool.labels.items())]
        args += [f"--node-taint={t.key}={t.value}:{t.effect}" for t in pool.taints]
    return " ".join(args)


def container_settings(spec: ClusterSpec, *, image: str = K3S_IMAGE) -> dict[str, Any]:
    """Everything the k3s container is started with (pure; applied by :meth:`K3sProvider.up`)."""
    return {
        "image": image,
        "command": server_command(spec),
        "labels": {CLUSTER_LABEL: spec.name},
        "extra_hosts": {WEBHOOK_HOST: "host-gateway"},
        "name": f"kthena-k3s-{spec.name}",
    }


class K3sProvider(Provider):
    name: ClassVar[str] = "k3s"
    simulates: ClassVar[tuple[str, ...]] = (
        "a single k3s node in one container (real kubelet and containerd; k3s's embedded datastore)",
        "scheduler 'volcano': unless Volcano is installed, not served (k3s has one scheduler profile)",
    )

    def __init__(self, runs: Path | None = None) -> None:
        self.runs = runs or runs_root()
        self._containers: dict[str, Any] = {}

    def _dir(self, name: str) -> Path:
        return self.runs / f"k3s-{name}"

    def up(self, spec: ClusterSpec, *, progress: Progress = quiet, owner_pid: int | None = None) -> ClusterInfo:
        from .kind import require_docker_engine

        require_docker_engine(self.name)
        try:
            from testcontainers.community.k3s import K3SContainer
        except ImportError as exc:
            raise HarnessError(
                "the k3s provider needs testcontainers", "pip install 'kthena-conformance[k3s]'"
            ) from exc
        settings = container_settings(spec)
        if owner_pid is None:  # `cluster up`: the container must outlive this process
            os.environ["TESTCONTAINERS_RYUK_DISABLED"] = "true"
        container = K3SContainer(image=settings["image"])
        container.with_command(settings["command"] + " --tls-san=" + container.get_container_host_ip())
        container.with_kwargs(privileged=True, labels=settings["labels"], extra_hosts=settings["extra_hosts"])
        container.with_name(settings["name"])
        progress(f"starting {settings['image']} through testcontainers")
        container.start()
        self._containers[spec.name] = container
        directory = self._dir(spec.name)
        directory.mkdir(parents=True, exist_ok=True)
        (directory / "kubeconfig").write_text(container.config_yaml())
        return self.info(spec.name)

    def down(self, name: str) -> bool:
        container = self._containers.pop(name, None)
        if container is not None:
            container.stop()
        else:
            import docker

            found = docker.from_env().containers.list(all=True, filters={"label": f"{CLUSTER_LABEL}={name}"})
            for c in found:
                c.remove(force=True)
            container = found or None
        existed = container is not None
        shutil.rmtree(self._dir(name), ignore_errors=True)
        return existed

    def status(self, name: str) -> dict[str, Any] | None:
        kubeconfig = self._dir(name) / "kubeconfig"
        return {"phase": "ready", "kubeconfig": str(kubeconfig)} if kubeconfig.exists() else None

    def info(self, name: str) -> ClusterInfo:
        kubeconfig = self._dir(name) / "kubeconfig"
        if not kubeconfig.exists():
            raise HarnessError(
                f"no k3s cluster named '{name}'", f"start one with `cluster up --provider k3s --name {name}`"
            )
        return ClusterInfo(
            provider=self.name,
            name=name,
            kubeconfig=kubeconfig,
            context=None,
            kubernetes_version=PINNED.kubernetes,
            simulates=self.simulates,
            details={"versions": {"kubernetes": PINNED.kubernetes, "image": K3S_IMAGE}, "webhookHost": WEBHOOK_HOST},
        )
