"""The rollout watch's pure part: Pod JSON -> PodState, snapshot -> counts, timeline -> extremes."""

from __future__ import annotations

from typing import Any

import pytest

from conformance.framework.outcomes import Inconclusive
from conformance.framework.rollout_watch import (
    GROUP_LABEL,
    ROLE_ID_LABEL,
    Layout,
    PodState,
    Snapshot,
    Timeline,
    ordinal,
    same_image,
)
from conformance.framework.support import PodLabels

V1, V2 = "registry.example/engine:v1", "registry.example/engine:v2"
# Two Roles: "a" with 2 instances of entry + 1 worker, "b" with 1 single-Pod instance: 5 Pods a group.
LAYOUT = Layout(replicas=2, roles={"a": (2, 2), "b": (1, 1)})


def pod(
    name: str,
    group: str | None = "ms-0",
    role: str = "a",
    role_id: str | None = "a-0",
    *,
    image: str = V1,
    running: str | None = None,
    phase: str = "Running",
    ready: bool = True,
    terminating: bool = False,
) -> PodState:
    return PodState(
        name=name,
        uid=f"uid-{name}",
        group=group,
        role=role,
        role_id=role_id,
        images=(image,),
        running=(image if running is None else running,),
        phase=phase,
        ready=ready,
        terminating=terminating,
    )


def group(g: int, *, image: str = V1, **overrides: dict[str, Any]) -> list[PodState]:
    """The 5 Pods of ServingGroup ``ms-<g>``, all available on ``image``; ``overrides`` by Pod
    suffix ("a0e", "a0w", "a1e", "a1w", "b0e") change one Pod."""
    out = []
    for suffix, role, rid in (("a0e", "a", "a-0"), ("a0w", "a", "a-0"), ("a1e", "a", "a-1"),
                              ("a1w", "a", "a-1"), ("b0e", "b", "b-0")):  # fmt: skip
        kwargs: dict[str, Any] = {"image": image, **overrides.get(suffix, {})}
        out.append(pod(f"ms-{g}-{suffix}", f"ms-{g}", role, rid, **kwargs))
    return out


def snap(*pods: PodState | list[PodState], seq: int = 0) -> Snapshot:
    flat: list[PodState] = []
    for p in pods:
        flat.extend(p if isinstance(p, list) else [p])
    return Snapshot(seq, float(seq), tuple(flat))


# -- PodState ---------------------------------------------------------------------------------------


def pod_json(**over: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "metadata": {
            "name": "ms-0-a-0-0",
            "uid": "u1",
            "labels": {GROUP_LABEL: "ms-0", ROLE_ID_LABEL: "a-0", "conformance.kthena.io/role": "a",
                       "conformance.kthena.io/member": "entry"},
            "ownerReferences": [{"uid": "other", "controller": False}, {"uid": "ms-uid", "controller": True}],
        },
        "spec": {"containers": [{"name": "engine", "image": V2}, {"name": "side", "image": "side:1"}]},
        "status": {
            "phase": "Running",
            "conditions": [{"type": "Ready", "status": "True"}],
            # out of order, and the second one reports the Docker Hub spelling
            "containerStatuses": [
                {"name": "side", "image": "docker.io/library/side:1", "restartCount": 2},
                {"name": "engine", "image": V1, "restartCount": 1},
            ],
        },
    }  # fmt: skip
    for key, value in over.items():
        section, _, leaf = key.partition("__")
        body[section][leaf] = value
    return body


def test_pod_state_from_json() -> None:
    state = PodState.from_json(pod_json())
    assert state.name == "ms-0-a-0-0" and state.uid == "u1" and state.owner == "ms-uid"
    assert (state.group, state.role, state.role_id, state.member) == ("ms-0", "a", "a-0", "entry")
    assert state.images == (V2, "side:1")
    assert state.running == (V1, "docker.io/library/side:1")  # in spec order
    assert state.restarts == 3 and state.ready and not state.terminating
    assert not state.images_applied, "engine runs v1 while its spec asks for v2: an image patch is pending"
    assert not state.available


