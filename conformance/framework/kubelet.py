"""What a test relies on the cluster's kubelet for, checked where the test relies on it.

Two kubelet behaviours make spec statements observable that nothing else does:

- **readiness gates**: a kubelet never sets a gate's condition (whoever owns the gate does, through
  the status subresource: here, the test) and reports a Pod Ready only once its containers are
  ready *and* every gate's condition is True;
- **an image that cannot be pulled** (:func:`conformance.cluster.faults.unpullable`): the container
  waits with reason ErrImagePull or ImagePullBackOff, never runs, and the Pod is not Ready; a Pod
  patched in place to such an image keeps its UID and phase but is not Ready.

And one fault a test asks for (:mod:`conformance.cluster.faults`) makes "an init container is
restarted" observable: a **sidecar** (an init container with ``restartPolicy: Always``, the only
init container a kubelet restarts once the Pod runs) restarting, its ``initContainerStatuses``
restartCount going up (:func:`require_faults`, :func:`expect_sidecar_restarted`).

A real kubelet does all of these; the embedded cluster's kwok stages do too. A cluster whose simulated
kubelet does not would make a test pass (or fail) for the wrong reason, so the tests check what
they see and raise :class:`~.outcomes.Inconclusive` (an error, never a pass or a non-conformance)
when the cluster did not produce the condition.
"""

from __future__ import annotations

from typing import Any

from ..cluster.faults import PULL_FAILURE_REASONS, Fault, is_unpullable
from .outcomes import Inconclusive
from .waits import WaitTimeout, wait_for


def condition_status(pod: Any, kind: str) -> str | None:
    """The status of ``pod``'s condition ``kind`` (a ``V1Pod``), None when it has none."""
    for cond in (pod.status.conditions if pod.status else None) or []:
        if cond.type == kind:
            return str(cond.status)
    return None


def set_pod_condition(kube: Any, namespace: str, pod: str, kind: str, status: str, reason: str = "") -> None:
    """Set ``pod``'s condition ``kind`` as a readiness gate's owner does (the status subresource)."""
    condition = {"type": kind, "status": status, "reason": reason or f"ConformanceTest{status}"}
    kube.core.patch_namespaced_pod_status(pod, namespace, {"status": {"conditions": [condition]}})


def gate_problem(pod: Any, gate: str) -> str | None:
    """Why ``pod`` (a ``V1Pod`` whose spec declares the readiness gate ``gate``, which nobody has
    set) shows that the cluster does not honour readiness gates; None when it does. Pure."""
    name = pod.metadata.name
    status = condition_status(pod, gate)
    if status is not None:
        return f"Pod {name}'s readiness gate {gate} has a condition ({status}) that only the test sets"
    if condition_status(pod, "Ready") == "True":
        return f"Pod {name} is Ready although its readiness gate {gate} has no condition"
    return None


def expect_gates_honoured(pods: list[Any], gate: str) -> None:
    """Every Pod of ``pods`` declares ``gate`` and is not Ready while the gate is unset; a Pod Ready
    anyway means the cluster's kubelet ignores readiness gates: :class:`Inconclusive`."""
    for pod in pods:
        problem = gate_problem(pod, gate)
        if problem:
            raise Inconclusive(
                f"{problem}: this cluster's kubelet does not honour readiness gates (a kubelet never sets a gate and "
                "keeps the Pod not Ready until it is True), so what the test needs cannot be observed here"
            )


def pull_state(pod: Any) -> str:
    """How ``pod`` (a ``V1Pod``) stands with the unpullable images its spec names. Pure.

    ``"failed"``: every such container waits with a pull failure and the Pod is not Ready;
    ``"pulled"``: one runs such an image (the cluster pulled what cannot be pulled); ``"pending"``:
    neither yet (a Pod patched in place still runs its old container until the kubelet acts);
    ``"none"``: the spec names no unpullable image."""
    names = {c.name for c in pod.spec.containers if is_unpullable(c.image)}
    if not names:
        return "none"
    statuses = {s.name: s for s in (pod.status.container_statuses if pod.status else None) or []}
    mine = [statuses[n] for n in sorted(names) if n in statuses and statuses[n].state]
    if any(s.state.running and is_unpullable(s.image or "") for s in mine):
        return "pulled"
    reasons = [s.state.waiting.reason for s in mine if s.state.waiting]
    failed = len(reasons) == len(names) and all(r in PULL_FAILURE_REASONS for r in reasons)
    return "failed" if failed and condition_status(pod, "Ready") != "True" else "pending"


