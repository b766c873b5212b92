"""pods.py: revisions ignore pacing fields, build_pod (names, labels, owner, scheduler, env, gang), expected_pods."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from kthena_ref.api.types import API_VERSION, KIND, ModelServing, Role
from kthena_ref.planner.names import (
    ANNOTATION_PODGROUP,
    ANNOTATION_TASK_SPEC,
    LABEL_ENTRY,
    LABEL_GROUP,
    LABEL_NAME,
    LABEL_REVISION,
    LABEL_ROLE,
    LABEL_ROLE_ID,
    LABEL_ROLE_TEMPLATE_HASH,
    PodId,
)
from kthena_ref.planner.pods import (
    build_pod,
    controller_revision,
    expected_pods,
    owner_reference,
    revision_of,
    role_template_hash,
)

from .builders import MS, edit_spec, env_of, template

Change = Callable[[dict[str, Any]], None]


def _role(**fields: Any) -> dict[str, Any]:
    return fields


def _roles(ms: ModelServing) -> list[Role]:
    return ms.spec.template.roles


def _base() -> ModelServing:
    return MS("llm").replicas(2).role("p", 2, 1, image="img:v1").role("d", 1, 0, image="img:v1").build()


def _set(path: str, value: Any) -> Change:
    """A spec change at a dotted path; numeric parts index lists."""

    def change(spec: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        node: Any = spec
        for part in parents:
            node = node[int(part)] if part.isdigit() else node.setdefault(part, {})
        if isinstance(node, list):
            node[int(last)] = value
        else:
            node[last] = value

    return change


@pytest.mark.parametrize(
    "change",
    [
        pytest.param(_set("template.roles.0.replicas", 5), id="role-replicas"),
        pytest.param(_set("template.roles.0.maxUnavailable", "50%"), id="role-maxUnavailable"),
        pytest.param(_set("template.roles.0.maxSurge", 2), id="role-maxSurge"),
        pytest.param(_set("template.roles.0.partition", 1), id="role-partition"),
        pytest.param(_set("replicas", 9), id="spec-replicas"),
        pytest.param(_set("schedulerName", "default-scheduler"), id="schedulerName"),
        pytest.param(_set("recoveryPolicy", "None"), id="recoveryPolicy"),
        pytest.param(_set("template.restartGracePeriodSeconds", 30), id="restartGracePeriodSeconds"),
        pytest.param(_set("template.gangPolicy", {"minRoleReplicas": {"p": 1}}), id="gangPolicy"),
        pytest.param(_set("revisionHistoryLimit", 2), id="revisionHistoryLimit"),
    ],
)
def test_revision_ignores_fields_that_do_not_roll_pods(change: Change) -> None:
    base = _base()
    assert revision_of(_roles(edit_spec(base, change))) == revision_of(_roles(base))


def _image(role: int, kind: str, image: str) -> Change:
    return _set(f"template.roles.{role}.{kind}.spec.containers.0.image", image)


@pytest.mark.parametrize(
    "change",
    [
        pytest.param(_image(0, "entryTemplate", "img:v2"), id="entry-image"),
        pytest.param(_image(0, "workerTemplate", "img:v2"), id="worker-image"),
        pytest.param(_image(1, "entryTemplate", "img:v2"), id="second-role-image"),
        pytest.param(_set("template.roles.0.workerReplicas", 2), id="workerReplicas"),
        pytest.param(_set("template.roles.0.entryTemplate.metadata", {"labels": {"a": "b"}}), id="template-labels"),
        pytest.param(
            _set("template.roles.0.entryTemplate.metadata", {"annotations": {"a": "b"}}), id="template-annotations"
        ),
        pytest.param(_set("template.roles.1.name", "x"), id="role-name"),
    ],
)
def test_revision_changes_with_fields_that_define_pods(change: Change) -> None:
    base = _base()
    assert revision_of(_roles(edit_spec(base, change))) != revision_of(_roles(base))


def test_revision_depends_on_role_order() -> None:
    roles = _roles(_base())
    assert revision_of(list(reversed(roles))) != revision_of(roles)


def test_explicit_defaults_hash_like_omitted_ones() -> None:
    omitted = MS().role("r", None).build()
    explicit = MS().role("r", 1, maxUnavailable=1).build()
    assert revision_of(_roles(omitted)) == revision_of(_roles(explicit))
    assert role_template_hash(_roles(omitted)[0]) == role_template_hash(_roles(explicit)[0])


def test_role_template_hash_is_per_role() -> None:
    ms = MS().role("a", image="x").role("b", image="x").role("c", image="y").build()
    a, b, c = (role_template_hash(r) for r in _roles(ms))
    assert len({a, b, c}) == 3  # the name is part of a role's template


# -- build_pod -------------------------------------------------------------------------------------


def _gang_ms() -> ModelServing:
    entry = template(
        "img:entry",
        labels={"app": "llm", LABEL_NAME: "spoofed"},
        annotations={"note": "entry"},
        env=[{"name": "GROUP_SIZE", "value": "99"}, {"name": "KEEP", "value": "1"}],
        init_containers=[
            {"name": "init", "image": "busybox", "env": [{"name": "WORKER_INDEX", "valueFrom": {"x": 1}}]}
        ],
        scheduler_name="from-template",
    )
    worker = template("img:worker", labels={"tier": "worker"}, annotations={"note": "worker"})
    return MS("llm").uid("u-1").role("p", 2, 3, entry=entry, worker=worker).build()


def _build(ms: ModelServing, pid: PodId, *, gang: bool = False, rev: str = "rev1") -> dict[str, Any]:
    return build_pod(ms, _roles(ms), rev, pid, gang=gang)


@pytest.mark.parametrize(
    ("pid", "name"),
    [
        pytest.param(PodId(0, "p", 0, 0), "llm-0-p-0-0", id="entry"),
        pytest.param(PodId(4, "p", 1, 3), "llm-4-p-1-3", id="worker"),
    ],
)
def test_build_pod_name_and_namespace(pid: PodId, name: str) -> None:
    pod = _build(_gang_ms(), pid)
    assert (pod["apiVersion"], pod["kind"]) == ("v1", "Pod")
    assert pod["metadata"]["name"] == name
    assert pod["metadata"]["namespace"] == "default"


def test_build_pod_entry_labels() -> None:
    ms = _gang_ms()
    pod = _build(ms, PodId(1, "p", 1, 0))
    assert pod["metadata"]["labels"] == {
        "app": "llm",
        LABEL_NAME: "llm",  # the template cannot spoof ours
        LABEL_GROUP: "llm-1",
        LABEL_ROLE: "p",
        LABEL_ROLE_ID: "p-1",
        LABEL_REVISION: "rev1",
        LABEL_ROLE_TEMPLATE_HASH: role_template_hash(_roles(ms)[0]),
        LABEL_ENTRY: "true",
    }


def test_build_pod_worker_labels_come_from_the_worker_template() -> None:
    pod = _build(_gang_ms(), PodId(1, "p", 1, 2))
    labels = pod["metadata"]["labels"]
    assert LABEL_ENTRY not in labels
    assert labels["tier"] == "worker"
    assert "app" not in labels
    assert (labels[LABEL_GROUP], labels[LABEL_ROLE_ID], labels[LABEL_REVISION]) == ("llm-1", "p-1", "rev1")


@pytest.mark.parametrize(
    ("k", "image", "note"),
    [pytest.param(0, "img:entry", "entry", id="entry"), pytest.param(1, "img:worker", "worker", id="worker")],
)
def test_build_pod_uses_the_right_template(k: int, image: str, note: str) -> None:
    pod = _build(_gang_ms(), PodId(0, "p", 0, k))
    assert pod["spec"]["containers"][0]["image"] == image
    assert pod["metadata"]["annotations"] == {"note": note}


def test_build_pod_owner_reference() -> None:
    pod = _build(_gang_ms(), PodId(0, "p", 0, 0))
    assert pod["metadata"]["ownerReferences"] == [
        {
            "apiVersion": API_VERSION,
            "kind": KIND,
            "name": "llm",
            "uid": "u-1",
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]
    assert "finalizers" not in pod["metadata"]


@pytest.mark.parametrize(
    ("scheduler", "want"),
    [
        pytest.param(None, "volcano", id="default-volcano-overrides-template"),
        pytest.param("default-scheduler", "default-scheduler", id="explicit"),
    ],
)
def test_build_pod_scheduler_name_comes_from_the_modelserving(scheduler: str | None, want: str) -> None:
    ms = _gang_ms() if scheduler is None else edit_spec(_gang_ms(), _set("schedulerName", scheduler))
    for k in (0, 1):
        assert _build(ms, PodId(0, "p", 0, k))["spec"]["schedulerName"] == want


@pytest.mark.parametrize("k", [0, 1, 3])
def test_build_pod_env_in_containers_and_init_containers(k: int) -> None:
    pod = _build(_gang_ms(), PodId(0, "p", 1, k))
    want = {"GROUP_SIZE": "4", "WORKER_INDEX": str(k)}
    for c in pod["spec"]["containers"]:
        env = env_of(c)
        assert {key: env[key] for key in want} == want
        assert [e["name"] for e in c["env"]].count("GROUP_SIZE") == 1
    if k == 0:
        assert env_of(pod["spec"]["containers"][0])["KEEP"] == "1"
        (init,) = pod["spec"]["initContainers"]
        assert env_of(init) == want  # the same-named valueFrom entry is replaced
        assert [e["name"] for e in init["env"]].count("WORKER_INDEX") == 1


def test_build_pod_env_group_size_without_workers() -> None:
    ms = MS().role("r", 1, 0).build()
    pod = _build(ms, PodId(0, "r", 0, 0))
    assert env_of(pod["spec"]["containers"][0]) == {"GROUP_SIZE": "1", "WORKER_INDEX": "0"}


def test_build_pod_does_not_mutate_the_template() -> None:
    ms = _gang_ms()
    before = ms.model_dump()
    _build(ms, PodId(0, "p", 0, 0), gang=True)
    _build(ms, PodId(0, "p", 0, 1), gang=True)
    assert ms.model_dump() == before


@pytest.mark.parametrize(
    ("pid", "task"),
    [pytest.param(PodId(2, "p", 1, 0), "p-1", id="entry"), pytest.param(PodId(2, "p", 0, 3), "p-0", id="worker")],
)
def test_build_pod_gang_annotations(pid: PodId, task: str) -> None:
    annotations = _build(_gang_ms(), pid, gang=True)["metadata"]["annotations"]
    assert annotations[ANNOTATION_PODGROUP] == "llm-2"
    assert annotations[ANNOTATION_TASK_SPEC] == task
    assert "note" in annotations


def test_build_pod_no_gang_annotations_without_gang() -> None:
    ms = MS().role("r").build()
    pod = _build(ms, PodId(0, "r", 0, 0))
    assert "annotations" not in pod["metadata"]
    annotations = _build(_gang_ms(), PodId(0, "p", 0, 0))["metadata"]["annotations"]
    assert ANNOTATION_PODGROUP not in annotations
    assert ANNOTATION_TASK_SPEC not in annotations


# -- expected_pods ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("roles", "count"),
    [
        pytest.param([("a", 1, 0)], 1, id="one-pod"),
        pytest.param([("a", 3, 0)], 3, id="three-instances"),
        pytest.param([("a", 1, 3)], 4, id="one-instance-three-workers"),
        pytest.param([("a", 2, 1), ("b", 3, 2)], 2 * 2 + 3 * 3, id="two-roles"),
        pytest.param([("a", 0, 2), ("b", 1, 0)], 1, id="zero-replica-role"),
    ],
)
def test_expected_pods_count(roles: list[tuple[str, int, int]], count: int) -> None:
    b = MS()
    for name, replicas, workers in roles:
        b.role(name, replicas, workers)
    assert len(expected_pods(_roles(b.build()), 7)) == count


def test_expected_pods_order() -> None:
    ms = MS().role("b", 2, 1).role("a", 1, 0).build()
    assert expected_pods(_roles(ms), 3) == [
        PodId(3, "b", 0, 0),
        PodId(3, "b", 0, 1),
        PodId(3, "b", 1, 0),
        PodId(3, "b", 1, 1),
        PodId(3, "a", 0, 0),
    ]


def test_controller_revision() -> None:
    ms = _gang_ms()
    cr = controller_revision(ms, "abc", _roles(ms), 4)
    assert (cr["apiVersion"], cr["kind"], cr["revision"]) == ("apps/v1", "ControllerRevision", 4)
    assert cr["metadata"]["name"] == "llm-abc"
    assert cr["metadata"]["labels"] == {LABEL_NAME: "llm", LABEL_REVISION: "abc"}
    assert cr["metadata"]["ownerReferences"] == [owner_reference(ms)]
    assert [Role.model_validate(r) for r in cr["data"]["roles"]] == _roles(ms)
