"""conformance.framework.kubelet: telling a cluster that honours readiness gates and failed pulls
from one that does not (the suite's tests are inconclusive on the latter, never passed)."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes import client

from conformance.cluster.faults import unpullable
from conformance.framework.kubelet import expect_gates_honoured, gate_problem, pull_state
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