def test_pod_state_from_json_applied_and_terminating() -> None:
    applied = pod_json()
    applied["status"]["containerStatuses"][1]["image"] = V2
    assert PodState.from_json(applied).available
    applied["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    state = PodState.from_json(applied)
    assert state.terminating and not state.available


def test_pod_state_reads_the_declared_label_keys() -> None:
    keys = PodLabels("example.com/serving-group", "example.com/instance")
    body = pod_json()
    body["metadata"]["labels"].update({"example.com/serving-group": "g-4", "example.com/instance": "7"})
    state = PodState.from_json(body, keys)
    assert (state.group, state.role_id) == ("g-4", "7")
    assert (PodState.from_json(body).group, PodState.from_json(body).role_id) == ("ms-0", "a-0")  # the defaults
    del body["metadata"]["labels"]["example.com/serving-group"]
    missing = PodState.from_json(body, keys)
    with pytest.raises(Inconclusive, match=r"no example\.com/serving-group label.*podLabels"):
        snap(missing).groups()


def test_pod_state_from_json_minimal() -> None:
    state = PodState.from_json({"metadata": {"name": "p"}})
    assert (state.group, state.role_id, state.owner, state.images, state.running) == (None, None, "", (), ())
    assert not state.available


@pytest.mark.parametrize(
    ("spec", "running", "same"),
    [
        ("x:1", "x:1", True),
        ("x:1", "docker.io/library/x:1", True),
        ("org/x:1", "docker.io/org/x:1", True),
        ("x:1", "x:2", False),
        ("x:1", "", False),
        ("registry.example/x:1", "docker.io/registry.example/x:1", True),
    ],
)
def test_same_image(spec: str, running: str, same: bool) -> None:
    assert same_image(spec, running) is same


@pytest.mark.parametrize(
    ("state", "available"),
    [
        pytest.param(pod("p"), True, id="running-ready"),
        pytest.param(pod("p", ready=False), False, id="not-ready"),
        pytest.param(pod("p", phase="Pending", ready=False), False, id="pending"),
        pytest.param(pod("p", terminating=True), False, id="terminating"),
        pytest.param(pod("p", image=V2, running=V1), False, id="image-patch-pending"),
        pytest.param(pod("p", running=""), False, id="no-container-status"),
    ],
)
def test_pod_available(state: PodState, available: bool) -> None:
    assert state.available is available
    assert state.on(V1) is available
    assert not state.on(V2)


# -- Layout -----------------------------------------------------------------------------------------


def test_layout_of_a_manifest() -> None:
    body = {"spec": {"replicas": 3, "template": {"roles": [
        {"name": "a", "replicas": 2, "workerReplicas": 1}, {"name": "b"}]}}}  # fmt: skip
    layout = Layout.of(body)
    assert layout == Layout(3, {"a": (2, 2), "b": (1, 1)})
    assert layout.pods_per_group == 5
    assert (layout.instance_size("a"), layout.role_replicas("a")) == (2, 2)
    assert Layout.of({"spec": {"template": {"roles": [{"name": "x", "workerReplicas": 3}]}}}).replicas == 1


@pytest.mark.parametrize(
    ("name", "expected"), [("ms-0", 0), ("my-ms-12", 12), ("a-3", 3), ("prefill-10", 10), ("7", 7), ("0", 0)]
)
def test_ordinal(name: str, expected: int) -> None:
    assert ordinal(name) == expected


@pytest.mark.parametrize("name", ["ms", "ms-01", "ms-x", ""])
def test_ordinal_unreadable_is_inconclusive(name: str) -> None:
    with pytest.raises(Inconclusive):
        ordinal(name)


# -- Snapshot: ServingGroups -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("snapshot", "existing", "ready"),
    [
        pytest.param(snap(group(0), group(1)), {"ms-0", "ms-1"}, {"ms-0", "ms-1"}, id="all-ready"),
        pytest.param(snap(group(0, a0w={"ready": False}), group(1)), {"ms-0", "ms-1"}, {"ms-1"},
                     id="one-pod-not-ready"),
        pytest.param(snap(group(0)[:4], group(1)), {"ms-0", "ms-1"}, {"ms-1"}, id="one-pod-missing"),
        pytest.param(snap(group(0, b0e={"terminating": True}), group(1)), {"ms-0", "ms-1"}, {"ms-1"},
                     id="one-pod-terminating"),
        pytest.param(
            snap([p for p in group(0, **{k: {"terminating": True} for k in ("a0e", "a0w", "a1e", "a1w", "b0e")})],
                 group(1)),
            {"ms-1"}, {"ms-1"}, id="all-terminating-does-not-exist",
        ),
        pytest.param(
            # delete-then-recreate under the same name: the old Pod terminating, its successor Pending
            snap(group(0, b0e={"terminating": True}), pod("ms-0-b0e-new", "ms-0", "b", "b-0", phase="Pending",
                 ready=False), group(1)),
            {"ms-0", "ms-1"}, {"ms-1"}, id="recreate-in-place-of-a-terminating-pod",
        ),
        pytest.param(snap(group(0), group(1), group(2)), {"ms-0", "ms-1", "ms-2"}, {"ms-0", "ms-1", "ms-2"},
                     id="surge-group"),
        pytest.param(snap(group(0), group(1), pod("ms-2-a0e", "ms-2", phase="Pending", ready=False)),
                     {"ms-0", "ms-1", "ms-2"}, {"ms-0", "ms-1"}, id="surge-group-being-created"),
        pytest.param(snap(group(0), group(1), pod("extra", "ms-1", "b", "b-0")), {"ms-0", "ms-1"}, {"ms-0"},
                     id="an-extra-pod-makes-the-group-incomplete"),
        pytest.param(snap(group(0, a1e={"image": V2, "running": V1}), group(1)), {"ms-0", "ms-1"}, {"ms-1"},
                     id="image-patch-pending"),
        pytest.param(snap(), set(), set(), id="no-pods"),
    ],
)  # fmt: skip
def test_groups_existing_and_ready(snapshot: Snapshot, existing: set[str], ready: set[str]) -> None:
    assert snapshot.existing_groups() == existing
    assert snapshot.ready_groups(LAYOUT) == ready


