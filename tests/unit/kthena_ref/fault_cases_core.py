"""Probes of the Core faults added for issue 13 by helper H6 (one per fault).

Why this module exists: ``test_faults.py`` holds one probe per fault; these are the ones for the CRD
schema (defaults, enums, the required entryTemplate), Pods against their templates, the status
counters, a status at zero replicas, whole-group recovery and ControllerRevisions, kept apart so the
table there stays readable. Each row is ``(fault, probe, off, on, overlaps)`` as in
:mod:`.fault_cases_plugins`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from pydantic import ValidationError

from kthena_ref.admission.rules import validate
from kthena_ref.api.crd import crd
from kthena_ref.api.types import ModelServing
from kthena_ref.executor import Executor
from kthena_ref.planner.model import Plan
from kthena_ref.planner.pods import revision_of

from .builders import MS, edit_spec, fresh_pods, fresh_revision, names, running_not_ready, set_image, template, world


def _spec_schema() -> dict[str, Any]:
    schema: dict[str, Any] = crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    return schema


def _fields(data: dict[str, Any]) -> list[str]:
    return [e.field for e in validate(data)]


def _api(**spec: Any) -> dict[str, Any]:
    data = MS().build().to_api()
    data["spec"].update(spec)
    return data


def probe_schema_defaults() -> tuple[Any, Any]:
    """The CRD's defaults of spec.replicas and spec.revisionHistoryLimit."""
    props = _spec_schema()["properties"]
    return props["replicas"].get("default"), props["revisionHistoryLimit"].get("default")


def probe_enums() -> tuple[Any, list[str]]:
    """The CRD's recoveryPolicy enum, and what the webhook refuses in recoveryPolicy 'Never'."""
    return _spec_schema()["properties"]["recoveryPolicy"].get("enum"), _fields(_api(recoveryPolicy="Never"))


def probe_entry_template() -> tuple[bool, list[str]]:
    """Whether the CRD requires a Role's entryTemplate, and what the webhook refuses without one."""
    role_schema = _spec_schema()["properties"]["template"]["properties"]["roles"]["items"]
    data = _api()
    del data["spec"]["template"]["roles"][0]["entryTemplate"]
    return "entryTemplate" in role_schema.get("required", []), _fields(data)


def probe_resources() -> Any:
    pod = fresh_pods(MS().role("r", 1, 0, requests={"cpu": "1", "example.com/foo": "2"}).build())[0]
    return pod["spec"]["containers"][0].get("resources")


def probe_scheduler_name() -> str:
    ms = MS().scheduler("ms-scheduler").role("r", 1, 0, entry=template(scheduler_name="template-scheduler")).build()
    return str(fresh_pods(ms)[0]["spec"]["schedulerName"])


def probe_available_unready() -> int:
    """2 single-Pod groups, one Pod Running and NotReady: status.availableReplicas."""
    w = world(MS().replicas(2).role("r", 1, 0).build())
    w.pods["ms-0-r-0-0"] = running_not_ready(w.pods["ms-0-r-0-0"])
    return int(w.plan().status["availableReplicas"])


def probe_current_revision() -> tuple[int, bool]:
    """3 groups, partition 1, a new image, converged: (currentReplicas, currentRevision == updateRevision)."""
    w = world(MS().replicas(3).role("r", 1, 0).rollout(partition=1).build())
    w.ms = edit_spec(w.ms, set_image("engine:v2"))
    w.converge()
    status = w.ms.status
    assert status is not None
    return status.current_replicas, status.current_revision == status.update_revision


def probe_podgroup_annotations() -> list[str]:
    """2 ServingGroups under gang scheduling: the PodGroup each entry Pod names, by ordinal."""
    from kthena_ref.planner.names import ANNOTATION_PODGROUP

    pods = fresh_pods(MS().replicas(2).role("r", 1, 0).build(), podgroups=[])
    return [
        str(p["metadata"]["annotations"][ANNOTATION_PODGROUP])
        for p in sorted(pods, key=lambda p: p["metadata"]["name"])
    ]


def probe_update_revision_after_scaling() -> bool:
    """1 ServingGroup scaled to 2, converged: whether status.updateRevision stayed the same."""
    w = world(MS().replicas(1).role("r", 1, 0).build())
    before = w.plan().status["updateRevision"]
    w.ms = edit_spec(w.ms, lambda spec: spec.update(replicas=2))
    w.converge()
    return bool(w.plan().status["updateRevision"] == before)


def probe_status_written() -> tuple[bool, bool]:
    """Whether the executor writes a status for spec.replicas 0 and for spec.replicas 1."""

    class Recorder:
        def __init__(self) -> None:
            self.calls = 0

        async def patch_namespaced_custom_object_status(self, *args: Any, **kwargs: Any) -> None:
            self.calls += 1

    def written(ms: ModelServing) -> bool:
        executor = Executor.__new__(Executor)
        recorder = Recorder()
        executor.custom = recorder
        asyncio.run(executor.apply(ms, Plan(status={"observedGeneration": 1, "replicas": 0})))
        return recorder.calls == 1

    return written(MS().replicas(0).build()), written(MS().replicas(1).build())


