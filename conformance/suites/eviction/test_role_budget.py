"""RoleEvictionBudget: protectionLevel Role, roleMinAvailable per Role; Roles absent from it are
unprotected."""

from __future__ import annotations

from typing import Any

from conformance.framework.catalog import behaviour
from conformance.framework.features import Feature
from conformance.framework.modelserving import ModelServings
from conformance.framework.rollout_watch import RolloutWatch

from . import (
    EVICTION,
    Binder,
    expect_allowed,
    expect_budget_refused,
    expect_instance_floor,
    instances_by_index,
    pod_of,
    start,
    with_strategy,
)

NAME = "roles"


@behaviour(
    "eviction/role/role-min-available",
    "With protectionLevel Role, an Eviction that would leave fewer ready instances of a Role than its "
    "roleMinAvailable (a number, or a percentage of its instances) MUST be refused, evicting a worker MUST count "
    "as disrupting its whole Role instance, and a Role absent from roleMinAvailable MUST NOT be protected.",
    EVICTION,
    Feature.ROLE_EVICTION_BUDGET,
)
def test_role_min_available_protects_named_roles_only(ms: ModelServings, manifest: Any) -> None:
    body: dict[str, Any] = manifest("eviction-roles")
    with_strategy(body, protectionLevel="Role", roleMinAvailable={"prefill": 2, "decode": "50%"})
    what = "roleMinAvailable {prefill: 2 of 3, decode: 50% of 2}, router unprotected"
    binder = Binder(ms)
    layout = start(ms, binder, body)
    with RolloutWatch(ms, NAME, layout) as watch:
        s = watch.latest()
        prefill, decode, router = (instances_by_index(s, r) for r in ("prefill", "decode", "router"))
        assert (len(prefill), len(decode), len(router)) == (3, 2, 2), f"unexpected Role instances in {s.describe()}"

        def pod(instance: tuple[str, str], member: str = "entry") -> str:
            return pod_of(s, instance[0], member, instance[1]).name

        # The floor is the guarantee: an Eviction may be refused above it, never allowed below it. An allowed
        # Eviction of any Pod (a worker included) disrupts its whole Role instance.
        ready = {"prefill": 3, "decode": 2}
        floor = {"prefill": 2, "decode": 1}
        tries = [("prefill", prefill[0], "worker"), ("prefill", prefill[1], "entry"), ("prefill", prefill[2], "worker"),
                 ("decode", decode[0], "entry"), ("decode", decode[1], "entry")]  # fmt: skip
        for role_name, instance, member in tries:
            answer = ms.evict(pod(instance, member))
            where = f"{what}: evicting the {member} of {role_name} {instance} with {ready[role_name]} ready"
            if answer.allowed:
                ready[role_name] -= 1
                assert ready[role_name] >= floor[role_name], (
                    f"{where}: it leaves {ready[role_name]} ready {role_name} instances, below roleMinAvailable "
                    f"{floor[role_name]}, so it MUST be refused; answered {answer.describe()}"
                )
            else:
                expect_budget_refused(answer, where)
        for instance in router:
            expect_allowed(ms.evict(pod(instance)), f"{what}: evicting router {instance} (unprotected)")
        timeline = watch.snapshot_timeline()
        expect_instance_floor(timeline, layout, "prefill", 2, what)
        expect_instance_floor(timeline, layout, "decode", 1, what)
