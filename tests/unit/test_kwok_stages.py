"""The kwok Stage selectors in kwok-stages.yaml: kthena-* stages are mutually exclusive and follow the priority."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import pytest
import yaml

from conformance.cluster.faults import FAULT_ANNOTATION, RESTARTS_ANNOTATION, Fault, fault_patch
from conformance.cluster.local.components import STAGES_FILE

Pod = dict[str, Any]
# A jq query's output stream, or None when the query errors (kwok then treats it as "no data").
Stream = list[Any] | None

# -- a tiny evaluator for exactly the jq keys kwok-stages.yaml uses --------------------------------


def _annotation(pod: Pod, key: str) -> Any:
    return (pod["metadata"].get("annotations") or {}).get(key)


def _ready_status(pod: Pod) -> Stream:
    conditions = pod["status"].get("conditions")
    if conditions is None:
        return None  # jq: cannot iterate over null
    return [c.get("status") for c in conditions if c.get("type") == "Ready"]


def _images_differ(pod: Pod) -> Stream:
    spec_images = [c.get("image") for c in pod["spec"]["containers"]]
    status_images = [s.get("image") for s in (pod["status"].get("containerStatuses") or [])]
    return [spec_images != status_images]


def _restart_pending(pod: Pod) -> Stream:
    wanted = _annotation(pod, RESTARTS_ANNOTATION) or ""  # jq `// ""` replaces null (and false)
    statuses = pod["status"].get("containerStatuses") or []
    count = statuses[0].get("restartCount") if statuses else None
    if count is None:
        count = 0
    return [wanted != "" and wanted != str(count)]


def _owner_kinds(pod: Pod) -> Stream:
    refs = pod["metadata"].get("ownerReferences")
    return None if refs is None else [r.get("kind") for r in refs]


KEYS: dict[str, Callable[[Pod], Stream]] = {
    ".metadata.deletionTimestamp": lambda p: [p["metadata"].get("deletionTimestamp")],
    ".status.phase": lambda p: [p["status"].get("phase")],
    '.status.conditions.[] | select( .type == "Ready" ) | .status': _ready_status,
    ".metadata.ownerReferences.[].kind": _owner_kinds,
    f'.metadata.annotations["{FAULT_ANNOTATION}"]': lambda p: [_annotation(p, FAULT_ANNOTATION)],
    f'.metadata.annotations["{FAULT_ANNOTATION}"] // ""': lambda p: [_annotation(p, FAULT_ANNOTATION) or ""],
    "[.spec.containers[].image] != [(.status.containerStatuses // [])[].image]": _images_differ,
    (
        f'(.metadata.annotations["{RESTARTS_ANNOTATION}"] // "") as $w | $w != "" and '
        "$w != ((((.status.containerStatuses // [])[0].restartCount) // 0) | tostring)"
    ): _restart_pending,
}


def _as_selector_string(value: Any) -> str | None:
    """How kwok compares a jq output with a selector value (strings, booleans and ints only)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (str, int)):
        return str(value)
    return None


def requirement_matches(key: str, operator: str, values: list[str], pod: Pod) -> bool:
    """kwok's ``expression.Requirement.Matches`` for the keys above."""
    if key not in KEYS:
        raise AssertionError(f"kwok-stages.yaml uses a jq key this test cannot evaluate: {key!r}")
    data = KEYS[key](pod)
    if data is None:
        if operator in ("In", "Exists"):
            return False
        if operator in ("NotIn", "DoesNotExist"):
            return True
    else:
        found = any(_as_selector_string(d) in values for d in data)
        present = any(d is not None for d in data)
        if operator == "In":
            return found
        if operator == "NotIn":
            return not found
        if operator == "Exists":
            return present
        if operator == "DoesNotExist":
            return not present
    raise AssertionError(f"kwok-stages.yaml uses an operator this test does not know: {operator!r}")


def stage_matches(stage: dict[str, Any], pod: Pod) -> bool:
    selector = stage["spec"]["selector"]
    unknown = set(selector) - {"matchExpressions"}
    assert not unknown, f"stage {stage['metadata']['name']} uses selector parts the test does not model: {unknown}"
    for expr in selector["matchExpressions"]:
        assert set(expr) <= {"key", "operator", "values"}, f"unmodelled selector expression {expr}"
        if not requirement_matches(expr["key"], expr["operator"], expr.get("values", []), pod):
            return False
    return True


