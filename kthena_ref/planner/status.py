"""Status: what the ModelServing reports about itself after a reconcile.

Why this module exists: status is derived, never stored elsewhere; this module is the one place
that counts groups (replicas, current, updated, available), words the conditions (Available,
Progressing, UpdateInProgress, one per plugin report reason such as MigrationRequired or
DeletionIdentityChanged, and PluginsSucceeded) and notices Role instances that started running
(``RoleRunning`` Events, from what the previous reconcile saw).
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from .. import faults
from ..api.types import ModelServing
from ..plugins.base import BoundPlugin
from .layout import Layout
from .model import Event, Plan
from .names import LABEL_ENTRY, LABEL_NAME, LABEL_ROLE_ID, PodId, group_name
from .observe import Group


def label_selector(ms: ModelServing) -> str:
    """Selects one Pod per ServingGroup: the entry Pod of the first role instance (spec reading 22)."""
    first = next((r for r in ms.spec.template.roles if r.replicas > 0), ms.spec.template.roles[0])
    if faults.active("label-selector-selects-all"):  # the other reading: every Pod of the ModelServing
        return f"{LABEL_NAME}={ms.metadata.name}"
    return f"{LABEL_NAME}={ms.metadata.name},{LABEL_ENTRY}=true,{LABEL_ROLE_ID}={first.name}-0"


def condition(ms: ModelServing, kind: str, ok: bool, reason: str, message: str, now: dt.datetime) -> dict[str, Any]:
    """One condition; its lastTransitionTime moves only when its status does."""
    status = "True" if ok else "False"
    old = next((c for c in (ms.status.conditions or []) if c.type == kind), None) if ms.status else None
    since = (
        old.last_transition_time
        if old and old.status == status and old.last_transition_time
        else now.strftime("%Y-%m-%dT%H:%M:%SZ")
    )
    return {
        "type": kind,
        "status": status,
        "reason": reason,
        "message": message,
        "lastTransitionTime": since,
        "observedGeneration": ms.metadata.generation,
    }


def build(
    ms: ModelServing,
    groups: dict[int, Group],
    kept: set[int],
    update_rev: str,
    current_rev: str,
    layout: Layout,
    now: dt.datetime,
) -> dict[str, Any]:
    """The status block: counts, revisions, the label selector and the three standing conditions."""
    present = [g for g in groups.values() if g.pods]
    available = sum(
        1 for g in present if g.ordinal in kept and not g.terminating and g.ready(layout.expected(g.ordinal))
    )
    if faults.active("available-counts-unready"):
        available = sum(1 for g in present if g.ordinal in kept and not g.terminating)
    updated = sum(  # every Pod it runs, and every Role instance it should have, at the update revision
        1
        for g in present
        if not g.terminating
        and all(p.revision == update_rev for p in g.live_pods())
        and all(rev == update_rev for _, _, rev in layout.instances(g.ordinal))
    )
    reported_current = current_rev if updated < ms.spec.replicas else update_rev
    if faults.active("current-revision-is-update"):
        reported_current = update_rev
    current = sum(1 for g in present if g.revision == reported_current and not g.terminating)
    replicas = len(present)
    want = ms.spec.replicas
    all_ready = available >= want and replicas == want
    updating = updated < want
    conditions = [
        condition(
            ms,
            "Available",
            all_ready,
            "AllGroupsReady" if all_ready else "GroupsNotReady",
            f"{available}/{want} ServingGroups ready",
            now,
        ),
        condition(
            ms,
            "Progressing",
            not all_ready,
            "GroupProgressing" if not all_ready else "GroupsReady",
            f"{replicas} ServingGroups exist, {available} ready, {want} wanted",
            now,
        ),
        condition(
            ms,
            "UpdateInProgress",
            updating,
            "GroupsUpdating" if updating else "GroupsUpdated",
            f"{updated}/{want} ServingGroups at revision {update_rev}",
            now,
        ),
    ]
    return {
        "observedGeneration": ms.metadata.generation,
        "replicas": replicas,
        "currentReplicas": replicas if faults.active("current-replicas-counts-all") else current,
        "updatedReplicas": updated,
        "availableReplicas": 0 if faults.active("stale-available-replicas") else available,
        "currentRevision": reported_current,
        "updateRevision": f"{update_rev}-{ms.spec.replicas}"
        if faults.active("status-revision-counts-replicas")
        else update_rev,
        "labelSelector": label_selector(ms),
        "conditions": conditions,
    }


def report_conditions(out: Plan, ms: ModelServing, chain: list[BoundPlugin], now: dt.datetime) -> None:
    """Reports become conditions (and one Warning Event each when their situation appears);
    plugin failures become the PluginsSucceeded condition, so they are visible in status too,
    not only as Events (spec reading 2)."""
    for reason in sorted({r for r, _ in out.reports}):  # e.g. MigrationRequired: Event and condition
        messages = [m for r, m in out.reports if r == reason]
        already = ms.status is not None and any(
            c.type == reason and c.status == "True" for c in ms.status.conditions or []
        )
        if not already:  # one Event when the situation appears, not one per reconcile
            out.events.extend(Event("Warning", reason, m) for m in messages)
        out.status["conditions"].append(condition(ms, reason, True, reason, "; ".join(messages[:3]), now))
    if chain:
        failed = bool(out.plugin_errors)
        out.status["conditions"].append(
            condition(
                ms,
                "PluginsSucceeded",
                not failed,
                "PluginError" if failed else "PluginsSucceeded",
                "; ".join(out.plugin_errors[:3]) if failed else f"{len(chain)} plugin(s) applied",
                now,
            )
        )


def running_instances(ms: str, groups: dict[int, Group], layout: Layout) -> frozenset[str]:
    """Role instances whose every expected Pod is Running and Ready, as ``<group>/<role-id>``."""
    out = set()
    for group in groups.values():
        expected: dict[tuple[str, int], list[PodId]] = {}
        for pid in layout.expected(group.ordinal):
            expected.setdefault((pid.role, pid.index), []).append(pid)
        for (role, index), pids in expected.items():
            if all(pid in group.pods and group.pods[pid].running_ready for pid in pids):
                out.add(f"{group_name(ms, group.ordinal)}/{role}-{index}")
    return frozenset(out)


def running_events(out: Plan, previously: frozenset[str] | None) -> None:
    """``RoleRunning`` for every Role instance running now and not at the previous reconcile
    (none after a fresh start: there is no previous reconcile to compare with)."""
    if previously is not None:
        for instance in sorted(out.running_instances - previously):
            group_label, rid = instance.split("/")
            out.events.append(Event("Normal", "RoleRunning", f"role {rid} of ServingGroup {group_label} is running"))
