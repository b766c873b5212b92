"""What a test does with ModelServings, the pure parts: omitted status counters read as 0, a
refusal's field check, a refused valid manifest is non-conformant (with the manifest and the
refusal text), an invalid one must be refused and not stored, and how Eviction answers are read."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from kubernetes.client.exceptions import ApiException

from conformance.framework.modelserving import (
    EvictionAnswer,
    Manifest,
    ModelServings,
    RefusedManifest,
    Rejection,
    counters,
    expect_refused,
    names_field,
    pods_in_words,
)
from conformance.framework.timeouts import Timeouts

BASIC = "conformance/suites/manifests/basic.yaml"


@pytest.mark.parametrize(
    ("status", "expected"),
    [
        # Go's omitempty drops counters at 0: omitted reads as 0, never as "not settled".
        ({"observedGeneration": 2}, {"replicas": 0, "currentReplicas": 0, "updatedReplicas": 0,
                                     "availableReplicas": 0}),
        ({"replicas": 3, "availableReplicas": None}, {"replicas": 3, "availableReplicas": 0}),
        (None, {"replicas": 0, "availableReplicas": 0}),
    ],
)  # fmt: skip
def test_omitted_counters_read_as_zero(status: dict[str, Any] | None, expected: dict[str, int]) -> None:
    seen = counters(status)
    assert {k: seen[k] for k in expected} == expected
    assert "observedGeneration" not in seen or seen["observedGeneration"] == (status or {}).get("observedGeneration")


def test_a_status_without_observed_generation_stays_unsettled() -> None:
    # Counters fill in, observedGeneration does not: a status never written is still not current.
    assert "observedGeneration" not in counters({})


def test_names_field_accepts_a_prefixed_path() -> None:
    schema = Rejection(422, "Invalid", 'ModelServing "x" is invalid: spec.template.roles[0].name: Too long')
    assert names_field(schema, "roles[0].name")
    assert not names_field(Rejection(422, "Invalid", "validation failed: must be 12 characters at most"), "name")


@pytest.mark.parametrize("status", [400, 403, 422])
def test_expect_refused_takes_any_refusal_whatever_its_message(status: int) -> None:
    assert expect_refused(Rejection(status, "", "no field named at all"), "x").status == status


@pytest.mark.parametrize(
    ("rejection", "fragment"),
    [(None, "it was accepted"), (Rejection(409, "AlreadyExists", "exists"), "seen 409")],
)
def test_expect_refused_fails_otherwise(rejection: Rejection | None, fragment: str) -> None:
    with pytest.raises(AssertionError, match=fragment):
        expect_refused(rejection, "x")


# -- writes against a scripted API ------------------------------------------------------------------


def api_error(status: int, message: str, reason: str = "Invalid") -> ApiException:
    exc = ApiException(status=status, reason=reason)
    exc.body = json.dumps({"kind": "Status", "reason": reason, "message": message})
    return exc


class FakeCustom:
    """The custom-objects API: create/patch answer from a script; get finds what was stored."""

    def __init__(self, answer: ApiException | None = None) -> None:
        self.answer = answer
        self.stored: dict[str, dict[str, Any]] = {}

    def create_namespaced_custom_object(self, *args: Any) -> dict[str, Any]:
        if self.answer is not None:
            raise self.answer
        body: dict[str, Any] = args[-1]
        self.stored[body["metadata"]["name"]] = body
        return body

    def patch_namespaced_custom_object(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        if self.answer is not None:
            raise self.answer
        return self.stored[args[4]]

    def get_namespaced_custom_object(self, *args: Any) -> dict[str, Any]:
        if args[-1] not in self.stored:
            raise api_error(404, "not found", "NotFound")
        return self.stored[args[-1]]


def handle(custom: FakeCustom) -> ModelServings:
    class Kube:
        pass

    kube = Kube()
    kube.custom = custom  # type: ignore[attr-defined]
    return ModelServings(kube, "ns", Timeouts())


def test_a_refused_valid_manifest_is_non_conformant_with_the_manifest_and_the_refusal() -> None:
    ms = handle(FakeCustom(api_error(422, "spec.template.roles[0].maxSurge: field not declared in schema")))
    body = copy.deepcopy(Manifest({"metadata": {"name": "basic"}, "spec": {}}, source=BASIC))
    with pytest.raises(RefusedManifest) as info:
        ms.create(body)
    message = str(info.value)
    assert isinstance(info.value, AssertionError)  # non-conformant, not an error
    assert f"ModelServing ns/basic (manifest {BASIC})" in message  # the source survives a deep copy
    assert "which the spec allows: HTTP 422 Invalid: spec.template.roles[0].maxSurge: field not declared" in message


def test_a_refused_valid_change_is_non_conformant() -> None:
    custom = FakeCustom()
    ms = handle(custom)
    ms.create({"metadata": {"name": "x"}, "spec": {"replicas": 1}})
    custom.answer = api_error(403, "denied")
    with pytest.raises(RefusedManifest, match=r"the change \{'spec': \{'replicas': 2\}\} of ModelServing ns/x"):
        ms.patch("x", {"spec": {"replicas": 2}})


@pytest.mark.parametrize("status", [404, 409, 500])
def test_other_failures_are_not_judged_as_refusals(status: int) -> None:
    ms = handle(FakeCustom(api_error(status, "boom")))
    with pytest.raises(ApiException):
        ms.create({"metadata": {"name": "x"}, "spec": {}})


def test_refused_create_requires_the_refusal_and_nothing_stored() -> None:
    ms = handle(FakeCustom(api_error(422, "bad")))
    assert ms.refused_create({"metadata": {"name": "x"}, "spec": {}}, "a bad spec").status == 422
    accepting = handle(FakeCustom())
    with pytest.raises(AssertionError, match="a bad spec to be rejected; it was accepted"):
        accepting.refused_create({"metadata": {"name": "x"}, "spec": {}}, "a bad spec")


def test_refused_patch_requires_the_spec_unchanged() -> None:
    custom = FakeCustom()
    ms = handle(custom)
    ms.create({"metadata": {"name": "x"}, "spec": {"replicas": 1}})
    custom.answer = api_error(422, "immutable")
    assert ms.refused_patch("x", {"spec": {"replicas": 2}}, "a change").status == 422


# -- Eviction answers ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "allowed", "refused", "too_many"),
    [
        (201, True, False, False),
        (200, True, False, False),
        (429, False, True, True),
        (403, False, True, False),  # a pods/eviction webhook's default code: still a refusal
        (422, False, True, False),
        (404, False, False, False),  # the Pod is gone: nothing was refused
    ],
)
def test_eviction_answers(status: int, allowed: bool, refused: bool, too_many: bool) -> None:
    answer = EvictionAnswer("p", status, "")
    assert (answer.allowed, answer.refused, answer.too_many_requests) == (allowed, refused, too_many)


def _pod(name: str, phase: str | None, ready: bool = False, deleting: bool = False) -> Any:
    from kubernetes import client

    return client.V1Pod(
        metadata=client.V1ObjectMeta(name=name, deletion_timestamp="2026-01-01T00:00:00Z" if deleting else None),
        status=client.V1PodStatus(
            phase=phase, conditions=[client.V1PodCondition(type="Ready", status="True" if ready else "False")]
        ),
    )


@pytest.mark.parametrize(
    ("pods", "expected"),
    [
        pytest.param(
            [],
            "no Pod of ModelServing ns/ms exists (label conformance.kthena.io/modelserving=ms, or a controller "
            "ownerReference to it)",
            id="none",
        ),
        pytest.param(
            [_pod("ms-0-a-0-0", "Running", ready=True), _pod("ms-0-a-0-1", "Pending"), _pod("x", None)],
            "3 Pod(s): ms-0-a-0-0 (Running, Ready), ms-0-a-0-1 (Pending, not Ready), x (no phase yet, not Ready)",
            id="states",
        ),
        pytest.param([_pod("gone", "Running", ready=True, deleting=True)], "1 Pod(s): gone (deleting)", id="deleting"),
    ],
)
def test_pods_in_words(pods: list[Any], expected: str) -> None:
    assert pods_in_words("ns", "ms", pods) == expected


class _Kube:
    """``kube`` whose namespace holds one ModelServing-less world: no Pods, the given Events."""

    def __init__(self, events: list[Any]) -> None:
        from types import SimpleNamespace

        self.core = SimpleNamespace(
            list_namespaced_pod=lambda ns: SimpleNamespace(items=[]),
            list_namespaced_event=lambda ns: SimpleNamespace(items=events),
        )


def _event(kind: str, type_: str, reason: str, message: str) -> Any:
    from kubernetes import client

    return client.CoreV1Event(
        metadata=client.V1ObjectMeta(name="e"), involved_object=client.V1ObjectReference(kind=kind, name="ms"),
        type=type_, reason=reason, message=message,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("events", "expected"),
    [
        pytest.param([], "; no Warning Event about ns/ms", id="no-events"),
        pytest.param(
            [
                _event("ModelServing", "Warning", "PluginError", "plugin x: bad config"),
                _event("ModelServing", "Normal", "Created", "fine"),
                _event("Pod", "Warning", "Other", "not ours"),
            ],
            "; Warning Events of ns/ms: PluginError: plugin x: bad config",
            id="warnings-quoted",
        ),
    ],
)
def test_a_pod_wait_that_times_out_says_what_there_was_and_what_the_implementation_reported(
    events: list[Any], expected: str
) -> None:
    ms = ModelServings(_Kube(events), "ns", Timeouts.from_options("0.001", []), "run", None)
    ms.get = lambda name: {"metadata": {"uid": "u"}}  # type: ignore[method-assign]
    with pytest.raises(AssertionError) as info:
        ms.wait_pods("ms", 2)
    message = str(info.value)
    assert "no Pod of ModelServing ns/ms exists" in message
    assert message.endswith(expected)