ALL_STAGES: list[dict[str, Any]] = list(yaml.safe_load_all(STAGES_FILE.read_text()))
POD_STAGES = [s for s in ALL_STAGES if s["spec"]["resourceRef"]["kind"] == "Pod"]
KTHENA_STAGES = [s for s in POD_STAGES if s["metadata"]["name"].startswith("kthena-")]


def matching(pod: Pod, stages: list[dict[str, Any]]) -> set[str]:
    return {s["metadata"]["name"] for s in stages if stage_matches(s, pod)}


# -- pods ------------------------------------------------------------------------------------------


def make_pod(
    *,
    phase: str = "Running",
    fault: str | None = None,
    images: str = "equal",
    restarts: str = "absent",
    ready: bool | None = True,
    restart_count: int = 2,
    deleted: bool = False,
    owner: str | None = None,
) -> Pod:
    annotations: dict[str, str] = {}
    if fault is not None:
        annotations[FAULT_ANNOTATION] = fault
    if restarts == "equal":
        annotations[RESTARTS_ANNOTATION] = str(restart_count)
    elif restarts == "different":
        annotations[RESTARTS_ANNOTATION] = str(restart_count + 1)
    metadata: dict[str, Any] = {"name": "p", "namespace": "ns", "annotations": annotations or None}
    if deleted:
        metadata["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    if owner is not None:
        metadata["ownerReferences"] = [{"kind": owner, "name": "o"}]
    status_images = ["img:v1", "side:v1"] if images == "equal" else ["img:v0", "side:v1"]
    status: dict[str, Any] = {
        "phase": phase,
        "containerStatuses": [
            {"name": "main", "image": status_images[0], "restartCount": restart_count, "ready": bool(ready)},
            {"name": "side", "image": status_images[1], "restartCount": 0, "ready": bool(ready)},
        ],
    }
    if ready is not None:
        status["conditions"] = [
            {"type": "Initialized", "status": "True"},
            {"type": "Ready", "status": "True" if ready else "False"},
        ]
    return {
        "metadata": metadata,
        "spec": {"containers": [{"name": "main", "image": "img:v1"}, {"name": "side", "image": "side:v1"}]},
        "status": status,
    }


def expected_stage(fault: str | None, images: str, restarts: str, ready: bool) -> str | None:
    """The documented priority: fail > image change > restart > not-ready > ready again."""
    if fault == "fail":
        return "kthena-pod-fail"
    if images == "different":
        return "kthena-pod-image-change"
    if restarts == "different":
        return "kthena-pod-restart"
    if fault == "not-ready" and ready:
        return "kthena-pod-not-ready"
    if fault != "not-ready" and not ready:
        return "kthena-pod-ready-again"
    return None


STATES = [
    pytest.param(f, i, r, ready, id=f"fault={f or 'absent'},images={i},restarts={r},ready={ready}")
    for f, i, r, ready in itertools.product(
        [None, "not-ready", "fail"], ["equal", "different"], ["absent", "equal", "different"], [True, False]
    )
]


# -- tests -----------------------------------------------------------------------------------------


def test_the_evaluator_knows_every_key_and_operator_in_the_file() -> None:
    for stage in ALL_STAGES:
        for expr in stage["spec"]["selector"]["matchExpressions"]:
            assert expr["key"] in KEYS, f"{stage['metadata']['name']}: unknown jq key {expr['key']!r}"
            assert expr["operator"] in {"In", "NotIn", "Exists", "DoesNotExist"}


def test_the_evaluator_fails_loudly_on_unknown_keys() -> None:
    stage = {"metadata": {"name": "x"}, "spec": {"selector": {"matchExpressions": [{"key": ".x", "operator": "In"}]}}}
    with pytest.raises(AssertionError, match="cannot evaluate"):
        stage_matches(stage, make_pod())


def test_the_file_has_the_five_kthena_stages() -> None:
    assert [s["metadata"]["name"] for s in KTHENA_STAGES] == [
        "kthena-pod-fail",
        "kthena-pod-image-change",
        "kthena-pod-restart",
        "kthena-pod-not-ready",
        "kthena-pod-ready-again",
    ]


@pytest.mark.parametrize(("fault", "images", "restarts", "ready"), STATES)
def test_at_most_one_kthena_stage_matches(fault: str | None, images: str, restarts: str, ready: bool) -> None:
    pod = make_pod(fault=fault, images=images, restarts=restarts, ready=ready)
    assert len(matching(pod, KTHENA_STAGES)) <= 1


@pytest.mark.parametrize(("fault", "images", "restarts", "ready"), STATES)
def test_the_matching_kthena_stage_follows_the_priority(
    fault: str | None, images: str, restarts: str, ready: bool
) -> None:
    pod = make_pod(fault=fault, images=images, restarts=restarts, ready=ready)
    expected = expected_stage(fault, images, restarts, ready)
    assert matching(pod, KTHENA_STAGES) == ({expected} if expected else set())


@pytest.mark.parametrize(("fault", "images", "restarts", "ready"), STATES)
def test_no_other_pod_stage_competes_for_a_running_pod(
    fault: str | None, images: str, restarts: str, ready: bool
) -> None:
    pod = make_pod(fault=fault, images=images, restarts=restarts, ready=ready)
    assert matching(pod, POD_STAGES) == matching(pod, KTHENA_STAGES)


@pytest.mark.parametrize(
    ("pod", "expected"),
    [
        pytest.param(make_pod(), set(), id="steady-running"),
        pytest.param(make_pod(phase="Pending", ready=None), {"pod-ready"}, id="pending-becomes-ready"),
        pytest.param(make_pod(phase="Pending", fault="fail", ready=False), {"pod-ready"}, id="pending-with-fault"),
        pytest.param(make_pod(deleted=True), {"pod-delete"}, id="deleted"),
        pytest.param(make_pod(deleted=True, fault="fail", images="different"), {"pod-delete"}, id="deleted-faulty"),
        pytest.param(make_pod(phase="Failed", fault="fail", ready=False), set(), id="failed-is-terminal"),
        pytest.param(make_pod(phase="Succeeded", ready=False), set(), id="succeeded-is-terminal"),
        pytest.param(make_pod(owner="Job"), {"pod-complete"}, id="job-pod-completes"),
        pytest.param(make_pod(owner="ReplicaSet"), set(), id="replicaset-pod-stays"),
        pytest.param(make_pod(fault="bogus", ready=False), {"kthena-pod-ready-again"}, id="unknown-fault-value"),
        pytest.param(make_pod(ready=None), {"kthena-pod-ready-again"}, id="running-without-conditions"),
    ],
)
def test_pod_lifecycle_states(pod: Pod, expected: set[str]) -> None:
    assert matching(pod, POD_STAGES) == expected


def test_pod_without_container_statuses_counts_as_image_change() -> None:
    pod = make_pod()
    del pod["status"]["containerStatuses"]
    assert matching(pod, KTHENA_STAGES) == {"kthena-pod-image-change"}


@pytest.mark.parametrize(
    ("count", "annotation", "expected"),
    [
        pytest.param(0, "0", set(), id="zero-equal"),
        pytest.param(0, "1", {"kthena-pod-restart"}, id="zero-to-one"),
        pytest.param(9, "10", {"kthena-pod-restart"}, id="string-not-numeric-compare"),
        pytest.param(10, "10", set(), id="two-digit-equal"),
        pytest.param(0, "", set(), id="empty-annotation-is-no-restart"),
    ],
)
def test_restart_annotation_compared_with_first_container(count: int, annotation: str, expected: set[str]) -> None:
    pod = make_pod(restart_count=count)
    pod["metadata"]["annotations"] = {RESTARTS_ANNOTATION: annotation}
    assert matching(pod, KTHENA_STAGES) == expected


def _apply_merge_patch(pod: Pod, patch: dict[str, Any]) -> Pod:
    annotations = dict(pod["metadata"].get("annotations") or {})
    for key, value in patch["metadata"]["annotations"].items():
        if value is None:
            annotations.pop(key, None)
        else:
            annotations[key] = value
    return {**pod, "metadata": {**pod["metadata"], "annotations": annotations or None}}


@pytest.mark.parametrize(
    ("start", "fault", "expected"),
    [
        pytest.param(make_pod(), Fault.NOT_READY, "kthena-pod-not-ready", id="not-ready"),
        pytest.param(make_pod(), Fault.FAIL, "kthena-pod-fail", id="fail"),
        pytest.param(make_pod(restart_count=3), Fault.RESTART, "kthena-pod-restart", id="restart"),
        pytest.param(make_pod(fault="not-ready", ready=False), Fault.CLEAR, "kthena-pod-ready-again", id="clear"),
    ],
)
def test_fault_patches_select_their_stage(start: Pod, fault: Fault, expected: str) -> None:
    assert matching(start, KTHENA_STAGES) == set()  # nothing to do before the fault
    restarts = start["status"]["containerStatuses"][0]["restartCount"]
    patched = _apply_merge_patch(start, fault_patch(fault, restarts))
    assert matching(patched, KTHENA_STAGES) == {expected}
