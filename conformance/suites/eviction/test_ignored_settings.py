"""EvictionBudget: each protection level uses only its own setting; roleMinAvailable keys are Roles.

Why this module exists: the budget tests set only the setting of the level they test. The spec
also says what the other one does: minAvailable "is used only when protectionLevel is
ServingGroup", roleMinAvailable "is used only when protectionLevel is Role", and roleMinAvailable's
"Map keys must match names in spec.template.roles". Each test sets the other level's setting so
that, applied, it would refuse an Eviction the budget in force allows, and checks that the budget
in force is enforced at all (a refusal at its boundary), so an implementation that enforces
nothing cannot pass.
"""

from __future__ import annotations

import copy
from typing import Any

from conformance.framework.catalog import behaviour
from conformance.framework.features import Feature
from conformance.framework.modelserving import ModelServings, expect_refused
from conformance.framework.rollout_watch import RolloutWatch

from . import (
    EVICTION,
    Binder,
    expect_allowed,
    expect_budget_refused,
    groups_by_ordinal,
    instances_by_index,
    pod_of,
    start,
    with_strategy,
)

NAME = "ignored"


def _body(manifest: Any, replicas: int, **eviction: Any) -> dict[str, Any]:
    body: dict[str, Any] = manifest("eviction-ignored-settings")
    body["spec"]["replicas"] = replicas
    return with_strategy(body, **eviction)


@behaviour(
    "eviction/role/min-available-ignored",
    "With protectionLevel Role, minAvailable MUST NOT take effect: with minAvailable 1 of 1 ServingGroup and "
    "roleMinAvailable {a: 1}, an Eviction of a Pod of Role b (not in roleMinAvailable) and one of Role a's two "
    "instances MUST be allowed, while the Eviction of Role a's last ready instance MUST be refused.",
    EVICTION,
    Feature.ROLE_EVICTION_BUDGET,
)
def test_min_available_does_not_apply_at_role_level(ms: ModelServings, manifest: Any) -> None:
    body = _body(manifest, 1, protectionLevel="Role", minAvailable=1, roleMinAvailable={"a": 1})
    what = "protectionLevel Role, roleMinAvailable {a: 1}, minAvailable 1 of 1 ServingGroup (not in force)"
    binder = Binder(ms)
    layout = start(ms, binder, body)
    with RolloutWatch(ms, NAME, layout) as watch:
        s = watch.latest()
        a, b = instances_by_index(s, "a"), instances_by_index(s, "b")
        assert (len(a), len(b)) == (2, 2), f"expected 2 instances of each Role, seen {s.describe()}"

        def pod(instance: tuple[str, str]) -> str:
            return pod_of(s, instance[0], "entry", instance[1]).name

        expect_allowed(ms.evict(pod(b[0])), f"{what}: evicting Role b's {b[0]} (b unprotected; minAvailable, "
                       "applied, would refuse it)")  # fmt: skip
        expect_allowed(ms.evict(pod(a[0])), f"{what}: evicting Role a's {a[0]} (2 ready, 1 after)")
        expect_budget_refused(ms.evict(pod(a[1])), f"{what}: evicting Role a's {a[1]}, its last ready instance")


@behaviour(
    "eviction/servinggroup/role-min-available-ignored",
    "With protectionLevel ServingGroup, roleMinAvailable MUST NOT take effect: with minAvailable 1 of 2 "
    "ServingGroups and roleMinAvailable {a: 4} (every instance of Role a), an Eviction of a Pod of Role a in one "
    "ServingGroup MUST be allowed, while an Eviction in the other, last ready ServingGroup MUST be refused.",
    EVICTION,
    Feature.EVICTION_BUDGET,
)
def test_role_min_available_does_not_apply_at_group_level(ms: ModelServings, manifest: Any) -> None:
    body = _body(manifest, 2, protectionLevel="ServingGroup", minAvailable=1, roleMinAvailable={"a": 4})
    what = "protectionLevel ServingGroup, minAvailable 1 of 2, roleMinAvailable {a: 4} (not in force)"
    binder = Binder(ms)
    layout = start(ms, binder, body)
    with RolloutWatch(ms, NAME, layout) as watch:
        s = watch.latest()
        g = groups_by_ordinal(s)
        assert len(g) == 2, f"expected 2 ServingGroups, seen {g}"
        first = next(p for p in s.pods if p.group == g[0] and p.role == "a" and not p.terminating)
        second = next(p for p in s.pods if p.group == g[1] and p.role == "a" and not p.terminating)
        expect_allowed(ms.evict(first.name), f"{what}: evicting {first.name} of Role a in {g[0]} (2 ready "
                       "ServingGroups, 1 after; roleMinAvailable, applied, would refuse it)")  # fmt: skip
        expect_budget_refused(ms.evict(second.name), f"{what}: evicting {second.name} of {g[1]}, the last ready "
                              "ServingGroup")  # fmt: skip


@behaviour(
    "eviction/admission/role-min-available-keys",
    "A rolloutStrategy.evictionStrategy.roleMinAvailable key that names no Role of spec.template.roles MUST be "
    "rejected, while keys that name Roles MUST be accepted.",
    EVICTION,
    Feature.ROLE_EVICTION_BUDGET,
)
def test_role_min_available_keys_must_name_roles(ms: ModelServings, manifest: Any) -> None:
    base = _body(manifest, 0, protectionLevel="Role")

    def variant(name: str, keys: dict[str, Any]) -> dict[str, Any]:
        body = copy.deepcopy(base)
        body["metadata"]["name"] = name
        body["spec"]["rolloutStrategy"]["evictionStrategy"]["roleMinAvailable"] = keys
        return body

    expect_refused(ms.try_create(variant("unknown-key", {"a": 1, "c": 1})), "roleMinAvailable with key c (no Role c)")
    expect_refused(ms.try_create(variant("case-differs", {"A": 1})), "roleMinAvailable with key A (the Role is a)")
    rejection = ms.try_create(variant("known-keys", {"a": 1, "b": "50%"}))
    assert rejection is None, f"expected roleMinAvailable {{a: 1, b: 50%}} (both Roles) to be accepted; {rejection}"
