"""The ResourceSlice planner (pure, table-driven) and the publisher loop against a fake API."""

from __future__ import annotations

import copy
import threading
from dataclasses import dataclass, field
from typing import Any

import pytest

from fake_devices.drivers import GPU, NPU, DriverShape
from fake_devices.publisher import ApiError, Plan, Publisher, desired_slice, plan, slice_name

Obj = dict[str, Any]
LABEL = GPU.count_label


def node(name: str, count: str | None = "2", *, uid: str | None = None, deleting: bool = False, **labels: str) -> Obj:
    meta: Obj = {"name": name, "uid": uid or f"uid-{name}", "labels": dict(labels)}
    if count is not None:
        meta["labels"][LABEL] = count
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return {"metadata": meta}


def published(
    name: str, count: int = 2, generation: int = 1, *, shape: DriverShape = GPU, rv: str = "7", **kw: Any
) -> Obj:
    """A slice as the API returns it (with server-set fields) for ``node(name, count)``."""
    s = desired_slice(shape, node(name, str(count), **kw), count, generation)
    s["metadata"].update(resourceVersion=rv, uid=f"slice-uid-{name}", creationTimestamp="2026-01-01T00:00:00Z")
    return s


def summary(p: Plan) -> tuple[list[tuple[str, int, int]], list[tuple[str, int, int]], list[str], list[str]]:
    """(creates, updates, deletes, problem nodes): creates/updates as (name, devices, generation)."""

    def short(s: Obj) -> tuple[str, int, int]:
        return (s["metadata"]["name"], len(s["spec"]["devices"]), s["spec"]["pool"]["generation"])

    return (
        [short(s) for s in p.creates],
        [short(u.body) for u in p.updates],
        p.deletes,
        [n for n, _ in p.problems],
    )


A = slice_name("a", GPU.driver)
B = slice_name("b", GPU.driver)


@pytest.mark.parametrize(
    ("nodes", "slices", "creates", "updates", "deletes", "problems"),
    [
        pytest.param([], [], [], [], [], [], id="nothing"),
        pytest.param([node("a")], [], [(A, 2, 1)], [], [], [], id="add-node"),
        pytest.param([node("a"), node("b", "3")], [published("a")], [(B, 3, 1)], [], [], [], id="add-second-node"),
        pytest.param([node("a")], [published("a")], [], [], [], [], id="in-sync"),
        pytest.param(
            [node("a", "4")], [published("a", 2, 5)], [], [(A, 4, 6)], [], [], id="label-grows-bumps-generation"
        ),
        pytest.param([node("a", "1")], [published("a", 2, 1)], [], [(A, 1, 2)], [], [], id="label-shrinks"),
        pytest.param([], [published("a")], [], [], [A], [], id="node-removed"),
        pytest.param([node("a", None)], [published("a")], [], [], [A], [], id="label-removed"),
        pytest.param([node("a", "0")], [published("a")], [], [], [A], [], id="label-zero"),
        pytest.param([node("a", deleting=True)], [published("a")], [], [], [A], [], id="node-being-deleted"),
        pytest.param([node("a", "four")], [published("a")], [], [], [A], ["a"], id="bad-label-unpublishes"),
        pytest.param([node("a", "-1"), node("b")], [], [(B, 2, 1)], [], [], ["a"], id="negative-label-skipped"),
        pytest.param([node("a", "100000")], [], [], [], [], ["a"], id="huge-label-skipped"),
        pytest.param(
            [node("a"), node("b")], [published("b")], [(A, 2, 1)], [], [], [], id="slice-deleted-behind-our-back"
        ),
        pytest.param(
            [node("a", uid="new-uid")],
            [published("a", uid="old-uid")],
            [],
            [(A, 2, 2)],
            [],
            [],
            id="node-recreated-new-owner",
        ),
        pytest.param(
            [node("a")],
            [
                published("a", generation=3),
                {**published("a", generation=4), "metadata": {"name": "a-stray", "resourceVersion": "1"}},
            ],
            [],
            [(A, 2, 5)],
            ["a-stray"],
            [],
            id="duplicate-slice-in-pool",
        ),
        pytest.param(
            [node("a")],
            [{**published("a", generation=2), "metadata": {"name": "a-other", "resourceVersion": "1"}}],
            [(A, 2, 3)],
            [],
            ["a-other"],
            [],
            id="only-a-foreign-named-slice",
        ),
        pytest.param(
            [node("a")], [published("a", shape=NPU)], [(A, 2, 1)], [], [], [], id="other-drivers-slices-ignored"
        ),
    ],
)
def test_plan(
    nodes: list[Obj],
    slices: list[Obj],
    creates: list[tuple[str, int, int]],
    updates: list[tuple[str, int, int]],
    deletes: list[str],
    problems: list[str],
) -> None:
    assert summary(plan(GPU, nodes, slices)) == (creates, updates, deletes, problems)


def test_desired_slice_is_one_pool_per_node() -> None:
    s = desired_slice(NPU, node("npu-0", "2"), 2, 1)
    assert s["metadata"]["name"] == "npu-0-npu.fake.kthena-conformance.io"
    assert s["spec"]["driver"] == "npu.fake.kthena-conformance.io"
    assert s["spec"]["nodeName"] == "npu-0"
    assert s["spec"]["pool"] == {"name": "npu-0", "generation": 1, "resourceSliceCount": 1}
    assert s["metadata"]["ownerReferences"] == [
        {"apiVersion": "v1", "kind": "Node", "name": "npu-0", "uid": "uid-npu-0", "controller": True}
    ]