def expect_pull_failed(kube: Any, namespace: str, pods: list[str], *, timeout: float) -> list[Any]:
    """Wait until the kubelet shows the pull of every unpullable image of ``pods`` failed (waiting
    with ErrImagePull or ImagePullBackOff, the Pod not Ready); their ``V1Pod``s. A cluster that runs
    such an image, or never shows the failure within ``timeout``, cannot produce what the test
    needs: :class:`Inconclusive`."""

    def read() -> list[Any]:
        return [kube.core.read_namespaced_pod(name, namespace) for name in pods]

    def describe(seen: list[Any]) -> str:
        return ", ".join(f"{p.metadata.name}: {pull_state(p)}" for p in seen)

    try:
        seen = wait_for(
            f"the pull of the unpullable images of {', '.join(pods)} to fail",
            read,
            until=lambda ps: all(pull_state(p) in ("failed", "pulled") for p in ps),
            timeout=timeout,
            interval=0.2,
        )
    except WaitTimeout as exc:
        raise Inconclusive(
            f"the cluster never showed the pull of an image that cannot be pulled failing (a kubelet shows "
            f"ErrImagePull or ImagePullBackOff): {exc}"
        ) from None
    pulled = [p.metadata.name for p in seen if pull_state(p) == "pulled"]
    if pulled:
        raise Inconclusive(
            f"the cluster pulled and ran an image that cannot be pulled ({describe(seen)}): its kubelet does not "
            "fail image pulls, so what the test needs cannot be observed here"
        )
    return seen


def require_faults(injector: Any, *needed: Fault) -> None:
    """``injector`` (the ``faults`` fixture) can inject every fault of ``needed``; a cluster that
    cannot (kind, an existing cluster: they declare what they support) cannot produce what the
    test needs: :class:`Inconclusive`, before anything is created."""
    missing = [f.value for f in needed if f not in injector.supported_faults()]
    if missing:
        raise Inconclusive(
            f"this cluster cannot inject {', '.join(missing)} (it supports: "
            f"{', '.join(sorted(f.value for f in injector.supported_faults())) or 'no fault'}), so what the test "
            "needs cannot be produced here"
        )


def sidecar_restarts(pod: Any) -> int:
    """The restartCount of ``pod``'s first init container (a ``V1Pod``); 0 before it has a status. Pure."""
    statuses = (pod.status.init_container_statuses if pod.status else None) or []
    return int(statuses[0].restart_count or 0) if statuses else 0


def expect_sidecar_restarted(
    kube: Any, namespace: str, pod: str, before: int, *, timeout: float, uid: str | None = None
) -> None:
    """Wait until ``pod``'s first init container, a sidecar, shows more than ``before`` restarts.
    The original Pod gone, terminating, or replaced under its name (another UID than ``uid``) counts
    as restarted too: it was removed after the restart, as only a reaction to the fault removes it
    (an implementation may recreate the Pod before a poll sees the count go up). A cluster that never
    shows the restart within ``timeout`` cannot produce what the test needs: :class:`Inconclusive`,
    so that the implementation is not blamed for a restart that never was."""
    from kubernetes.client.exceptions import ApiException

    def read() -> int | None:
        try:
            current = kube.core.read_namespaced_pod(pod, namespace)
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise
        meta = current.metadata
        if meta.deletion_timestamp or (uid is not None and meta.uid != uid):
            return None
        return sidecar_restarts(current)

    try:
        wait_for(
            f"the sidecar of {pod} to show more than {before} restarts",
            read,
            until=lambda seen: seen is None or seen > before,
            timeout=timeout,
            interval=0.2,
        )
    except WaitTimeout as exc:
        raise Inconclusive(
            f"the cluster never restarted the sidecar (first init container) of {pod} as asked (its "
            f"initContainerStatuses restartCount stayed at {before}): {exc}"
        ) from None
