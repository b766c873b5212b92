"""Expectations: a ModelServing is not planned again until the cache has seen the controller's writes.

The first half drives :class:`Expectations` with an injected clock; the second drives one
:class:`Controller` reconcile with a fake API (no cluster) to check that the controller lowers an
expectation for every write that failed, since no informer event will ever arrive for it.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from kthena_ref.runtime.controller import Controller, ControllerConfig, ReconcileError
from kthena_ref.runtime.expectations import TTL, Expectations

from .builders import MS, failed, fresh_pods, ready


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_nothing_expected_is_satisfied() -> None:
    assert Expectations(clock=Clock()).satisfied("ns/ms")


def test_creates_and_deletes_must_all_be_observed() -> None:
    exp = Expectations(clock=Clock())
    exp.expect("ns/ms", creates=["p0", "p1"], deletes=["u9"])
    assert not exp.satisfied("ns/ms")
    exp.created("ns/ms", "p0")
    exp.deleted("ns/ms", "u9")
    assert not exp.satisfied("ns/ms"), "p1 not seen yet"
    exp.created("ns/ms", "p1")
    assert exp.satisfied("ns/ms")
    assert exp.satisfied("ns/ms"), "and stays satisfied"


def test_observations_for_other_keys_names_or_uids_do_not_count() -> None:
    exp = Expectations(clock=Clock())
    exp.expect("ns/a", creates=["p0"], deletes=["u1"])
    exp.created("ns/b", "p0")
    exp.deleted("ns/b", "u1")
    exp.created("ns/a", "p-other")
    exp.deleted("ns/a", "u-other")
    assert not exp.satisfied("ns/a")
    assert exp.satisfied("ns/b")


def test_observing_an_unexpected_key_is_a_no_op() -> None:
    exp = Expectations(clock=Clock())
    exp.created("ns/x", "p")
    exp.deleted("ns/x", "u")
    assert exp.satisfied("ns/x") and not exp.expects_deletion("ns/x", "u")


def test_expects_deletion_until_observed() -> None:
    exp = Expectations(clock=Clock())
    exp.expect("ns/ms", deletes=["u1", "u2"])
    assert exp.expects_deletion("ns/ms", "u1") and exp.expects_deletion("ns/ms", "u2")
    assert not exp.expects_deletion("ns/ms", "u3")
    exp.deleted("ns/ms", "u1")
    assert not exp.expects_deletion("ns/ms", "u1")
    assert not exp.satisfied("ns/ms")


def test_an_empty_expectation_is_satisfied_at_once() -> None:
    exp = Expectations(clock=Clock())
    exp.expect("ns/ms")
    assert exp.satisfied("ns/ms")


def test_unobserved_expectations_expire_after_the_ttl() -> None:
    clock = Clock()
    exp = Expectations(clock=clock)
    exp.expect("ns/ms", creates=["p0"])
    clock.now += TTL
    assert not exp.satisfied("ns/ms"), "not before the TTL has passed"
    clock.now += 0.001
    assert exp.satisfied("ns/ms")
    exp.created("ns/ms", "p0")  # a late observation of an expired expectation changes nothing
    assert exp.satisfied("ns/ms")


def test_the_default_ttl_is_five_minutes_as_in_kube_controller_manager() -> None:
    assert TTL == 300.0


def test_expecting_more_extends_the_ttl_and_merges() -> None:
    clock = Clock()
    exp = Expectations(clock=clock, ttl=10)
    exp.expect("ns/ms", creates=["p0"])
    clock.now += 8
    exp.expect("ns/ms", creates=["p1"], deletes=["u1"])
    clock.now += 8  # 16 s after the first expectation, 8 s after the second
    assert not exp.satisfied("ns/ms")
    exp.created("ns/ms", "p1")
    exp.deleted("ns/ms", "u1")
    assert not exp.satisfied("ns/ms"), "p0 is still expected: the expectations merged"
    exp.created("ns/ms", "p0")
    assert exp.satisfied("ns/ms")


def test_forget_drops_what_was_expected() -> None:
    exp = Expectations(clock=Clock())
    exp.expect("ns/ms", creates=["p0"], deletes=["u1"])
    exp.forget("ns/ms")
    assert exp.satisfied("ns/ms") and not exp.expects_deletion("ns/ms", "u1")
    exp.forget("ns/never")


# -- the controller lowers expectations for writes that failed -------------------------------------

KEY = "default/ms"


class Created:
    """A 201 answer, decoded or not (the executor may ask for ``_preload_content=False``)."""

    status = 201
    reason = "Created"

    def __init__(self, body: dict[str, Any]) -> None:
        self.body = body

    async def read(self) -> bytes:
        return json.dumps(self.body).encode()

    def release(self) -> None:
        return None


class FakeCore:
    def __init__(self, *, create_status: int | None = None, delete_status: int | None = None) -> None:
        self.create_status = create_status
        self.delete_status = delete_status
        self.created: list[str] = []
        self.deletes: list[str] = []

    async def create_namespaced_pod(self, ns: str, body: dict[str, Any], **_: Any) -> Created:
        if self.create_status is not None:
            raise ApiException(status=self.create_status, reason="refused")
        self.created.append(body["metadata"]["name"])
        return Created(body)

    async def delete_namespaced_pod(self, name: str, ns: str, **_: Any) -> None:
        self.deletes.append(name)
        if self.delete_status is not None:
            raise ApiException(status=self.delete_status, reason="refused")

    async def create_namespaced_event(self, ns: str, body: dict[str, Any], **_: Any) -> None:
        return None


class FakeApps:
    async def create_namespaced_controller_revision(self, ns: str, body: dict[str, Any], **_: Any) -> None:
        return None

    async def delete_namespaced_controller_revision(self, name: str, ns: str, **_: Any) -> None:
        return None


class FakeCustom:
    async def patch_namespaced_custom_object_status(self, *args: Any, **kwargs: Any) -> None:
        return None


def run(scenario: Callable[[Controller], Awaitable[None]]) -> None:
    async def main() -> None:
        api = client.ApiClient()  # never used: every call goes to the fakes below
        try:
            controller = Controller(api, ControllerConfig(namespace="default"))
            controller.executor.apps = FakeApps()
            controller.executor.custom = FakeCustom()
            await asyncio.wait_for(scenario(controller), timeout=10)
        finally:
            await api.close()

    asyncio.run(main())


def _load(controller: Controller, ms: Any, pods: list[dict[str, Any]]) -> None:
    """Put ``ms`` and ``pods`` in the controller's caches as the informers would."""
    raw = ms.to_api()
    raw["metadata"]["namespace"] = "default"
    controller.ms_informer.cache[KEY] = raw
    for pod in pods:
        controller.pod_informer.cache[f"default/{pod['metadata']['name']}"] = pod
        controller._on_pod("ADDED", pod, None)


