"""Pod creation: every missing Pod of every kept group, unless something still holds its place.

Why this module exists: it is the step that turns the :class:`~.layout.Layout` into new Pods,
and the one place that knows when *not* to: a Role instance whose Pods are still terminating, is
being rebuilt, has a deletion pending or is being patched in place waits for that to finish (so
a name is never reused while the old Pod holds it); a group being rebuilt whole, or patched in
place, waits entirely. Each new Pod goes through the plugins' OnPodCreate (:mod:`.hooks`) first;
a plugin error skips that Pod and is reported.
"""

from __future__ import annotations

from typing import Any

from .. import faults
from ..api.types import ModelServing, PluginSpec, RecoveryPolicy
from ..plugins.base import BoundPlugin, PluginError
from ..plugins.builtin import HEADLESS, REGISTRY
from . import group_rollout
from .deletions import Deleter
from .hooks import run_pod_create
from .layout import Layout
from .model import Event, InstanceKey, Plan
from .names import PodId, group_name
from .observe import Observation, ObservedPod
from .pods import build_pod
from .recovery import Rebuilding


def create_missing(
    out: Plan,
    ms: ModelServing,
    chain: list[BoundPlugin],
    seen: Observation,
    layout: Layout,
    kept: set[int],
    services: list[dict[str, Any]] | None,
    *,
    gang: bool,
    policy: RecoveryPolicy,
    delete: Deleter,
    rebuilding: Rebuilding,
    patched: set[int],
    role_patched: set[InstanceKey],
) -> None:
    """Create what the kept groups are missing. ``patched``: groups patched in place and
    ``role_patched``: Role instances patched in place (their Pods move first)."""
    name = ms.metadata.name
    services_by_name = {svc["metadata"]["name"]: svc for svc in services or []}
    for ordinal in sorted(kept):
        existing = seen.groups.get(ordinal)
        present: dict[PodId, ObservedPod] = existing.pods if existing else {}
        busy_instances = {(p.pid.role, p.pid.index) for p in present.values() if delete.going(p)}
        busy_instances |= {(key[1], key[2]) for key in rebuilding if isinstance(key, tuple) and key[0] == ordinal}
        busy_instances |= {(key[1], key[2]) for key in out.pending if key[0] == ordinal}
        busy_instances |= {(key[1], key[2]) for key in role_patched if key[0] == ordinal}
        group_busy = bool(present) and all(delete.going(p) for p in present.values())
        if ordinal in patched:
            continue  # its Pods move to the update revision first; anything missing comes after
        whole = policy is RecoveryPolicy.SERVING_GROUP_RECREATE or group_rollout.enabled(ms)
        if ordinal in rebuilding or (group_busy and whole):
            # The whole group is being rebuilt: wait for every Pod to go. Under ServingGroupRollingUpdate
            # too, whatever the policy (the rollout recreates whole groups): a Role instance built
            # meanwhile would take the revision of the group's terminating Pods, the outdated one, and
            # the rollout would recreate the group again, the Roles taking turns forever.
            continue
        if policy is RecoveryPolicy.SERVING_GROUP_RECREATE and any(key[0] == ordinal for key in seen.conflicts):
            continue  # a replacement holds part of the group's identity: nothing is built around it
        if faults.active("terminating-service-blocks-role") and any(
            svc["metadata"].get("deletionTimestamp") for svc in services_by_name.values()
        ):
            continue  # waits for its auxiliary Services to go first
        hooks = chain
        if faults.active("legacy-dns-on-recreated-pods") and not chain and existing is not None:
            hooks = [BoundPlugin(REGISTRY.build(PluginSpec(name=HEADLESS), "spec.plugins"), PluginSpec(name=HEADLESS))]
        created_instances: set[str] = set()
        for pid, roles, rev in layout.pods(ordinal):
            if pid in present or (pid.role, pid.index) in busy_instances:
                continue
            new_pod = build_pod(ms, roles, rev, pid, gang=gang)
            whole = existing is not None and not seen.raw_by_instance.get((ordinal, pid.role, pid.index))
            try:
                run_pod_create(
                    [] if faults.active("recreated-pods-skip-plugins") and whole else hooks,
                    ms,
                    roles,
                    pid,
                    new_pod,
                    seen.raw_by_instance.get((ordinal, pid.role, pid.index)),
                    services_by_name,
                )
            except PluginError as exc:
                message = f"pod {new_pod['metadata']['name']} not created: {exc}"
                out.plugin_errors.append(message)
                out.events.append(Event("Warning", "PluginError", message))
                continue
            out.create_pods.append(new_pod)
            created_instances.add(pid.role_id)
        for rid in sorted(created_instances):
            out.events.append(
                Event("Normal", "RoleCreating", f"creating role {rid} of ServingGroup {group_name(name, ordinal)}")
            )
