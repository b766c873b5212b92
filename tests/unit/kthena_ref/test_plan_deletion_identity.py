"""plan(): deletion identity - retries keep the original UIDs, a replacement that reused an
instance's identity is reported (DeletionIdentityChanged), kept with its Services, not adopted,
and the deletion stays pending until it is gone (plugin-framework-and-headless-service.txt)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from kthena_ref.api.types import ModelServing
from kthena_ref.planner.plan import Observed, PendingDeletion, Plan, plan

from .builders import MS, T0, deleting, edit_spec, failed, fresh_pods, names, ready

REASON = "DeletionIdentityChanged"


def two_groups(replicas: int = 1, recovery: str | None = None) -> tuple[ModelServing, list[dict[str, Any]]]:
    """A ModelServing at ``replicas`` whose cluster still runs 2 ready groups (entry + 1 worker each)."""
    base = MS().replicas(2).role("r", worker_replicas=1)
    pods = [ready(p) for p in fresh_pods(base.build())]
    ms = base.replicas(replicas)
    if recovery:
        ms = ms.recovery(recovery)
    return ms.build(), pods


def replacement(pod: dict[str, Any], uid: str = "uid-replacement") -> dict[str, Any]:
    """A Pod somebody else created with the name and labels of ``pod`` (a new UID)."""
    out = copy.deepcopy(pod)
    out["metadata"]["uid"] = uid
    out["metadata"].pop("deletionTimestamp", None)
    return ready(out)


def by_name(pods: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {p["metadata"]["name"]: p for p in pods}


def reasons(p: Plan) -> list[str]:
    return [e.reason for e in p.events]


def condition(p: Plan, kind: str) -> dict[str, Any] | None:
    return next((c for c in p.status["conditions"] if c["type"] == kind), None)


def test_a_scale_down_remembers_the_uids_it_decided_to_delete() -> None:
    ms, pods = two_groups()
    result = plan(Observed(ms=ms, pods=pods, now=T0))
    assert names_of(result) == ["ms-1-r-0-0", "ms-1-r-0-1"]
    assert result.pending == {
        (1, "r", 0): PendingDeletion(
            frozenset({"uid-ms-1-r-0-0", "uid-ms-1-r-0-1"}), frozenset({"uid-ms-1-r-0-0", "uid-ms-1-r-0-1"})
        )
    }


def names_of(p: Plan) -> list[str]:
    return sorted(d.name for d in p.delete_pods)


@pytest.mark.parametrize(
    ("entry_state", "want_pending"),
    [
        pytest.param("terminating", True, id="original-entry-still-terminating"),
        pytest.param("gone", True, id="originals-gone-replacement-stays"),
    ],
)
def test_a_replacement_is_reported_kept_and_not_adopted(entry_state: str, want_pending: bool) -> None:
    ms, pods = two_groups()
    first = plan(Observed(ms=ms, pods=pods, now=T0))
    pods_now = by_name(pods)
    worker = replacement(pods_now.pop("ms-1-r-0-1"))
    if entry_state == "terminating":
        pods_now["ms-1-r-0-0"] = deleting(pods_now["ms-1-r-0-0"])
    else:
        del pods_now["ms-1-r-0-0"]
    result = plan(Observed(ms=ms, pods=[*pods_now.values(), worker], pending=first.pending, now=T0))
    assert result.delete_pods == [], "the replacement is never deleted"
    assert result.create_pods == []
    assert REASON in reasons(result)
    cond = condition(result, REASON)
    assert cond is not None and cond["status"] == "True" and "ms-1-r-0-1" in cond["message"]
    assert ((1, "r", 0) in result.pending) is want_pending
    assert result.status["replicas"] == (2 if entry_state == "terminating" else 1), "the replacement is not counted"


def test_the_deletion_finishes_once_the_replacement_is_gone() -> None:
    ms, pods = two_groups()
    first = plan(Observed(ms=ms, pods=pods, now=T0))
    group0 = [p for p in pods if p["metadata"]["name"].startswith("ms-0-")]
    result = plan(Observed(ms=ms, pods=group0, pending=first.pending, now=T0))
    assert result.pending == {}
    assert condition(result, REASON) is None and REASON not in reasons(result)


def test_a_scale_up_does_not_build_around_a_replacement() -> None:
    ms, pods = two_groups()
    first = plan(Observed(ms=ms, pods=pods, now=T0))
    group0 = [p for p in pods if p["metadata"]["name"].startswith("ms-0-")]
    worker = replacement(by_name(pods)["ms-1-r-0-1"])
    scaled = MS().replicas(2).role("r", worker_replicas=1).build()
    held = plan(Observed(ms=scaled, pods=[*group0, worker], pending=first.pending, now=T0))
    assert held.create_pods == [] and held.delete_pods == []
    freed = plan(Observed(ms=scaled, pods=group0, pending=held.pending, now=T0))
    assert names(freed.create_pods) == ["ms-1-r-0-0", "ms-1-r-0-1"]


def test_retries_delete_only_the_original_uid() -> None:
    ms, pods = two_groups()
    first = plan(Observed(ms=ms, pods=pods, now=T0))
    # The first delete of the worker failed: it is still there with its original UID.
    retry = plan(Observed(ms=ms, pods=pods, pending=first.pending, now=T0))
    assert {(d.name, d.uid) for d in retry.delete_pods} == {
        ("ms-1-r-0-0", "uid-ms-1-r-0-0"),
        ("ms-1-r-0-1", "uid-ms-1-r-0-1"),
    }


def test_a_recovery_rebuild_keeps_its_identity_across_reconciles() -> None:
    ms, pods = two_groups(replicas=2, recovery="RoleRecreate")
    current = by_name(pods)
    current["ms-0-r-0-0"] = failed(current["ms-0-r-0-0"])
    first = plan(Observed(ms=ms, pods=list(current.values()), now=T0))
    assert names_of(first) == ["ms-0-r-0-1"], "the failed pod goes last"
    # the worker has gone; a replacement worker appears before the failed entry is deleted
    del current["ms-0-r-0-1"]
    worker = replacement(by_name(pods)["ms-0-r-0-1"])
    second = plan(Observed(ms=ms, pods=[*current.values(), worker], pending=first.pending, now=T0))
    assert REASON in reasons(second)
    assert "ms-0-r-0-1" not in names_of(second)
    assert all(p["metadata"]["name"] != "ms-0-r-0-1" for p in second.create_pods)


def test_a_fresh_controller_seeds_pending_deletions_from_terminating_pods() -> None:
    ms, pods = two_groups()
    current = by_name(pods)
    current["ms-1-r-0-0"] = deleting(current["ms-1-r-0-0"])
    result = plan(Observed(ms=ms, pods=list(current.values()), pending=None, now=T0))
    intent = result.pending[(1, "r", 0)]
    assert intent.known == {"uid-ms-1-r-0-0", "uid-ms-1-r-0-1"}
    assert "uid-ms-1-r-0-0" in intent.targets


def headless(replicas: int) -> ModelServing:
    def with_plugin(spec: dict[str, Any]) -> None:
        spec["plugins"] = [{"name": "headless-service"}]

    return edit_spec(MS().replicas(replicas).role("r", worker_replicas=1).build(), with_plugin)


def services_for(ms: ModelServing, pods: list[dict[str, Any]]) -> list[dict[str, Any]]:
    created = plan(Observed(ms=ms, pods=pods, services=[], now=T0)).create_services
    return [dict(s, metadata={**s["metadata"], "uid": f"uid-{s['metadata']['name']}"}) for s in created]


def test_a_replacement_keeps_the_instance_services() -> None:
    two = headless(2)
    pods = [ready(p) for p in fresh_pods(two, services=[])]
    services = services_for(two, pods)
    one = headless(1)
    first = plan(Observed(ms=one, pods=pods, services=services, now=T0))
    assert {s for s, _ in first.delete_services} == {"ms-1-r-0", "ms-1-r-0-0"}, "unwanted Services go normally"
    group0 = [p for p in pods if p["metadata"]["name"].startswith("ms-0-")]
    worker = replacement(by_name(pods)["ms-1-r-0-1"])
    held = plan(Observed(ms=one, pods=[*group0, worker], services=services, pending=first.pending, now=T0))
    assert held.delete_services == [], "the replacement's networking is preserved"


def test_a_recreated_service_is_not_deleted_under_the_old_deletion() -> None:
    two = headless(2)
    pods = [ready(p) for p in fresh_pods(two, services=[])]
    services = services_for(two, pods)
    one = headless(1)
    group0 = [p for p in pods if p["metadata"]["name"].startswith("ms-0-")]
    first = plan(Observed(ms=one, pods=group0, services=services, now=T0))
    assert ("ms-1-r-0", "uid-ms-1-r-0") in first.delete_services
    recreated = [
        dict(s, metadata={**s["metadata"], "uid": "uid-somebody-else"}) if s["metadata"]["name"] == "ms-1-r-0" else s
        for s in services
    ]
    again = plan(
        Observed(
            ms=one, pods=group0, services=recreated, pending=first.pending,
            pending_services=first.pending_services, now=T0,
        )
    )  # fmt: skip
    assert ("ms-1-r-0", "uid-somebody-else") not in again.delete_services
    assert REASON in reasons(again)
