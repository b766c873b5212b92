"""The eviction budget's decision (kthena_ref.planner.eviction): table-driven, no cluster.

Each row builds a ModelServing with an evictionStrategy, its Pods in some state, a ledger of
approved evictions, and asks whether one Pod may be evicted: allowed, or refused with a message
that says why.
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

from kthena_ref.api.types import ModelServing
from kthena_ref.planner.eviction import decide, owner_of, prune

from .builders import MS, deleting, edit_spec, fresh_pods, fresh_revision, pending, ready, running_not_ready, set_image


def budget(ms: ModelServing, **strategy: Any) -> ModelServing:
    return edit_spec(ms, lambda spec: spec.setdefault("rolloutStrategy", {}).update(evictionStrategy=strategy))


def groups_ms(replicas: int, workers: int = 0, **strategy: Any) -> ModelServing:
    return budget(MS().replicas(replicas).role("r", 1, workers).build(), **strategy)


def roles_ms(replicas: int, recovery: str | None = None, **strategy: Any) -> ModelServing:
    builder = MS().replicas(replicas).role("prefill", 2, 0).role("decode", 1, 1)
    if recovery:
        builder = builder.recovery(recovery)
    return budget(builder.build(), protectionLevel="Role", **strategy)


@dataclass
class Row:
    id: str
    ms: ModelServing
    target: str
    allowed: bool
    says: str = ""  # a fragment of the message
    states: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = field(default_factory=dict)  # pod -> state
    ledger: tuple[str, ...] = ()  # Pod names whose eviction was approved
    missing: tuple[str, ...] = ()  # Pods not there (deleted, not yet recreated)


def pods_of(row: Row) -> list[dict[str, Any]]:
    out = []
    for pod in fresh_pods(row.ms):
        name = pod["metadata"]["name"]
        if name in row.missing:
            continue
        out.append(row.states.get(name, ready)(pod))
    return out


ROWS = [
    # -- ServingGroup level, numbers
    Row("n-within-budget", groups_ms(4, minAvailable=3), "ms-0-r-0-0", True, "leaves 3 ready"),
    Row(
        "n-would-break",
        groups_ms(3, minAvailable=3),
        "ms-0-r-0-0",
        False,
        "would leave 2 ready ServingGroups of ModelServing default/ms, below minAvailable 3",
    ),
    Row("n-exactly-at-budget", groups_ms(3, minAvailable=2), "ms-2-r-0-0", True),
    Row("n-zero-allows-all", groups_ms(1, minAvailable=0), "ms-0-r-0-0", True),
    Row("n-above-replicas-refuses-all", groups_ms(2, minAvailable=5), "ms-0-r-0-0", False, "below minAvailable 5"),
    # -- percentages round up; unset means 1
    Row("pct-within-budget", groups_ms(3, minAvailable="50%"), "ms-0-r-0-0", True, "leaves 2"),
    Row(
        "pct-rounds-up-refused-with-one-down",
        groups_ms(3, minAvailable="50%"),
        "ms-0-r-0-0",
        False,
        "below minAvailable 2 (evictionStrategy.minAvailable 50% of 3 replicas)",
        states={"ms-2-r-0-0": pending},
    ),
    Row("pct-100-refuses", groups_ms(2, minAvailable="100%"), "ms-1-r-0-0", False, "below minAvailable 2"),
    Row("pct-1-of-4-is-1", groups_ms(4, minAvailable="1%"), "ms-0-r-0-0", True, "leaves 3"),
    Row("unset-means-one-allowed", groups_ms(2), "ms-0-r-0-0", True),
    Row(
        "unset-means-one-refused",
        groups_ms(1),
        "ms-0-r-0-0",
        False,
        "below minAvailable 1 (evictionStrategy.minAvailable unset, meaning 1 of 1 replicas)",
    ),
    Row("level-defaults-to-group", groups_ms(2, minAvailable=2), "ms-0-r-0-0", False, "ready ServingGroups"),
    # -- the whole group is the unit of disruption
    Row(
        "worker-pod-disrupts-its-group",
        groups_ms(2, workers=2, minAvailable=2),
        "ms-1-r-0-2",
        False,
        "the whole ServingGroup ms-1 counts as disrupted",
    ),
    Row(
        "second-pod-of-a-disrupted-group-costs-nothing",
        groups_ms(3, workers=1, minAvailable=2),
        "ms-0-r-0-1",
        True,
        states={"ms-0-r-0-0": deleting},
    ),
    Row(
        "unready-group-evictable-while-budget-met",
        groups_ms(3, minAvailable=2),
        "ms-0-r-0-0",
        True,
        states={"ms-0-r-0-0": running_not_ready},
    ),
    Row(
        "unready-group-not-evictable-while-budget-broken",
        groups_ms(3, minAvailable=3),
        "ms-0-r-0-0",
        False,
        "; ServingGroup ms-0 is not ready already",
        states={"ms-0-r-0-0": running_not_ready},
    ),
    Row(
        "another-group-already-unready",
        groups_ms(3, minAvailable=2),
        "ms-0-r-0-0",
        False,
        "would leave 1 ready",
        states={"ms-2-r-0-0": pending},
    ),
    Row(
        "another-group-missing-a-pod",
        groups_ms(3, workers=1, minAvailable=2),
        "ms-0-r-0-0",
        False,
        "would leave 1 ready",
        missing=("ms-1-r-0-1",),
    ),
    Row(
        "another-group-terminating",
        groups_ms(3, minAvailable=2),
        "ms-1-r-0-0",
        False,
        "would leave 1 ready",
        states={"ms-0-r-0-0": deleting},
    ),
    # -- the ledger of approved evictions not yet visible on the Pods
    Row(
        "ledger-counts-approved-evictions",
        groups_ms(4, minAvailable=2),
        "ms-2-r-0-0",
        False,
        "would leave 1 ready",
        ledger=("ms-0-r-0-0", "ms-1-r-0-0"),
    ),
    Row(
        "ledger-pod-of-the-same-group-costs-nothing",
        groups_ms(3, workers=1, minAvailable=2),
        "ms-0-r-0-1",
        True,
        ledger=("ms-0-r-0-0",),
    ),
    Row(
        "retry-of-an-approved-eviction",
        groups_ms(2, minAvailable=2),
        "ms-0-r-0-0",
        True,
        "already approved",
        ledger=("ms-0-r-0-0",),
    ),
    # -- terminating target, unprotected
    Row(
        "terminating-target",
        groups_ms(1, minAvailable=1),
        "ms-0-r-0-0",
        True,
        "already terminating",
        states={"ms-0-r-0-0": deleting},
    ),
    Row("no-eviction-strategy", MS().replicas(1).build(), "ms-0-r-0-0", True, "not protected"),
    # -- Role level
    Row(
        "role-within-budget",
        roles_ms(2, roleMinAvailable={"prefill": 3}),
        "ms-0-prefill-1-0",
        True,
        "keeps roleMinAvailable of prefill",
    ),
    Row(
        "role-would-break",
        roles_ms(2, roleMinAvailable={"prefill": 4}),
        "ms-0-prefill-1-0",
        False,
        "would leave 3 ready instances of role prefill of ModelServing default/ms, below roleMinAvailable[prefill] 4",
    ),
    Row(
        "role-absent-from-map-is-unprotected",
        roles_ms(1, roleMinAvailable={"prefill": 2}),
        "ms-0-decode-0-1",
        True,
        "role decode of ModelServing default/ms is not protected",
    ),
    Row("role-empty-map-protects-nothing", roles_ms(1), "ms-0-prefill-0-0", True, "not protected"),
    Row(
        "role-ignores-minAvailable",
        roles_ms(1, minAvailable=1, roleMinAvailable={"prefill": 1}),
        "ms-0-decode-0-0",
        True,
    ),
    Row(
        "role-pct-rounds-up",  # 6 prefill instances in total: 34% -> 2.04 -> 3
        roles_ms(3, roleMinAvailable={"prefill": "34%"}),
        "ms-0-prefill-0-0",
        False,
        "below roleMinAvailable[prefill] 3 (34% of 6 role instances",
        states={"ms-1-prefill-0-0": pending, "ms-1-prefill-1-0": pending, "ms-2-prefill-0-0": pending},
    ),
    Row(
        "role-other-instance-of-the-group-still-counts",  # RoleRecreate: only the instance is disrupted
        roles_ms(1, roleMinAvailable={"prefill": 1}),
        "ms-0-prefill-0-0",
        True,
    ),
    Row(
        "role-worker-pod-disrupts-its-instance",
        roles_ms(2, roleMinAvailable={"decode": 2}),
        "ms-1-decode-0-1",
        False,
        "would leave 1 ready instances of role decode",
    ),
    Row(
        "role-ledger-counts",
        roles_ms(2, roleMinAvailable={"prefill": 3}),
        "ms-0-prefill-1-0",
        False,
        "would leave 2 ready instances of role prefill",
        ledger=("ms-1-prefill-0-0",),
    ),
    Row(
        "role-group-recreate-disrupts-every-role-of-the-group",
        roles_ms(2, recovery="ServingGroupRecreate", roleMinAvailable={"prefill": 3}),
        "ms-0-decode-0-0",
        False,
        "would leave 2 ready instances of role prefill",
    ),
]


@pytest.mark.parametrize("row", ROWS, ids=[r.id for r in ROWS])
def test_decision(row: Row) -> None:
    pods = pods_of(row)
    by_name = {p["metadata"]["name"]: p for p in pods}
    uids = frozenset(by_name[n]["metadata"]["uid"] for n in row.ledger)
    decision = decide(row.ms, copy.deepcopy(pods), by_name[row.target], uids)
    assert (decision.allowed, row.says in decision.message) == (row.allowed, True), decision.message
    if not decision.allowed:
        assert decision.message.startswith(f"evicting pod {row.target} would leave")
    # an approval that disrupts is recorded in the ledger; one that costs nothing is not
    assert decision.record == (
        decision.allowed and not any(w in decision.message for w in ("already", "not protected"))
    )


def test_pods_of_another_modelserving_are_not_judged_by_this_budget() -> None:
    ms = groups_ms(1, minAvailable=1)
    other = fresh_pods(MS("other").replicas(1).build())
    decision = decide(ms, [ready(p) for p in fresh_pods(ms)], ready(other[0]))
    assert decision.allowed and "not a ServingGroup member" in decision.message


def test_pods_of_other_modelservings_in_the_list_do_not_count() -> None:
    ms = groups_ms(2, minAvailable=2)
    others = [ready(p) for p in fresh_pods(MS("other").replicas(3).build())]
    pods = [ready(p) for p in fresh_pods(ms)]
    assert not decide(ms, pods + others, pods[0]).allowed


def test_no_modelserving_allows() -> None:
    pod = ready(fresh_pods(MS().build())[0])
    assert decide(None, [pod], pod).allowed


def test_a_group_at_an_older_revision_is_judged_by_its_own_layout() -> None:
    """During a rolling update a group built from the old template (1 worker) is ready with its
    2 Pods, although the new template has 2 workers: its ControllerRevision says so."""
    old = groups_ms(2, workers=1, minAvailable=1)
    old_pods = [ready(p) for p in fresh_pods(old)]
    revision = fresh_revision(old)

    def two_workers(spec: dict[str, Any]) -> None:
        role = spec["template"]["roles"][0]
        role["workerReplicas"] = 2
        set_image("engine:v2")(spec)

    new = edit_spec(old, two_workers)
    group1 = [p for p in old_pods if p["metadata"]["name"].startswith("ms-1-")]
    assert decide(new, old_pods, group1[0], revisions=[revision]).allowed  # group 0 is still ready
    assert not decide(new, old_pods, group1[0], revisions=[]).allowed  # without it: no group looks ready


def test_invalid_budget_refuses_with_the_reason() -> None:
    ms = groups_ms(2, minAvailable="most")
    pods = [ready(p) for p in fresh_pods(ms)]
    decision = decide(ms, pods, pods[0])
    assert not decision.allowed and "invalid" in decision.message and "minAvailable" in decision.message


def test_owner_is_the_controlling_modelserving() -> None:
    pod = fresh_pods(MS("llm").build())[0]
    assert owner_of(pod) == "llm"
    pod["metadata"]["ownerReferences"][0]["controller"] = False
    assert owner_of(pod) is None
    assert (
        owner_of({"metadata": {"ownerReferences": [{"kind": "ModelServing", "apiVersion": "v1", "name": "x"}]}}) is None
    )
    assert owner_of({"metadata": {}}) is None


def test_prune_drops_terminating_gone_and_expired_approvals() -> None:
    pods = [ready(p) for p in fresh_pods(groups_ms(3, minAvailable=1))]
    pods[1] = deleting(pods[1])
    uid = [p["metadata"]["uid"] for p in pods]
    ledger = {uid[0]: 100.0, uid[1]: 100.0, uid[2]: 10.0, "gone": 100.0}
    assert prune(ledger, pods, now=50.0) == {uid[0]: 100.0}


# -- the webhook's thin layer ------------------------------------------------------------------------


class FakeGuard:
    def __init__(self, answer: dict[str, Any]) -> None:
        self.answer = answer
        self.requests: list[dict[str, Any]] = []

    async def review(self, request: dict[str, Any]) -> dict[str, Any]:
        self.requests.append(request)
        return self.answer


def eviction_review(**request: Any) -> dict[str, Any]:
    base = {
        "uid": "u1",
        "operation": "CREATE",
        "resource": {"group": "", "version": "v1", "resource": "pods"},
        "subResource": "eviction",
        "namespace": "ns",
        "name": "ms-0-r-0-0",
    }
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {**base, **request}}


def test_refusal_is_a_429_too_many_requests_with_the_message() -> None:
    from kthena_ref.admission.server import eviction_response
    from kthena_ref.eviction import refused

    guard = FakeGuard(refused("evicting pod x would leave 0 ready ServingGroups"))
    answer = asyncio.run(eviction_response(eviction_review(), guard))  # type: ignore[arg-type]
    response = answer["response"]
    assert response["uid"] == "u1" and response["allowed"] is False
    status = response["status"]
    assert (status["code"], status["reason"]) == (429, "TooManyRequests")
    assert status["message"] == "evicting pod x would leave 0 ready ServingGroups"
    assert guard.requests[0]["name"] == "ms-0-r-0-0"


@pytest.mark.parametrize(
    "request_fields",
    [{"operation": "DELETE"}, {"subResource": ""}, {"resource": {"group": "", "version": "v1", "resource": "nodes"}}],
    ids=["not-create", "not-the-subresource", "not-pods"],
)
def test_anything_but_a_pod_eviction_is_allowed_without_a_decision(request_fields: dict[str, Any]) -> None:
    from kthena_ref.admission.server import eviction_response
    from kthena_ref.eviction import refused

    guard = FakeGuard(refused("no"))
    answer = asyncio.run(eviction_response(eviction_review(**request_fields), guard))  # type: ignore[arg-type]
    assert answer["response"] == {"uid": "u1", "allowed": True} and guard.requests == []


def test_a_malformed_review_is_an_error() -> None:
    from kthena_ref.admission.server import eviction_response

    with pytest.raises(ValueError, match=r"request\.uid"):
        asyncio.run(eviction_response({"request": {}}, FakeGuard({"allowed": True})))  # type: ignore[arg-type]


def test_the_ledger_annotation_round_trips_and_damage_reads_as_empty() -> None:
    from kthena_ref.eviction import LEDGER_ANNOTATION, _ledger

    assert _ledger(None) == {}
    assert _ledger({"metadata": {"annotations": {LEDGER_ANNOTATION: '{"a": 12.5}'}}}) == {"a": 12.5}
    assert _ledger({"metadata": {"annotations": {LEDGER_ANNOTATION: "not json"}}}) == {}
    assert _ledger({"metadata": {"annotations": {LEDGER_ANNOTATION: "[1]"}}}) == {}


def test_the_in_cluster_manifest_registers_the_eviction_webhook(tmp_path: Any) -> None:
    import yaml
    from click.testing import CliRunner

    from kthena_ref.cli import main
    from kthena_ref.eviction import PATH

    ca = tmp_path / "ca.pem"
    ca.write_bytes(b"-----BEGIN CERTIFICATE-----\n")
    result = CliRunner().invoke(main, ["manifests", "controller", "--ca-bundle-file", str(ca)])
    assert result.exit_code == 0, result.output
    docs = {d["kind"]: d for d in yaml.safe_load_all(result.output) if d}
    hooks = {h["name"]: h for h in docs["ValidatingWebhookConfiguration"]["webhooks"]}
    hook = hooks["eviction-budget.modelservings.workload.serving.volcano.sh"]
    assert hook["clientConfig"]["service"]["path"] == PATH
    assert (
        hook["clientConfig"]["caBundle"]
        == hooks["validate.modelservings.workload.serving.volcano.sh"]["clientConfig"]["caBundle"]
    )
    assert hook["rules"] == [
        {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["pods/eviction"]}
    ]
    assert (hook["failurePolicy"], hook["sideEffects"]) == ("Fail", "NoneOnDryRun")
    excluded = hook["namespaceSelector"]["matchExpressions"][0]
    assert excluded["operator"] == "NotIn" and {"kube-system", "kthena-system"} <= set(excluded["values"])
