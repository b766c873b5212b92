"""conformance.framework.kubelet: telling a cluster that honours readiness gates and failed pulls
from one that does not (the suite's tests are inconclusive on the latter, never passed)."""

from __future__ import annotations

import datetime
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from conformance.cluster.faults import Fault, unpullable
from conformance.framework.kubelet import (
    expect_gates_honoured,
    expect_sidecar_restarted,
    gate_problem,
    pull_state,
    require_faults,
    sidecar_restarts,
)
from conformance.framework.outcomes import Inconclusive

GATE = "example.com/gate"
GOOD, BAD = "registry.example/engine:v1", unpullable("registry.example/engine:v2")


def pod(
    *, image: str = GOOD, ready: str = "True", gate: str | None = None, state: dict[str, Any] | None = None,
    status_image: str | None = None,
) -> client.V1Pod:  # fmt: skip
    conditions = [client.V1PodCondition(type="Ready", status=ready)]
    if gate is not None:
        conditions.append(client.V1PodCondition(type=GATE, status=gate))
    container_state = client.V1ContainerState(**(state or {"running": client.V1ContainerStateRunning()}))
    return client.V1Pod(
        metadata=client.V1ObjectMeta(name="p"),
        spec=client.V1PodSpec(
            containers=[client.V1Container(name="main", image=image)],
            readiness_gates=[client.V1PodReadinessGate(condition_type=GATE)],
        ),
        status=client.V1PodStatus(
            phase="Running",
            conditions=conditions,
            container_statuses=[
                client.V1ContainerStatus(
                    name="main", image=status_image or image, image_id="", ready=ready == "True", restart_count=0,
                    state=container_state,
                )
            ],
        ),
    )  # fmt: skip


def waiting(reason: str) -> dict[str, Any]:
    return {"waiting": client.V1ContainerStateWaiting(reason=reason)}


@pytest.mark.parametrize(
    ("subject", "problem"),
    [
        pytest.param(pod(ready="False"), None, id="not-ready-while-unset"),
        pytest.param(pod(ready="True"), "is Ready although its readiness gate", id="ready-without-gate"),
        pytest.param(pod(ready="False", gate="False"), "only the test sets", id="gate-set-by-someone"),
    ],
)
def test_gate_problem(subject: client.V1Pod, problem: str | None) -> None:
    found = gate_problem(subject, GATE)
    assert (found is None) if problem is None else (found is not None and problem in found)


def test_a_cluster_that_ignores_gates_makes_the_test_inconclusive() -> None:
    expect_gates_honoured([pod(ready="False")], GATE)
    with pytest.raises(Inconclusive, match="does not honour readiness gates"):
        expect_gates_honoured([pod(ready="False"), pod(ready="True")], GATE)


@pytest.mark.parametrize(
    ("subject", "state"),
    [
        pytest.param(pod(), "none", id="no-unpullable-image"),
        pytest.param(pod(image=BAD, status_image=GOOD), "pending", id="patched-old-container-still-running"),
        pytest.param(pod(image=BAD, ready="False", state=waiting("ContainerCreating")), "pending", id="creating"),
        pytest.param(pod(image=BAD, ready="False", state=waiting("ErrImagePull")), "failed", id="err-image-pull"),
        pytest.param(
            pod(image=BAD, ready="False", status_image=GOOD, state=waiting("ImagePullBackOff")), "failed", id="back-off"
        ),
        pytest.param(pod(image=BAD, ready="True", state=waiting("ErrImagePull")), "pending", id="ready-anyway"),
        pytest.param(pod(image=BAD, ready="True"), "pulled", id="runs-the-unpullable-image"),
    ],
)
def test_pull_state(subject: client.V1Pod, state: str) -> None:
    assert pull_state(subject) == state


# -- restarting a sidecar (an init container) ------------------------------------------------------


class FakeInjector:
    def __init__(self, supported: frozenset[Fault]) -> None:
        self.supported = supported

    def supported_faults(self) -> frozenset[Fault]:
        return self.supported


def test_a_cluster_that_cannot_restart_a_sidecar_makes_the_test_inconclusive() -> None:
    require_faults(FakeInjector(frozenset(Fault)), Fault.NOT_READY, Fault.RESTART_SIDECAR)
    with pytest.raises(Inconclusive, match=r"cannot inject restart-sidecar \(it supports: restart\)"):
        require_faults(FakeInjector(frozenset({Fault.RESTART})), Fault.RESTART, Fault.RESTART_SIDECAR)
    with pytest.raises(Inconclusive, match=r"cannot inject not-ready, restart-sidecar \(it supports: no fault"):
        require_faults(FakeInjector(frozenset()), Fault.NOT_READY, Fault.RESTART_SIDECAR)


def with_sidecar(restarts: int | None) -> client.V1Pod:
    """:func:`pod` with a sidecar; ``restarts`` None: the kubelet has not reported it yet."""
    subject = pod()
    subject.metadata.uid = "original"
    subject.spec.init_containers = [client.V1Container(name="proxy", image=GOOD, restart_policy="Always")]
    if restarts is not None:
        subject.status.init_container_statuses = [
            client.V1ContainerStatus(name="proxy", image=GOOD, image_id="", ready=True, restart_count=restarts)
        ]
    return subject


@pytest.mark.parametrize(("restarts", "seen"), [(None, 0), (0, 0), (3, 3)])
def test_sidecar_restarts(restarts: int | None, seen: int) -> None:
    assert sidecar_restarts(with_sidecar(restarts)) == seen


class FakeCore:
    """``kube.core`` that serves ``pods`` one read at a time (the last one again), None meaning 404."""

    def __init__(self, *pods: client.V1Pod | None) -> None:
        self.pods = list(pods)

    def read_namespaced_pod(self, name: str, namespace: str) -> client.V1Pod:
        current = self.pods.pop(0) if len(self.pods) > 1 else self.pods[0]
        if current is None:
            raise ApiException(status=404, reason="Not Found")
        return current


class FakeKube:
    def __init__(self, *pods: client.V1Pod | None) -> None:
        self.core = FakeCore(*pods)


def _as(subject: client.V1Pod, *, uid: str = "original", deleting: bool = False) -> client.V1Pod:
    subject.metadata.uid = uid
    subject.metadata.deletion_timestamp = datetime.datetime.now(datetime.UTC) if deleting else None
    return subject


@pytest.mark.parametrize(
    "pods",
    [
        pytest.param((with_sidecar(1), with_sidecar(1), with_sidecar(2)), id="restart-reported"),
        pytest.param((with_sidecar(1), None), id="pod-removed-after-the-restart"),
        pytest.param((with_sidecar(1), _as(with_sidecar(0), uid="new")), id="pod-replaced-under-its-name"),
        pytest.param((with_sidecar(1), _as(with_sidecar(1), deleting=True)), id="pod-terminating"),
    ],
)
def test_a_sidecar_restart_the_cluster_shows_is_accepted(pods: tuple[client.V1Pod | None, ...]) -> None:
    expect_sidecar_restarted(FakeKube(*pods), "ns", "p", 1, timeout=5, uid="original")


def test_a_sidecar_restart_the_cluster_never_shows_makes_the_test_inconclusive() -> None:
    with pytest.raises(Inconclusive, match=r"never restarted the sidecar \(first init container\) of p"):
        expect_sidecar_restarted(FakeKube(_as(with_sidecar(1))), "ns", "p", 1, timeout=0.5, uid="original")
