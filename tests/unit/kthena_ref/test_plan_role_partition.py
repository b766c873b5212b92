"""RoleRollingUpdate: a Role instance its partition protects comes back, when deleted during or after
the Role's update, at the revision it had (status.currentRevision), and status.currentRevision does
not move because of it; as a partition-protected ServingGroup does."""

from __future__ import annotations

from typing import Any

import pytest

from kthena_ref import faults
from kthena_ref.api.types import ModelServing

from .builders import MS, World, edit_spec, revision, world


def _ms(a: dict[str, Any], b: dict[str, Any] | None = None, a_replicas: int = 2) -> ModelServing:
    ms = MS("ms").role("a", a_replicas, 1, image="a:v1", worker_image="a:v1").role("b", 1, 0, image="b:v1")
    ms.rollout(type="RoleRollingUpdate")

    def settings(spec: dict[str, Any]) -> None:
        spec["template"]["roles"][0].update(a)
        spec["template"]["roles"][1].update(b or {})

    return edit_spec(ms.build(), settings)


def _image(role: int, image: str) -> Any:
    def change(spec: dict[str, Any]) -> None:
        target = spec["template"]["roles"][role]
        target["entryTemplate"]["spec"]["containers"][0]["image"] = image
        if "workerTemplate" in target:
            target["workerTemplate"]["spec"]["containers"][0]["image"] = image

    return change


def _images(w: World, instance: str) -> set[str]:
    """Images of the Pods of ``instance`` (``a-0``) in group 0."""
    return {p["spec"]["containers"][0]["image"] for n, p in w.pods.items() if n.startswith(f"ms-0-{instance}-")}


def _drop(w: World, instance: str) -> frozenset[str]:
    """Delete every Pod of ``instance`` behind the controller's back; their names."""
    gone = frozenset(n for n in w.pods if n.startswith(f"ms-0-{instance}-"))
    for name in gone:
        del w.pods[name]
    return gone


def _converge_watching(w: World, first_lost: frozenset[str] = frozenset()) -> list[str]:
    """Step to a fixed point; every status.currentRevision reported on the way."""
    seen = [w.step(first_lost).status["currentRevision"]]
    for _ in range(30):
        p = w.step()
        seen.append(p.status["currentRevision"])
        if not (p.create_pods or p.delete_pods or p.patch_pods):
            return seen
    raise AssertionError("no convergence")


@pytest.mark.parametrize(
    ("how", "lost"),
    [
        pytest.param("whole-instance", False, id="whole-instance-gone"),
        pytest.param("one-pod", True, id="one-pod-lost-role-recreate"),
        pytest.param("one-pod", False, id="one-pod-gone-while-down"),
    ],
)
def test_a_protected_instance_deleted_after_the_update_comes_back_at_its_revision(how: str, lost: bool) -> None:
    w = world(_ms({"partition": 1}))
    old = w.plan().status["currentRevision"]
    w.ms = edit_spec(w.ms, _image(0, "a:v2"))
    w.converge()
    new = w.plan().status["updateRevision"]
    assert (_images(w, "a-0"), _images(w, "a-1")) == ({"a:v1"}, {"a:v2"}), "the partition protected a-0"
    assert w.plan().status["currentRevision"] == old != new
    gone = _drop(w, "a-0") if how == "whole-instance" else frozenset({"ms-0-a-0-1"})
    if how == "one-pod":
        del w.pods["ms-0-a-0-1"]
    currents = _converge_watching(w, gone if lost else frozenset())
    assert _images(w, "a-0") == {"a:v1"}, "rebuilt from the revision it had"
    assert {revision(p) for n, p in w.pods.items() if n.startswith("ms-0-a-0-")} == {old}
    assert len([n for n in w.pods if n.startswith("ms-0-a-0-")]) == 2
    assert set(currents) == {old}, "status.currentRevision never moved"
    assert w.plan().status["updatedReplicas"] == 0


def test_a_protected_instance_deleted_during_the_update_comes_back_at_its_revision() -> None:
    w = world(_ms({"partition": 1, "maxUnavailable": 1}, a_replicas=3))
    old = w.plan().status["currentRevision"]
    w.ms = edit_spec(w.ms, _image(0, "a:v2"))
    p = w.step()
    assert {"-".join(d.name.split("-")[2:4]) for d in p.delete_pods} == {"a-2"}, "the update has started"
    _drop(w, "a-0")
    currents = _converge_watching(w)
    assert [_images(w, f"a-{i}") for i in range(3)] == [{"a:v1"}, {"a:v2"}, {"a:v2"}]
    assert set(currents) == {old}


def test_an_unchanged_roles_protected_instance_comes_back_at_the_update_revision() -> None:
    w = world(_ms({}, {"partition": 1}))
    w.ms = edit_spec(w.ms, _image(0, "a:v2"))
    w.converge()
    new = w.plan().status["updateRevision"]
    assert w.plan().status["currentRevision"] == new
    _drop(w, "b-0")
    currents = _converge_watching(w)
    assert {revision(p) for p in w.pods.values()} == {new}
    assert set(currents) == {new}


def test_without_a_partition_a_deleted_instance_comes_back_updated() -> None:
    w = world(_ms({}))
    w.ms = edit_spec(w.ms, _image(0, "a:v2"))
    w.converge()
    _drop(w, "a-0")
    w.converge()
    assert _images(w, "a-0") == {"a:v2"}


def test_the_fault_brings_it_back_at_the_update_revision() -> None:
    w = world(_ms({"partition": 1}))
    w.ms = edit_spec(w.ms, _image(0, "a:v2"))
    w.converge()
    _drop(w, "a-0")
    with faults.injected("role-partition-refilled-at-update"):
        w.converge()
    assert _images(w, "a-0") == {"a:v2"}


def test_current_revision_stays_while_a_protected_instance_runs_the_old_template() -> None:
    """Most Pods of the group are updated (Role b relabelled, a-1 recreated), a-0 is not: the
    group is not updated, so currentRevision stays and updatedReplicas counts no group."""
    w = world(_ms({"partition": 1}, a_replicas=2))
    old = w.plan().status["currentRevision"]
    w.ms = edit_spec(w.ms, _image(0, "a:v2"))
    w.converge()
    status = w.plan().status
    assert (status["currentRevision"], status["updatedReplicas"]) == (old, 0)
    w.ms = edit_spec(w.ms, lambda spec: spec["template"]["roles"][0].update(partition=0))
    w.converge()
    status = w.plan().status
    assert status["currentRevision"] == status["updateRevision"] != old
    assert status["updatedReplicas"] == 1
