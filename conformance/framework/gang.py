"""What a ServingGroup's PodGroup must say, computed from the ModelServing the test wrote (pure).

The spec (GangPolicy) says which Pods of a ServingGroup are *gang required*: ``minRoleReplicas``
Role instances of each Role it names (a Role it does not name counts with all its replicas, spec
reading 27; no ``gangPolicy`` at all makes every Role gang required), and every Pod of a required
Role instance ("pods within a role must be scheduled together"). Volcano's PodGroup expresses that
as ``minMember`` (how many Pods), ``minTaskMember`` (per task, the Pods' ``volcano.sh/task-spec``
annotation) and ``minResources`` (what those Pods request). So, per ServingGroup::

    minMember    = sum over Roles of (1 + workerReplicas) x min(minRoleReplicas[role] or replicas, replicas)
    minResources = summed container requests of those Pods (the entry template for the entry Pod,
                   the worker template for each worker)

``minTaskMember`` is checked without choosing how tasks are cut (one per Role instance, as upstream
Kthena does, or one per Role): the tasks a Role's Pods carry must together require exactly that
Role's gang-required Pods, and no task may require more Pods than carry its name.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

PODGROUP_API = ("scheduling.volcano.sh", "v1beta1", "podgroups")
PODGROUP_ANNOTATION = "scheduling.k8s.io/group-name"
TASK_ANNOTATION = "volcano.sh/task-spec"
QUEUE_ANNOTATION = "scheduling.volcano.sh/queue-name"


def parse_quantity(value: Any) -> Decimal:
    """A Kubernetes quantity (``500m``, ``1Gi``, ``2``) as a Decimal; ValueError when it is not one."""
    from kubernetes.utils import parse_quantity as parse

    result = parse(value)  # type: ignore[no-untyped-call]
    if not isinstance(result, Decimal):  # pragma: no cover - the client always returns Decimal
        raise ValueError(f"not a quantity: {value!r}")
    return result


def resources(mapping: Mapping[str, Any] | None) -> dict[str, Decimal]:
    """``{resource: quantity}`` parsed (``minResources`` or a container's ``requests``)."""
    return {str(k): parse_quantity(v) for k, v in (mapping or {}).items()}


def template_requests(template: Mapping[str, Any] | None) -> dict[str, Decimal]:
    """Summed ``resources.requests`` of a Pod template's regular containers."""
    totals: dict[str, Decimal] = {}
    for container in ((template or {}).get("spec") or {}).get("containers") or []:
        for resource, value in resources((container.get("resources") or {}).get("requests")).items():
            totals[resource] = totals.get(resource, Decimal(0)) + value
    return totals


def _add(into: dict[str, Decimal], more: Mapping[str, Decimal], times: int = 1) -> None:
    for resource, value in more.items():
        into[resource] = into.get(resource, Decimal(0)) + value * times


@dataclass(frozen=True)
class GangExpectation:
    """The gang requirement of one ServingGroup of a ModelServing body."""

    pods_per_group: int
    min_member: int
    required_instances: dict[str, int]  # role -> gang-required Role instances
    required_pods: dict[str, int]  # role -> gang-required Pods
    min_resources: dict[str, Decimal]


def expectation(body: Mapping[str, Any]) -> GangExpectation:
    """What every ServingGroup's PodGroup must require, from the ModelServing ``body``."""
    template = body["spec"]["template"]
    policy = (template.get("gangPolicy") or {}).get("minRoleReplicas") or {}
    per_group = 0
    min_member = 0
    instances: dict[str, int] = {}
    pods: dict[str, int] = {}
    totals: dict[str, Decimal] = {}
    for role in template["roles"]:
        name = str(role["name"])
        replicas = int(role.get("replicas", 1))
        workers = int(role.get("workerReplicas", 0))
        needed = min(int(policy[name]), replicas) if name in policy else replicas
        per_group += replicas * (1 + workers)
        min_member += needed * (1 + workers)
        instances[name] = needed
        pods[name] = needed * (1 + workers)
        entry = template_requests(role.get("entryTemplate"))
        worker = template_requests(role.get("workerTemplate") or role.get("entryTemplate"))
        _add(totals, entry, needed)
        _add(totals, worker, needed * workers)
    return GangExpectation(per_group, min_member, instances, pods, totals)


def same_resources(seen: Mapping[str, Decimal], want: Mapping[str, Decimal]) -> bool:
    """Equal as quantities; a resource at 0 counts as absent (``cpu: 0`` says nothing more)."""
    keys = set(seen) | set(want)
    return all(seen.get(k, Decimal(0)) == want.get(k, Decimal(0)) for k in keys)


def format_resources(values: Mapping[str, Decimal]) -> str:
    return "{" + ", ".join(f"{k}: {v.normalize():f}" for k, v in sorted(values.items())) + "}"


def task_problems(
    min_task_member: Mapping[str, Any], tasks: Mapping[str, list[str]], expected: GangExpectation
) -> list[str]:
    """What is wrong with one PodGroup's ``minTaskMember`` (empty: nothing).

    ``tasks`` maps each task name the group's Pods carry (``volcano.sh/task-spec``) to the Roles of
    the Pods carrying it, one entry per Pod."""
    problems: list[str] = []
    per_role: dict[str, int] = {}
    for task, raw in sorted(min_task_member.items()):
        try:
            value = int(raw)
        except (TypeError, ValueError):
            problems.append(f"minTaskMember[{task}] is not a number: {raw!r}")
            continue
        if value == 0:
            continue
        carriers = tasks.get(task, [])
        if not carriers:
            problems.append(f"minTaskMember[{task}]={value} names a task no Pod of the ServingGroup carries")
            continue
        roles = sorted(set(carriers))
        if len(roles) != 1:
            problems.append(f"task {task} is carried by Pods of several Roles {roles}")
            continue
        if value > len(carriers):
            problems.append(f"minTaskMember[{task}]={value} but only {len(carriers)} Pods carry that task")
        per_role[roles[0]] = per_role.get(roles[0], 0) + value
    for role, want in sorted(expected.required_pods.items()):
        have = per_role.get(role, 0)
        if have != want:
            problems.append(
                f"the tasks of Role {role} require {have} Pods in minTaskMember; {want} are gang required "
                f"({expected.required_instances[role]} Role instance(s) with all their Pods)"
            )
    return problems
