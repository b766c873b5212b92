"""What a ServingGroup's PodGroup must say, computed from the ModelServing the test wrote (pure).

The spec (GangPolicy) says which Pods of a ServingGroup are *gang required*: ``minRoleReplicas``
Role instances of each Role it names (a Role it does not name counts with all its replicas, spec
reading 27; a gangPolicy without minRoleReplicas makes every Role gang required), and every Pod of
a required Role instance ("pods within a role must be scheduled together"). Volcano's PodGroup
expresses that as ``minMember`` (how many Pods), a per-Role requirement (``minTaskMember`` per
task, the Pods' ``volcano.sh/task-spec`` annotation, or Volcano's newer ``subGroupPolicy``) and
``minResources`` (what those Pods request; Volcano's, not stated by the spec). So, per ServingGroup::

    minMember    = sum over Roles of (1 + workerReplicas) x min(minRoleReplicas[role] or replicas, replicas)
    minResources = summed container requests of those Pods (the entry template for the entry Pod,
                   the worker template for each worker)

``minTaskMember`` is checked without choosing how tasks are cut (one per Role instance, as upstream
Kthena does, or one per Role): the tasks a Role's Pods carry must together require exactly that
Role's gang-required Pods, and no task may require more Pods than carry its name.

``subGroupPolicy`` (what upstream Kthena writes when the PodGroup CRD has it) is checked the same
way: each entry's ``labelSelector`` must select the Pods of one Role, ``matchLabelKeys`` must cut
them into whole Role instances (one entry Pod and its workers each) of ``subGroupSize`` Pods, and
over a Role's entries ``minSubGroups x subGroupSize`` must be exactly its gang-required Pods.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
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
    instance_sizes: dict[str, int] = field(default_factory=dict)  # role -> Pods of one Role instance


def expectation(body: Mapping[str, Any]) -> GangExpectation:
    """What every ServingGroup's PodGroup must require, from the ModelServing ``body``."""
    template = body["spec"]["template"]
    policy = (template.get("gangPolicy") or {}).get("minRoleReplicas") or {}
    per_group = 0
    min_member = 0
    instances: dict[str, int] = {}
    pods: dict[str, int] = {}
    totals: dict[str, Decimal] = {}
    sizes: dict[str, int] = {}
    for role in template["roles"]:
        name = str(role["name"])
        replicas = int(role.get("replicas", 1))
        workers = int(role.get("workerReplicas", 0))
        needed = min(int(policy[name]), replicas) if name in policy else replicas
        per_group += replicas * (1 + workers)
        min_member += needed * (1 + workers)
        instances[name] = needed
        pods[name] = needed * (1 + workers)
        sizes[name] = 1 + workers
        entry = template_requests(role.get("entryTemplate"))
        worker = template_requests(role.get("workerTemplate") or role.get("entryTemplate"))
        _add(totals, entry, needed)
        _add(totals, worker, needed * workers)
    return GangExpectation(per_group, min_member, instances, pods, totals, sizes)


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


def selects(selector: Mapping[str, Any] | None, labels: Mapping[str, str]) -> bool:
    """Whether a metav1 LabelSelector (``matchLabels``, ``matchExpressions``) selects ``labels``; no
    selector selects everything. An unknown operator selects nothing."""
    if not selector:
        return True
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for expression in selector.get("matchExpressions") or []:
        key, operator = expression.get("key"), expression.get("operator")
        values = set(expression.get("values") or [])
        if operator == "In" and labels.get(key) not in values:
            return False
        if operator == "NotIn" and key in labels and labels[key] in values:
            return False
        if operator == "Exists" and key not in labels:
            return False
        if operator == "DoesNotExist" and key in labels:
            return False
        if operator not in ("In", "NotIn", "Exists", "DoesNotExist"):
            return False
    return True


@dataclass(frozen=True)
class GangPod:
    """What the per-Role check needs of one Pod of the ServingGroup: its name, labels, and the
    Role and member (``entry`` / ``worker``) the suite's own template labels give it."""

    name: str
    labels: Mapping[str, str]
    role: str
    member: str


def subgroup_problems(policies: Sequence[Any], pods: Sequence[GangPod], expected: GangExpectation) -> list[str]:
    """What is wrong with one PodGroup's ``subGroupPolicy`` over the Pods naming that PodGroup
    (empty: nothing). See the module docstring for what it must say."""
    problems: list[str] = []
    per_role: dict[str, int] = {}
    for i, policy in enumerate(policies):
        if not isinstance(policy, Mapping):
            problems.append(f"subGroupPolicy[{i}] is not an object: {policy!r}")
            continue
        where = f"subGroupPolicy[{i}] ({policy.get('name', '')})"
        try:
            size = int(policy.get("subGroupSize") or 0)
            minimum = int(policy.get("minSubGroups") or 0)
        except (TypeError, ValueError):
            problems.append(f"{where}: subGroupSize or minSubGroups is not a number: {policy!r}")
            continue
        selected = [p for p in pods if selects(policy.get("labelSelector"), p.labels)]
        roles = sorted({p.role for p in selected})
        if not selected:
            if minimum:
                problems.append(f"{where}: minSubGroups {minimum} but its labelSelector selects no Pod of the gang")
            continue
        if len(roles) != 1:
            problems.append(f"{where}: its labelSelector selects Pods of several Roles {roles}")
            continue
        role = roles[0]
        keys = [str(k) for k in policy.get("matchLabelKeys") or []]
        subgroups: dict[tuple[str, ...], list[GangPod]] = {}
        for pod in selected:
            subgroups.setdefault(tuple(pod.labels.get(k, "") for k in keys), []).append(pod)
        want = expected.instance_sizes.get(role, 0)
        if size != want:
            problems.append(f"{where}: subGroupSize is {size}; a Role instance of {role} has {want} Pods")
        for values, members in sorted(subgroups.items()):
            entries = sum(1 for p in members if p.member == "entry")
            if len(members) != want or entries != 1:
                names = sorted(p.name for p in members)
                problems.append(
                    f"{where}: matchLabelKeys {keys} = {list(values)} groups {names}, not one Role instance of {role} "
                    f"(one entry Pod and its workers, {want} Pods)"
                )
        if minimum > len(subgroups):
            problems.append(f"{where}: minSubGroups {minimum} but only {len(subgroups)} subgroups exist")
        per_role[role] = per_role.get(role, 0) + minimum * size
    for role, want in sorted(expected.required_pods.items()):
        have = per_role.get(role, 0)
        if have != want:
            problems.append(
                f"the subGroupPolicy entries of Role {role} require {have} Pods (minSubGroups x subGroupSize); {want} "
                f"are gang required ({expected.required_instances[role]} Role instance(s) with all their Pods)"
            )
    return problems


