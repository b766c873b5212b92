"""plan() recovery: error Pods and lost Pods under each RecoveryPolicy, restartGracePeriodSeconds, terminating."""

from __future__ import annotations

import datetime as dt

import pytest

from kthena_ref.api.types import ModelServing

from .builders import (
    MS,
    T0,
    World,
    deleted,
    deleting,
    failed,
    names,
    pending,
    restarted,
    running_not_ready,
    world,
)

SECOND = dt.timedelta(seconds=1)

# Group 0 of the world below: role p (2 instances x 2 Pods) and role d (1 instance x 1 Pod).
GROUP_0 = ["ms-0-d-0-0", "ms-0-p-0-0", "ms-0-p-0-1", "ms-0-p-1-0", "ms-0-p-1-1"]
VICTIM = "ms-0-p-1-1"


def _ms(policy: str | None = None, grace: int | None = None) -> ModelServing:
    b = MS("ms").replicas(2).role("p", 2, 1).role("d", 1, 0)
    if policy is not None:
        b.recovery(policy)
    if grace is not None:
        b.restart_grace(grace)
    return b.build()


def _world(policy: str | None = None, grace: int | None = None) -> World:
    w = world(_ms(policy, grace))
    assert len(w.pods) == 10
    return w


def rebuild_deletions(w: World, victim: str = VICTIM, max_steps: int = 5) -> list[str]:
    """Every deletion of one rebuild, across the steps it takes.

    The failed Pod is deleted last, once the rest of its scope is gone (the crash-safe order), and
    nothing in the scope is created before the failed Pod is gone too.
    """
    seen: list[str] = []
    for _ in range(max_steps):
        p = w.plan()
        names_now = deleted(p)
        seen += names_now
        assert p.create_pods == [] or victim in seen, "nothing is recreated before the whole scope is down"
        if victim in names_now or not names_now:
            assert not names_now or names_now == [victim] or victim not in names_now[:-1] or len(seen) == len(set(seen))
            break
        w.apply(p)
    return sorted(seen)


POLICIES = [
    pytest.param(None, ["ms-0-p-1-0", "ms-0-p-1-1"], id="default-RoleRecreate"),
    pytest.param("RoleRecreate", ["ms-0-p-1-0", "ms-0-p-1-1"], id="RoleRecreate"),
    pytest.param("ServingGroupRecreate", GROUP_0, id="ServingGroupRecreate"),
    pytest.param("None", [VICTIM], id="None"),
]


@pytest.mark.parametrize(("policy", "want"), POLICIES)
def test_failed_pod_recovery_scope(policy: str | None, want: list[str]) -> None:
    w = _world(policy)
    w.pods[VICTIM] = failed(w.pods[VICTIM])
    w.now = T0 + 5 * SECOND
    first = w.plan()
    others = [n for n in want if n != VICTIM]
    assert deleted(first) == (others or [VICTIM]), "the failed Pod goes last, after the rest of its scope"
    assert {d.uid for d in first.delete_pods} == {f"uid-{n}" for n in (others or [VICTIM])}
    assert all(d.reason.startswith("recovery") for d in first.delete_pods)
    assert first.create_pods == []  # nothing is created under a name that still exists
    assert first.requeue_after is None
    assert rebuild_deletions(w) == want


@pytest.mark.parametrize(
    ("policy", "want"),
    # None behaves as a Deployment's Pod: the kubelet restarts the container, nothing is recreated.
    [*POLICIES[:-1], pytest.param("None", [], id="None")],
)
def test_restarted_not_ready_pod_is_an_error(policy: str | None, want: list[str]) -> None:
    w = _world(policy)
    w.pods[VICTIM] = restarted(w.pods[VICTIM], 3, since=T0)
    w.now = T0 + SECOND
    assert rebuild_deletions(w) == want


@pytest.mark.parametrize(
    ("policy", "want"),
    # "Any containers/init-containers in a pod is restarted": an init container (a sidecar) counts as a container.
    [*POLICIES[:-1], pytest.param("None", [], id="None")],
)
def test_restarted_init_container_is_an_error_as_a_container(policy: str | None, want: list[str]) -> None:
    w = _world(policy)
    pod = running_not_ready(w.pods[VICTIM], since=T0)
    pod["status"]["initContainerStatuses"] = [{"name": "proxy", "restartCount": 2, "ready": False}]
    w.pods[VICTIM] = pod
    w.now = T0 + SECOND
    assert rebuild_deletions(w) == want


