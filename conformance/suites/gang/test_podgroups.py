"""GangScheduling: one PodGroup per ServingGroup, what it requires, its lifecycle; VolcanoPodGroup:
the PodGroup fields the spec does not state (minResources, the queue annotation).

What the spec states about gang scheduling (GangPolicy) is only observable through what the
implementation hands the gang scheduler: no gang scheduler runs on the conformance cluster, so
"at least minRoleReplicas instances of each Role scheduled before any Pod runs" is read from the
PodGroup (spec reading: gang scheduling, docs/spec-readings.md). Its size (minMember) and per-Role
requirement (minTaskMember or subGroupPolicy) state GangPolicy and are the GangScheduling feature;
minResources and the queue are Volcano's mechanism and are the optional VolcanoPodGroup feature.
"""

from __future__ import annotations

from typing import Any

from conformance.framework.catalog import behaviour
from conformance.framework.features import Feature
from conformance.framework.gang import (
    QUEUE_ANNOTATION,
    TASK_ANNOTATION,
    expectation,
    format_resources,
    per_role_problems,
    resources,
    same_resources,
)
from conformance.framework.modelserving import ModelServings, role_of

from . import GANG_POLICY, each_podgroup, gang_pods, start, wait_gang

NAME = "gang"


def _body(manifest: Any, *, min_role_replicas: bool = True) -> dict[str, Any]:
    body: dict[str, Any] = manifest("gang-roles")
    if not min_role_replicas:
        body["spec"]["template"]["gangPolicy"] = {}  # a gangPolicy that sets no minRoleReplicas
    return body


def _min_member(body: dict[str, Any]) -> Any:
    want = expectation(body).min_member

    def check(pg: str, spec: dict[str, Any], pods: list[Any]) -> list[str]:
        seen = spec.get("minMember")
        return [] if seen == want else [f"minMember is {seen!r}, expected {want}"]

    return lambda view: each_podgroup(view, check)


@behaviour(
    "gang/podgroup/one-per-servinggroup",
    "With schedulerName volcano, every Pod of a ServingGroup MUST name in its scheduling.k8s.io/group-name "
    "annotation one PodGroup of that ServingGroup alone, and that PodGroup MUST exist.",
    GANG_POLICY,
    Feature.GANG_SCHEDULING,
)
def test_one_podgroup_per_servinggroup(ms: ModelServings, manifest: Any) -> None:
    body = _body(manifest)
    start(ms, body)
    view = wait_gang(ms, body, what="2 ServingGroups of 6 Pods")
    assert len(view.groups) == 2, view.describe()


@behaviour(
    "gang/podgroup/min-member",
    "A ServingGroup's PodGroup minMember MUST be the number of its gang-required Pods: for every Role, "
    "(1 + workerReplicas) Pods times minRoleReplicas of that Role, or its replicas when gangPolicy does not "
    "name it.",
    GANG_POLICY,
    Feature.GANG_SCHEDULING,
)
def test_min_member_follows_min_role_replicas(ms: ModelServings, manifest: Any) -> None:
    body = _body(manifest)
    start(ms, body)
    wait_gang(ms, body, _min_member(body), what="minRoleReplicas {prefill: 1}, decode unnamed (2 + 2 Pods)")


@behaviour(
    "gang/podgroup/min-member-without-gang-policy",
    "With a gangPolicy that sets no minRoleReplicas every Role MUST be gang required, so a ServingGroup's PodGroup "
    "minMember MUST be the number of Pods of the ServingGroup.",
    GANG_POLICY,
    Feature.GANG_SCHEDULING,
)
def test_min_member_without_gang_policy_is_every_pod(ms: ModelServings, manifest: Any) -> None:
    # "If this field is not set" is minRoleReplicas: a gangPolicy without it. Without any gangPolicy
    # the spec says nothing (upstream Kthena then makes no PodGroup at all), so that is not asserted.
    body = _body(manifest, min_role_replicas=False)
    assert expectation(body).min_member == 6
    start(ms, body)
    wait_gang(ms, body, _min_member(body), what="gangPolicy without minRoleReplicas (6 Pods a ServingGroup)")


@behaviour(
    "gang/podgroup/min-task-member",
    "A ServingGroup's PodGroup MUST require, for each Role, exactly that Role's gang-required Pods as whole Role "
    "instances, through minTaskMember over the Pods' tasks (volcano.sh/task-spec) or through subGroupPolicy, so "
    "that the Pods of a required Role instance are scheduled together.",
    GANG_POLICY,
    Feature.GANG_SCHEDULING,
)
def test_min_task_member_requires_whole_role_instances(ms: ModelServings, manifest: Any) -> None:
    # Volcano has two ways to say it: minTaskMember (per task) and the newer subGroupPolicy (per
    # label-selected subgroup, what upstream Kthena writes when the PodGroup CRD has it); either is
    # accepted, and each one the PodGroup carries must be right.
    body = _body(manifest)
    per_role = _per_role(expectation(body))
    start(ms, body)
    wait_gang(ms, body, per_role, what="minRoleReplicas {prefill: 1}")


