"""plan() ServingGroupRollingUpdate while a recreated ServingGroup's Pods terminate one by one.

Why this module exists: a rollout deletes every Pod of an outdated group, and the kubelet removes
them in no particular order. Under RoleRecreate (the default) a Role instance whose Pods are all gone
used to be built again at once, at the revision of the group's Pods still terminating (the old one),
so the group was outdated again, recreated again, and two Roles took turns forever (seen in the
conformance run of plugins/chain/recreated-pods-mutated). The world here applies plans as the
executor and the API server do: a deletion only marks the Pod terminating, the terminating Pods go
in the order a row chooses, and the pending deletions are handed to the next plan. Every row must
end with every Pod at the update revision, in a few steps, each group recreated at most once.
"""

from __future__ import annotations

import copy
import dataclasses
import itertools
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

from kthena_ref.api.types import ModelServing
from kthena_ref.planner.model import InstanceKey, PendingDeletion
from kthena_ref.planner.plan import Observed, Plan, plan

from .builders import (
    MS,
    T0,
    deleting,
    edit_spec,
    fresh_pods,
    name_of,
    ready,
    revision,
    set_image,
    with_status,
    world,
)

Vanish = Callable[[list[str]], list[str]]  # terminating Pod names (sorted) -> the ones gone by the next plan


def _all(terminating: list[str]) -> list[str]:
    return terminating


def _role_first(role: str) -> Vanish:
    """The Pods of ``role`` go first; the others only once none of ``role``'s is left."""

    def vanish(terminating: list[str]) -> list[str]:
        first = [n for n in terminating if f"-{role}-" in n]
        return first or terminating

    return vanish


def _one_at_a_time(reverse: bool) -> Vanish:
    def vanish(terminating: list[str]) -> list[str]:
        return sorted(terminating, reverse=reverse)[:1]

    return vanish


def _every_other_step() -> Vanish:
    """Nothing goes on one plan, everything on the next (a slow kubelet)."""
    tick = itertools.count()

    def vanish(terminating: list[str]) -> list[str]:
        return terminating if next(tick) % 2 else []

    return vanish


VANISH: dict[str, Callable[[], Vanish]] = {
    "all-at-once": lambda: _all,
    "beta-first": lambda: _role_first("beta"),
    "alpha-first": lambda: _role_first("alpha"),
    "one-at-a-time": lambda: _one_at_a_time(reverse=False),
    "one-at-a-time-reversed": lambda: _one_at_a_time(reverse=True),
    "slow": _every_other_step,
}


@dataclass
class Cluster:
    """Pods as the API server keeps them: a deletion marks a Pod terminating; it goes later."""

    ms: ModelServing
    pods: dict[str, dict[str, Any]]
    revisions: dict[str, dict[str, Any]]
    pending: dict[InstanceKey, PendingDeletion] | None = None
    plans: list[Plan] = field(default_factory=list)
    uids: itertools.count[int] = field(default_factory=itertools.count)

    def observed(self) -> Observed:
        return Observed(
            ms=self.ms,
            pods=[copy.deepcopy(pod) for pod in self.pods.values()],
            revisions=list(self.revisions.values()),
            pending=self.pending,
            now=T0,
        )

    def step(self, vanish: Vanish) -> Plan:
        """Plan, apply as the executor does, then let the Pods ``vanish`` picks go."""
        p = plan(self.observed())
        self.pending = p.pending
        for gone in p.delete_pods:
            pod = self.pods[gone.name]
            assert gone.uid == pod["metadata"]["uid"], f"deletion of {gone.name} names another uid"
            self.pods[gone.name] = deleting(pod)
        for created in p.create_pods:
            name = name_of(created)
            assert name not in self.pods, f"creating {name}, which still exists"
            self.pods[name] = ready(created)
            self.pods[name]["metadata"]["uid"] = f"{name}-{next(self.uids)}"  # a new Pod, a new uid
        assert not p.patch_pods, "a Recreate rollout patches nothing"
        for cr in p.create_revisions:
            self.revisions[name_of(cr)] = copy.deepcopy(cr)
        for cr_name in p.delete_revisions:
            del self.revisions[cr_name]
        if p.status:
            self.ms = with_status(self.ms, p.status)
        self.plans.append(p)
        terminating = sorted(n for n, pod in self.pods.items() if pod["metadata"].get("deletionTimestamp"))
        for name in vanish(terminating):
            del self.pods[name]
        return p