def test_ready_groups_on_an_image() -> None:
    s = snap(group(0, image=V2), group(1), group(2, image=V2, a0e={"image": V1}))
    assert s.ready_groups(LAYOUT, V2) == {"ms-0"}
    assert s.ready_groups(LAYOUT, V1) == {"ms-1"}
    assert s.group_images() == {"ms-0": {V2}, "ms-1": {V1}, "ms-2": {V1, V2}}


def test_a_pod_without_the_group_label_is_inconclusive() -> None:
    s = snap(group(0), pod("stray", None))
    with pytest.raises(Inconclusive, match=r"stray has no modelserving\.volcano\.sh/group-name"):
        s.existing_groups()


# -- Snapshot: Role instances -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("snapshot", "role", "existing", "ready"),
    [
        pytest.param(snap(group(0)), "a", {("ms-0", "a-0"), ("ms-0", "a-1")}, {("ms-0", "a-0"), ("ms-0", "a-1")},
                     id="all-ready"),
        pytest.param(snap(group(0, a1w={"ready": False})), "a", {("ms-0", "a-0"), ("ms-0", "a-1")},
                     {("ms-0", "a-0")}, id="worker-not-ready"),
        pytest.param(snap(group(0, a1w={"terminating": True}, a1e={"terminating": True})), "a",
                     {("ms-0", "a-0")}, {("ms-0", "a-0")}, id="instance-terminating"),
        pytest.param(snap(group(0), pod("s", "ms-0", "a", "a-2", phase="Pending", ready=False)), "a",
                     {("ms-0", "a-0"), ("ms-0", "a-1"), ("ms-0", "a-2")}, {("ms-0", "a-0"), ("ms-0", "a-1")},
                     id="surge-instance"),
        pytest.param(snap(group(0), group(1)), "b", {("ms-0", "b-0"), ("ms-1", "b-0")},
                     {("ms-0", "b-0"), ("ms-1", "b-0")}, id="same-role-id-in-two-groups"),
    ],
)  # fmt: skip
def test_instances(snapshot: Snapshot, role: str, existing: set[Any], ready: set[Any]) -> None:
    assert snapshot.existing_instances(role) == existing
    assert snapshot.ready_instances(LAYOUT, role) == ready


def test_instances_by_group_and_image() -> None:
    s = snap(group(0, a0e={"image": V2}, a0w={"image": V2}), group(1, image=V2))
    assert s.ready_instances(LAYOUT, "a", V2) == {("ms-0", "a-0"), ("ms-1", "a-0"), ("ms-1", "a-1")}
    assert s.ready_instances(LAYOUT, "a", V2, group="ms-0") == {("ms-0", "a-0")}
    assert s.existing_instances("a", "ms-1") == {("ms-1", "a-0"), ("ms-1", "a-1")}


