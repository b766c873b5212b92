"""Deletion identity: every Pod deletion is an intent on a Role instance, remembered by UID.

Why this module exists: a deletion takes time, and while it is pending someone else may create a
Pod under the same name. Every deletion is therefore an intent on a Role instance that remembers
the UIDs it meant to delete and the UIDs the instance had when it decided
(:class:`~.model.PendingDeletion`); retries only ever delete those UIDs. A Pod that appears in the
instance while the intent is pending with a UID the intent never saw has reused the instance's
identity: it is reported (``DeletionIdentityChanged``), kept with the instance's Services, never
adopted (not counted, not deleted, not a member of any group) and the deletion stays pending
until it is gone. A controller that starts fresh seeds intents from the Pods it finds terminating.

:class:`Deleter` is the one way the other steps of a reconcile delete Pods: each Pod once, with
its UID as a precondition, extending its instance's intent.
"""

from __future__ import annotations

from .. import faults
from .model import InstanceKey, PendingDeletion, Plan, PodDeletion
from .names import group_name
from .observe import Group, ObservedPod, instance_key


def pending_deletions(
    previous: dict[InstanceKey, PendingDeletion] | None, pods: list[ObservedPod]
) -> tuple[dict[InstanceKey, PendingDeletion], dict[InstanceKey, list[ObservedPod]]]:
    """(deletions still pending, replacement Pods per instance) from what is observed now.

    An intent ends when none of its target UIDs is left and no replacement holds its instance.
    Instances with terminating Pods and no intent (a fresh controller, or a deletion by someone
    else) get one whose known UIDs are the instance's current Pods.
    """
    by_instance: dict[InstanceKey, list[ObservedPod]] = {}
    for pod in pods:
        by_instance.setdefault(instance_key(pod), []).append(pod)
    pending: dict[InstanceKey, PendingDeletion] = {}
    conflicts: dict[InstanceKey, list[ObservedPod]] = {}
    for key, intent in (previous or {}).items():
        members = by_instance.get(key, [])
        replacements = [p for p in members if p.uid not in intent.known]
        if faults.active("deletion-identity-ignored"):
            replacements = []  # a replacement counts as an original: adopted, deleted, never reported
        if replacements:
            conflicts[key] = replacements
        if replacements or any(p.uid in intent.targets for p in members):
            pending[key] = intent
    for key, members in by_instance.items():
        if key not in pending and any(p.deleting for p in members):
            pending[key] = PendingDeletion(
                frozenset(p.uid for p in members if p.deleting), frozenset(p.uid for p in members)
            )
    return pending, conflicts


def report_conflicts(out: Plan, ms: str, conflicts: dict[InstanceKey, list[ObservedPod]]) -> None:
    """One ``DeletionIdentityChanged`` report per replacement Pod."""
    for key, replacements in sorted(conflicts.items()):
        where = f"role {key[1]}-{key[2]} of ServingGroup {group_name(ms, key[0])}"
        for pod in replacements:
            out.reports.append(
                (
                    "DeletionIdentityChanged",
                    f"pod {pod.name} (uid {pod.uid}) reused the identity of {where} while its deletion is pending; "
                    "the pod and the instance's Services are kept and not adopted, and the deletion stays pending "
                    "until the conflicting workload is resolved",
                )
            )


class Deleter:
    """Deletes Pods for one plan: each at most once, recording the intent on its Role instance."""

    def __init__(self, out: Plan, groups: dict[int, Group]) -> None:
        self._out = out
        self._groups = groups
        self.names: set[str] = set()  # Pods this plan deletes

    def __call__(self, pods: list[ObservedPod], reason: str) -> None:
        out = self._out
        for pod in pods:
            if not pod.deleting and pod.name not in self.names:
                self.names.add(pod.name)
                out.delete_pods.append(PodDeletion(pod.name, pod.uid, reason))
                key = instance_key(pod)
                group = self._groups.get(pod.pid.ordinal)
                members = frozenset(
                    p.uid for p in (group.pods.values() if group else []) if (p.pid.role, p.pid.index) == key[1:]
                )
                intent = out.pending.get(key, PendingDeletion(frozenset(), frozenset()))
                out.pending[key] = intent.extend(frozenset({pod.uid}), members | {pod.uid})

    def going(self, pod: ObservedPod) -> bool:
        """Being deleted already, or by this plan."""
        return pod.deleting or pod.name in self.names

    def retry_pending(self) -> None:
        """Deletions decided earlier and not finished: retried with the UIDs they were decided for."""
        for key, intent in sorted(self._out.pending.items()):
            group = self._groups.get(key[0])
            self(
                [
                    p
                    for p in (group.pods.values() if group else [])
                    if p.uid in intent.targets and (p.pid.role, p.pid.index) == key[1:]
                ],
                "deletion retry",
            )
