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
    evict_when_allowed,
    expect_allowed,
    expect_budget_refused,
    expect_instance_floor,
    instances_by_index,
    pod_of,
    recover,
    start,
    with_strategy,
)

NAME = "roles"


@behaviour(
    "eviction/role/role-min-available",
    "With protectionLevel Role, an Eviction that would leave fewer ready instances of a Role than its "
    "roleMinAvailable (a number, or a percentage of its instances) MUST be refused, evicting a worker MUST count "
    "as disrupting its whole Role instance, Evictions within the budget MUST be allowed, and a Role absent from "
    "roleMinAvailable MUST NOT be protected.",
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

        expect_allowed(ms.evict(pod(prefill[0], "worker")), f"{what}: evicting the worker of prefill {prefill[0]}")
        expect_budget_refused(ms.evict(pod(prefill[1])), f"{what}: evicting the entry of prefill {prefill[1]} "
                              "with 2 prefill instances ready")  # fmt: skip
        expect_budget_refused(ms.evict(pod(prefill[2], "worker")), f"{what}: evicting the worker of prefill "
                              f"{prefill[2]} with 2 prefill instances ready")  # fmt: skip
        expect_allowed(ms.evict(pod(decode[0])), f"{what}: evicting decode {decode[0]} (2 ready, 1 after)")
        expect_budget_refused(ms.evict(pod(decode[1])), f"{what}: evicting decode {decode[1]} with 1 ready")
        for instance in router:
            expect_allowed(ms.evict(pod(instance)), f"{what}: evicting router {instance} (unprotected)")
        timeline = watch.snapshot_timeline()
        expect_instance_floor(timeline, layout, "prefill", 2, what)
        expect_instance_floor(timeline, layout, "decode", 1, what)

        def all_ready(snap: Any) -> bool:
            return all(len(snap.ready_instances(layout, r)) == n for r, (n, _) in layout.roles.items())

        recover(watch, binder, all_ready, f"{what}: every Role instance ready again")
        evict_when_allowed(ms, pod_of(watch.latest(), prefill[1][0], "entry", prefill[1][1]).name,
                           f"{what}, once every prefill instance is ready again")  # fmt: skip