def test_update_carries_the_resource_version() -> None:
    (update,) = plan(GPU, [node("a", "3")], [published("a", rv="42")]).updates
    assert update.body["metadata"]["resourceVersion"] == "42"


def test_server_defaults_do_not_cause_updates() -> None:
    s = published("a")
    s["spec"]["devices"][0]["capacity"]["memory"]["requestPolicy"] = None  # fields the publisher does not own
    s["metadata"]["labels"]["someone-else"] = "x"
    s["metadata"]["managedFields"] = [{"manager": "fake-devices"}]
    assert plan(GPU, [node("a")], [s]).empty


def test_long_node_names_give_valid_slice_names() -> None:
    name = slice_name("n" * 253, GPU.driver)
    assert len(name) <= 253 and name.endswith(GPU.driver)
    assert name == slice_name("n" * 253, GPU.driver)
    assert name != slice_name("n" * 252 + "m", GPU.driver)


# -- the loop, against a fake API ---------------------------------------------------------------


@dataclass
class FakeApi:
    """An in-memory API: nodes and slices; optional failures to inject."""

    nodes: list[Obj] = field(default_factory=list)
    slices: dict[str, Obj] = field(default_factory=dict)
    fail_lists: int = 0
    conflict_on_create: bool = False
    calls: list[str] = field(default_factory=list)
    rv: int = 0

    def list_nodes(self) -> list[Obj]:
        if self.fail_lists:
            self.fail_lists -= 1
            raise ApiError(503, "Service Unavailable")
        return copy.deepcopy(self.nodes)

    def list_slices(self) -> list[Obj]:
        return copy.deepcopy(list(self.slices.values()))

    def create(self, body: Obj) -> None:
        self.calls.append(f"create {body['metadata']['name']}")
        if self.conflict_on_create:
            self.conflict_on_create = False
            raise ApiError(409, "AlreadyExists")
        self.rv += 1
        self.slices[body["metadata"]["name"]] = {
            **copy.deepcopy(body),
            "metadata": {**body["metadata"], "resourceVersion": str(self.rv)},
        }

    def replace(self, name: str, body: Obj) -> None:
        self.calls.append(f"replace {name}")
        if self.slices[name]["metadata"]["resourceVersion"] != body["metadata"]["resourceVersion"]:
            raise ApiError(409, "Conflict")
        self.rv += 1
        self.slices[name] = {**copy.deepcopy(body), "metadata": {**body["metadata"], "resourceVersion": str(self.rv)}}

    def delete(self, name: str) -> None:
        self.calls.append(f"delete {name}")
        if name not in self.slices:
            raise ApiError(404, "NotFound")
        del self.slices[name]

    def watches(self) -> list[tuple[str, Any, dict[str, Any]]]:
        return []


def publisher(api: FakeApi) -> Publisher:
    return Publisher(GPU, api, resync=0.01)  # type: ignore[arg-type]


def test_reconcile_converges_and_then_does_nothing() -> None:
    api = FakeApi(nodes=[node("a", "2"), node("b", "1"), node("c", "bogus")])
    pub = publisher(api)
    pub.reconcile_once()
    assert sorted(api.slices) == [A, B]
    api.calls.clear()
    assert pub.reconcile_once().empty and api.calls == []


def test_reconcile_recovers_a_deleted_slice_and_follows_label_changes() -> None:
    api = FakeApi(nodes=[node("a", "2")])
    pub = publisher(api)
    pub.reconcile_once()
    del api.slices[A]  # deleted behind the publisher's back
    pub.reconcile_once()
    assert len(api.slices[A]["spec"]["devices"]) == 2
    api.nodes = [node("a", "3")]
    pub.reconcile_once()
    assert len(api.slices[A]["spec"]["devices"]) == 3
    assert api.slices[A]["spec"]["pool"]["generation"] == 2
    api.nodes = []
    pub.reconcile_once()
    assert api.slices == {}


def test_conflicts_and_vanished_slices_mean_look_again() -> None:
    api = FakeApi(nodes=[node("a")], conflict_on_create=True)
    pub = publisher(api)
    pub.reconcile_once()  # 409 on create: no exception, marked dirty
    assert pub.dirty.is_set() and api.slices == {}
    pub.reconcile_once()
    assert list(api.slices) == [A]


def test_bad_label_is_logged_once(caplog: pytest.LogCaptureFixture) -> None:
    api = FakeApi(nodes=[node("a", "lots")])
    pub = publisher(api)
    for _ in range(3):
        pub.reconcile_once()
    warnings = [r for r in caplog.records if "lots" in r.getMessage()]
    assert len(warnings) == 1 and "publishing no devices" in warnings[0].getMessage()


def test_run_survives_api_errors_and_stops_on_request() -> None:
    api = FakeApi(nodes=[node("a")], fail_lists=2)
    pub = publisher(api)
    stop = threading.Event()
    thread = threading.Thread(target=pub.run, args=(stop,))
    thread.start()
    try:
        for _ in range(200):
            if A in api.slices:
                break
            threading.Event().wait(0.05)
        assert A in api.slices, "the publisher never recovered from the failing lists"
    finally:
        stop.set()
        thread.join(timeout=5)
    assert not thread.is_alive()
