"""The drain's pure part: which Pods a round evicts, waits for or leaves alone; what an answer means."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from conformance.framework.drain import Answer, NodePod, classify, plan


def v1pod(name: str, *, owner: str | None = None, mirror: bool = False, deleting: bool = False) -> Any:
    refs = [SimpleNamespace(kind=owner, controller=True)] if owner else None
    meta = SimpleNamespace(
        namespace="ns",
        name=name,
        uid=f"uid-{name}",
        owner_references=refs,
        annotations={"kubernetes.io/config.mirror": "x"} if mirror else None,
        deletion_timestamp="2026-01-01T00:00:00Z" if deleting else None,
    )
    return SimpleNamespace(metadata=meta)


def test_node_pod_reads_what_a_drain_needs() -> None:
    assert NodePod.of(v1pod("a")) == NodePod("ns", "a", "uid-a")
    assert NodePod.of(v1pod("d", owner="DaemonSet")).daemonset
    assert not NodePod.of(v1pod("r", owner="ReplicaSet")).daemonset
    assert NodePod.of(v1pod("m", mirror=True)).mirror
    assert NodePod.of(v1pod("t", deleting=True)).terminating
    assert NodePod.of(v1pod("a")).key == "ns/a"


def test_plan_evicts_waits_and_skips_like_kubectl_drain_ignore_daemonsets() -> None:
    pods = [
        NodePod("ns", "web-1"),
        NodePod("ns", "web-0"),
        NodePod("ns", "gone", terminating=True),
        NodePod("kube-system", "proxy", daemonset=True),
        NodePod("kube-system", "static", mirror=True),
    ]
    step = plan(pods)
    assert [p.name for p in step.evict] == ["web-0", "web-1"]  # sorted: rounds are reproducible
    assert [p.name for p in step.waiting] == ["gone"]
    assert step.skipped == {"kube-system/proxy": "DaemonSet Pod", "kube-system/static": "mirror Pod"}
    assert not step.done


def test_plan_honours_the_selection_first() -> None:
    pods = [NodePod("mine", "a"), NodePod("theirs", "b"), NodePod("theirs", "c", terminating=True)]
    step = plan(pods, select=lambda p: p.namespace == "mine")
    assert [p.key for p in step.evict] == ["mine/a"]
    assert step.waiting == ()
    assert step.skipped == {"theirs/b": "not selected", "theirs/c": "not selected"}


def test_plan_is_done_when_only_skipped_pods_are_left() -> None:
    assert plan([]).done
    assert plan([NodePod("k", "ds", daemonset=True), NodePod("k", "m", mirror=True)]).done
    assert not plan([NodePod("ns", "t", terminating=True)]).done  # a terminating Pod is waited for


@pytest.mark.parametrize(
    ("status", "answer"),
    [(201, Answer.EVICTED), (200, Answer.EVICTED), (429, Answer.RETRY), (404, Answer.GONE),
     (403, Answer.FAILED), (409, Answer.FAILED), (500, Answer.FAILED), (422, Answer.FAILED)],
)  # fmt: skip
def test_classify_answers(status: int, answer: Answer) -> None:
    assert classify(status) is answer


@pytest.mark.parametrize(
    ("status", "answer"),
    [(201, Answer.EVICTED), (429, Answer.RETRY), (403, Answer.RETRY), (422, Answer.RETRY), (400, Answer.RETRY),
     (404, Answer.GONE), (500, Answer.FAILED), (503, Answer.FAILED)],
)  # fmt: skip
def test_classify_retrying_every_refusal(status: int, answer: Answer) -> None:
    # The conformance drain: the refusal is the MUST, its code (429) the convention.
    assert classify(status, retry_refusals=True) is answer


# -- the drain loop against a scripted API ---------------------------------------------------------


class FakeCore:
    """Pods on one node; each Eviction answers from a script (per Pod), 201 removes the Pod."""

    def __init__(self, pods: list[str], script: dict[str, list[int]]) -> None:
        self.pods = list(pods)
        self.script = script
        self.calls: list[str] = []
        self.node_patches: list[dict[str, Any]] = []

    def patch_node(self, name: str, body: dict[str, Any]) -> None:
        self.node_patches.append(body)

    def list_namespaced_pod(self, namespace: str, field_selector: str) -> Any:
        assert field_selector == "spec.nodeName=node-a"
        return SimpleNamespace(items=[v1pod(n) for n in self.pods])

    def create_namespaced_pod_eviction(self, name: str, namespace: str, body: Any, **_: Any) -> Any:
        from kubernetes.client.exceptions import ApiException

        self.calls.append(name)
        answers = self.script.get(name) or [201]
        status = answers.pop(0) if len(answers) > 1 else answers[0]
        if status == 201:
            self.pods.remove(name)
            return SimpleNamespace(status=201)
        exc = ApiException(status=status, reason="Too Many Requests" if status == 429 else "Forbidden")
        exc.body = '{"message": "budget says no"}'
        raise exc


def test_drain_cordons_retries_refusals_and_finishes() -> None:
    from conformance.framework.drain import CORDONED_BY, drain

    core = FakeCore(["a", "b"], {"b": [429, 429, 201]})
    result = drain(SimpleNamespace(core=core), "node-a", timeout=5, namespace="ns", interval=0, run_id="r1")
    assert result.evicted == ["ns/a", "ns/b"]
    assert [a.status for a in result.refused] == [429, 429]
    assert all(a.message == "budget says no" for a in result.refused)
    assert core.calls == ["a", "b", "b", "b"]
    assert core.node_patches[0] == {"spec": {"unschedulable": True}, "metadata": {"annotations": {CORDONED_BY: "r1"}}}


def test_drain_stops_at_an_answer_it_cannot_retry() -> None:
    from conformance.framework.drain import DrainError, drain

    core = FakeCore(["a"], {"a": [403]})
    with pytest.raises(DrainError, match=r"ns/a was answered a: HTTP 403: budget says no"):
        drain(SimpleNamespace(core=core), "node-a", timeout=5, namespace="ns", interval=0)


def test_drain_gives_up_at_its_deadline_naming_what_is_left() -> None:
    from conformance.framework.drain import DrainError, drain

    core = FakeCore(["a"], {"a": [429]})
    with pytest.raises(
        DrainError, match=r"waited 0.05s; Pods still on the node: \['ns/a'\]; last refusals: a: HTTP 429"
    ):
        drain(SimpleNamespace(core=core), "node-a", timeout=0.05, namespace="ns", interval=0.01)
