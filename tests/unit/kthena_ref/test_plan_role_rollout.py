"""plan() with RoleRollingUpdate, and roleCoordination (maxSkew, dependencies)."""

from __future__ import annotations

from typing import Any

import pytest

from kthena_ref.api.types import ModelServing, RoleCoordination
from kthena_ref.planner import coordination
from kthena_ref.planner.coordination import RoleProgress, Start
from kthena_ref.planner.names import LABEL_REVISION

from .builders import MS, World, edit_spec, names, revision, world


def _ms(replicas: int = 1, roles: dict[str, int] | None = None, **role_settings: Any) -> ModelServing:
    """Roles (name -> replicas), each with one worker; ``role_settings``: name -> {maxUnavailable...}."""
    b = MS("ms").replicas(replicas)
    for name, count in (roles or {"a": 2, "b": 2}).items():
        b.role(name, count, 1, image=f"{name}:v1")
    b.rollout(type="RoleRollingUpdate")
    ms = b.build()

    def change(spec: dict[str, Any]) -> None:
        for role in spec["template"]["roles"]:
            role.update(role_settings.get(role["name"], {}))

    return edit_spec(ms, change)


def _set(w: World, change: Any) -> None:
    w.ms = edit_spec(w.ms, change)


def _image(role: str, image: str) -> Any:
    def change(spec: dict[str, Any]) -> None:
        for r in spec["template"]["roles"]:
            if r["name"] == role:
                r["entryTemplate"]["spec"]["containers"][0]["image"] = image
                r["workerTemplate"]["spec"]["containers"][0]["image"] = f"{image}-worker"

    return change


def _instances(pod_names: list[str]) -> set[str]:
    """``ms-0-a-1-0`` -> ``0/a-1``."""
    return {"{}/{}-{}".format(*n.split("-")[1:4]) for n in pod_names}


def _deleted_instances(w: World) -> list[set[str]]:
    return [_instances([d.name for d in p.delete_pods]) for p in w.plans if p.delete_pods]


def test_only_the_changed_role_is_recreated_the_other_keeps_its_pods() -> None:
    w = world(_ms(2))
    _set(w, _image("a", "a:v2"))
    new = w.plan().status["updateRevision"]
    w.plans.clear()
    w.converge()
    gone = set().union(*_deleted_instances(w))
    assert gone == {"0/a-0", "0/a-1", "1/a-0", "1/a-1"}, "only Role a's instances are recreated"
    assert {revision(p) for p in w.pods.values()} == {new}, "Role b's Pods were relabelled, not rebuilt"
    relabelled = {patch.name for p in w.plans for patch in p.patch_pods}
    assert {n for n in relabelled if "-b-" in n} == {
        f"ms-{g}-b-{i}-{k}" for g in (0, 1) for i in (0, 1) for k in (0, 1)
    }
    assert all(patch.body["metadata"]["labels"] == {LABEL_REVISION: new} for p in w.plans for patch in p.patch_pods)
    status = w.plan().status
    assert status["updatedReplicas"] == 2 and status["currentRevision"] == new


def test_each_servinggroup_rolls_its_role_instances_at_the_same_time_within_the_role_budget() -> None:
    w = world(_ms(2, {"a": 4, "b": 1}, a={"maxUnavailable": 2}))
    _set(w, _image("a", "a:v2"))
    w.plans.clear()
    w.converge()
    steps = _deleted_instances(w)
    assert steps[0] == {"0/a-3", "0/a-2", "1/a-3", "1/a-2"}
    assert steps[1] == {"0/a-1", "0/a-0", "1/a-1", "1/a-0"}


