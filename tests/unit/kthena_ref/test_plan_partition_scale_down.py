"""A scale-down under a partition removes the units outside the partition first, for ServingGroups
and for a Role's instances under RoleRollingUpdate (issue 31, section 5: upstream's e2e
``TestModelServingRolePartitionScaleDown``). Partition "protects the first N existing replicas in
ascending ordinal order from updates": after the scale-down the first N kept units are the
protected ones, so they must be the ones that were protected (still at the current revision), never
an updated unit that a lower pod-deletion-cost let survive."""

from __future__ import annotations

from typing import Any

import pytest

from kthena_ref import faults
from kthena_ref.api.types import ModelServing
from kthena_ref.planner.scaledown import Candidate, choose, instance_ids

from .builders import MS, World, edit_spec, with_cost, world


@pytest.mark.parametrize(
    ("units", "replicas", "partition", "kept", "victims"),
    [
        pytest.param(
            [(0, True, 0, "v1"), (1, True, 0, "v1"), (2, True, 9, "v2")], 2, 2, [0, 1], [2], id="updated-first"
        ),
        pytest.param(
            [(0, True, 0, "v1"), (1, True, 0, "v1"), (2, True, 9, "v2")], 2, 0, [0, 2], [1], id="no-partition"
        ),
        pytest.param(
            [(0, True, 0, "v1"), (1, True, 0, "v1"), (2, True, 9, "v1")], 2, 2, [0, 2], [1], id="one-template"
        ),
        pytest.param(
            [(0, True, 0, "v1"), (1, True, 0, "v1"), (2, True, 0, "v1"), (3, True, 9, "v2"), (4, True, 9, "v2")],
            3, 3, [0, 1, 2], [4, 3], id="upstream-e2e-5-to-3",
        ),
        pytest.param(
            [(0, True, 5, "v1"), (1, True, 0, "v1"), (2, True, 0, "v1"), (3, True, 9, "v2")], 2, 3, [0, 1], [3, 2],
            id="below-partition-then-plain-order",
        ),
        pytest.param(
            [(0, False, 0, "v1"), (1, True, 0, "v1"), (2, True, 0, "v2")], 2, 2, [0, 1], [2],
            id="updated-before-not-ready-protected",
        ),
        pytest.param(
            [(0, True, 0, "v1"), (1, True, 0, "v1"), (2, False, 0, "v1"), (3, True, 0, "v2")], 3, 2, [0, 1, 2], [3],
            id="updated-before-not-ready-outside",
        ),
        pytest.param(
            [(0, True, 0, "v1"), (1, True, 0, "v1"), (2, False, 0, "v1"), (3, True, 0, "v2")], 2, 2, [0, 1], [3, 2],
            id="then-the-plain-order",
        ),
        pytest.param(
            [(1, True, 0, "v1"), (3, True, 0, "v1"), (4, True, 9, "v2")], 2, 2, [1, 3], [4],
            id="first-existing-not-ordinals",
        ),
        pytest.param([(0, True, 0, "v1"), (1, True, 0, "v2")], 0, 1, [], [1, 0], id="to-zero"),
    ],
)  # fmt: skip
def test_choose_with_partition(
    units: list[tuple[int, bool, int, str]], replicas: int, partition: int, kept: list[int], victims: list[int]
) -> None:
    assert choose([Candidate(*u) for u in units], replicas, partition=partition) == (kept, victims)


def test_instance_ids_fault_forgets_the_partition() -> None:
    units = [Candidate(0, True, 0, "v1"), Candidate(1, True, 0, "v1"), Candidate(2, True, 9, "v2")]
    assert instance_ids(units, 2, partition=2) == [0, 1]
    with faults.injected("role-scale-down-ignores-partition"):
        assert instance_ids(units, 2, partition=2) == [0, 2]


# -- in plan(): the update rolled past the partition, then the count drops ---------------------------


def _images(w: World, prefix: str) -> dict[str, str]:
    """Entry image by unit: ``ms-<o>`` for ServingGroups, ``a-<i>`` for instances of Role a in group 0."""
    out: dict[str, str] = {}
    for name, pod in w.pods.items():
        parts = name.split("-")
        unit = f"ms-{parts[1]}" if prefix == "ms" else f"{parts[2]}-{parts[3]}"
        if name.endswith("-0") and unit.startswith(prefix):
            out[unit] = pod["spec"]["containers"][0]["image"]
    return out


def _image(image: str) -> Any:
    def change(spec: dict[str, Any]) -> None:
        spec["template"]["roles"][0]["entryTemplate"]["spec"]["containers"][0]["image"] = image

    return change


