"""One interface for every way of getting a cluster: local (embedded), kind, k3s, existing.

Callers (the CLI, the pytest fixture, the conformance runner) only see :class:`Provider` and
:class:`ClusterInfo`; which binaries, containers or kubeconfigs are behind them is the provider's
business. Each provider says what it simulates rather than runs, and the reports repeat it.
"""

from __future__ import annotations

import abc
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from .errors import HarnessError, UnsupportedOperation
from .faults import AnnotationFaultInjector, Fault, FaultInjector
from .spec import ClusterSpec

Progress = Callable[[str], None]


def quiet(_: str) -> None:
    """A progress callback that prints nothing."""


# The details a report repeats (the others are for the harness: ports, run dirs).
REPORTED_DETAILS = frozenset({"versions", "timings", "nodes", "dns", "realNodes", "runnerAddress"})


@dataclass(frozen=True)
class ClusterInfo:
    """A ready cluster: how to reach it and what it is."""

    provider: str
    name: str
    kubeconfig: Path
    context: str | None
    kubernetes_version: str
    simulates: tuple[str, ...]
    details: dict[str, Any] = field(default_factory=dict)

    def as_report(self) -> dict[str, Any]:
        """The cluster's entry in a conformance report."""
        return {
            "provider": self.provider,
            "name": self.name,
            "kubernetesVersion": self.kubernetes_version,
            "context": self.context,
            "simulates": list(self.simulates),
            **{k: v for k, v in self.details.items() if k in REPORTED_DETAILS},
        }

    def to_json(self) -> str:
        """What another process (the suite's pytest run) needs to reach and describe the cluster."""
        import json

        data = {**self.__dict__, "kubeconfig": str(self.kubeconfig), "simulates": list(self.simulates)}
        return json.dumps(data, default=str)

    @classmethod
    def from_json(cls, text: str) -> ClusterInfo:
        import json

        data = json.loads(text)
        return cls(
            provider=data["provider"],
            name=data["name"],
            kubeconfig=Path(data["kubeconfig"]),
            context=data.get("context"),
            kubernetes_version=data.get("kubernetes_version", ""),
            simulates=tuple(data.get("simulates") or ()),
            details=dict(data.get("details") or {}),
        )


class Provider(abc.ABC):
    """Makes, describes and removes clusters of one kind."""

    name: ClassVar[str]
    #: What this provider's clusters simulate instead of running for real.
    simulates: ClassVar[tuple[str, ...]] = ()

    @abc.abstractmethod
    def up(self, spec: ClusterSpec, *, progress: Progress = quiet, owner_pid: int | None = None) -> ClusterInfo:
        """Bring the cluster up and return once it is ready. Idempotent for a running cluster.

        ``owner_pid``: tear the cluster down by itself when that process exits (providers that
        cannot watch a process ignore it and rely on ``down``).
        """

    @abc.abstractmethod
    def down(self, name: str) -> bool:
        """Remove the cluster and everything it left on this machine; False if there was none."""

    @abc.abstractmethod
    def status(self, name: str) -> dict[str, Any] | None:
        """What is known about the cluster, or None when it does not exist."""

    @abc.abstractmethod
    def info(self, name: str) -> ClusterInfo:
        """The :class:`ClusterInfo` of a running cluster (raises when there is none)."""

    def check_inputs(self) -> None:
        """:class:`~.errors.BadInput` when what the user gave this provider cannot be used (a
        kubeconfig that is not one); reads files only, never a cluster. Most providers take none."""
        return None

    def kubeconfig(self, name: str) -> Path:
        return self.info(name).kubeconfig

    def nodes(self, name: str) -> list[str]:
        """The names of the cluster's Nodes, as the API server lists them."""
        from kubernetes import client

        from .kube import api_client

        info = self.info(name)
        items: list[Any] = client.CoreV1Api(api_client(info.kubeconfig, info.context)).list_node().items
        return sorted(str(n.metadata.name) for n in items)

    def fault_injector(self, info: ClusterInfo) -> FaultInjector:
        """How to inject faults into this cluster's Pods. Default: none supported."""
        return NoFaults(self.name)

    # The faults this provider's clusters can inject, known before any cluster exists (what
    # ``run --dry-run`` tells the user); :meth:`fault_injector` is the running cluster's own word.
    injects: ClassVar[frozenset[Fault]] = frozenset()

    def injects_now(self) -> frozenset[Fault]:
        """The faults a run on this provider can inject, as far as is known before it starts: the
        class's :attr:`injects`, or, for a cluster that exists already, what it declares."""
        return self.injects


class NoFaults:
    """The fault injector of a provider that cannot inject any fault."""

    def __init__(self, provider: str) -> None:
        self.provider = provider

    def supported_faults(self) -> frozenset[Fault]:
        return frozenset()

    def inject(self, namespace: str, pod: str, fault: Fault) -> None:
        raise UnsupportedOperation(
            f"the {self.provider} provider cannot inject '{fault.value}' into pods",
            "run the tests that need fault injection on the local (embedded) provider",
        )


def kwok_fault_injector(kubeconfig: Path, context: str | None = None) -> FaultInjector:
    """The annotation-based injector for clusters whose kubelet is kwok with our stages."""
    from kubernetes import client  # imported lazily: slow, and not needed by `cluster up`

    from .faults import RESTARTS_ANNOTATION, SIDECAR_RESTARTS_ANNOTATION
    from .kube import api_client

    api = client.CoreV1Api(api_client(kubeconfig, context))

    def restart_count(namespace: str, pod: str) -> int:
        obj: Any = api.read_namespaced_pod(pod, namespace)
        statuses = (obj.status.container_statuses or []) if obj.status else []
        seen = int(statuses[0].restart_count) if statuses else 0
        asked = int((obj.metadata.annotations or {}).get(RESTARTS_ANNOTATION, "0") or 0)
        return max(seen, asked)

    def sidecar_restart_count(namespace: str, pod: str) -> int:
        obj: Any = api.read_namespaced_pod(pod, namespace)
        first = (obj.spec.init_containers or [None])[0]
        if first is None or first.restart_policy != "Always":
            raise HarnessError(
                f"pod {namespace}/{pod} has no sidecar as its first init container: a running Pod restarts only "
                "sidecars (init containers with restartPolicy Always)",
                "make the Pod's first init container a sidecar",
            )
        statuses = (obj.status.init_container_statuses or []) if obj.status else []
        seen = int(statuses[0].restart_count) if statuses else 0
        asked = int((obj.metadata.annotations or {}).get(SIDECAR_RESTARTS_ANNOTATION, "0") or 0)
        return max(seen, asked)

    def patch(name: str, namespace: str, body: dict[str, object]) -> object:
        return api.patch_namespaced_pod(name, namespace, body)

    return AnnotationFaultInjector(patch, restart_count, sidecar_restart_count)