@pytest.mark.parametrize(
    ("settings", "first", "protected"),
    [
        pytest.param({"maxUnavailable": "50%"}, {"0/a-3", "0/a-2"}, set(), id="percent-of-role-replicas"),
        pytest.param({"maxUnavailable": "30%"}, {"0/a-3"}, set(), id="percent-rounds-down"),
        pytest.param({"partition": "25%"}, {"0/a-3"}, {"0/a-0"}, id="partition-percent"),
        pytest.param({"partition": 3}, {"0/a-3"}, {"0/a-0", "0/a-1", "0/a-2"}, id="partition"),
    ],
)
def test_role_budget_and_partition(settings: dict[str, Any], first: set[str], protected: set[str]) -> None:
    w = world(_ms(1, {"a": 4}, a=settings))
    _set(w, _image("a", "a:v2"))
    w.plans.clear()
    w.converge()
    steps = _deleted_instances(w)
    assert steps[0] == first
    assert not protected & set().union(*steps), "partition-protected instances are never touched"
    new = w.plan().status["updateRevision"]
    old = {"0/" + "-".join(n.split("-")[2:4]) for n, p in w.pods.items() if revision(p) != new}
    assert old == protected


def test_role_surge_creates_a_new_instance_first() -> None:
    w = world(_ms(1, {"a": 2}, a={"maxUnavailable": 0, "maxSurge": 1}))
    _set(w, _image("a", "a:v2"))
    p = w.step()
    assert _instances(names(p.create_pods)) == {"0/a-2"} and p.delete_pods == []
    p = w.step()
    assert _instances([d.name for d in p.delete_pods]) == {"0/a-1"}
    for _ in range(20):
        p = w.step()
        live = {n.rsplit("-", 1)[0] for n in w.pods}
        assert len(live) >= 2, f"never fewer than 2 instances of Role a (maxUnavailable 0): {sorted(live)}"
        if not (p.create_pods or p.delete_pods or p.patch_pods):
            break
    assert len({n.rsplit("-", 1)[0] for n in w.pods}) == 2, "back to two instances"
    assert not any(p.delete_pods and p.create_pods for p in w.plans[-3:]), "the surge instance is kept, not swapped"


def test_worker_count_change_rebuilds_the_instance_with_the_new_count() -> None:
    w = world(_ms(1, {"a": 2, "b": 1}))
    _set(w, lambda spec: spec["template"]["roles"][0].update(workerReplicas=2))
    p = w.step()
    assert _instances([d.name for d in p.delete_pods]) == {"0/a-1"}, "one instance at a time, nothing else"
    w.converge()
    assert sorted(n for n in w.pods if "-a-" in n) == [f"ms-0-a-{i}-{k}" for i in (0, 1) for k in (0, 1, 2)]


def test_in_place_under_role_rolling_update_patches_instances() -> None:
    w = world(_ms(1, {"a": 2, "b": 1}))
    _set(w, lambda spec: spec["rolloutStrategy"].update(updateMethod="InPlace"))
    _set(w, _image("a", "a:v2"))
    w.plans.clear()
    w.converge()
    assert not any(p.delete_pods for p in w.plans)
    images = {c["image"] for n, pod in w.pods.items() if "-a-" in n for c in pod["spec"]["containers"]}
    assert images == {"a:v2", "a:v2-worker"}


def _ready_ratio(w: World, role: str, new: str, replicas: int) -> float:
    ready = set()
    for name, pod in w.pods.items():
        if f"-{role}-" in name and revision(pod) == new:  # World Pods come up Ready at once
            ready.add(name.rsplit("-", 1)[0])
    return len(ready) / replicas


def test_max_skew_keeps_target_ready_ratios_together() -> None:
    w = world(_ms(1, {"a": 4, "b": 4}, a={"maxUnavailable": 4}))
    _set(w, lambda spec: spec["rolloutStrategy"].update(roleCoordination={"maxSkew": "25%"}))
    _set(w, _image("a", "a:v2"))
    _set(w, _image("b", "b:v2"))
    new = w.plan().status["updateRevision"]
    for _ in range(40):
        p = w.step()
        skew = abs(_ready_ratio(w, "a", new, 4) - _ready_ratio(w, "b", new, 4))
        assert skew <= 0.25 + 1e-9
        if not (p.create_pods or p.delete_pods or p.patch_pods):
            break
    assert {revision(p) for p in w.pods.values()} == {new}


def test_without_coordination_the_faster_role_runs_ahead() -> None:
    w = world(_ms(1, {"a": 4, "b": 4}, a={"maxUnavailable": 4}))
    _set(w, _image("a", "a:v2"))
    _set(w, _image("b", "b:v2"))
    assert len(_instances([d.name for d in w.plan().delete_pods])) == 5