def _ms() -> ModelServing:
    """plugins-two-roles.yaml's shape: two Roles, each an entry and one worker, default rollout and
    recovery (ServingGroupRollingUpdate, maxUnavailable 1; RoleRecreate)."""
    return MS("tweaks").replicas(2).role("alpha", 1, 1, image="alpha:v1").role("beta", 1, 1, image="beta:v1").build()


def _new_template(spec: dict[str, Any]) -> None:
    set_image("alpha:v2", 0)(spec)
    set_image("beta:v2", 1)(spec)


GROUP_0 = {
    "alpha": ["tweaks-0-alpha-0-0", "tweaks-0-alpha-0-1"],
    "beta": ["tweaks-0-beta-0-0", "tweaks-0-beta-0-1"],
}

# How ServingGroup tweaks-0 stands when the rows start (tweaks-1 is at the update revision then,
# except in "untouched"): each Role's Pods at the old revision, at the new one, terminating at the
# old one, or missing.
STATES: dict[str, dict[str, str]] = {
    "untouched": {},
    "alpha-missing-beta-terminating": {"alpha": "missing", "beta": "terminating"},
    "alpha-terminating-beta-missing": {"alpha": "terminating", "beta": "missing"},
    "alpha-new-beta-terminating": {"alpha": "new", "beta": "terminating"},
    "alpha-missing-beta-old": {"alpha": "missing", "beta": "old"},
    "both-terminating": {"alpha": "terminating", "beta": "terminating"},
}


def _cluster(state: dict[str, str]) -> tuple[Cluster, str, str]:
    """A world at the old revision, the template changed, and tweaks-0 put in ``state``; with the
    old and the update revision."""
    before = world(_ms())
    assert before.ms.status is not None and before.ms.status.update_revision
    old = before.ms.status.update_revision
    cluster = Cluster(ms=edit_spec(before.ms, _new_template), pods=before.pods, revisions=before.revisions)
    if not state:
        return cluster, old, str(plan(cluster.observed()).status["updateRevision"])
    new = str(cluster.step(_all).status["updateRevision"])  # tweaks-1 first (the highest ordinal)
    cluster.step(_all)  # its Pods gone, it is built again at the update revision
    assert sorted((n[:8], revision(p), "deletionTimestamp" in p["metadata"]) for n, p in cluster.pods.items()) == [
        *[("tweaks-0", old, False)] * 4,
        *[("tweaks-1", new, False)] * 4,
    ], "tweaks-1 updated, tweaks-0 not yet"
    built_new = {name_of(p): p for p in fresh_pods(cluster.ms)}  # every Pod as the update revision builds it
    for role, how in state.items():
        for name in GROUP_0[role]:
            if how == "missing":
                cluster.pods.pop(name, None)
            elif how == "terminating":
                cluster.pods[name] = deleting(cluster.pods[name])
            elif how == "new":
                cluster.pods[name] = ready(built_new[name])
                cluster.pods[name]["metadata"]["uid"] = f"{name}-new"
    cluster.pending = None  # a controller that just started: it seeds intents from terminating Pods
    cluster.plans.clear()
    return cluster, old, new


def _recreations(plans: list[Plan]) -> Counter[str]:
    return Counter(
        e.message.split(" ")[2]
        for p in plans
        for e in p.events
        if e.reason == "RoleDeleting" and e.message.startswith("recreating ServingGroup")
    )