def per_role_problems(
    spec: Mapping[str, Any], tasks: Mapping[str, list[str]], pods: Sequence[GangPod], expected: GangExpectation
) -> list[str]:
    """The per-Role gang requirement of one PodGroup ``spec``, through ``minTaskMember`` or
    ``subGroupPolicy`` (either is accepted; each one present must be right). Empty: nothing wrong."""
    task_member, subgroups = spec.get("minTaskMember"), spec.get("subGroupPolicy")
    has_tasks = isinstance(task_member, Mapping) and bool(task_member)
    has_subgroups = isinstance(subgroups, list) and bool(subgroups)
    if not has_tasks and not has_subgroups:
        return [
            f"neither minTaskMember ({task_member!r}) nor subGroupPolicy ({subgroups!r}) requires the gang-required "
            "Pods of each Role together"
        ]
    problems: list[str] = []
    if has_tasks:
        assert isinstance(task_member, Mapping)
        problems += [f"minTaskMember: {p}" for p in task_problems(task_member, tasks, expected)]
    if has_subgroups:
        assert isinstance(subgroups, list)
        problems += subgroup_problems(subgroups, pods, expected)
    return problems


def _cut_keys(policy: Mapping[str, Any]) -> list[str]:
    """The label keys a subGroupPolicy entry cuts its Pods by: ``matchLabelKeys``, or the
    ``labelKey`` of each ``matchPolicy`` item (an earlier Volcano spelling of the same thing)."""
    keys = policy.get("matchLabelKeys")
    if keys:
        return [str(k) for k in keys]
    return [str(m.get("labelKey")) for m in policy.get("matchPolicy") or [] if isinstance(m, Mapping)]


def role_topology_problems(
    policies: Sequence[Any], pods: Sequence[GangPod], instance_key: str, want: Mapping[str, Any]
) -> list[str]:
    """What keeps one PodGroup's ``subGroupPolicy`` from giving every Role instance of the
    ServingGroup the network topology ``want`` (``networkTopology.rolePolicy``); empty: nothing.

    Every form is accepted in which each Role instance (its Pods: the same Role and the same
    ``instance_key`` label) is exactly one subgroup of an entry that carries ``want`` as its
    ``networkTopology``: one entry per Role cut by the instance label (upstream Kthena's form), one
    entry for all Pods cut by Role and instance, ``matchLabelKeys`` or ``matchPolicy``. Every entry
    with a ``networkTopology`` that selects an instance's Pods must cut them so and carry ``want``;
    entries without one (gang requirements only) are not looked at."""
    problems: list[str] = []
    instances: dict[tuple[str, str], set[str]] = {}
    for pod in pods:
        value = pod.labels.get(instance_key)
        if value is None:
            problems.append(f"Pod {pod.name} lacks the Role-instance label {instance_key}")
            continue
        instances.setdefault((pod.role, value), set()).add(pod.name)
    covered: dict[tuple[str, str], int] = {key: 0 for key in instances}
    for i, policy in enumerate(policies):
        if not isinstance(policy, Mapping) or not isinstance(policy.get("networkTopology"), Mapping):
            continue
        where = f"subGroupPolicy[{i}] ({policy.get('name', '')})"
        topology = policy["networkTopology"]
        keys = _cut_keys(policy)
        selected = [p for p in pods if selects(policy.get("labelSelector"), p.labels)]
        subgroups: dict[tuple[str, ...], set[str]] = {}
        for pod in selected:
            subgroups.setdefault(tuple(pod.labels.get(k, "") for k in keys), set()).add(pod.name)
        names = {p.name for p in selected}
        for key, members in sorted(instances.items()):
            if not members & names:
                continue
            covered[key] += 1
            what = f"Role {key[0]} instance {key[1]}"
            holding = [sorted(group) for group in subgroups.values() if group & members]
            if holding != [sorted(members)]:
                problems.append(
                    f"{where}: matchLabelKeys {keys} cut {what} ({sorted(members)}) into the subgroups {holding}, "
                    "not one subgroup of exactly its Pods"
                )
            if {k: topology.get(k) for k in want} != dict(want):
                problems.append(f"{where}: the networkTopology of {what} is {dict(topology)}, expected {dict(want)}")
    for key, count in sorted(covered.items()):
        if not count:
            problems.append(
                f"no subGroupPolicy entry with a networkTopology selects Role {key[0]} instance {key[1]} "
                f"({sorted(instances[key])}): the rolePolicy {dict(want)} does not reach it"
            )
    return problems
