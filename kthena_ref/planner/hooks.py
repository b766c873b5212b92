"""The plugin hooks on Pods: OnPodCreate before a Pod is created, OnPodReady once it is Ready.

Why this module exists: the planner is where plugins act (they are pure too), and both Pod hooks
share one shape: every in-scope plugin of the chain, in list order, gets a :class:`HookRequest`
describing the Role instance. :func:`run_pod_create` lets each plugin mutate a Pod about to be
created (each seeing the previous mutations); :func:`pods_ready` runs OnPodReady once per Pod that
became Running and Ready, at least once across controller restarts. The third hook, OnRoleSync,
manages Services (:mod:`.services`).
"""

from __future__ import annotations

from typing import Any

from ..api.types import ModelServing, PluginTarget, Role
from ..plugins.base import BoundPlugin, HookRequest, PluginError
from .layout import Layout
from .model import Event, InstanceKey, Plan
from .names import PodId, group_name
from .observe import Group


def request(
    ms: ModelServing,
    role: Role,
    ordinal: int,
    index: int,
    target: PluginTarget,
    pod: Any = None,
    instance_pods: list[dict[str, Any]] | None = None,
    services: dict[str, dict[str, Any]] | None = None,
) -> HookRequest:
    """What a hook is told about one Role instance (and one of its Pods)."""
    return HookRequest(
        ms=ms,
        group=group_name(ms.metadata.name, ordinal),
        ordinal=ordinal,
        role=role,
        role_index=index,
        instance_pods=instance_pods or [],
        services=services or {},
        target=target,
        pod=pod,
    )


def run_pod_create(
    chain: list[BoundPlugin],
    ms: ModelServing,
    roles: list[Role],
    pid: PodId,
    pod: dict[str, Any],
    instance_pods: list[dict[str, Any]] | None = None,
    services: dict[str, dict[str, Any]] | None = None,
) -> None:
    """OnPodCreate of every in-scope plugin, in list order, each seeing the previous mutations."""
    role = next(r for r in roles if r.name == pid.role)
    target = PluginTarget.ENTRY if pid.is_entry else PluginTarget.WORKER
    for bound in chain:
        if bound.in_scope(role.name, target):
            req = request(ms, role, pid.ordinal, pid.index, target, pod, instance_pods, services)
            bound.plugin.on_pod_create(req)


def pods_ready(
    out: Plan,
    ms: ModelServing,
    chain: list[BoundPlugin],
    groups: dict[int, Group],
    layout: Layout,
    instance_pods: dict[InstanceKey, list[dict[str, Any]]],
    previously: frozenset[str] | None,
) -> frozenset[str]:
    """Run OnPodReady of every in-scope plugin, in list order, for Pods that became Running and
    Ready; returns the UIDs handled. A failing hook leaves its Pod out, so it is retried."""
    done: set[str] = set()
    for group in groups.values():
        for pod in group.pods.values():
            if not pod.running_ready:
                continue
            role = layout.role_of(group.ordinal, pod.pid.role, pod.pid.index)
            if (previously is not None and pod.uid in previously) or not chain or role is None:
                done.add(pod.uid)
                continue
            key = (pod.pid.ordinal, pod.pid.role, pod.pid.index)
            raw = next((p for p in instance_pods.get(key, []) if p["metadata"].get("uid") == pod.uid), None)
            target = PluginTarget.ENTRY if pod.pid.is_entry else PluginTarget.WORKER
            try:
                for bound in chain:
                    if bound.in_scope(pod.pid.role, target):
                        bound.plugin.on_pod_ready(
                            request(ms, role, pod.pid.ordinal, pod.pid.index, target, raw,
                                    instance_pods.get(key))
                        )  # fmt: skip
            except PluginError as exc:
                message = f"OnPodReady for pod {pod.name} failed: {exc}"
                out.plugin_errors.append(message)
                out.events.append(Event("Warning", "PluginError", message))
                continue
            done.add(pod.uid)
    return frozenset(done)