def probe_emptied_group() -> list[str]:
    """ServingGroupRecreate, every Pod of the only group deleted behind the controller's back: what is created."""
    w = world(MS().role("r", 2, 1).recovery("ServingGroupRecreate").build())
    lost = frozenset(w.pods)
    w.pods.clear()
    return sorted(names(w.plan(lost).create_pods))


def probe_replicas_revision() -> bool:
    """Whether a Role's replicas change keeps the revision."""
    one, two = MS().role("r", 1, 0).build(), MS().role("r", 2, 0).build()
    return revision_of(one.spec.template.roles) == revision_of(two.spec.template.roles)


def probe_revision_owner() -> int:
    return len(fresh_revision(MS().build())["metadata"].get("ownerReferences") or [])


def probe_history_limit() -> int:
    """revisionHistoryLimit 1, the image changed three times: the ControllerRevisions kept."""
    w = world(MS().role("r", 1, 0).history_limit(1).build())
    for image in ("engine:v2", "engine:v3", "engine:v4"):
        w.ms = edit_spec(w.ms, set_image(image))
        w.converge()
    return len(w.revisions)


def probe_live_revisions() -> int:
    """revisionHistoryLimit 0, partition 1 of 3 holding one group on v1 while the rest run v2: revisions kept."""
    w = world(MS().replicas(3).role("r", 1, 0).rollout(partition=1).history_limit(0).build())
    w.ms = edit_spec(w.ms, set_image("engine:v2"))
    w.converge()
    return len(w.revisions)


def probe_worker_replicas_required() -> tuple[bool, Any]:
    """Whether the CRD requires a Role's workerReplicas, and the default it gives one."""
    role_schema = _spec_schema()["properties"]["template"]["properties"]["roles"]["items"]
    return "workerReplicas" in role_schema.get("required", []), role_schema["properties"]["workerReplicas"].get(
        "default"
    )


def probe_in_place_update_spelling() -> tuple[Any, list[str], str]:
    """The CRD's updateMethod enum, what the webhook refuses in updateMethod InPlaceUpdate, and how the
    controller reads it."""
    strategy = _spec_schema()["properties"]["rolloutStrategy"]["properties"]["updateMethod"]
    data = _api(rolloutStrategy={"updateMethod": "InPlaceUpdate"})
    refused = _fields(data)
    if refused:
        return strategy.get("enum"), refused, "refused"
    try:
        rollout = ModelServing.model_validate(data).spec.rollout_strategy
    except ValidationError:
        return strategy.get("enum"), refused, "unreadable"
    return strategy.get("enum"), refused, str(rollout.update_method if rollout else None)


CASES: list[tuple[str, Callable[[], Any], Any, Any, tuple[str, ...]]] = [
    ("no-schema-defaults", probe_schema_defaults, (1, 10), (None, None), ()),
    (
        "enums-not-validated",
        probe_enums,
        (["ServingGroupRecreate", "RoleRecreate", "None"], ["spec.recoveryPolicy"]),
        (None, []),
        (),
    ),
    (
        "entry-template-optional",
        probe_entry_template,
        (True, ["spec.template.roles[0].entryTemplate"]),
        (False, []),
        (),
    ),
    (
        "container-resources-dropped",
        probe_resources,
        {"requests": {"cpu": "1", "example.com/foo": "2"}},
        None,
        (),
    ),
    ("template-scheduler-name-wins", probe_scheduler_name, "ms-scheduler", "template-scheduler", ()),
    ("worker-replicas-default-one", probe_worker_replicas_required, (True, None), (False, 1), ()),
    (
        "in-place-update-alias-recreates",
        probe_in_place_update_spelling,
        (["Recreate", "InPlace"], ["spec.rolloutStrategy.updateMethod"], "refused"),
        (["Recreate", "InPlace", "InPlaceUpdate"], [], "Recreate"),
        ("enums-not-validated",),
    ),
    ("available-counts-unready", probe_available_unready, 1, 2, ("stale-available-replicas",)),
    (
        "current-revision-is-update",
        probe_current_revision,
        (1, False),
        (2, True),
        ("partition-ignored", "current-replicas-counts-all"),
    ),
    (
        "current-replicas-counts-all",
        lambda: probe_current_revision()[0],
        1,
        3,
        ("partition-ignored", "current-revision-is-update"),
    ),
    ("status-revision-counts-replicas", probe_update_revision_after_scaling, True, False, ()),
    ("podgroup-named-by-group-zero", probe_podgroup_annotations, ["ms-0", "ms-1"], ["ms-0", "ms-0"], ()),
    ("no-status-at-zero-replicas", probe_status_written, (True, True), (False, True), ()),
    (
        "emptied-group-wedged",
        probe_emptied_group,
        ["ms-0-r-0-0", "ms-0-r-0-1", "ms-0-r-1-0", "ms-0-r-1-1"],
        [],
        (),
    ),
    ("replicas-in-revision", probe_replicas_revision, True, False, ()),
    ("revision-not-owned", probe_revision_owner, 1, 0, ()),
    ("revision-history-unbounded", probe_history_limit, 2, 4, ()),
    ("live-revision-pruned", probe_live_revisions, 2, 1, ("partition-ignored",)),
]
