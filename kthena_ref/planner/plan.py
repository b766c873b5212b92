"""The reconcile planner's entry point: :func:`plan`, a ModelServing and what is observed in, a Plan out.

Why this module exists: it is the one function the controller calls (the runtime builds an
:class:`Observed`, the executor applies the :class:`Plan`), and it reads as the sequence of steps
of one reconcile; each step lives in its own module (the package docstring,
:mod:`kthena_ref.planner`, lists them). Everything is decided from plain data, so the whole
reconcile is unit tested in milliseconds, and because a ModelServing's state is derived entirely
from the objects it owns, a restarted controller picks up exactly where it stopped.

The planner's data types are re-exported here, so callers need only this module.
"""

from __future__ import annotations

from ..plugins import build_chain
from . import group_rollout, role_rollout, scale, services, status
from .create import create_missing
from .deletions import Deleter, pending_deletions, report_conflicts
from .fallback import InPlaceFindings
from .hooks import pods_ready
from .layout import Instance, Layout
from .model import EVENT_SOURCE, Event, InstanceKey, Observed, PendingDeletion, Plan, PodDeletion, PodPatch
from .observe import Group, ObservedPod, adopt, observe_pod, observe_pods
from .podgroups import plan_podgroups, podgroup
from .recovery import recover, recovery_policy
from .revisions import Revisions, plan_revisions
from .status import label_selector

__all__ = [
    "EVENT_SOURCE",
    "Event",
    "Group",
    "Instance",
    "InstanceKey",
    "Layout",
    "Observed",
    "ObservedPod",
    "PendingDeletion",
    "Plan",
    "PodDeletion",
    "PodPatch",
    "label_selector",
    "observe_pod",
    "plan",
    "podgroup",
]


def plan(observed: Observed) -> Plan:
    """One reconcile, in order:

    1. observe: read our Pods, settle which deletions are still pending and which Pods are
       replacements that reused an identity (never adopted), group the rest into ServingGroups;
    2. revisions and layout: the Roles of every revision, and the Role instances each group
       should have (under RoleRollingUpdate, each at its own revision);
    3. retry the deletions decided earlier, with the UIDs they were decided for;
    4. recovery: error Pods past their grace period and lost Pods rebuild their scope; Pods
       updated in place are followed to arrival or their progress deadline;
    5. scale and rollout: which groups stay, go or are created (one ServingGroupRollingUpdate step,
       else plain scaling); then, in the kept groups, the Role rollout (RoleRollingUpdate), the Pods
       of scaled-down Roles, and the outdated groups recreated or patched in place;
    6. create every missing Pod whose place is not still held (OnPodCreate hooks first);
    7. plugin Services, ControllerRevisions, PodGroups;
    8. status and its conditions, OnPodReady hooks, RoleRunning Events.
    """
    ms, now = observed.ms, observed.now
    name = ms.metadata.name
    out = Plan()
    chain = build_chain(ms)  # validated at admission (and by the controller before planning)
    gang = observed.podgroups is not None and ms.spec.scheduler_name == "volcano"

    pods = observe_pods(observed)  # 1
    out.pending, conflicts = pending_deletions(observed.pending, [pod for pod, _ in pods])
    seen = adopt(pods, conflicts)
    groups = seen.groups
    report_conflicts(out, name, conflicts)

    revs = Revisions(ms, observed.revisions, groups)  # 2
    layout = Layout(revs.roles_for, revs.target, groups)
    role_rollout.seed(layout, ms, groups, revs)

    delete = Deleter(out, groups)  # 3
    delete.retry_pending()

    policy = recovery_policy(ms)  # 4
    rebuilding = recover(out, observed, seen, layout, policy, delete)

    findings = InPlaceFindings(ms, revs.roles_at, revs.settings_at)  # 5
    chosen = scale.decide(ms, groups, layout, revs.update, findings, delete)
    revs.settle(chosen.protected, role_rollout.protected_instances(ms, groups, chosen.kept))
    kept = chosen.kept
    scale.remove_groups(out, name, chosen.victims, delete)
    role_patched = role_rollout.roll(out, ms, seen, kept, layout, revs, findings, delete, now)
    scale.remove_surplus(out, name, groups, kept, layout, delete)
    patched = group_rollout.apply(out, ms, chosen.step, groups, revs.update, findings, delete, seen.raw_by_name, now)

    create_missing(  # 6
        out, ms, chain, seen, layout, kept, observed.services, gang=gang, policy=policy, delete=delete,
        rebuilding=rebuilding, patched=patched, role_patched=role_patched,
    )  # fmt: skip

    services.sync(out, observed, chain, kept, layout, seen)  # 7
    plan_revisions(out, ms, observed.revisions, revs, {g.revision for g in groups.values()})
    if gang:
        plan_podgroups(out, ms, observed.podgroups or [], kept, set(groups), revs)

    out.status = status.build(ms, groups, kept, revs.update, revs.current, layout, now)  # 8
    status.report_conditions(out, ms, chain, now)
    out.running_instances = status.running_instances(name, groups, layout)
    out.ready_pods = pods_ready(out, ms, chain, groups, layout, seen.raw_by_instance, observed.previously_ready)
    status.running_events(out, observed.previously_running)
    return out
