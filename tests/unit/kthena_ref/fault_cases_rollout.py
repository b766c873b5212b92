"""Probes of the rollout, in-place, recovery and eviction faults added for issue 13 by helper H8.

Why this module exists: ``test_faults.py`` holds one probe per fault; these are the ones for the
budget rules of rolling updates (an already unready unit, defaults, settings that must not take
effect), the update methods, in-place eligibility, recovery of restarted containers and the
eviction settings of the other protection level, kept apart so the table there stays readable.
Each row is ``(fault, probe, off, on, overlaps)`` as in :mod:`.fault_cases_plugins`.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import Any

from kthena_ref.admission.rules import validate
from kthena_ref.api.crd import crd
from kthena_ref.api.types import RoleCoordination
from kthena_ref.planner import coordination
from kthena_ref.planner.coordination import RoleProgress, Start
from kthena_ref.planner.eligibility import check_roles
from kthena_ref.planner.eviction import decide
from kthena_ref.planner.fallback import InPlaceFindings

from .builders import (
    MS,
    T0,
    container,
    deleted,
    edit_spec,
    failed,
    fresh_pods,
    names,
    ready,
    restarted,
    running_not_ready,
    set_image,
    world,
)


def _first_step(ms: Any, unready: tuple[str, ...] = ()) -> Callable[[], list[str]]:
    """``ms`` settled, the Pods in ``unready`` not Ready, a new image: what the first step deletes."""

    def probe() -> list[str]:
        w = world(ms)
        for name in unready:
            w.pods[name] = running_not_ready(w.pods[name])
        w.ms = edit_spec(w.ms, set_image("engine:v2"))
        return deleted(w.plan())

    return probe


def _role_step(ms: Any, steps: int = 1, only: str | None = None) -> Callable[[], list[str]]:
    """``ms`` (RoleRollingUpdate) settled, every Role (or only Role ``only``) on a new image: what the
    ``steps``-th step deletes and creates (``+name``), created Pods coming up Ready in between."""

    def probe() -> list[str]:
        w = world(ms)

        def change(spec: dict[str, Any]) -> None:
            for r in spec["template"]["roles"]:
                if only is None or r["name"] == only:
                    r["entryTemplate"]["spec"]["containers"][0]["image"] = "engine:v2"

        w.ms = edit_spec(w.ms, change)
        for _ in range(steps - 1):
            w.step()
        p = w.plan()
        return deleted(p) + [f"+{n}" for n in names(p.create_pods)]

    return probe


def _roles(**a: Any) -> Any:
    """RoleRollingUpdate, Role a of 3 single-Pod instances with ``a`` as its settings."""
    return MS().role("a", 3, 0, **a).rollout(type="RoleRollingUpdate")


def _role_max_unavailable_default() -> Any:
    """The CRD's default of a Role's maxUnavailable."""
    spec = crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    return spec["properties"]["template"]["properties"]["roles"]["items"]["properties"]["maxUnavailable"].get("default")


def _coordination_compared_whole() -> bool:
    """Whether the CRD's immutability rule compares roleCoordination as a whole (dependencies included)."""
    rules = crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["x-kubernetes-validations"]
    whole = "self.rolloutStrategy.roleCoordination == oldSelf.rolloutStrategy.roleCoordination"
    return any(whole in r["rule"] for r in rules)


def _three_groups(**role: Any) -> Any:
    return MS().replicas(3).role("r", 1, 0, **role)


def _eviction_allowed(ms: Any, target: str, **strategy: Any) -> Callable[[], bool]:
    """Every Pod of ``ms`` Running and Ready, ``strategy`` as its evictionStrategy: may ``target`` go?"""

    def probe() -> bool:
        edited = edit_spec(ms, lambda spec: spec.update(rolloutStrategy={"evictionStrategy": strategy}))
        pods = {p["metadata"]["name"]: ready(p) for p in fresh_pods(edited)}
        return decide(edited, list(pods.values()), pods[target]).allowed

    return probe