@pytest.mark.parametrize(
    "state",
    [
        pytest.param(lambda pod: restarted(pod, 5, ready_now=True), id="restarted-but-ready"),
        pytest.param(pending, id="pending"),
        pytest.param(running_not_ready, id="running-not-ready-never-restarted"),
    ],
)
@pytest.mark.parametrize("policy", ["RoleRecreate", "ServingGroupRecreate", "None"])
def test_not_an_error(policy: str, state: object) -> None:
    w = _world(policy)
    w.pods[VICTIM] = state(w.pods[VICTIM])  # type: ignore[operator]
    w.now = T0 + dt.timedelta(hours=1)
    p = w.plan()
    assert (p.delete_pods, p.create_pods, p.requeue_after) == ([], [], None)


@pytest.mark.parametrize(
    ("elapsed", "deletes", "requeue"),
    [
        pytest.param(0, False, 30.0, id="just-failed"),
        pytest.param(10, False, 20.0, id="10s-in"),
        pytest.param(29, False, 1.0, id="1s-left"),
        pytest.param(30, True, None, id="grace-over"),
        pytest.param(3600, True, None, id="long-ago"),
    ],
)
@pytest.mark.parametrize("state", ["failed", "restarted"])
def test_restart_grace_period(elapsed: int, deletes: bool, requeue: float | None, state: str) -> None:
    w = _world("RoleRecreate", grace=30)
    since = T0 + dt.timedelta(minutes=5)
    pod = w.pods[VICTIM]
    w.pods[VICTIM] = failed(pod, since) if state == "failed" else restarted(pod, 1, since=since)
    w.now = since + elapsed * SECOND
    p = w.plan()
    assert deleted(p) == (["ms-0-p-1-0"] if deletes else []), "the sibling first, the failed Pod last"
    assert p.requeue_after == (None if requeue is None else pytest.approx(requeue))
    assert p.create_pods == []
    if deletes:
        assert rebuild_deletions(w) == ["ms-0-p-1-0", "ms-0-p-1-1"]


def test_restart_grace_requeues_for_the_earliest_pod() -> None:
    w = _world("None", grace=60)
    w.pods["ms-0-p-0-0"] = failed(w.pods["ms-0-p-0-0"], T0)
    w.pods["ms-1-d-0-0"] = failed(w.pods["ms-1-d-0-0"], T0 + 20 * SECOND)
    w.now = T0 + 50 * SECOND
    p = w.plan()
    assert p.delete_pods == []
    assert p.requeue_after == pytest.approx(10.0)


def test_restart_grace_elapses_for_a_failed_pod_without_ready_condition() -> None:
    w = _world("None", grace=30)
    pod = failed(w.pods[VICTIM], conditions=False)  # e.g. rejected by the kubelet at admission
    pod["status"]["startTime"] = "2026-01-01T12:00:00Z"
    w.pods[VICTIM] = pod
    w.now = T0 + dt.timedelta(hours=1)
    assert deleted(w.plan()) == [VICTIM]


def test_failed_pod_without_ready_condition_and_no_grace_is_rebuilt() -> None:
    w = _world("None")
    w.pods[VICTIM] = failed(w.pods[VICTIM], conditions=False)
    assert deleted(w.plan()) == [VICTIM]


def test_other_groups_and_instances_untouched_by_role_recreate() -> None:
    w = _world("RoleRecreate")
    w.pods[VICTIM] = failed(w.pods[VICTIM])
    p = w.plan()
    untouched = set(w.pods) - {"ms-0-p-1-0", "ms-0-p-1-1"}
    assert untouched.isdisjoint(deleted(p))
    assert "ms-0-p-0-0" in untouched and "ms-1-p-1-0" in untouched


