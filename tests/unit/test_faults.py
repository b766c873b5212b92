"""fault_patch (the annotation contract) and AnnotationFaultInjector, with recording fakes."""

from __future__ import annotations

import pytest

from conformance.cluster.errors import UnsupportedOperation
from conformance.cluster.faults import (
    FAULT_ANNOTATION,
    RESTARTS_ANNOTATION,
    SIDECAR_RESTARTS_ANNOTATION,
    AnnotationFaultInjector,
    Fault,
    fault_patch,
)


@pytest.mark.parametrize(
    ("fault", "current", "annotations"),
    [
        pytest.param(Fault.NOT_READY, 0, {FAULT_ANNOTATION: "not-ready"}, id="not-ready"),
        pytest.param(Fault.NOT_READY, 7, {FAULT_ANNOTATION: "not-ready"}, id="not-ready-ignores-count"),
        pytest.param(Fault.FAIL, 0, {FAULT_ANNOTATION: "fail"}, id="fail"),
        pytest.param(Fault.RESTART, 0, {RESTARTS_ANNOTATION: "1"}, id="restart-from-0"),
        pytest.param(Fault.RESTART, 4, {RESTARTS_ANNOTATION: "5"}, id="restart-from-4"),
        pytest.param(Fault.RESTART, 99, {RESTARTS_ANNOTATION: "100"}, id="restart-from-99"),
        pytest.param(Fault.RESTART_SIDECAR, 0, {SIDECAR_RESTARTS_ANNOTATION: "1"}, id="sidecar-from-0"),
        pytest.param(Fault.RESTART_SIDECAR, 4, {SIDECAR_RESTARTS_ANNOTATION: "5"}, id="sidecar-from-4"),
        pytest.param(Fault.CLEAR, 0, {FAULT_ANNOTATION: None}, id="clear-removes-annotation"),
        pytest.param(Fault.CLEAR, 3, {FAULT_ANNOTATION: None}, id="clear-ignores-count"),
    ],
)
def test_fault_patch(fault: Fault, current: int, annotations: dict[str, str | None]) -> None:
    assert fault_patch(fault, current) == {"metadata": {"annotations": annotations}}


def test_fault_patch_restart_default_count_is_zero() -> None:
    assert fault_patch(Fault.RESTART) == {"metadata": {"annotations": {RESTARTS_ANNOTATION: "1"}}}


def test_restart_annotation_value_is_a_string() -> None:
    # Kubernetes annotations are strings; an int in a merge patch is rejected by the API server.
    value = fault_patch(Fault.RESTART, 2)["metadata"]["annotations"][RESTARTS_ANNOTATION]  # type: ignore[index]
    assert value == "3"
    assert isinstance(value, str)


@pytest.mark.parametrize(
    ("fault", "value"),
    [
        (Fault.NOT_READY, "not-ready"),
        (Fault.FAIL, "fail"),
        (Fault.RESTART, "restart"),
        (Fault.RESTART_SIDECAR, "restart-sidecar"),
        (Fault.CLEAR, "clear"),
    ],
)
def test_fault_values(fault: Fault, value: str) -> None:
    assert fault.value == value
    assert Fault(value) is fault


def test_annotation_names() -> None:
    assert FAULT_ANNOTATION == "conformance.kthena.io/fault"
    assert RESTARTS_ANNOTATION == "conformance.kthena.io/restarts"
    assert SIDECAR_RESTARTS_ANNOTATION == "conformance.kthena.io/sidecar-restarts"


class Recorder:
    """A fake PodPatcher plus restart counter that records every call."""

    def __init__(self, restarts: int = 0, sidecar_restarts: int = 0) -> None:
        self.restarts = restarts
        self.sidecar_restarts = sidecar_restarts
        self.patches: list[tuple[str, str, dict[str, object]]] = []
        self.count_calls: list[tuple[str, str]] = []
        self.sidecar_count_calls: list[tuple[str, str]] = []

    def patch(self, name: str, namespace: str, body: dict[str, object]) -> object:
        self.patches.append((name, namespace, body))
        return None

    def restart_count(self, namespace: str, pod: str) -> int:
        self.count_calls.append((namespace, pod))
        return self.restarts

    def sidecar_restart_count(self, namespace: str, pod: str) -> int:
        self.sidecar_count_calls.append((namespace, pod))
        return self.sidecar_restarts

    def injector(self) -> AnnotationFaultInjector:
        return AnnotationFaultInjector(self.patch, self.restart_count, self.sidecar_restart_count)


@pytest.mark.parametrize(
    ("fault", "restarts", "counted", "body"),
    [
        pytest.param(Fault.NOT_READY, 5, False, fault_patch(Fault.NOT_READY), id="not-ready"),
        pytest.param(Fault.FAIL, 5, False, fault_patch(Fault.FAIL), id="fail"),
        pytest.param(Fault.CLEAR, 5, False, fault_patch(Fault.CLEAR), id="clear"),
        pytest.param(Fault.RESTART, 5, True, {"metadata": {"annotations": {RESTARTS_ANNOTATION: "6"}}}, id="restart"),
        pytest.param(Fault.RESTART, 0, True, {"metadata": {"annotations": {RESTARTS_ANNOTATION: "1"}}}, id="restart-0"),
    ],
)
def test_injector_patches_the_pod(fault: Fault, restarts: int, counted: bool, body: dict[str, object]) -> None:
    rec = Recorder(restarts)
    AnnotationFaultInjector(rec.patch, rec.restart_count).inject("team-a", "pod-1", fault)
    # The patcher takes (name, namespace, body), the counter (namespace, pod): the order matters.
    assert rec.patches == [("pod-1", "team-a", body)]
    assert rec.count_calls == ([("team-a", "pod-1")] if counted else [])


def test_injector_supports_every_fault() -> None:
    assert Recorder().injector().supported_faults() == frozenset(Fault)


def test_a_sidecar_restart_counts_the_first_init_container() -> None:
    rec = Recorder(restarts=7, sidecar_restarts=2)
    rec.injector().inject("ns", "p", Fault.RESTART_SIDECAR)
    assert rec.patches == [("p", "ns", {"metadata": {"annotations": {SIDECAR_RESTARTS_ANNOTATION: "3"}}})]
    assert (rec.count_calls, rec.sidecar_count_calls) == ([], [("ns", "p")])


def test_without_a_sidecar_counter_a_sidecar_restart_is_unsupported() -> None:
    """Declared like any capability: left out of supported_faults, refused by inject, nothing patched."""
    rec = Recorder()
    injector = AnnotationFaultInjector(rec.patch, rec.restart_count)
    assert injector.supported_faults() == frozenset(Fault) - {Fault.RESTART_SIDECAR}
    with pytest.raises(UnsupportedOperation, match="restart-sidecar"):
        injector.inject("ns", "p", Fault.RESTART_SIDECAR)
    assert rec.patches == []


def test_successive_restarts_use_the_current_count() -> None:
    rec = Recorder(restarts=0)
    injector = AnnotationFaultInjector(rec.patch, rec.restart_count)
    for observed in (0, 1, 2):
        rec.restarts = observed
        injector.inject("ns", "p", Fault.RESTART)
    wanted = [body["metadata"]["annotations"][RESTARTS_ANNOTATION] for _, _, body in rec.patches]  # type: ignore[index]
    assert wanted == ["1", "2", "3"]