def _admission_errors(strategy: dict[str, Any]) -> Callable[[], list[str]]:
    """Admission's answer (the fields it names) to a ModelServing with rolloutStrategy ``strategy``."""

    def probe() -> list[str]:
        pod = {"spec": {"containers": [{"name": "c", "image": "engine:v1"}]}}
        obj = {
            "apiVersion": "workload.serving.volcano.sh/v1alpha1",
            "kind": "ModelServing",
            "metadata": {"name": "ms"},
            "spec": {
                "replicas": 1,
                "rolloutStrategy": strategy,
                "template": {"roles": [{"name": "r", "workerReplicas": 0, "entryTemplate": pod}]},
            },
        }
        return [e.field for e in validate(obj)]

    return probe


def _findings(old: dict[str, Any], new: dict[str, Any], workers: tuple[int, int] = (0, 0)) -> Callable[[], list[str]]:
    """The fields in-place eligibility reports between a Role with entry template ``old`` and one with ``new``."""

    def probe() -> list[str]:
        before = MS().role("r", 1, workers[0], entry=old, worker=old if workers[0] else None).build()
        after = MS().role("r", 1, workers[1], entry=new, worker=new if workers[1] else None).build()
        return [f.field for f in check_roles(before.spec.template.roles, after.spec.template.roles)]

    return probe


def _pod(*containers: dict[str, Any], **spec: Any) -> dict[str, Any]:
    return {"spec": {"containers": list(containers), **spec}}


def _role_a_in_place() -> bool:
    """RoleRollingUpdate, InPlace: Role a's image and Role b's command change together; may a be patched?"""
    old = MS().role("a", 1, 0).role("b", 1, 0).rollout(type="RoleRollingUpdate").build()

    def change(spec: dict[str, Any]) -> None:
        spec["rolloutStrategy"]["updateMethod"] = "InPlace"
        spec["template"]["roles"][0]["entryTemplate"]["spec"]["containers"][0]["image"] = "engine:v2"
        spec["template"]["roles"][1]["entryTemplate"]["spec"]["containers"][0]["command"] = ["serve", "--new"]

    new = edit_spec(old, change)
    return InPlaceFindings(new, {"old": old.spec.template.roles}).in_place("old", "a")


def _scheduler_and_image_change() -> list[str]:
    """InPlace: schedulerName and the image change together: what the first step deletes (not patches)."""
    ms = MS().scheduler("one").role("r", 1, 0).rollout(type="ServingGroupRollingUpdate").build()
    w = world(edit_spec(ms, lambda spec: spec["rolloutStrategy"].update(updateMethod="InPlace")))
    w.ms = edit_spec(w.ms, lambda spec: spec.update(schedulerName="two"))
    w.ms = edit_spec(w.ms, set_image("engine:v2"))
    return deleted(w.plan())


def _recovery_step(ms: Any, victim: str, *, fail: bool = False, after: float = 1.0) -> Callable[[], list[str]]:
    """``ms`` settled; ``victim`` restarted (and not Ready) or failed at T0: what a plan ``after`` s later deletes."""

    def probe() -> list[str]:
        w = world(ms)
        w.pods[victim] = failed(w.pods[victim]) if fail else restarted(w.pods[victim], 1, since=T0)
        w.now = T0 + dt.timedelta(seconds=after)
        return deleted(w.plan())

    return probe


def _progress(replicas: int, target_ready: int, outdated: int) -> RoleProgress:
    """A Role of single-Pod instances: ``target_ready`` updated and Ready, ``outdated`` old and Ready."""
    return RoleProgress(replicas, target_ready, target_ready, outdated, outdated, spare=replicas > 1)


def _dependency_starts(dependencies: list[dict[str, Any]], progress: dict[str, RoleProgress], role: str) -> list[int]:
    """The starts of ``role`` (one per outdated instance) that roleCoordination allows now."""
    starts = {r: [Start(i, True) for i in range(p.outdated)] for r, p in progress.items()}
    coordinated = RoleCoordination.model_validate({"dependencies": dependencies})
    return coordination.allowed(coordinated, progress, starts)[role]