def test_a_failed_create_lowers_its_expectation_so_the_next_reconcile_retries() -> None:
    ms = MS("ms").replicas(1).role("r", worker_replicas=1).build()

    async def scenario(controller: Controller) -> None:
        core = FakeCore(create_status=500)
        controller.executor.core = core
        _load(controller, ms, [])
        with pytest.raises(ReconcileError):
            await controller.reconcile(KEY)
        assert controller.expectations.satisfied(KEY), "no event will come for a Pod never created"
        core.create_status = None
        await controller.reconcile(KEY)
        assert sorted(core.created) == ["ms-0-r-0-0", "ms-0-r-0-1"]

    run(scenario)


@pytest.mark.parametrize("status", [500, 429, 403])
def test_a_failed_delete_lowers_its_expectation_so_the_next_reconcile_retries(status: int) -> None:
    ms = MS("ms").replicas(1).role("r", worker_replicas=1).recovery("RoleRecreate").build()
    an_hour_ago = dt.datetime.now(dt.UTC) - dt.timedelta(hours=1)
    entry, worker = fresh_pods(ms)
    pods = [ready(entry, an_hour_ago), failed(worker, an_hour_ago)]

    async def scenario(controller: Controller) -> None:
        core = FakeCore(delete_status=status)
        controller.executor.core = core
        _load(controller, ms, pods)
        with pytest.raises(ReconcileError):
            await controller.reconcile(KEY)
        assert core.deletes == ["ms-0-r-0-0"], "RoleRecreate deletes the sibling first, the failed Pod last"
        core.delete_status = None
        await controller.reconcile(KEY)  # the queue's backoff retry
        assert core.deletes == ["ms-0-r-0-0", "ms-0-r-0-0"], "the retry after a failed delete must not wait for the TTL"

    run(scenario)


def test_a_delete_that_finds_the_pod_gone_or_replaced_is_not_retried_forever() -> None:
    """404 and 409 (precondition: another UID) count as done; the informer brings the DELETED."""
    ms = MS("ms").replicas(1).role("r", worker_replicas=1).recovery("RoleRecreate").build()
    an_hour_ago = dt.datetime.now(dt.UTC) - dt.timedelta(hours=1)
    entry, worker = fresh_pods(ms)
    pods = [ready(entry, an_hour_ago), failed(worker, an_hour_ago)]

    async def scenario(controller: Controller) -> None:
        core = FakeCore(delete_status=404)
        controller.executor.core = core
        _load(controller, ms, pods)
        assert await controller.reconcile(KEY) is None
        assert not controller.expectations.satisfied(KEY)
        controller._on_pod("DELETED", pods[0], pods[0])  # the rebuild deletes the sibling first
        assert controller.expectations.satisfied(KEY)
        assert controller.lost.get(KEY, set()) == set(), "our own deletions are not lost Pods"

    run(scenario)