@pytest.mark.parametrize("vanish", sorted(VANISH))
@pytest.mark.parametrize("state", sorted(STATES))
def test_a_group_recreated_while_its_pods_terminate_in_any_order_converges(state: str, vanish: str) -> None:
    cluster, old, new = _cluster(STATES[state])
    order = VANISH[vanish]()
    settled = None
    for steps in range(1, 25):
        p = cluster.step(order)
        done = (
            not p.create_pods
            and not p.delete_pods
            and not cluster.pending
            and len(cluster.pods) == 8
            and {revision(pod) for pod in cluster.pods.values()} == {new}
        )
        if done:
            settled = steps
            break
    seen = sorted((n, revision(pod), bool(pod["metadata"].get("deletionTimestamp"))) for n, pod in cluster.pods.items())
    assert settled is not None, (
        f"expected every Pod of both ServingGroups at the update revision {new} within 24 plans "
        f"(old revision {old}); after them the Pods are (name, revision, terminating): {seen}, "
        f"and the groups were recreated {dict(_recreations(cluster.plans))} times"
    )
    recreated = _recreations(cluster.plans)
    assert all(count <= 1 for count in recreated.values()), (
        f"expected each ServingGroup recreated at most once from this state, saw {dict(recreated)}: "
        "a group rebuilt from its terminating Pods' revision is outdated again"
    )
    built_old = [name_of(pod) for p in cluster.plans for pod in p.create_pods if revision(pod) != new]
    assert not built_old, f"expected every Pod built at the update revision {new}, {built_old} were built at {old}"
    assert cluster.ms.status is not None
    assert cluster.ms.status.current_revision == new, "every Pod runs the update revision: currentRevision is it"


@pytest.mark.parametrize("vanish", sorted(VANISH))
def test_the_conformance_sequence_converges_whatever_order_the_pods_go(vanish: str) -> None:
    """The steps of plugins/chain/recreated-pods-mutated: an alpha worker deleted (RoleRecreate
    rebuilds alpha-0), replicas 1 -> 2, then a new image in every template."""
    one = MS("tweaks").replicas(1).role("alpha", 1, 1, image="alpha:v1").role("beta", 1, 1, image="beta:v1").build()
    before = world(one)
    cluster = Cluster(ms=before.ms, pods=before.pods, revisions=before.revisions)
    for pod in cluster.pods.values():
        pod["metadata"]["uid"] = f"{name_of(pod)}-first"
    del cluster.pods["tweaks-0-alpha-0-1"]
    p = plan(dataclasses.replace(cluster.observed(), lost=frozenset({"tweaks-0-alpha-0-1"})))
    assert [d.name for d in p.delete_pods] == ["tweaks-0-alpha-0-0"], "RoleRecreate rebuilds alpha-0"
    cluster.pending = p.pending
    del cluster.pods["tweaks-0-alpha-0-0"]
    cluster.ms = edit_spec(cluster.ms, lambda spec: spec.update(replicas=2))
    for _ in range(4):
        cluster.step(_all)
    assert len(cluster.pods) == 8, sorted(cluster.pods)
    cluster.ms = edit_spec(cluster.ms, _new_template)
    cluster.plans.clear()
    order = VANISH[vanish]()
    for _ in range(20):
        cluster.step(order)
    new = cluster.plans[-1].status["updateRevision"]
    seen = sorted((n, revision(pod), "deletionTimestamp" in pod["metadata"]) for n, pod in cluster.pods.items())
    count = len(cluster.pods)
    assert count == 8 and {revision(pod) for pod in cluster.pods.values()} == {new}, (
        f"expected the 8 Pods at the update revision {new} after 20 plans, saw (name, revision, terminating) {seen}"
    )
    recreated = _recreations(cluster.plans)
    assert recreated == {"tweaks-0": 1, "tweaks-1": 1}, f"expected each ServingGroup recreated once, saw {recreated}"
