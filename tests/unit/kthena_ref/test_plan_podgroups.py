"""plan() PodGroups: one per ServingGroup under volcano with the CRD, minMember/minTaskMember/minResources, queue."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest

from kthena_ref.api.types import ModelServing
from kthena_ref.planner.names import ANNOTATION_PODGROUP, ANNOTATION_QUEUE, ANNOTATION_TASK_SPEC, LABEL_NAME
from kthena_ref.planner.plan import Observed, plan

from .builders import (
    MS,
    T0,
    edit_spec,
    fresh_pods,
    fresh_revision,
    label,
    name_of,
    names,
    ordinal,
    ready,
    revision,
    world,
)

UNITS = {"m": Decimal("0.001"), "k": Decimal(10**3), "M": Decimal(10**6), "G": Decimal(10**9)}
UNITS |= {"T": Decimal(10**12), "P": Decimal(10**15), "E": Decimal(10**18)}
UNITS |= {"Ki": Decimal(2**10), "Mi": Decimal(2**20), "Gi": Decimal(2**30), "Ti": Decimal(2**40)}
UNITS |= {"Pi": Decimal(2**50), "Ei": Decimal(2**60)}


def quantity(text: str) -> Decimal:
    for unit in sorted(UNITS, key=len, reverse=True):
        if text.endswith(unit):
            return Decimal(text[: -len(unit)]) * UNITS[unit]
    return Decimal(text)


def _podgroups(ms: ModelServing, podgroups: list[dict[str, Any]] | None = None, **kw: Any) -> list[dict[str, Any]]:
    return plan(
        Observed(ms=ms, pods=[], podgroups=[] if podgroups is None else podgroups, now=T0, **kw)
    ).apply_podgroups


def _two_roles(gang: dict[str, int] | None = None, *, policy: bool = False) -> ModelServing:
    b = MS("llm").replicas(2).role("p", 2, 1).role("d", 3, 0)
    if policy or gang is not None:
        b.gang(gang)
    return b.build()


def test_one_podgroup_per_serving_group() -> None:
    ms = MS("llm").uid("u-9").replicas(3).build()
    pgs = _podgroups(ms)
    assert names(pgs) == ["llm-0", "llm-1", "llm-2"]
    for pg in pgs:
        assert (pg["apiVersion"], pg["kind"]) == ("scheduling.volcano.sh/v1beta1", "PodGroup")
        assert pg["metadata"]["labels"] == {LABEL_NAME: "llm"}
        (owner,) = pg["metadata"]["ownerReferences"]
        assert (owner["uid"], owner["controller"], owner["blockOwnerDeletion"]) == ("u-9", True, True)


@pytest.mark.parametrize(
    ("scheduler", "podgroups", "want"),
    [
        pytest.param(None, [], True, id="default-volcano-crd-present"),
        pytest.param("volcano", [], True, id="volcano-crd-present"),
        pytest.param("volcano", None, False, id="crd-absent"),
        pytest.param("default-scheduler", [], False, id="other-scheduler"),
        pytest.param("default-scheduler", None, False, id="other-scheduler-crd-absent"),
    ],
)
def test_podgroups_and_pod_annotations_only_with_volcano_and_the_crd(
    scheduler: str | None, podgroups: list[dict[str, Any]] | None, want: bool
) -> None:
    b = MS("llm").replicas(2).role("p", 2, 1)
    if scheduler:
        b.scheduler(scheduler)
    p = plan(Observed(ms=b.build(), pods=[], podgroups=podgroups, now=T0))
    assert names(p.apply_podgroups) == (["llm-0", "llm-1"] if want else [])
    for pod in p.create_pods:
        annotations = pod["metadata"].get("annotations") or {}
        if want:
            assert annotations[ANNOTATION_PODGROUP] == f"llm-{ordinal(pod)}"
            assert annotations[ANNOTATION_TASK_SPEC] == label(pod, "modelserving.volcano.sh/role-id")
        else:
            assert ANNOTATION_PODGROUP not in annotations
            assert ANNOTATION_TASK_SPEC not in annotations


@pytest.mark.parametrize(
    ("gang", "policy", "min_member", "tasks"),
    [
        pytest.param(None, False, 2 * 2 + 3 * 1, ["d-0", "d-1", "d-2", "p-0", "p-1"], id="no-gang-policy"),
        pytest.param(None, True, 7, ["d-0", "d-1", "d-2", "p-0", "p-1"], id="empty-gang-policy"),
        pytest.param({"p": 1, "d": 1}, True, 2 + 1, ["d-0", "p-0"], id="one-of-each"),
        pytest.param({"p": 1}, True, 2 + 3, ["d-0", "d-1", "d-2", "p-0"], id="missing-role-counts-fully"),
        pytest.param({"p": 5, "d": 2}, True, 2 * 2 + 2, ["d-0", "d-1", "p-0", "p-1"], id="capped-at-replicas"),
        pytest.param({"p": 0, "d": 3}, True, 3, ["d-0", "d-1", "d-2"], id="zero"),
    ],
)
def test_min_member_and_min_task_member(
    gang: dict[str, int] | None, policy: bool, min_member: int, tasks: list[str]
) -> None:
    pgs = _podgroups(_two_roles(gang, policy=policy))
    for pg in pgs:
        assert pg["spec"]["minMember"] == min_member
        task_members = pg["spec"]["minTaskMember"]
        assert sorted(task_members) == tasks
        assert all(task_members[t] == (2 if t.startswith("p") else 1) for t in tasks)
        assert sum(task_members.values()) == min_member


def _resourced(gang: dict[str, int] | None = None) -> ModelServing:
    b = (
        MS("llm")
        .replicas(1)
        .role("p", 2, 1, requests={"cpu": "500m", "memory": "1Gi", "nvidia.com/gpu": "1"})
        .role("d", 3, 0, requests={"cpu": "1", "memory": "512Mi"})
    )
    if gang is not None:
        b.gang(gang)
    return b.build()


@pytest.mark.parametrize(
    ("gang", "want"),
    [
        pytest.param(None, {"cpu": "5", "memory": str(4 * 2**30 + 3 * 2**29), "nvidia.com/gpu": "4"}, id="all"),
        pytest.param({"p": 1, "d": 1}, {"cpu": "2", "memory": str(2 * 2**30 + 2**29), "nvidia.com/gpu": "2"}, id="min"),
        pytest.param({"p": 0, "d": 1}, {"cpu": "1", "memory": str(2**29)}, id="no-gpu-role"),
    ],
)
def test_min_resources_sum_requests_of_the_gang(gang: dict[str, int] | None, want: dict[str, str]) -> None:
    (pg,) = _podgroups(_resourced(gang))
    got = pg["spec"]["minResources"]
    assert sorted(got) == sorted(want)
    assert {k: quantity(v) for k, v in got.items()} == {k: quantity(v) for k, v in want.items()}


@pytest.mark.parametrize(
    ("requests", "want"),
    [
        pytest.param(["100m", "200m"], Decimal("0.3"), id="millis"),
        pytest.param(["0.5", "250m"], Decimal("0.75"), id="decimal-and-millis"),
        pytest.param(["1k", "1"], Decimal(1001), id="kilo"),
        pytest.param(["1Ki", "1M"], Decimal(1024 + 10**6), id="binary-and-decimal"),
    ],
)
def test_min_resources_quantities(requests: list[str], want: Decimal) -> None:
    b = MS("llm").replicas(1)
    for i, value in enumerate(requests):
        b.role(f"r{i}", 1, 0, requests={"example.com/thing": value})
    (pg,) = _podgroups(b.build())
    assert quantity(pg["spec"]["minResources"]["example.com/thing"]) == want


@pytest.mark.parametrize("value", ["1T", "1Pi", "2E", "1P"])
def test_min_resources_keeps_every_valid_quantity(value: str) -> None:
    ms = MS("llm").replicas(1).role("r", 1, 0, requests={"ephemeral-storage": value}).build()
    (pg,) = _podgroups(ms)
    assert quantity(pg["spec"]["minResources"].get("ephemeral-storage", "0")) == quantity(value)


@pytest.mark.parametrize(
    ("queue", "want"),
    [pytest.param("team-a", "team-a", id="annotated"), pytest.param(None, None, id="no-annotation")],
)
def test_queue_from_annotation(queue: str | None, want: str | None) -> None:
    b = MS("llm").replicas(1)
    if queue:
        b.annotation(ANNOTATION_QUEUE, queue)
    (pg,) = _podgroups(b.build())
    assert pg["spec"].get("queue") == want


def test_existing_podgroup_with_the_same_spec_is_not_applied_again() -> None:
    w = world(_two_roles(), podgroups=True)
    assert w.podgroups is not None and sorted(w.podgroups) == ["llm-0", "llm-1"]
    p = w.plan()
    assert (p.apply_podgroups, p.delete_podgroups) == ([], [])


def test_podgroup_with_a_different_spec_is_applied() -> None:
    w = world(_two_roles(), podgroups=True)
    assert w.podgroups is not None
    w.podgroups["llm-1"]["spec"]["minMember"] = 1
    assert names(w.plan().apply_podgroups) == ["llm-1"]


def test_podgroups_follow_the_gang_policy_without_rolling_pods() -> None:
    w = world(_two_roles(), podgroups=True)
    w.ms = edit_spec(w.ms, lambda s: s["template"].update(gangPolicy={"minRoleReplicas": {"p": 1}}))
    p = w.plan()
    assert names(p.apply_podgroups) == ["llm-0", "llm-1"]
    assert {pg["spec"]["minMember"] for pg in p.apply_podgroups} == {5}
    assert (p.delete_pods, p.create_pods, p.create_revisions) == ([], [], [])


def test_podgroups_of_removed_groups_are_deleted_once_their_pods_are_gone() -> None:
    w = world(MS("llm").replicas(3).build(), podgroups=True)
    assert w.podgroups is not None
    w.podgroups["llm-7"] = {**w.podgroups["llm-2"], "metadata": {**w.podgroups["llm-2"]["metadata"], "name": "llm-7"}}
    w.podgroups["llm-8"] = {"metadata": {"name": "llm-8", "ownerReferences": [{"uid": "someone-else"}]}, "spec": {}}
    w.ms = edit_spec(w.ms, lambda s: s.update(replicas=2))
    p = w.step()
    assert sorted(p.delete_podgroups) == ["llm-7"]  # llm-2 still has Pods in this step (deleted by it)
    assert "llm-2-r-0-0" not in w.pods
    assert w.plan().delete_podgroups == ["llm-2"]


def test_podgroup_network_topology_from_the_group_policy() -> None:
    ms = edit_spec(
        MS("llm").replicas(1).build(),
        lambda s: s["template"].update(networkTopology={"groupPolicy": {"mode": "hard", "highestTierAllowed": 2}}),
    )
    (pg,) = _podgroups(ms)
    assert pg["spec"]["networkTopology"] == {"mode": "hard", "highestTierAllowed": 2}


def test_podgroup_of_a_group_created_at_the_current_revision_matches_its_pods() -> None:
    def at(workers: int) -> ModelServing:
        return MS("llm").replicas(3).role("r", 1, workers).rollout(partition=2).build()

    old, new = at(1), at(2)
    old_cr, new_cr = fresh_revision(old), fresh_revision(new)
    new_cr["revision"] = 2
    pods = [ready(p) for p in fresh_pods(old) if ordinal(p) == 1]
    pods += [ready(p) for p in fresh_pods(new) if ordinal(p) == 2]
    data = new.to_api()
    data["status"] = {"currentRevision": revision(old_cr)}
    ms = ModelServing.model_validate(data)
    p = plan(Observed(ms=ms, pods=pods, revisions=[old_cr, new_cr], podgroups=[], now=T0))
    created = [pod for pod in p.create_pods if ordinal(pod) == 0]
    assert {revision(pod) for pod in created} == {revision(old_cr)}  # below the partition: the old layout
    (pg,) = [pg for pg in p.apply_podgroups if name_of(pg) == "llm-0"]
    assert pg["spec"]["minMember"] == len(created) == 2
