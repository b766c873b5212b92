"""Gang scheduling: the Volcano PodGroup of every ServingGroup.

Why this module exists: with ``schedulerName: volcano`` and the PodGroup CRD served, every kept
ServingGroup gets a PodGroup (upstream's contract): ``minMember`` and ``minTaskMember`` from the
Roles the group is built from (``gangPolicy.minRoleReplicas`` may lower a Role's share),
``minResources`` as the exact sum of the members' requests (:mod:`.quantity`), the queue from the
ModelServing's annotation, the network topology's group policy, and its role policy as a
``subGroupPolicy`` entry per Role whose subgroups are the Role's instances. PodGroups of groups
that are gone are deleted.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from .. import faults
from ..api.types import ModelServing, NetworkTopologySpec, Role
from . import quantity
from .model import Plan
from .names import ANNOTATION_QUEUE, LABEL_NAME, LABEL_ROLE, LABEL_ROLE_ID, PodId, group_name
from .pods import build_pod, owner_reference
from .revisions import Revisions


def plan_podgroups(
    out: Plan,
    ms: ModelServing,
    existing: list[dict[str, Any]],
    kept: set[int],
    present: set[int],
    revs: Revisions,
) -> None:
    """Apply the PodGroup of every kept group whose spec differs (or that is missing); delete ours
    whose group is neither kept nor present."""
    name = ms.metadata.name
    by_name = {pg["metadata"]["name"]: pg for pg in existing}
    gang_policy = ms.spec.template.gang_policy
    queue = (ms.metadata.annotations or {}).get(ANNOTATION_QUEUE)
    for ordinal in sorted(kept):
        roles = revs.roles_for(revs.target(ordinal))  # the roles the group's Pods are (or will be) built from
        desired = podgroup(ms, ordinal, roles, gang_policy.min_role_replicas if gang_policy else None, queue)
        current = by_name.get(desired["metadata"]["name"])
        if current is None or current.get("spec") != desired["spec"]:
            out.apply_podgroups.append(desired)
    for pg_name, pg in by_name.items():
        owned = any(ref.get("uid") == ms.metadata.uid for ref in pg["metadata"].get("ownerReferences") or [])
        ordinal_text = pg_name.removeprefix(f"{name}-")
        if owned and ordinal_text.isdigit() and int(ordinal_text) not in kept | present:
            if faults.active("podgroups-kept-on-scale-down"):
                continue
            out.delete_podgroups.append(pg_name)


def sum_requests(pods: list[dict[str, Any]]) -> dict[str, str]:
    """Summed container requests of ``pods``, per resource (unparsable quantities are skipped:
    the API server has already validated every request the Pods will carry)."""
    totals: dict[str, Decimal] = {}
    for pod in pods:
        for container in pod["spec"].get("containers") or []:
            for resource, value in ((container.get("resources") or {}).get("requests") or {}).items():
                try:
                    totals[resource] = totals.get(resource, Decimal(0)) + quantity.parse(value)
                except quantity.QuantityError:
                    continue
    return {k: quantity.format_quantity(v) for k, v in sorted(totals.items())}


def role_subgroups(
    ms: ModelServing, roles: list[Role], needs: dict[str, int], policy: NetworkTopologySpec
) -> list[dict[str, Any]]:
    """Volcano's ``subGroupPolicy`` for ``networkTopology.rolePolicy`` (upstream's form): per Role,
    its Pods cut into Role instances by the Role-instance label, each instance a subgroup of
    ``1 + workerReplicas`` Pods under the rolePolicy, ``needs[role]`` of them gang required."""
    topology = policy.model_dump(by_alias=True, exclude_none=True, mode="json")
    return [
        {
            "name": role.name,
            "labelSelector": {"matchLabels": {LABEL_NAME: ms.metadata.name, LABEL_ROLE: role.name}},
            "matchLabelKeys": [LABEL_ROLE_ID],
            "subGroupSize": 1 + role.worker_replicas,
            "minSubGroups": needs[role.name],
            "networkTopology": dict(topology),
        }
        for role in roles
    ]


def podgroup(
    ms: ModelServing, ordinal: int, roles: list[Role], min_role_replicas: dict[str, int] | None, queue: str | None
) -> dict[str, Any]:
    """The Volcano PodGroup of one ServingGroup (upstream's contract)."""
    members: list[dict[str, Any]] = []
    min_member = 0
    task_members: dict[str, int] = {}
    needs: dict[str, int] = {}
    for role in roles:
        needed = (
            role.replicas
            if not min_role_replicas or role.name not in min_role_replicas
            else min(min_role_replicas[role.name], role.replicas)
        )
        if faults.active("min-role-replicas-first-value") and min_role_replicas and role.name in min_role_replicas:
            needed = min(next(iter(min_role_replicas.values())), role.replicas)
        if faults.active("gang-policy-without-minimums-one-instance") and not min_role_replicas:
            needed = needed if ms.spec.template.gang_policy is None else min(1, role.replicas)  # gangPolicy: {}
        needs[role.name] = needed
        counted = role.replicas if faults.active("min-member-ignores-min-role-replicas") else needed
        min_member += (1 + role.worker_replicas) * counted
        for index in range(needed):
            task_members[f"{role.name}-{index}"] = 1 + role.worker_replicas
            for k in range(role.worker_replicas + 1):
                members.append(build_pod(ms, roles, "", PodId(ordinal, role.name, index, k), gang=True))
    spec: dict[str, Any] = {
        "minMember": min_member,
        "minTaskMember": {} if faults.active("min-task-member-omitted") else task_members,
        "minResources": sum_requests(members),
    }
    if queue and not faults.active("podgroup-queue-dropped"):
        spec["queue"] = queue
    topology = ms.spec.template.network_topology
    if topology and topology.group_policy and not faults.active("group-policy-not-in-podgroup"):
        spec["networkTopology"] = topology.group_policy.model_dump(by_alias=True, exclude_none=True, mode="json")
    if topology and topology.role_policy and not faults.active("role-policy-not-in-podgroup"):
        spec["subGroupPolicy"] = role_subgroups(ms, roles, needs, topology.role_policy)
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {
            "name": group_name(ms.metadata.name, ordinal),
            "namespace": ms.metadata.namespace,
            "labels": {LABEL_NAME: ms.metadata.name},
            "ownerReferences": [] if faults.active("podgroup-not-owned") else [owner_reference(ms)],
        },
        "spec": spec,
    }