def test_terminating_failed_pod_is_not_deleted_again() -> None:
    w = _world("RoleRecreate")
    w.pods[VICTIM] = deleting(failed(w.pods[VICTIM]))
    w.pods["ms-0-p-1-0"] = deleting(w.pods["ms-0-p-1-0"])
    p = w.plan()
    assert (p.delete_pods, p.create_pods) == ([], [])


@pytest.mark.parametrize(
    ("policy", "want_deleted", "want_created"),
    [
        pytest.param("RoleRecreate", ["ms-0-p-1-0"], [], id="RoleRecreate-deletes-survivors"),
        pytest.param(None, ["ms-0-p-1-0"], [], id="default-deletes-survivors"),
        pytest.param("ServingGroupRecreate", [n for n in GROUP_0 if n != VICTIM], [], id="SG-deletes-group"),
        pytest.param("None", [], [VICTIM], id="None-recreates-only-the-pod"),
    ],
)
def test_lost_pod(policy: str | None, want_deleted: list[str], want_created: list[str]) -> None:
    w = _world(policy)
    del w.pods[VICTIM]
    p = w.plan(lost=frozenset({VICTIM}))
    assert deleted(p) == want_deleted
    assert names(p.create_pods) == want_created


@pytest.mark.parametrize("policy", ["RoleRecreate", "ServingGroupRecreate", "None"])
def test_missing_pod_not_reported_lost_is_simply_created(policy: str) -> None:
    w = _world(policy)
    del w.pods[VICTIM]
    p = w.plan()
    assert p.delete_pods == []
    assert names(p.create_pods) == [VICTIM]


@pytest.mark.parametrize("policy", ["RoleRecreate", "None"])
def test_lost_single_pod_instance_is_created_again(policy: str) -> None:
    w = _world(policy)
    del w.pods["ms-1-d-0-0"]
    p = w.plan(lost=frozenset({"ms-1-d-0-0"}))
    assert p.delete_pods == []
    assert names(p.create_pods) == ["ms-1-d-0-0"]


@pytest.mark.parametrize(
    ("policy", "terminating", "gone"),
    [
        pytest.param("RoleRecreate", ["ms-0-p-1-0"], [VICTIM], id="role-half-gone"),
        pytest.param("RoleRecreate", ["ms-0-p-1-0", VICTIM], [], id="role-all-terminating"),
        pytest.param("ServingGroupRecreate", [n for n in GROUP_0 if n != VICTIM], [VICTIM], id="group-half-gone"),
        pytest.param("ServingGroupRecreate", GROUP_0, [], id="group-all-terminating"),
        pytest.param("None", [VICTIM], [], id="none-pod-terminating"),
    ],
)
def test_terminating_instance_is_not_recreated_until_gone(policy: str, terminating: list[str], gone: list[str]) -> None:
    w = _world(policy)
    for name in terminating:
        w.pods[name] = deleting(w.pods[name])
    for name in gone:
        del w.pods[name]
    p = w.plan()
    assert p.create_pods == []
    assert p.delete_pods == []
    for name in terminating:  # once they are gone, the whole instance (or group) comes back
        del w.pods[name]
    p = w.plan()
    assert sorted(names(p.create_pods)) == sorted(terminating + gone)


@pytest.mark.parametrize(("policy", "rebuilt"), POLICIES)
def test_recovery_converges(policy: str | None, rebuilt: list[str]) -> None:
    w = _world(policy)
    w.plans.clear()
    w.pods[VICTIM] = failed(w.pods[VICTIM])
    w.converge()
    deletion_steps = [deleted(p) for p in w.plans if p.delete_pods]
    assert sorted(n for step in deletion_steps for n in step) == rebuilt, "each Pod of the scope deleted once"
    assert deletion_steps[-1] == [VICTIM], "the failed Pod is deleted last"
    assert sorted(n for p in w.plans for n in names(p.create_pods)) == rebuilt
    assert len(w.pods) == 10
    assert w.ms.status is not None
    assert w.ms.status.available_replicas == 2


def test_recovery_events() -> None:
    w = _world("RoleRecreate")
    w.pods[VICTIM] = failed(w.pods[VICTIM])
    p = w.plan()
    assert [e.reason for e in p.events] == ["RoleDeleting"]
    assert "p-1" in p.events[0].message and "ms-0" in p.events[0].message