def _per_role(expected: Any) -> Any:
    """Problems of each PodGroup's per-Role requirement (minTaskMember or subGroupPolicy)."""

    def check(pg: str, spec: dict[str, Any], pods: list[Any]) -> list[str]:
        tasks: dict[str, list[str]] = {}
        for pod in pods:
            task = (pod.metadata.annotations or {}).get(TASK_ANNOTATION)
            if task:
                tasks.setdefault(str(task), []).append(role_of(pod))
        return per_role_problems(spec, tasks, gang_pods(pods), expected)

    return lambda view: each_podgroup(view, check)


@behaviour(
    "gang/podgroup/min-role-replicas-per-role",
    "gangPolicy.minRoleReplicas MUST give each Role it names its own minimum: with different values for two Roles, "
    "each ServingGroup's PodGroup MUST require exactly that many instances of each Role, in minMember and in the "
    "per-Role requirement (minTaskMember or subGroupPolicy).",
    GANG_POLICY,
    Feature.GANG_SCHEDULING,
)
def test_each_named_role_gets_its_own_minimum(ms: ModelServings, manifest: Any) -> None:
    # Both Roles named, so how a Role missing from the map counts (spec reading 27) does not matter.
    # prefill 2 of 2 instances (4 Pods), decode 1 of 2 (1 Pod): minMember 5. One value for every
    # Role gives 3 or 6, ignoring either entry 6: every mix-up is a different number.
    body = _body(manifest)
    body["spec"]["template"]["gangPolicy"] = {"minRoleReplicas": {"prefill": 2, "decode": 1}}
    expected = expectation(body)
    assert expected.min_member == 5 and expected.required_instances == {"prefill": 2, "decode": 1}
    min_member, per_role = _min_member(body), _per_role(expected)
    start(ms, body)
    wait_gang(
        ms, body, lambda view: min_member(view) + per_role(view),
        what="minRoleReplicas {prefill: 2, decode: 1} (4 + 1 gang-required Pods a ServingGroup)",
    )  # fmt: skip


@behaviour(
    "gang/podgroup/min-resources",
    "A ServingGroup's PodGroup minResources MUST be the summed container requests of its gang-required Pods.",
    GANG_POLICY,
    Feature.VOLCANO_POD_GROUP,
)
def test_min_resources_sum_the_required_pods(ms: ModelServings, manifest: Any) -> None:
    body = _body(manifest)
    want = expectation(body).min_resources
    start(ms, body)

    def check(pg: str, spec: dict[str, Any], pods: list[Any]) -> list[str]:
        raw = spec.get("minResources")
        try:
            seen = resources(raw if isinstance(raw, dict) else None)
        except ValueError as exc:
            return [f"minResources {raw!r} holds a value that is not a quantity: {exc}"]
        if same_resources(seen, want):
            return []
        return [f"minResources is {raw!r}, expected {format_resources(want)} (1 prefill instance, 2 decode)"]

    wait_gang(ms, body, lambda view: each_podgroup(view, check), what="requests of the gang-required Pods")


@behaviour(
    "gang/podgroup/queue",
    "A ServingGroup's PodGroup queue MUST be the ModelServing's scheduling.volcano.sh/queue-name annotation.",
    GANG_POLICY,
    Feature.VOLCANO_POD_GROUP,
)
def test_queue_comes_from_the_annotation(ms: ModelServings, manifest: Any) -> None:
    body = _body(manifest)
    queue = body["metadata"]["annotations"][QUEUE_ANNOTATION]

    def check(pg: str, spec: dict[str, Any], pods: list[Any]) -> list[str]:
        return [] if spec.get("queue") == queue else [f"queue is {spec.get('queue')!r}, expected {queue!r}"]

    start(ms, body)
    wait_gang(ms, body, lambda view: each_podgroup(view, check), what=f"annotation {QUEUE_ANNOTATION}={queue}")


@behaviour(
    "gang/podgroup/scale",
    "Scaling a ModelServing up MUST add one PodGroup per new ServingGroup, with the same requirements, and "
    "scaling it down MUST remove the PodGroups of the removed ServingGroups.",
    GANG_POLICY,
    Feature.GANG_SCHEDULING,
)
def test_scaling_adds_and_removes_podgroups(ms: ModelServings, manifest: Any) -> None:
    body = _body(manifest)
    start(ms, body)
    before = wait_gang(ms, body, _min_member(body), what="2 ServingGroups")
    ms.patch(NAME, {"spec": {"replicas": 3}})  # spec.replicas, not /scale (an optional feature of its own)
    up = wait_gang(ms, body, _min_member(body), replicas=3, what="scaled up to 3", wait="scale")
    lost = set(before.groups) - set(up.groups)
    assert not lost, f"scaling up must keep the existing ServingGroups' PodGroups; {sorted(lost)} are gone"
    ms.patch(NAME, {"spec": {"replicas": 1}})
    # One PodGroup for the one ServingGroup left, and no other the ModelServing owns (wait_gang).
    wait_gang(ms, body, _min_member(body), replicas=1, what="scaled down to 1", wait="scale")
