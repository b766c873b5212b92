"""Behaviours seen from inside a running container: on the nodes the cluster declares real.

Some spec statements are only observable inside a container the kubelet really started: the
hostname and FQDN an engine process sees, a name resolved through the Pod's own resolver, the
environment a DRA driver's CDI spec put there. kwok runs no container, so those tests run their
Pods on the cluster's **real nodes** (:class:`~conformance.cluster.declared.RealNodes`: the nodes a
selector picks and an image with a shell present there), read from the cluster info the runner
passes (``details["realNodes"]``: the local provider's real nodes, or what a cluster declares for
``--provider existing``). A cluster without them cannot produce the condition: :func:`require`
raises :class:`~.outcomes.Inconclusive` naming what could not be observed (never a pass).

:func:`place_on_real_nodes` rewrites a Pod template so its Pods land there and keep running
(``sleep`` in the declared image, never pulled); :func:`run_in` executes a command in a container
through the API server (``pods/exec``), as ``kubectl exec`` does.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from conformance.cluster.declared import RealNodes

from .outcomes import Inconclusive

# Keeps the container running and stops at once on SIGTERM (PID 1 ignores signals without a handler).
SLEEP = "trap 'exit 0' TERM INT; while :; do sleep 3600 & wait $!; done"
EXEC_TIMEOUT = 60  # seconds for one exec round trip (the command itself takes milliseconds)


def declared(suite: Any) -> tuple[RealNodes | None, str]:
    """The cluster's real nodes (None without any) and the cluster's name for messages."""
    from conformance.cluster.provider import ClusterInfo

    if not suite.cluster_info:
        return None, "the cluster (no --cluster-info was given)"
    info = ClusterInfo.from_json(Path(suite.cluster_info).read_text())
    return RealNodes.from_details(info.details), f"the {info.provider} cluster '{info.name}'"


def require(suite: Any, what: str) -> RealNodes:
    """The cluster's real nodes, or :class:`Inconclusive`: ``what`` is only observable in a
    running container and the cluster declares no node that runs one."""
    real, cluster = declared(suite)
    if real is None:
        raise Inconclusive(
            f"{what} is only observable inside a running container, and {cluster} declares no real nodes "
            "(kwok runs no container): run with real nodes (`--real-nodes` on the embedded cluster, or a "
            "cluster that declares them)"
        )
    return real


def place_on_real_nodes(
    pod_spec: Mapping[str, Any], real: RealNodes, *, variant: str = "v1", selector: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """``pod_spec`` (a Pod template's ``spec``) run on the real nodes: their selector (plus
    ``selector``) merged into ``nodeSelector``, every container running the declared image
    ``variant`` with pull policy IfNotPresent and a sleeping shell as its command. Pure."""
    if variant not in real.images:
        raise Inconclusive(f"the cluster's real nodes declare no image {variant!r} (only {sorted(real.images)})")
    spec = copy.deepcopy(dict(pod_spec))
    spec["nodeSelector"] = {**(spec.get("nodeSelector") or {}), **real.selector, **(selector or {})}
    for container in spec.get("containers") or []:
        container["image"] = real.images[variant]
        container["imagePullPolicy"] = "IfNotPresent"
        container["command"] = ["sh", "-c", SLEEP]
        container.pop("args", None)
    return spec


def run_in(core: Any, namespace: str, pod: str, container: str, *command: str) -> str:
    """``command`` run in ``pod``'s ``container`` through the API server (exec); stdout and stderr."""
    from kubernetes.stream import stream

    out: str = stream(
        core.connect_get_namespaced_pod_exec,
        pod,
        namespace,
        container=container,
        command=list(command),
        stderr=True,
        stdin=False,
        stdout=True,
        tty=False,
        _request_timeout=EXEC_TIMEOUT,
    )
    return out
