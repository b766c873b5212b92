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
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from conformance.cluster.declared import RealNodes
from conformance.cluster.realnode.images import SLEEP_FOREVER

from .outcomes import Inconclusive

# Keeps the container running and stops at once on SIGTERM (PID 1 ignores signals without a handler).
SLEEP = SLEEP_FOREVER
EXEC_TIMEOUT = 60  # seconds for one exec round trip (the command itself takes milliseconds)
CRASH_VOLUME, CRASH_DIR = "kthena-conformance-state", "/kthena-conformance-state"  # outlive a container restart
NOT_READY_MARKER = f"{CRASH_DIR}/not-ready"  # while it exists, a crashable container's readiness probe fails
OBSERVED_REAL, OBSERVED_SIMULATED = "real nodes", "simulated"  # how a test result's ``observed`` begins


_REQUIRE = re.compile(r"\brequire\(\s*suite\b")


def needs_real_nodes(source: str) -> bool:
    """Whether a test's ``source`` calls :func:`require` (it is inconclusive without real nodes). Pure."""
    return _REQUIRE.search(source) is not None


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


def observed_on_real_nodes(request: Any, nodes: list[str]) -> None:
    """Record that the test's Pod-level condition was observed in running containers on ``nodes``."""
    from .plugin import record_observed

    record_observed(request.node, f"{OBSERVED_REAL}: in running containers on {', '.join(sorted(set(nodes)))}")


def observed_simulated(request: Any, how: str) -> None:
    """Record that the test's Pod-level condition was simulated (``how``), not observed in a container."""
    from .plugin import record_observed

    record_observed(request.node, f"{OBSERVED_SIMULATED}: {how}")


def place_on_real_nodes(
    pod_spec: Mapping[str, Any],
    real: RealNodes,
    *,
    variant: str = "v1",
    selector: Mapping[str, str] | None = None,
    crashable: bool = False,
) -> dict[str, Any]:
    """``pod_spec`` (a Pod template's ``spec``) run on the real nodes: their selector (plus
    ``selector``) merged into ``nodeSelector``, every container running the declared image
    ``variant`` with pull policy IfNotPresent and a sleeping shell as its command. ``crashable``
    containers have a real exec readiness probe the test switches (:func:`set_ready`) and can be
    made to crash as an engine does (:func:`crash_container`): the probe fails while a marker exists
    in an emptyDir volume, which outlives the container's restart. Pure."""
    if variant not in real.images:
        raise Inconclusive(f"the cluster's real nodes declare no image {variant!r} (only {sorted(real.images)})")
    spec = copy.deepcopy(dict(pod_spec))
    spec["nodeSelector"] = {**(spec.get("nodeSelector") or {}), **real.selector, **(selector or {})}
    spec["tolerations"] = [*(spec.get("tolerations") or []), *(dict(t) for t in real.tolerations)]
    for container in spec.get("containers") or []:
        container["image"] = real.images[variant]
        container["imagePullPolicy"] = "IfNotPresent"
        container["command"] = ["sh", "-c", SLEEP]
        container.pop("args", None)
        if crashable:
            mounts = [m for m in container.get("volumeMounts") or [] if m.get("name") != CRASH_VOLUME]
            container["volumeMounts"] = [*mounts, {"name": CRASH_VOLUME, "mountPath": CRASH_DIR}]
            container["readinessProbe"] = {
                "exec": {"command": ["sh", "-c", f"test ! -e {NOT_READY_MARKER}"]},
                "periodSeconds": 1,
                "failureThreshold": 1,
            }
    if crashable:
        volumes = [v for v in spec.get("volumes") or [] if v.get("name") != CRASH_VOLUME]
        spec["volumes"] = [*volumes, {"name": CRASH_VOLUME, "emptyDir": {}}]
    return spec


def crash_container(core: Any, namespace: str, pod: str, container: str) -> None:
    """Crash a :func:`place_on_real_nodes` ``crashable`` container as an engine does: it exits (the
    kubelet restarts it) and stays not Ready (its readiness probe now fails)."""
    set_ready(core, namespace, pod, container, ready=False)
    exit_container(core, namespace, pod, container)


def set_ready(core: Any, namespace: str, pod: str, container: str, *, ready: bool) -> None:
    """Make a :func:`place_on_real_nodes` ``crashable`` container's readiness probe fail (``ready``
    False) or pass again: the kubelet's next probe (every second) flips the Pod's Ready condition."""
    command = f"rm -f {NOT_READY_MARKER}" if ready else f"touch {NOT_READY_MARKER}"
    run_in(core, namespace, pod, container, "sh", "-c", command)


def if_declared(suite: Any, request: Any, simulated: str) -> RealNodes | None:
    """The cluster's real nodes for a behaviour that runs on either kind of node; without them the
    test's result says the condition was ``simulated`` (how), and the caller takes the kwok path."""
    real, _ = declared(suite)
    if real is None:
        observed_simulated(request, simulated)
    return real


def place_modelserving(body: dict[str, Any], real: RealNodes, *, variant: str = "v1", crashable: bool = False) -> None:
    """Every Role template of the ModelServing ``body`` placed on the real nodes (in place)."""
    for role in body["spec"]["template"]["roles"]:
        for key in ("entryTemplate", "workerTemplate"):
            if key in role:
                role[key]["spec"] = place_on_real_nodes(role[key]["spec"], real, variant=variant, crashable=crashable)


def restart_count(pod: Any) -> int:
    """The sum of a Pod's regular containers' restartCounts (a ``V1Pod``)."""
    return sum(s.restart_count or 0 for s in (pod.status.container_statuses if pod.status else None) or [])


def exit_container(core: Any, namespace: str, pod: str, container: str) -> None:
    """Make ``container`` exit for real (its PID 1 gets SIGTERM: the sleeping shell exits 0), so
    the kubelet restarts it. The exec session may end with the container; that is not an error."""
    try:
        run_in(core, namespace, pod, container, "sh", "-c", "kill 1")
    except Exception:
        return


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


def tolerations(suite: Any) -> list[dict[str, str]]:
    """The tolerations a Pod needs to run on the cluster's real nodes too (none without them)."""
    real, _ = declared(suite)
    return [dict(t) for t in real.tolerations] if real is not None else []