def _role_ms(partition: int) -> ModelServing:
    ms = MS("ms").role("a", 5, 0, image="a:v1").rollout(type="RoleRollingUpdate").build()

    def settings(spec: dict[str, Any]) -> None:
        spec["template"]["roles"][0].update(partition=partition, maxUnavailable=5)

    return edit_spec(ms, settings)


def _role_replicas(n: int) -> Any:
    def change(spec: dict[str, Any]) -> None:
        spec["template"]["roles"][0].update(replicas=n, maxUnavailable=n)

    return change


def _cost_protected_low(w: World, protected: set[str], prefix: str) -> None:
    """Cost 0 on the protected units' Pods, 10000 + index on the others (upstream's e2e)."""
    for name in list(w.pods):
        parts = name.split("-")
        unit = f"ms-{parts[1]}" if prefix == "ms" else f"{parts[2]}-{parts[3]}"
        index = int(unit.rsplit("-", 1)[1])
        w.pods[name] = with_cost(w.pods[name], 0 if unit in protected else 10000 + index)


@pytest.mark.parametrize(
    ("fault", "kept"),
    [
        pytest.param(None, {"a-0": "a:v1", "a-1": "a:v1", "a-2": "a:v1"}, id="reference"),
        pytest.param("role-scale-down-ignores-partition", {"a-0": "a:v1", "a-3": "a:v2", "a-4": "a:v2"}, id="fault"),
    ],
)
def test_role_partition_scale_down_keeps_the_protected_instances(fault: str | None, kept: dict[str, str]) -> None:
    w = world(_role_ms(partition=3))
    w.ms = edit_spec(w.ms, _image("a:v2"))
    w.converge()
    assert _images(w, "a") == {"a-0": "a:v1", "a-1": "a:v1", "a-2": "a:v1", "a-3": "a:v2", "a-4": "a:v2"}
    _cost_protected_low(w, {"a-0", "a-1", "a-2"}, "a")
    protected_uids = {n: p["metadata"]["uid"] for n, p in w.pods.items() if n.split("-")[3] in "012"}
    w.ms = edit_spec(w.ms, _role_replicas(3))
    with faults.injected(*([fault] if fault else [])):
        w.converge()
    assert _images(w, "a") == kept
    if fault is None:
        assert {n: p["metadata"]["uid"] for n, p in w.pods.items()} == protected_uids, "no protected Pod replaced"


def _group_ms(partition: int, replicas: int = 3) -> ModelServing:
    return MS("ms").replicas(replicas).role("a", 1, 0, image="a:v1").rollout(partition=partition).build()


def _replicas(n: int) -> Any:
    def change(spec: dict[str, Any]) -> None:
        spec["replicas"] = n

    return change


@pytest.mark.parametrize(
    ("fault", "kept"),
    [
        pytest.param(None, {"ms-0": "a:v1", "ms-1": "a:v1"}, id="reference"),
        pytest.param("scale-down-ignores-partition", {"ms-0": "a:v1", "ms-2": "a:v2"}, id="fault"),
    ],
)
def test_servinggroup_partition_scale_down_keeps_the_protected_groups(fault: str | None, kept: dict[str, str]) -> None:
    w = world(_group_ms(partition=2))
    w.ms = edit_spec(w.ms, _image("a:v2"))
    w.converge()
    assert _images(w, "ms") == {"ms-0": "a:v1", "ms-1": "a:v1", "ms-2": "a:v2"}
    _cost_protected_low(w, {"ms-0", "ms-1"}, "ms")
    w.ms = edit_spec(w.ms, _replicas(2))
    with faults.injected(*([fault] if fault else [])):
        w.converge()
    assert _images(w, "ms") == kept


def test_servinggroup_scale_down_at_the_partition_then_up_again() -> None:
    """Below the partition only protected groups remain; a scale-up adds groups at the update revision
    beyond it (the partition's first N existing stay as they were)."""
    w = world(_group_ms(partition=2, replicas=4))
    w.ms = edit_spec(w.ms, _image("a:v2"))
    w.converge()
    _cost_protected_low(w, {"ms-0", "ms-1"}, "ms")
    w.ms = edit_spec(w.ms, _replicas(1))
    w.converge()
    assert _images(w, "ms") == {"ms-0": "a:v1"}
    w.ms = edit_spec(w.ms, _replicas(3))
    w.converge()
    assert _images(w, "ms") == {"ms-0": "a:v1", "ms-1": "a:v1", "ms-2": "a:v2"}
