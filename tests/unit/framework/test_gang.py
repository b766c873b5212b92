"""PodGroup expectations: minMember, gang-required Pods per Role, minResources, minTaskMember checks."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
import yaml

from conformance.framework.gang import (
    GangExpectation,
    GangPod,
    expectation,
    format_resources,
    per_role_problems,
    resources,
    same_resources,
    selects,
    subgroup_problems,
    task_problems,
    template_requests,
)

MANIFESTS = Path(__file__).resolve().parents[3] / "conformance" / "suites" / "manifests"


def template(**requests: str) -> dict[str, Any]:
    return {"spec": {"containers": [{"name": "c", "image": "i", "resources": {"requests": requests}}]}}


def role(
    name: str, replicas: int, workers: int, entry: dict[str, str], worker: dict[str, str] | None = None
) -> dict[str, Any]:
    out: dict[str, Any] = {"name": name, "replicas": replicas, "workerReplicas": workers,
                           "entryTemplate": template(**entry)}  # fmt: skip
    if worker is not None:
        out["workerTemplate"] = template(**worker)
    return out


def body(*roles: dict[str, Any], min_role_replicas: dict[str, int] | None = None) -> dict[str, Any]:
    tpl: dict[str, Any] = {"roles": list(roles)}
    if min_role_replicas is not None:
        tpl["gangPolicy"] = {"minRoleReplicas": min_role_replicas}
    return {"spec": {"replicas": 2, "template": tpl}}


P = role("p", 2, 1, {"cpu": "500m", "memory": "1Gi"}, {"cpu": "250m", "memory": "512Mi"})
D = role("d", 3, 0, {"cpu": "100m"})


def test_without_gang_policy_every_pod_is_required() -> None:
    e = expectation(body(P, D))
    assert (e.pods_per_group, e.min_member) == (7, 7)
    assert e.required_instances == {"p": 2, "d": 3}
    assert e.required_pods == {"p": 4, "d": 3}
    assert same_resources(e.min_resources, resources({"cpu": "1800m", "memory": "3Gi"}))


def test_min_role_replicas_limits_the_named_roles_only() -> None:
    e = expectation(body(P, D, min_role_replicas={"p": 1}))  # d unnamed: all 3 (spec reading 27)
    assert e.min_member == 2 + 3
    assert e.required_pods == {"p": 2, "d": 3}
    assert same_resources(e.min_resources, resources({"cpu": "1050m", "memory": "1536Mi"}))


def test_min_role_replicas_above_replicas_is_capped_and_zero_requires_nothing() -> None:
    e = expectation(body(P, D, min_role_replicas={"p": 5, "d": 0}))
    assert e.required_instances == {"p": 2, "d": 0}
    assert e.min_member == 4
    assert same_resources(e.min_resources, resources({"cpu": "1500m", "memory": "3Gi"}))


def test_workers_without_a_worker_template_request_what_the_entry_does() -> None:
    e = expectation(body(role("x", 1, 2, {"cpu": "1"})))
    assert e.min_member == 3
    assert e.min_resources == {"cpu": Decimal(3)}


def test_template_requests_sum_containers_and_ignore_limits() -> None:
    tpl = {"spec": {"containers": [
        {"name": "a", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"cpu": "4"}}},
        {"name": "b", "resources": {"requests": {"cpu": "500m"}}},
        {"name": "c"},
    ], "initContainers": [{"name": "i", "resources": {"requests": {"cpu": "8"}}}]}}  # fmt: skip
    assert template_requests(tpl) == {"cpu": Decimal("1.5"), "memory": Decimal(1024**3)}
    assert template_requests(None) == {}


def test_same_resources_compares_quantities_and_ignores_zeroes() -> None:
    assert same_resources(resources({"cpu": "1.5", "memory": "1536Mi"}), resources({"cpu": "1500m",
                                                                                     "memory": "1.5Gi"}))  # fmt: skip
    assert same_resources(resources({"cpu": "1", "nvidia.com/gpu": 0}), resources({"cpu": 1}))
    assert not same_resources(resources({"cpu": "1"}), resources({"cpu": "1", "memory": "1Mi"}))
    with pytest.raises(ValueError):
        resources({"cpu": "lots"})
    assert format_resources(resources({"memory": "1Gi", "cpu": "950m"})) == "{cpu: 0.95, memory: 1073741824}"


def test_the_gang_manifest_matches_its_comment() -> None:
    e = expectation(yaml.safe_load((MANIFESTS / "gang-roles.yaml").read_text()))
    assert (e.pods_per_group, e.min_member) == (6, 4)
    assert same_resources(e.min_resources, resources({"cpu": "950m", "memory": "1792Mi"}))


EXPECTED = GangExpectation(5, 4, {"p": 1, "d": 2}, {"p": 2, "d": 2}, {}, {"p": 2, "d": 1})
# Pods of one ServingGroup by task: p has 2 instances of 2 Pods, d 2 single-Pod instances.
TASKS = {"p-0": ["p", "p"], "p-1": ["p", "p"], "d-0": ["d"], "d-1": ["d"]}


@pytest.mark.parametrize(
    "min_task_member",
    [
        {"p-0": 2, "d-0": 1, "d-1": 1},  # one task per Role instance (upstream)
        {"p-1": 2, "d-0": 1, "d-1": 1, "p-0": 0},  # which instance, and explicit zeroes, are free
    ],
)
def test_tasks_requiring_exactly_the_gang_required_pods_pass(min_task_member: dict[str, int]) -> None:
    assert task_problems(min_task_member, TASKS, EXPECTED) == []


def test_per_role_tasks_pass_too() -> None:
    tasks = {"p": ["p"] * 4, "d": ["d", "d"]}
    assert task_problems({"p": 2, "d": 2}, tasks, EXPECTED) == []


@pytest.mark.parametrize(
    ("min_task_member", "fragment"),
    [
        ({"p-0": 2, "p-1": 2, "d-0": 1, "d-1": 1}, "Role p require 4 Pods"),  # every instance required
        ({"p-0": 1, "d-0": 1, "d-1": 1}, "Role p require 1 Pods"),  # half an instance
        ({"p-0": 2, "d-0": 1}, "Role d require 1 Pods"),
        ({"p-0": 3, "d-0": 1, "d-1": 1}, "only 2 Pods carry that task"),
        ({"p-0": 2, "d-0": 1, "d-1": 1, "x-9": 1}, "names a task no Pod"),
        ({"p-0": "two", "d-0": 1, "d-1": 1}, "not a number"),
    ],
)
def test_wrong_task_requirements_are_named(min_task_member: dict[str, Any], fragment: str) -> None:
    problems = task_problems(min_task_member, TASKS, EXPECTED)
    assert any(fragment in p for p in problems), problems


def test_a_task_spanning_roles_is_a_problem() -> None:
    problems = task_problems({"t": 3}, {"t": ["p", "p", "d"]}, EXPECTED)
    assert any("several Roles" in p for p in problems), problems


def test_expectation_knows_each_roles_instance_size() -> None:
    assert expectation(body(P, D)).instance_sizes == {"p": 2, "d": 1}


# -- subGroupPolicy (Volcano's newer per-Role requirement) ------------------------------------------

NAME, ROLE, RID = "modelserving.volcano.sh/name", "modelserving.volcano.sh/role", "modelserving.volcano.sh/role-id"


def gang_pod(name: str, role: str, index: int, member: str) -> GangPod:
    labels = {NAME: "ms", ROLE: role, RID: f"{role}-{index}", "conformance.kthena.io/role": role}
    return GangPod(name, labels, role, member)


# One ServingGroup: p has 2 instances of an entry and a worker, d 2 single-Pod instances.
PODS = [
    gang_pod("p0e", "p", 0, "entry"), gang_pod("p0w", "p", 0, "worker"),
    gang_pod("p1e", "p", 1, "entry"), gang_pod("p1w", "p", 1, "worker"),
    gang_pod("d0e", "d", 0, "entry"), gang_pod("d1e", "d", 1, "entry"),
]  # fmt: skip


def policy(role: str, size: int, minimum: int, keys: list[str] | None = None, **selector: Any) -> dict[str, Any]:
    """What upstream Kthena writes: a Role's Pods selected by name and role, cut by role-id."""
    return {
        "name": role,
        "labelSelector": selector or {"matchLabels": {NAME: "ms", ROLE: role}},
        "matchLabelKeys": [RID] if keys is None else keys,
        "subGroupSize": size,
        "minSubGroups": minimum,
    }