def _headless_in_place_first_step() -> list[str]:
    """3 groups with headless-service, InPlace, maxUnavailable 1, an image change: what the first step deletes."""
    ms = MS().replicas(3).role("r", 1, 0).rollout(max_unavailable=1).build()
    ms = edit_spec(ms, lambda spec: spec.update(plugins=[{"name": "headless-service"}]))
    w = world(edit_spec(ms, lambda spec: spec["rolloutStrategy"].update(updateMethod="InPlace")))
    w.ms = edit_spec(w.ms, set_image("engine:v2"))
    return deleted(w.plan())


CASES: list[tuple[str, Callable[[], Any], Any, Any, tuple[str, ...]]] = [
    # Rollout: a Role's budget under RoleRollingUpdate
    ("role-max-unavailable-default-all", _role_max_unavailable_default, 1, "100%", ("no-schema-defaults",)),
    (
        "role-unavailable-rounds-up",
        _role_step(_roles(maxUnavailable="60%", maxSurge=0).build()),
        ["ms-0-a-2-0"],
        ["ms-0-a-1-0", "ms-0-a-2-0"],
        (),
    ),
    (
        "role-surge-rounds-down",
        _role_step(_roles(maxUnavailable=0, maxSurge="10%").build()),
        ["+ms-0-a-3-0"],
        ["ms-0-a-2-0"],
        (),
    ),
    (
        "role-default-max-surge-one",
        _role_step(_roles(maxUnavailable=1).build()),
        ["ms-0-a-2-0"],
        ["ms-0-a-2-0", "+ms-0-a-3-0"],
        (),
    ),
    (
        "role-partition-absolute-ignored",
        _role_step(_roles(partition=2, maxUnavailable=3, maxSurge=0).build()),
        ["ms-0-a-2-0"],
        ["ms-0-a-0-0", "ms-0-a-1-0", "ms-0-a-2-0"],
        (),
    ),
    (
        "role-groups-one-at-a-time",
        _role_step(MS().replicas(2).role("a", 1, 0, maxSurge=0).rollout(type="RoleRollingUpdate").build()),
        ["ms-0-a-0-0", "ms-1-a-0-0"],
        ["ms-0-a-0-0"],
        (),
    ),
    (  # ServingGroupRecreate: Role a's update recreates the group, Role b's Pod included
        "role-rolling-ignores-servinggroup-recreate",
        _role_step(
            MS()
            .role("a", 1, 0)
            .role("b", 1, 0, image="other:v1")
            .rollout(type="RoleRollingUpdate")
            .recovery("ServingGroupRecreate")
            .build(),
            only="a",
        ),
        ["ms-0-a-0-0", "ms-0-b-0-0"],
        ["ms-0-a-0-0"],
        ("no-recovery",),
    ),
    (  # a (4, partition 2) at 1 of 4 on its target: b may have 3 of 4 (maxSkew 50%), 4 if a counted as 1 of 2
        "skew-ratio-excludes-partition",
        _role_step(
            edit_spec(
                MS()
                .role("a", 4, 0, partition=2, maxUnavailable=1, maxSurge=0)
                .role("b", 4, 0, maxUnavailable=4, maxSurge=0)
                .rollout(type="RoleRollingUpdate")
                .build(),
                lambda spec: spec["rolloutStrategy"].update(roleCoordination={"roles": ["a", "b"], "maxSkew": "50%"}),
            ),
            steps=3,
        ),
        ["ms-0-a-2-0", "ms-0-b-1-0"],
        ["ms-0-a-2-0", "ms-0-b-0-0", "ms-0-b-1-0"],
        ("coordination-ignored",),
    ),
    # Recovery: a restarted container under each policy, and the grace period
    (
        "none-recreates-restarted-pod",
        _recovery_step(MS().role("r", 1, 1).recovery("None").build(), "ms-0-r-0-1"),
        [],
        ["ms-0-r-0-1"],
        (),
    ),
    (  # the group's other Pods go first, the restarted one last
        "servinggroup-recreate-ignores-restarts",
        _recovery_step(MS().role("a", 1, 0).role("b", 1, 0).recovery("ServingGroupRecreate").build(), "ms-0-a-0-0"),
        ["ms-0-b-0-0"],
        ["ms-0-a-0-0"],
        ("no-recovery",),
    ),
    (
        "servinggroup-recreate-ignores-failures",
        _recovery_step(
            MS().role("a", 1, 0).role("b", 1, 0).recovery("ServingGroupRecreate").build(), "ms-0-a-0-0", fail=True
        ),
        ["ms-0-b-0-0"],
        ["ms-0-a-0-0"],
        ("no-recovery",),
    ),
    (
        "role-recreate-rebuilds-group",
        _recovery_step(MS().role("a", 1, 1).role("b", 1, 0).recovery("RoleRecreate").build(), "ms-0-a-0-1", fail=True),
        ["ms-0-a-0-0"],
        ["ms-0-a-0-0", "ms-0-b-0-0"],
        ("no-recovery",),
    ),
    (
        "restart-grace-ignored",
        _recovery_step(MS().role("r", 1, 1).restart_grace(30).build(), "ms-0-r-0-1"),
        [],
        ["ms-0-r-0-0"],
        (),
    ),
    # Rollout: a group unready before the update uses up maxUnavailable 1; the fault also takes down another
    (
        "unready-not-counted",
        _first_step(_three_groups().rollout(max_unavailable=1).build(), unready=("ms-0-r-0-0",)),
        ["ms-0-r-0-0"],
        ["ms-0-r-0-0", "ms-2-r-0-0"],
        ("recreate-updates-in-place",),  # an image-only change patched in place deletes nothing
    ),
    # rollingUpdateConfiguration omitted: one group at a time
    (
        "default-max-unavailable-all",
        _first_step(_three_groups().rollout(type="ServingGroupRollingUpdate").build()),
        ["ms-2-r-0-0"],
        ["ms-0-r-0-0", "ms-1-r-0-0", "ms-2-r-0-0"],
        ("recreate-updates-in-place",),  # an image-only change patched in place deletes nothing
    ),
    # ServingGroupRollingUpdate ignores the Role's own maxUnavailable
    (
        "group-rollout-uses-role-settings",
        _first_step(_three_groups(maxUnavailable="100%").rollout(max_unavailable=1).build()),
        ["ms-2-r-0-0"],
        ["ms-0-r-0-0", "ms-1-r-0-0", "ms-2-r-0-0"],
        ("recreate-updates-in-place",),  # an image-only change patched in place deletes nothing
    ),
    # updateMethod InPlace patches an image-only change: the first step deletes nothing
    (
        "in-place-recreates",
        _first_step(
            edit_spec(MS().role("r", 1, 0).build(), lambda s: s.update(rolloutStrategy={"updateMethod": "InPlace"}))
        ),
        [],
        ["ms-0-r-0-0"],
        (),
    ),
    # updateMethod Recreate (given, or by default with no rolloutStrategy) deletes the outdated Pod
    (
        "recreate-updates-in-place",
        _first_step(MS().role("r", 1, 0).rollout(type="ServingGroupRollingUpdate").build()),
        ["ms-0-r-0-0"],
        [],
        (),
    ),
    ("update-method-default-in-place", _first_step(MS().role("r", 1, 0).build()), ["ms-0-r-0-0"], [], ()),
    # EvictionBudget: Role b is not in roleMinAvailable; minAvailable 1 of 1 group is not in force
    (
        "min-available-applied-under-role",
        _eviction_allowed(
            MS().role("a", 2, 0).role("b", 2, 0).build(),
            "ms-0-b-0-0",
            protectionLevel="Role",
            minAvailable=1,
            roleMinAvailable={"a": 1},
        ),
        True,
        False,
        (),
    ),
    # 1 of 2 groups left satisfies minAvailable 1; roleMinAvailable {r: 2} (every instance) is not in force
    (
        "role-min-available-applied-under-servinggroup",
        _eviction_allowed(
            MS().replicas(2).role("r", 1, 0).build(),
            "ms-0-r-0-0",
            protectionLevel="ServingGroup",
            minAvailable=1,
            roleMinAvailable={"r": 2},
        ),
        True,
        False,
        ("eviction-budget-too-strict",),  # it refuses the same Eviction at the floor of minAvailable 1
    ),
    # Rollout: roleCoordination's rules (maxSkew's form is validated with the admission rules)
    (
        "coordination-participants-miss-last-role",
        lambda: coordination.participants(RoleCoordination(roles=[]), ["a", "b", "c"]),
        ["a", "b", "c"],
        ["a", "b"],
        (),
    ),
    (
        "max-skew-any-form",
        _admission_errors({"type": "RoleRollingUpdate", "roleCoordination": {"maxSkew": 1}}),
        ["spec.rolloutStrategy.roleCoordination.maxSkew"],
        [],
        (),
    ),
    ("coordination-dependencies-mutable", _coordination_compared_whole, True, False, ()),
    (
        "coordination-roles-list-ignored",
        lambda: coordination.participants(RoleCoordination(roles=["a", "b"]), ["a", "b", "c"]),
        ["a", "b"],
        ["a", "b", "c"],
        (),
    ),
    (  # a depends on b; b may update both its instances, but one old one stays while a is old
        "dependency-capacity-dropped",
        lambda: _dependency_starts(
            [{"role": "a", "dependsOn": ["b"]}], {"a": _progress(2, 0, 2), "b": _progress(2, 0, 2)}, "b"
        ),
        [0],
        [0, 1],
        (),
    ),
    (  # a -> b -> c: b is Ready on its target, c is not: the root a waits
        "dependency-closure-direct-only",
        lambda: _dependency_starts(
            [{"role": "a", "dependsOn": ["b"]}, {"role": "b", "dependsOn": ["c"]}],
            {"a": _progress(1, 0, 1), "b": _progress(1, 1, 0), "c": _progress(1, 0, 1)},
            "a",
        ),
        [],
        [0],
        (),
    ),
    # InPlaceUpdate: the eligibility rules
    (
        "eligibility-ignores-worker-replicas",
        _findings(_pod(container()), _pod(container()), (1, 2)),
        ["spec.template.roles[0].workerReplicas"],
        [],
        (),
    ),
    (
        "eligibility-ignores-container-order",
        _findings(_pod(container("a"), container("b")), _pod(container("b"), container("a"))),
        ["spec.template.roles[0].entryTemplate.spec.containers"],
        [],
        (),
    ),
    (
        "eligibility-ignores-restart-policy",
        _findings(
            _pod(container(), restartPolicy="OnFailure"), _pod(container(image="engine:v2"), restartPolicy="OnFailure")
        ),
        ["spec.template.roles[0].entryTemplate.spec.restartPolicy"],
        [],
        (),
    ),
    (
        "eligibility-ignores-pull-policy",
        _findings(_pod(container()), _pod(container(image="engine:latest"))),
        ["spec.template.roles[0].entryTemplate.spec.containers[0].imagePullPolicy"],
        [],
        (),
    ),
    (
        "explicit-pull-policy-ignored",
        _findings(
            _pod(container(imagePullPolicy="IfNotPresent")),
            _pod(container(image="engine:latest", imagePullPolicy="IfNotPresent")),
        ),
        [],
        ["spec.template.roles[0].entryTemplate.spec.containers[0].imagePullPolicy"],
        (),
    ),
    ("role-eligibility-whole-group", _role_a_in_place, True, False, ("in-place-recreates",)),
    ("eligibility-ignores-scheduler-name", _scheduler_and_image_change, ["ms-0-r-0-0"], [], ()),
    (
        "plugin-fallback-ignores-budget",
        _headless_in_place_first_step,
        ["ms-2-r-0-0"],
        ["ms-0-r-0-0", "ms-1-r-0-0", "ms-2-r-0-0"],
        (),
    ),
    (
        "role-min-available-keys-unchecked",
        _admission_errors({"evictionStrategy": {"protectionLevel": "Role", "roleMinAvailable": {"x": 1}}}),
        ["spec.rolloutStrategy.evictionStrategy.roleMinAvailable[x]"],
        [],
        (),
    ),
]
