"""Probes of the faults added so that every behaviour is proven able to fail (issue 13, third wave):
rollout budgets and gang PodGroups that had no fault variant.

Why this module exists: ``test_faults.py`` holds one probe per fault; these are kept apart so the
table there stays readable. Each row is ``(fault, probe, off, on, overlaps)`` as in
:mod:`.fault_cases_plugins`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kthena_ref.api.types import ModelServing
from kthena_ref.planner.plan import Plan
from kthena_ref.planner.podgroups import podgroup

from .builders import MS, deleted, edit_spec, set_image, world
from .fault_cases_rollout import _role_step, _roles

TOPOLOGY = {"groupPolicy": {"mode": "hard", "highestTierAllowed": 2}}


def _in_group_0(probe: Callable[[], list[str]]) -> Callable[[], list[str]]:
    """``probe``'s names of ServingGroup 0 only."""
    return lambda: [n for n in probe() if n.lstrip("+").startswith("ms-0-")]


def _updated(p: Plan) -> list[str]:
    """The Pods a plan updates: recreates (deletes) or patches in place."""
    return sorted(set(deleted(p)) | {patch.name for patch in p.patch_pods})


def _first_update(ms: ModelServing) -> list[str]:
    """``ms`` settled, then a new image: the Pods the first step updates."""
    w = world(ms)
    w.ms = edit_spec(w.ms, set_image("engine:v2"))
    return _updated(w.plan())


def _retargeted_step() -> list[str]:
    """3 groups, maxUnavailable 1: v1 -> v2 until group 2 is back on v2, then v3: the Pods the next step
    updates (every group is outdated, the highest ordinal goes first)."""
    w = world(MS().replicas(3).role("r", 1, 0).rollout(max_unavailable=1).build())
    w.ms = edit_spec(w.ms, set_image("engine:v2"))
    while not any(p["spec"]["containers"][0]["image"] == "engine:v2" for p in w.pods.values()):
        w.step()  # group 2 deleted, then created on v2 (or patched in place), Ready
    w.ms = edit_spec(w.ms, set_image("engine:v3"))
    return _updated(w.plan())


def _gang_ms(gang: dict[str, int] | None, **template: Any) -> ModelServing:
    """Role a of 2 single-Pod instances, the gangPolicy ``{minRoleReplicas: gang}`` (``{}`` when None)."""
    ms = MS().annotation("scheduling.volcano.sh/queue-name", "q").role("a", 2, 0).gang(gang).build()
    return edit_spec(ms, lambda spec: spec["template"].update(template))


def _podgroup_spec(gang: dict[str, int] | None, **template: Any) -> dict[str, Any]:
    ms = _gang_ms(gang, **template)
    pg = podgroup(ms, 0, ms.spec.template.roles, gang, "q")
    return dict(pg["spec"]) | {"owners": len(pg["metadata"]["ownerReferences"])}


def _podgroups_after_scale_down() -> int:
    """3 groups scaled to 2 and settled: how many PodGroups are left."""
    w = world(MS().scheduler("volcano").replicas(3).role("r", 1, 0).build(), podgroups=True)
    w.ms = edit_spec(w.ms, lambda spec: spec.update(replicas=2))
    w.converge()
    assert w.podgroups is not None
    return len(w.podgroups)


CASES: list[tuple[Any, ...]] = [
    # RoleRollingUpdate: a Role's own budget
    ("role-surge-ignored", _role_step(_roles(maxUnavailable=0, maxSurge=1).build()), ["+ms-0-a-3-0"], [], ()),
    (
        "role-unavailable-off-by-one",
        _role_step(_roles(maxUnavailable=2, maxSurge=0).build()),
        ["ms-0-a-1-0", "ms-0-a-2-0"],
        ["ms-0-a-0-0", "ms-0-a-1-0", "ms-0-a-2-0"],
        (),
    ),
    (  # 50% of Role a's 2 instances is 1; of the 4 ServingGroups, 2
        "role-percent-of-servinggroups",
        _in_group_0(
            _role_step(
                MS()
                .replicas(4)
                .role("a", 2, 0, maxUnavailable="50%", maxSurge=0)
                .rollout(type="RoleRollingUpdate")
                .build()
            )
        ),
        ["ms-0-a-1-0"],
        ["ms-0-a-0-0", "ms-0-a-1-0"],
        (),
    ),
    (  # 50% of 3 instances protects 2 (rounded up), 1 rounded down
        "role-partition-percent-rounds-down",
        _role_step(_roles(partition="50%", maxUnavailable=3, maxSurge=0).build()),
        ["ms-0-a-2-0"],
        ["ms-0-a-1-0", "ms-0-a-2-0"],
        (),
    ),
    # ServingGroupRollingUpdate
    (
        "max-unavailable-off-by-one",
        lambda: _first_update(MS().replicas(4).role("r", 1, 0).rollout(max_unavailable=2).build()),
        ["ms-2-r-0-0", "ms-3-r-0-0"],
        ["ms-1-r-0-0", "ms-2-r-0-0", "ms-3-r-0-0"],
        (),
    ),
    ("retarget-ignored", _retargeted_step, ["ms-2-r-0-0"], ["ms-1-r-0-0"], ()),
    # Gang scheduling: the PodGroup of a ServingGroup
    ("min-member-ignores-min-role-replicas", lambda: _podgroup_spec({"a": 1})["minMember"], 1, 2, ()),
    ("gang-policy-without-minimums-one-instance", lambda: _podgroup_spec(None)["minMember"], 2, 1, ()),
    ("min-task-member-omitted", lambda: _podgroup_spec({"a": 1})["minTaskMember"], {"a-0": 1}, {}, ()),
    (
        "group-policy-not-in-podgroup",
        lambda: _podgroup_spec({"a": 1}, networkTopology=TOPOLOGY).get("networkTopology"),
        TOPOLOGY["groupPolicy"],
        None,
        (),
    ),
    ("podgroup-not-owned", lambda: _podgroup_spec({"a": 1})["owners"], 1, 0, ()),
    ("podgroup-queue-dropped", lambda: _podgroup_spec({"a": 1}).get("queue"), "q", None, ()),
    (
        "podgroups-kept-on-scale-down",
        _podgroups_after_scale_down,
        2,
        3,
        ("podgroup-not-owned",),  # only PodGroups the ModelServing owns are cleaned up, so an unowned one stays
    ),
]
