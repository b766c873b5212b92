"""Plugin-managed Services: what OnRoleSync wants for every kept Role instance, and ours to delete.

Why this module exists: plugins (the headless-service plugin, for one) give Role instances
auxiliary Services through OnRoleSync. Each reconcile asks every in-scope plugin for the Services
of every kept instance, creates the missing ones (again after an accidental deletion) and deletes
the ones no instance wants any more, by UID. Their presence never decides whether a Role or
ServingGroup exists: groups are derived from Pods only. Services follow deletion identity too
(:mod:`.deletions`): one recreated under a name being deleted is reported and kept. A deleted
Service stays remembered, with the UID its deletion was for, while a Pod deletion of the
ModelServing is pending, so one recreated after the original was gone is a replacement as well.
Cleanup deletes only Services this ModelServing owns (controller ownerReference, checked on every
deletion), never one a user released from its ownership.
"""

from __future__ import annotations

import secrets
from typing import Any

from .. import faults
from ..api.types import ModelServing, PluginTarget
from ..plugins.base import BoundPlugin
from ..plugins.builtin import LABEL_SERVICE_KIND
from .hooks import request
from .layout import Layout
from .model import InstanceKey, Observed, Plan
from .names import LABEL_GROUP, LABEL_ROLE_ID, group_name
from .observe import Observation

# The fault services-recreated-after-restart marks the Services of this process with this token.
FAULT_INCARNATION = "kthena-ref.fault/incarnation"
INCARNATION = secrets.token_hex(6)


def sync(
    out: Plan, observed: Observed, chain: list[BoundPlugin], kept: set[int], layout: Layout, seen: Observation
) -> None:
    """Plan the Services of the kept groups (nothing when Services are not observed or no plugin
    is configured). The instances a replacement Pod holds keep theirs."""
    if observed.services is None or not chain:
        return
    ms = observed.ms
    held = {(group_name(ms.metadata.name, key[0]), f"{key[1]}-{key[2]}") for key in seen.conflicts}
    services(
        out, ms, chain, kept, layout, observed.services, seen.raw_by_instance, held, observed.pending_services,
    )  # fmt: skip