def test_a_root_waits_for_ready_target_capacity_in_its_dependencies() -> None:
    w = world(_ms(1, {"a": 2, "b": 2}))
    coordination_ = {"dependencies": [{"role": "a", "dependsOn": ["b"]}]}
    _set(w, lambda spec: spec["rolloutStrategy"].update(roleCoordination=coordination_))
    _set(w, _image("a", "a:v2"))
    _set(w, _image("b", "b:v2"))
    p = w.step()
    assert _instances([d.name for d in p.delete_pods]) == {"0/b-1"}, "the root a waits"
    w.converge()
    first_a = next(i for i, q in enumerate(w.plans) if any("-a-" in d.name for d in q.delete_pods))
    first_b_ready = next(i for i, q in enumerate(w.plans) if any("-b-" in n for n in names(q.create_pods)))
    assert first_a > first_b_ready


# -- coordination.allowed, pure -----------------------------------------------------------------------


def _p(replicas: int, ready: int, headed: int | None = None, old_ready: int = 0, outdated: int = 0) -> RoleProgress:
    return RoleProgress(replicas, ready, ready if headed is None else headed, old_ready, outdated, replicas > 1)


def _starts(*ids: int, ready_old: bool = True) -> list[Start]:
    return [Start(i, ready_old) for i in ids]


@pytest.mark.parametrize(
    ("spec", "progress", "starts", "expected"),
    [
        pytest.param(
            {"maxSkew": "25%"},
            {"a": _p(4, 0), "b": _p(4, 0)},
            {"a": _starts(3, 2, 1, 0), "b": _starts(3)},
            {"a": [3], "b": [3]},
            id="skew-one-step-each",
        ),
        pytest.param(
            {"maxSkew": "25%"},
            {"a": _p(4, 1), "b": _p(4, 0)},
            {"a": _starts(2, 1, 0), "b": _starts(3)},
            {"a": [], "b": [3]},
            id="the-leader-waits",
        ),
        pytest.param(
            {"maxSkew": "50%"},
            {"a": _p(4, 0, headed=1), "b": _p(4, 0)},
            {"a": _starts(2, 1), "b": _starts(3)},
            {"a": [2], "b": [3]},
            id="in-flight-counts-as-headed",
        ),
        pytest.param(
            {"maxSkew": "10%"},
            {"a": _p(2, 0), "b": _p(4, 0)},
            {"a": _starts(1), "b": _starts(3)},
            {"a": [1], "b": [3]},
            id="skew-below-one-instance-laggards-step",
        ),
        pytest.param(
            {"maxSkew": "25%", "roles": ["a", "b"]},
            {"a": _p(4, 0), "b": _p(4, 0), "c": _p(4, 0)},
            {"a": _starts(3, 2), "b": _starts(3), "c": _starts(3, 2, 1)},
            {"a": [3], "b": [3], "c": [3, 2, 1]},
            id="non-participants-are-free",
        ),
        pytest.param(
            {"dependencies": [{"role": "a", "dependsOn": ["b"]}, {"role": "b", "dependsOn": ["c"]}]},
            {"a": _p(2, 0, outdated=2, old_ready=2), "b": _p(2, 1, outdated=1), "c": _p(2, 0, outdated=2, old_ready=2)},
            {"a": _starts(1), "b": _starts(0, ready_old=False), "c": _starts(1, 0)},
            {"a": [], "b": [0], "c": [1]},
            id="root-waits-internal-free-old-dependency-capacity-kept",
        ),
        pytest.param(
            {"dependencies": [{"role": "a", "dependsOn": ["b"]}]},
            {"a": _p(2, 0, outdated=2, old_ready=2), "b": _p(2, 1, old_ready=1, outdated=1)},
            {"a": _starts(1, 0), "b": _starts(0)},
            {"a": [1, 0], "b": []},
            id="root-starts-once-dependencies-have-capacity",
        ),
    ],
)
def test_allowed(
    spec: dict[str, Any], progress: dict[str, RoleProgress], starts: dict[str, list[Start]], expected: Any
) -> None:
    assert coordination.allowed(RoleCoordination.model_validate(spec), progress, starts) == expected