def test_upstreams_subgroup_policy_passes() -> None:
    assert subgroup_problems([policy("p", 2, 1), policy("d", 1, 2)], PODS, EXPECTED) == []


def test_a_selector_by_expression_passes_too() -> None:
    by_expression = policy("p", 2, 1, matchExpressions=[{"key": ROLE, "operator": "In", "values": ["p"]}])
    assert subgroup_problems([by_expression, policy("d", 1, 2)], PODS, EXPECTED) == []


@pytest.mark.parametrize(
    ("policies", "fragment"),
    [
        ([policy("p", 2, 2), policy("d", 1, 2)], "Role p require 4 Pods"),  # every instance required
        ([policy("p", 2, 1)], "Role d require 0 Pods"),  # d missing
        ([policy("p", 1, 2), policy("d", 1, 2)], "subGroupSize is 1"),  # half instances
        ([policy("p", 2, 1, keys=[]), policy("d", 1, 2)], "not one Role instance"),  # not cut by instance
        ([policy("p", 2, 3), policy("d", 1, 2)], "only 2 subgroups exist"),
        ([policy("x", 2, 1, matchLabels={NAME: "ms"}), policy("d", 1, 2)], "several Roles"),
        ([policy("p", 2, 1, matchLabels={ROLE: "nope"}), policy("d", 1, 2)], "selects no Pod"),
        ([policy("p", "two", 1), policy("d", 1, 2)], "not a number"),  # type: ignore[arg-type]
        (["p"], "not an object"),
    ],
)
def test_wrong_subgroup_policies_are_named(policies: list[Any], fragment: str) -> None:
    problems = subgroup_problems(policies, PODS, EXPECTED)
    assert any(fragment in p for p in problems), problems


