"""What a test relies on the cluster's kubelet for, checked where the test relies on it.

Two kubelet behaviours make spec statements observable that nothing else does:

- **readiness gates**: a kubelet never sets a gate's condition (whoever owns the gate does, through
  the status subresource: here, the test) and reports a Pod Ready only once its containers are
  ready *and* every gate's condition is True;
- **an image that cannot be pulled** (:func:`conformance.cluster.faults.unpullable`): the container
  waits with reason ErrImagePull or ImagePullBackOff, never runs, and the Pod is not Ready; a Pod
  patched in place to such an image keeps its UID and phase but is not Ready.

A real kubelet does both; the embedded cluster's kwok stages do too. A cluster whose simulated
kubelet does not would make a test pass (or fail) for the wrong reason, so the tests check what
they see and raise :class:`~.outcomes.Inconclusive` (an error, never a pass or a non-conformance)
when the cluster did not produce the condition.
"""

from __future__ import annotations

from typing import Any

from ..cluster.faults import PULL_FAILURE_REASONS, is_unpullable
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