def test_a_pod_without_the_role_id_label_is_inconclusive() -> None:
    with pytest.raises(Inconclusive, match="role-id"):
        snap(pod("p", role_id=None)).instances("a")
    assert snap(pod("p", role="b", role_id=None)).instances("a") == {}  # other Roles are not asked about


# -- Snapshot: settled -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("snapshot", "images", "settled"),
    [
        pytest.param(snap(group(0, image=V2), group(1, image=V2)), {"a": V2, "b": V2}, True, id="settled"),
        pytest.param(snap(group(0, image=V2), group(1, image=V2)), {"a": V2}, True, id="unnamed-role-any-image"),
        pytest.param(snap(group(0, image=V2), group(1)), {"a": V2, "b": V2}, False, id="one-group-old"),
        pytest.param(snap(group(0, image=V2)), {"a": V2, "b": V2}, False, id="a-group-missing"),
        pytest.param(snap(group(0, image=V2), group(1, image=V2), group(2, image=V2)), {"a": V2}, False,
                     id="a-surge-group-left"),
        pytest.param(snap(group(0, image=V2), group(1, image=V2, b0e={"terminating": True})), {"a": V2}, False,
                     id="a-pod-terminating"),
    ],
)  # fmt: skip
def test_settled_on(snapshot: Snapshot, images: dict[str, str], settled: bool) -> None:
    assert snapshot.settled_on(LAYOUT, images) is settled


def test_describe_names_every_pod() -> None:
    text = snap(pod("p1", ready=False), pod("p0", image=V2, running=V1, terminating=True), seq=3).describe()
    assert text.startswith("#3 +3.00s (LIST): p0 ")
    assert "image-pending terminating" in text and "p1 uid=uid-p1 image=" in text and "ready=False" in text
    assert repr(snap(pod("p1"), seq=3)) == snap(pod("p1"), seq=3).describe(), "a timed-out wait shows it"


# -- Timeline -------------------------------------------------------------------------------------


def rollout_timeline() -> Timeline:
    """Two groups rolled v1 -> v2 one at a time by delete-then-recreate."""
    states = [
        snap(group(0), group(1)),
        snap(group(0), group(1, **{k: {"terminating": True} for k in ("a0e", "a0w", "a1e", "a1w", "b0e")})),
        snap(group(0)),
        snap(group(0), group(1, image=V2, b0e={"phase": "Pending", "ready": False})),
        snap(group(0), group(1, image=V2)),
        snap(group(0, image=V2), group(1, image=V2)),
    ]
    return Timeline([Snapshot(i, float(i), s.pods, "MODIFIED") for i, s in enumerate(states)])


def test_timeline_extremes() -> None:
    t = rollout_timeline()
    value, at = t.min_ready_groups(LAYOUT)
    assert (value, at.seq) == (1, 1), "the first snapshot with the fewest ready groups"
    assert t.max_groups()[0] == 2
    assert t.min_ready_groups(LAYOUT, since=4)[0] == 2
    assert t.max_groups(since=2)[0] == 2
    assert t.min_ready_instances(LAYOUT, "a")[0] == 2
    assert t.min_ready_instances(LAYOUT, "a", group="ms-0")[0] == 2
    assert t.max_instances("b")[0] == 2


def test_timeline_first_and_gone() -> None:
    t = rollout_timeline()
    first_v2 = t.first_pod(lambda p: p.image == V2)
    assert first_v2 is not None and first_v2.seq == 3
    ready_v2 = t.first_pod(lambda p: p.on(V2))
    assert ready_v2 is not None and ready_v2.seq == 3, "the a-Pods of ms-1 are Ready at v2 while b waits"
    assert t.first(lambda s: len(s.ready_groups(LAYOUT, V2)) == 2) == t.snapshots[5]
    assert t.first(lambda s: False) is None
    gone = t.gone_at("uid-ms-1-b0e")
    assert gone is not None and gone.seq == 1
    assert t.gone_at("uid-ms-0-b0e") is None


def test_timeline_uid_history() -> None:
    history = rollout_timeline().uid_history()
    assert history["ms-0-a0e"] == [("uid-ms-0-a0e", V1), ("uid-ms-0-a0e", V2)]  # the test double keeps UIDs
    assert "uid-ms-1-b0e" in rollout_timeline().uids_seen()


def test_an_empty_timeline_is_inconclusive() -> None:
    with pytest.raises(Inconclusive):
        Timeline().max_groups()
    with pytest.raises(Inconclusive):
        rollout_timeline().min_ready_groups(LAYOUT, since=99)