@pytest.mark.parametrize(
    ("selector", "labels", "selected"),
    [
        (None, {"a": "1"}, True),
        ({}, {}, True),
        ({"matchLabels": {"a": "1"}}, {"a": "1", "b": "2"}, True),
        ({"matchLabels": {"a": "1"}}, {"a": "2"}, False),
        ({"matchExpressions": [{"key": "a", "operator": "In", "values": ["1", "2"]}]}, {"a": "2"}, True),
        ({"matchExpressions": [{"key": "a", "operator": "NotIn", "values": ["1"]}]}, {}, True),
        ({"matchExpressions": [{"key": "a", "operator": "NotIn", "values": ["1"]}]}, {"a": "1"}, False),
        ({"matchExpressions": [{"key": "a", "operator": "Exists"}]}, {"a": ""}, True),
        ({"matchExpressions": [{"key": "a", "operator": "DoesNotExist"}]}, {"a": ""}, False),
        ({"matchExpressions": [{"key": "a", "operator": "Gt", "values": ["1"]}]}, {"a": "2"}, False),
    ],
)
def test_label_selectors(selector: dict[str, Any] | None, labels: dict[str, str], selected: bool) -> None:
    assert selects(selector, labels) is selected


def test_either_per_role_form_is_accepted_and_each_present_must_be_right() -> None:
    good_tasks, good_subgroups = {"p-0": 2, "d-0": 1, "d-1": 1}, [policy("p", 2, 1), policy("d", 1, 2)]
    assert per_role_problems({"minTaskMember": good_tasks}, TASKS, PODS, EXPECTED) == []
    assert per_role_problems({"subGroupPolicy": good_subgroups}, TASKS, PODS, EXPECTED) == []
    both = {"minTaskMember": good_tasks, "subGroupPolicy": good_subgroups}
    assert per_role_problems(both, TASKS, PODS, EXPECTED) == []
    wrong = per_role_problems({"minTaskMember": {"p-0": 1}, "subGroupPolicy": good_subgroups}, TASKS, PODS, EXPECTED)
    assert any(p.startswith("minTaskMember:") for p in wrong), wrong
    neither = per_role_problems({"minTaskMember": {}, "subGroupPolicy": []}, TASKS, PODS, EXPECTED)
    assert neither and "neither minTaskMember" in neither[0]