def services(
    out: Plan,
    ms: ModelServing,
    chain: list[BoundPlugin],
    kept: set[int],
    layout: Layout,
    observed: list[dict[str, Any]],
    instance_pods: dict[InstanceKey, list[dict[str, Any]]],
    held: set[tuple[str, str]],
    pending: dict[str, str],
) -> None:
    """Create the Services the plugins want for every kept Role instance (again after an
    accidental deletion); delete ours that no instance wants any more.

    ``held``: (group, role-id) of instances a replacement Pod holds: their Services stay.
    ``pending``: Services being deleted, by name, with the UID the deletion was decided for: one
    found under that name with another UID is a replacement, reported and kept."""
    desired: dict[str, dict[str, Any]] = {}
    settled: set[str] = set()  # Services of instances that already have Pods (services-not-recreated)
    for ordinal in sorted(kept):
        for role, index, _ in layout.instances(ordinal):
            req = request(
                ms, role, ordinal, index, PluginTarget.ALL, None, instance_pods.get((ordinal, role.name, index)),
                {svc["metadata"]["name"]: svc for svc in observed},
            )  # fmt: skip
            for bound in chain:
                if bound.in_scope(role.name, PluginTarget.ALL) or faults.active("headless-scope-roles-ignored"):
                    for obj in bound.plugin.on_role_sync(req):
                        desired[obj["metadata"]["name"]] = obj
                        if faults.active("services-not-recreated") and req.instance_pods:
                            settled.add(obj["metadata"]["name"])
            for reason, message in req.reports:
                out.reports.append((reason, message))
    have = {svc["metadata"]["name"]: svc for svc in observed}
    if faults.active("services-recreated-on-resync"):  # replaced after every spec change instead of kept
        mark = {"generation": str(ms.metadata.generation)}
        for obj in desired.values():
            obj["metadata"]["annotations"] = mark
        stale = [n for n in sorted(desired.keys() & have.keys()) if have[n]["metadata"].get("annotations") != mark]
        out.delete_services += [(n, have[n]["metadata"].get("uid", "")) for n in stale]
    if faults.active("services-recreated-after-restart"):  # Services of an earlier process are replaced
        mark = {FAULT_INCARNATION: INCARNATION}
        for obj in desired.values():
            obj["metadata"]["annotations"] = mark
        stale = [n for n in sorted(desired.keys() & have.keys()) if have[n]["metadata"].get("annotations") != mark]
        out.delete_services += [(n, have[n]["metadata"].get("uid", "")) for n in stale]
    if faults.active("entry-only-service-replaced"):  # an instance without its Discovery Service is rebuilt whole
        out.delete_services += _entry_only(desired, have)
    for name in sorted(desired.keys() - have.keys()):
        if name in settled:  # services-not-recreated: its instance has Pods, so it existed and was deleted
            continue
        out.create_services.append(desired[name])
    for name in sorted(have.keys() - desired.keys()):
        meta = have[name]["metadata"]
        labels = meta.get("labels") or {}
        uid = meta.get("uid", "")
        ours = any(
            ref.get("uid") == ms.metadata.uid and ref.get("controller") for ref in meta.get("ownerReferences") or []
        )
        going = f"{labels.get(LABEL_GROUP)}-{labels.get(LABEL_ROLE_ID)}-"
        if faults.active("instance-cleanup-unowned") and any(d.name.startswith(going) for d in out.delete_pods):
            ours = True  # the Services of an instance whose Pods this plan deletes go with them, owned or not
        if not (ours or faults.active("service-ownership-unchecked")) or LABEL_SERVICE_KIND not in labels:
            continue
        removed_group = labels.get(LABEL_GROUP) not in {group_name(ms.metadata.name, o) for o in kept}
        if faults.active("services-kept-on-group-removal" if removed_group else "services-kept-on-role-scale-down"):
            continue
        if (labels.get(LABEL_GROUP), labels.get(LABEL_ROLE_ID)) in held:
            continue  # a replacement Pod still resolves through it: its networking is preserved
        if faults.active("role-deletion-waits-for-services"):  # the instance's Pods go once its Services are gone
            out.delete_pods = [d for d in out.delete_pods if not d.name.startswith(f"{labels.get(LABEL_GROUP)}-")]
        intended = pending.get(name)
        if intended is not None and intended != uid:
            out.pending_services[name] = intended
            out.reports.append(
                (
                    "DeletionIdentityChanged",
                    f"service {name} was recreated (uid {uid}) while its deletion (uid {intended}) was pending; "
                    "it is kept and not adopted until the conflicting workload is resolved",
                )
            )
            continue
        out.pending_services[name] = uid
        if faults.active("failed-service-delete-not-retried") and pending.get(name) == uid:
            continue  # asked once already: a failed request is not repeated
        if not meta.get("deletionTimestamp"):
            out.delete_services.append((name, uid))  # with its UID: never a replacement
    if out.pending and not faults.active("service-replacement-unprotected"):
        # Gone, but a deletion of the ModelServing is still pending: a Service recreated under
        # this name meanwhile is a replacement (Deletion retries retain the original UIDs).
        for name, intended in pending.items():
            if name not in have and name not in desired:
                out.pending_services.setdefault(name, intended)


def _entry_only(desired: dict[str, dict[str, Any]], have: dict[str, dict[str, Any]]) -> list[tuple[str, str]]:
    """Fault entry-only-service-replaced: the existing Entry Services of instances whose Discovery
    Service is missing, to be deleted (and so created again with a new UID)."""

    def key(obj: dict[str, Any]) -> tuple[str | None, str | None, str | None]:
        labels = obj["metadata"].get("labels") or {}
        return labels.get(LABEL_GROUP), labels.get(LABEL_ROLE_ID), labels.get(LABEL_SERVICE_KIND)

    lacking = {key(d)[:2] for n, d in desired.items() if n not in have and key(d)[2] == "discovery"}
    return [(n, have[n]["metadata"].get("uid", "")) for n, d in desired.items()
            if n in have and key(d)[2] == "entry" and key(d)[:2] in lacking]  # fmt: skip
