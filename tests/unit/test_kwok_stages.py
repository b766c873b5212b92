"""The kwok Stage selectors in kwok-stages.yaml: kthena-* stages are mutually exclusive and follow the priority.

The selectors are jq over the Pod; a small evaluator below models exactly the keys the file uses
(checked against the jq binary when one is installed), and every combination of the states the
stages key on must select at most one kthena-* stage: the one the documented priority names.
What the stages write (their Go templates) is exercised on a real cluster by
tests/integration/test_embedded_cluster.py.
"""

from __future__ import annotations

import itertools
import json
import re
import shutil
import subprocess
from collections.abc import Callable
from typing import Any

import pytest
import yaml

from conformance.cluster.faults import (
    FAULT_ANNOTATION,
    PULL_FAILS_REGISTRY,
    RESTARTS_ANNOTATION,
    SIDECAR_RESTARTS_ANNOTATION,
    Fault,
    fault_patch,
    unpullable,
)
from conformance.cluster.local.components import STAGES_FILE

Pod = dict[str, Any]
# A jq query's output stream, or None when the query errors (kwok then treats it as "no data").
Stream = list[Any] | None

# -- a tiny evaluator for exactly the jq keys kwok-stages.yaml uses --------------------------------

# The long keys, as YAML folds them (one space where the file breaks a line).
PULL_KEY = (
    "(.status.containerStatuses // []) as $s"
    f' | [.spec.containers[] | select(.image | startswith("{PULL_FAILS_REGISTRY}/"))'
    ' | .name as $n | [$s[] | select(.name == $n) | .state.waiting.reason // ""] | first // ""]'
    ' | if length == 0 then "none" elif all(. == "ImagePullBackOff") then "backing-off"'
    ' elif all(. == "ErrImagePull" or . == "ImagePullBackOff") then "failing" else "to-fail" end'
)
IMAGES_KEY = (
    "(.status.containerStatuses // []) as $s | any(.spec.containers[]; .name as $n | .image as $i"
    " | any($s[]; .name == $n and .image == $i and .state.running != null) | not)"
)
GATES_KEY = (
    '(.status.conditions // []) as $c | ([$c[] | select(.type == "Ready") | .status] == ["True"])'
    ' != all((.spec.readinessGates // [])[]; .conditionType as $t | any($c[]; .type == $t and .status == "True"))'
)
RESTART_KEY = (
    f'(.metadata.annotations["{RESTARTS_ANNOTATION}"] // "") as $w | $w != "" and '
    "$w != ((((.status.containerStatuses // [])[0].restartCount) // 0) | tostring)"
)
SIDECAR_KEY = (
    f'(.metadata.annotations["{SIDECAR_RESTARTS_ANNOTATION}"] // "") as $w | $w != ""'
    ' and (.spec.initContainers // [])[0].restartPolicy == "Always"'
    " and $w != ((((.status.initContainerStatuses // [])[0].restartCount) // 0) | tostring)"
)


def _annotation(pod: Pod, key: str) -> Any:
    return (pod["metadata"].get("annotations") or {}).get(key)


def _condition_status(kind: str) -> Callable[[Pod], Stream]:
    def status(pod: Pod) -> Stream:
        conditions = pod["status"].get("conditions")
        if conditions is None:
            return None  # jq: cannot iterate over null
        return [c.get("status") for c in conditions if c.get("type") == kind]

    return status


def _statuses(pod: Pod) -> list[dict[str, Any]]:
    return list(pod["status"].get("containerStatuses") or [])


def _pull(pod: Pod) -> Stream:
    reasons = []
    for container in pod["spec"]["containers"]:
        if not container.get("image", "").startswith(PULL_FAILS_REGISTRY + "/"):
            continue
        seen = [
            ((s.get("state") or {}).get("waiting") or {}).get("reason") or ""
            for s in _statuses(pod)
            if s.get("name") == container["name"]
        ]
        reasons.append(seen[0] if seen else "")
    if not reasons:
        return ["none"]
    if all(r == "ImagePullBackOff" for r in reasons):
        return ["backing-off"]
    if all(r in ("ErrImagePull", "ImagePullBackOff") for r in reasons):
        return ["failing"]
    return ["to-fail"]


def _not_running_spec_image(pod: Pod) -> Stream:
    def runs(container: dict[str, Any]) -> bool:
        return any(
            s.get("name") == container["name"]
            and s.get("image") == container.get("image")
            and (s.get("state") or {}).get("running") is not None
            for s in _statuses(pod)
        )

    return [any(not runs(c) for c in pod["spec"]["containers"])]


def _gates_disagree(pod: Pod) -> Stream:
    conditions = pod["status"].get("conditions") or []
    ready = [c.get("status") for c in conditions if c.get("type") == "Ready"] == ["True"]
    gates = all(
        any(c.get("type") == g["conditionType"] and c.get("status") == "True" for c in conditions)
        for g in pod["spec"].get("readinessGates") or []
    )
    return [ready != gates]


def _restart_pending(pod: Pod) -> Stream:
    wanted = _annotation(pod, RESTARTS_ANNOTATION) or ""  # jq `// ""` replaces null (and false)
    statuses = _statuses(pod)
    count = statuses[0].get("restartCount") if statuses else None
    if count is None:
        count = 0
    return [wanted != "" and wanted != str(count)]


def _sidecar_restart_pending(pod: Pod) -> Stream:
    wanted = _annotation(pod, SIDECAR_RESTARTS_ANNOTATION) or ""
    inits = pod["spec"].get("initContainers") or []
    sidecar = bool(inits) and inits[0].get("restartPolicy") == "Always"
    statuses = pod["status"].get("initContainerStatuses") or []
    count = statuses[0].get("restartCount") if statuses else None
    if count is None:
        count = 0
    return [wanted != "" and sidecar and wanted != str(count)]


def _owner_kinds(pod: Pod) -> Stream:
    refs = pod["metadata"].get("ownerReferences")
    return None if refs is None else [r.get("kind") for r in refs]


KEYS: dict[str, Callable[[Pod], Stream]] = {
    ".metadata.deletionTimestamp": lambda p: [p["metadata"].get("deletionTimestamp")],
    ".status.phase": lambda p: [p["status"].get("phase")],
    '.status.conditions.[] | select( .type == "Ready" ) | .status': _condition_status("Ready"),
    '.status.conditions.[] | select( .type == "ContainersReady" ) | .status': _condition_status("ContainersReady"),
    ".metadata.ownerReferences.[].kind": _owner_kinds,
    f'.metadata.annotations["{FAULT_ANNOTATION}"]': lambda p: [_annotation(p, FAULT_ANNOTATION)],
    f'.metadata.annotations["{FAULT_ANNOTATION}"] // ""': lambda p: [_annotation(p, FAULT_ANNOTATION) or ""],
    PULL_KEY: _pull,
    IMAGES_KEY: _not_running_spec_image,
    GATES_KEY: _gates_disagree,
    RESTART_KEY: _restart_pending,
    SIDECAR_KEY: _sidecar_restart_pending,
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

GATE = "example.com/gate"
OLD_IMAGE, NEW_IMAGE = "img:v1", "img:v2"


def _running(name: str, image: str, restarts: int, ready: bool) -> dict[str, Any]:
    return {"name": name, "image": image, "restartCount": restarts, "ready": ready, "state": {"running": {}}}


def make_pod(
    *,
    phase: str = "Running",
    fault: str | None = None,
    images: str = "equal",
    restarts: str = "absent",
    sidecar: str = "absent",
    containers_ready: bool | None = True,
    gates: str = "none",
    ready: bool | None = None,
    pull: str = "none",
    restart_count: int = 2,
    sidecar_count: int = 1,
    deleted: bool = False,
    owner: str | None = None,
) -> Pod:
    """A Pod in one of the states the stages key on.

    ``images="different"``: the side container's image was patched and not yet applied.
    ``restarts`` / ``sidecar``: no restarts (sidecar-restarts) annotation, one equal to the first
    container's (first init container's, a sidecar) restartCount, or one asking for one more.
    ``pull``: the main container's image was patched to an unpullable one, and its status shows
    nothing yet (``to-fail``), ErrImagePull (``failing``) or ImagePullBackOff (``backing-off``).
    ``gates``: no readiness gate, or one whose condition is ``true``, ``false`` or ``missing``.
    ``ready``: the Ready condition; None means what a kubelet would show (containers ready and
    every gate True). ``containers_ready=None``: no conditions at all.
    """
    annotations: dict[str, str] = {}
    if fault is not None:
        annotations[FAULT_ANNOTATION] = fault
    if restarts == "equal":
        annotations[RESTARTS_ANNOTATION] = str(restart_count)
    elif restarts == "different":
        annotations[RESTARTS_ANNOTATION] = str(restart_count + 1)
    if sidecar == "equal":
        annotations[SIDECAR_RESTARTS_ANNOTATION] = str(sidecar_count)
    elif sidecar == "different":
        annotations[SIDECAR_RESTARTS_ANNOTATION] = str(sidecar_count + 1)
    metadata: dict[str, Any] = {"name": "p", "namespace": "ns", "annotations": annotations or None}
    if deleted:
        metadata["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    if owner is not None:
        metadata["ownerReferences"] = [{"kind": owner, "name": "o"}]
    spec: dict[str, Any] = {
        "initContainers": [{"name": "proxy", "image": "proxy:v1", "restartPolicy": "Always"}],
        "containers": [{"name": "main", "image": OLD_IMAGE}, {"name": "side", "image": "side:v1"}],
    }
    main = _running("main", OLD_IMAGE, restart_count, bool(containers_ready))
    if pull != "none":
        spec["containers"][0]["image"] = unpullable(NEW_IMAGE)
    if pull in ("failing", "backing-off"):
        reason = "ErrImagePull" if pull == "failing" else "ImagePullBackOff"
        main = {**main, "ready": False, "state": {"waiting": {"reason": reason}}}
    side = _running("side", "side:v0" if images == "different" else "side:v1", 0, bool(containers_ready))
    proxy = {**_running("proxy", "proxy:v1", sidecar_count, bool(containers_ready)), "started": True}
    status: dict[str, Any] = {"phase": phase, "containerStatuses": [main, side], "initContainerStatuses": [proxy]}
    conditions = [{"type": "Initialized", "status": "True"}]
    if gates != "none":
        spec["readinessGates"] = [{"conditionType": GATE}]
        if gates != "missing":
            conditions.append({"type": GATE, "status": "True" if gates == "true" else "False"})
    if containers_ready is not None:
        if ready is None:
            ready = containers_ready and gates in ("none", "true")
        conditions.append({"type": "ContainersReady", "status": "True" if containers_ready else "False"})
        conditions.append({"type": "Ready", "status": "True" if ready else "False"})
        status["conditions"] = conditions
    return {"metadata": metadata, "spec": spec, "status": status}


def expected_stage(
    fault: str | None,
    images: str,
    restarts: str,
    sidecar: str,
    containers_ready: bool,
    pull: str,
    gates: str,
    stale: bool,
) -> str | None:
    """The documented priority: fail > pull fails > pull back-off > image change > restart >
    sidecar restart > not-ready > ready again > readiness gates."""
    if fault == "fail":
        return "kthena-pod-fail"
    if pull != "none":
        return {"to-fail": "kthena-pod-pull-fails", "failing": "kthena-pod-pull-back-off"}.get(pull)
    if images == "different":
        return "kthena-pod-image-change"
    if restarts == "different":
        return "kthena-pod-restart"
    if sidecar == "different":
        return "kthena-pod-restart-sidecar"
    if fault == "not-ready":
        return "kthena-pod-not-ready" if containers_ready else None
    if not containers_ready:
        return "kthena-pod-ready-again"
    if stale:
        return "kthena-pod-readiness-gates"
    return None


def _state_pod(
    fault: str | None,
    images: str,
    restarts: str,
    sidecar: str,
    containers_ready: bool,
    pull: str,
    gates: str,
    stale: bool,
) -> Pod:
    consistent = containers_ready and gates in ("none", "true")
    return make_pod(
        fault=fault,
        images=images,
        restarts=restarts,
        sidecar=sidecar,
        containers_ready=containers_ready,
        pull=pull,
        gates=gates,
        ready=(not consistent) if stale else consistent,
    )


# (fault, images, restarts, sidecar, containers_ready, pull, gates, stale): every combination (3456).
STATES: list[tuple[Any, ...]] = list(
    itertools.product(
        [None, "not-ready", "fail"],
        ["equal", "different"],
        ["absent", "equal", "different"],
        ["absent", "equal", "different"],
        [True, False],
        ["none", "to-fail", "failing", "backing-off"],
        ["none", "true", "false", "missing"],
        [False, True],
    )
)
STATE_FIELDS = ("fault", "images", "restarts", "sidecar", "containersReady", "pull", "gates", "stale")


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


def test_the_file_has_the_kthena_stages_in_priority_order() -> None:
    assert [s["metadata"]["name"] for s in KTHENA_STAGES] == [
        "kthena-pod-fail",
        "kthena-pod-pull-fails",
        "kthena-pod-pull-back-off",
        "kthena-pod-image-change",
        "kthena-pod-restart",
        "kthena-pod-restart-sidecar",
        "kthena-pod-not-ready",
        "kthena-pod-ready-again",
        "kthena-pod-readiness-gates",
    ]


def test_the_stages_spell_the_unpullable_registry_of_the_fault_contract() -> None:
    text = STAGES_FILE.read_text()
    assert f'startswith("{PULL_FAILS_REGISTRY}/")' in text
    assert f'hasPrefix "{PULL_FAILS_REGISTRY}/"' in text


def test_exactly_the_kthena_stage_the_priority_names_matches() -> None:
    """In every state: at most one stage (kwok would pick at random), the one of the priority, and
    no other Pod stage competes for a Running Pod. One table-driven test (a test per state costs
    more in pytest's overhead than the 3456 evaluations); every wrong state is listed."""
    wrong = []
    for state in STATES:
        pod = _state_pod(*state)
        expected = expected_stage(*state)
        seen = matching(pod, POD_STAGES)
        if seen != ({expected} if expected else set()):
            described = ", ".join(f"{k}={v}" for k, v in zip(STATE_FIELDS, state, strict=True))
            wrong.append(f"{described}: expected {expected or 'no stage'}, matched {sorted(seen) or 'none'}")
    assert not wrong, f"{len(wrong)} of {len(STATES)} states select the wrong stages:\n" + "\n".join(wrong[:40])


def _pending(image: str, statuses: list[dict[str, Any]] | None = None, *, ready: str = "False") -> Pod:
    pod = make_pod(phase="Pending", containers_ready=None)
    pod["spec"]["containers"][0]["image"] = image
    pod["status"]["containerStatuses"] = statuses or []
    if statuses:
        pod["status"]["conditions"] = [{"type": "Ready", "status": ready}]
    return pod


def _waiting(reason: str) -> dict[str, Any]:
    return {"name": "main", "image": unpullable(OLD_IMAGE), "restartCount": 0, "state": {"waiting": {"reason": reason}}}


@pytest.mark.parametrize(
    ("pod", "expected"),
    [
        pytest.param(make_pod(), set(), id="steady-running"),
        pytest.param(make_pod(phase="Pending", containers_ready=None), {"pod-ready"}, id="pending-becomes-ready"),
        pytest.param(
            make_pod(phase="Pending", fault="fail", containers_ready=False), {"pod-ready"}, id="pending-with-fault"
        ),
        pytest.param(make_pod(deleted=True), {"pod-delete"}, id="deleted"),
        pytest.param(make_pod(deleted=True, fault="fail", images="different"), {"pod-delete"}, id="deleted-faulty"),
        pytest.param(make_pod(deleted=True, pull="failing"), {"pod-delete"}, id="deleted-failing-pull"),
        pytest.param(make_pod(phase="Failed", fault="fail", containers_ready=False), set(), id="failed-is-terminal"),
        pytest.param(make_pod(phase="Succeeded", containers_ready=False), set(), id="succeeded-is-terminal"),
        pytest.param(make_pod(owner="Job"), {"pod-complete"}, id="job-pod-completes"),
        pytest.param(make_pod(owner="ReplicaSet"), set(), id="replicaset-pod-stays"),
        pytest.param(
            make_pod(fault="bogus", containers_ready=False), {"kthena-pod-ready-again"}, id="unknown-fault-value"
        ),
        pytest.param(make_pod(containers_ready=None), {"kthena-pod-ready-again"}, id="running-without-conditions"),
        pytest.param(_pending(unpullable(OLD_IMAGE)), {"kthena-pod-pull-fails"}, id="pending-unpullable"),
        pytest.param(
            _pending(unpullable(OLD_IMAGE), [_waiting("ErrImagePull")]),
            {"kthena-pod-pull-back-off"},
            id="pending-err-image-pull",
        ),
        pytest.param(
            _pending(unpullable(OLD_IMAGE), [_waiting("ImagePullBackOff")]), set(), id="pending-image-pull-back-off"
        ),
        pytest.param(
            _pending(OLD_IMAGE, [_waiting("ImagePullBackOff")]), {"pod-ready"}, id="pending-image-fixed-starts"
        ),
        pytest.param(
            _pending(unpullable(OLD_IMAGE), [_waiting("ContainerCreating")]),
            {"kthena-pod-pull-fails"},
            id="pending-other-waiting-reason",
        ),
        pytest.param(
            make_pod(pull="to-fail", fault="not-ready"), {"kthena-pod-pull-fails"}, id="not-ready-does-not-hide-a-pull"
        ),
    ],
)
def test_pod_lifecycle_states(pod: Pod, expected: set[str]) -> None:
    assert matching(pod, POD_STAGES) == expected


def test_an_image_changed_back_after_a_failed_pull_restarts_the_container() -> None:
    pod = make_pod(pull="backing-off", containers_ready=False)
    pod["spec"]["containers"][0]["image"] = OLD_IMAGE  # the status still names it (the exited container)
    assert matching(pod, POD_STAGES) == {"kthena-pod-image-change"}


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


@pytest.mark.parametrize(
    ("init_containers", "expected"),
    [
        pytest.param([{"name": "proxy", "restartPolicy": "Always"}], {"kthena-pod-restart-sidecar"}, id="sidecar"),
        pytest.param([{"name": "setup"}], set(), id="regular-init-container"),
        pytest.param([{"name": "setup", "restartPolicy": "OnFailure"}], set(), id="other-restart-policy"),
        pytest.param([{"name": "setup"}, {"name": "proxy", "restartPolicy": "Always"}], set(), id="sidecar-not-first"),
        pytest.param([], set(), id="no-init-containers"),
    ],
)
def test_only_a_sidecar_first_init_container_is_restarted(
    init_containers: list[dict[str, Any]], expected: set[str]
) -> None:
    """A running Pod's kubelet restarts only sidecars; the annotation does nothing to any other Pod."""
    pod = make_pod(sidecar="different")
    pod["spec"]["initContainers"] = [{"image": "i:v1", **c} for c in init_containers]
    pod["status"]["initContainerStatuses"] = [
        {"name": c["name"], "restartCount": 1, "ready": True, "state": {"running": {}}} for c in init_containers
    ]
    assert matching(pod, POD_STAGES) == expected


@pytest.mark.parametrize(
    ("count", "annotation", "expected"),
    [
        pytest.param(1, "1", set(), id="equal"),
        pytest.param(1, "2", {"kthena-pod-restart-sidecar"}, id="one-more"),
        pytest.param(9, "10", {"kthena-pod-restart-sidecar"}, id="string-not-numeric-compare"),
        pytest.param(0, "", set(), id="empty-annotation-is-no-restart"),
    ],
)
def test_sidecar_restart_annotation_compared_with_first_init_container(
    count: int, annotation: str, expected: set[str]
) -> None:
    pod = make_pod(sidecar_count=count)
    pod["metadata"]["annotations"] = {SIDECAR_RESTARTS_ANNOTATION: annotation}
    assert matching(pod, KTHENA_STAGES) == expected


def test_a_sidecar_restart_leaves_the_regular_containers_restart_count_alone() -> None:
    """The two annotations are read against their own lists: a pending sidecar restart is not
    taken for a pending container restart, nor the other way round."""
    pod = make_pod(restarts="equal", sidecar="different", restart_count=4, sidecar_count=0)
    assert matching(pod, KTHENA_STAGES) == {"kthena-pod-restart-sidecar"}
    pod = make_pod(restarts="different", sidecar="equal", restart_count=0, sidecar_count=4)
    assert matching(pod, KTHENA_STAGES) == {"kthena-pod-restart"}


@pytest.mark.parametrize(
    ("gates", "ready", "expected"),
    [
        pytest.param("missing", False, set(), id="gate-never-set-stays-not-ready"),
        pytest.param("true", False, {"kthena-pod-readiness-gates"}, id="gate-set-true-makes-ready"),
        pytest.param("false", True, {"kthena-pod-readiness-gates"}, id="gate-set-false-makes-not-ready"),
        pytest.param("missing", True, {"kthena-pod-readiness-gates"}, id="gate-condition-removed"),
        pytest.param("true", True, set(), id="gate-true-and-ready"),
    ],
)
def test_ready_follows_the_readiness_gates(gates: str, ready: bool, expected: set[str]) -> None:
    assert matching(make_pod(gates=gates, ready=ready), POD_STAGES) == expected


def test_a_pod_with_two_gates_is_ready_only_when_both_are_true() -> None:
    pod = make_pod(gates="true", ready=True)
    pod["spec"]["readinessGates"].append({"conditionType": "example.com/other"})
    assert matching(pod, POD_STAGES) == {"kthena-pod-readiness-gates"}  # Ready must go False
    pod["status"]["conditions"].append({"type": "example.com/other", "status": "True"})
    assert matching(pod, POD_STAGES) == set()


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
        pytest.param(make_pod(gates="missing"), Fault.NOT_READY, "kthena-pod-not-ready", id="not-ready-gated"),
        pytest.param(make_pod(), Fault.FAIL, "kthena-pod-fail", id="fail"),
        pytest.param(make_pod(restart_count=3), Fault.RESTART, "kthena-pod-restart", id="restart"),
        pytest.param(make_pod(sidecar_count=3), Fault.RESTART_SIDECAR, "kthena-pod-restart-sidecar", id="sidecar"),
        pytest.param(
            make_pod(fault="not-ready", containers_ready=False),
            Fault.RESTART_SIDECAR,
            "kthena-pod-restart-sidecar",
            id="sidecar-while-not-ready",
        ),
        pytest.param(
            make_pod(fault="not-ready", containers_ready=False), Fault.CLEAR, "kthena-pod-ready-again", id="clear"
        ),
    ],
)
def test_fault_patches_select_their_stage(start: Pod, fault: Fault, expected: str) -> None:
    assert matching(start, KTHENA_STAGES) == set()  # nothing to do before the fault
    statuses = "initContainerStatuses" if fault is Fault.RESTART_SIDECAR else "containerStatuses"
    restarts = start["status"][statuses][0]["restartCount"]
    patched = _apply_merge_patch(start, fault_patch(fault, restarts))
    assert matching(patched, KTHENA_STAGES) == {expected}


@pytest.mark.parametrize(
    ("image", "expected"),
    [
        ("registry.example/engine:v2", f"{PULL_FAILS_REGISTRY}/engine:v2"),
        ("localhost:5000/a/b:1", f"{PULL_FAILS_REGISTRY}/a/b:1"),
        ("library/nginx:1", f"{PULL_FAILS_REGISTRY}/library/nginx:1"),
        ("nginx", f"{PULL_FAILS_REGISTRY}/nginx"),
    ],
)
def test_unpullable_moves_an_image_to_the_registry_that_never_pulls(image: str, expected: str) -> None:
    assert unpullable(image) == expected


# -- the evaluator agrees with jq ------------------------------------------------------------------

JQ = shutil.which("jq")


def _jq_stream(key: str, pods: list[Pod]) -> list[Stream]:
    """Each pod's output of ``key`` by the jq binary (None where the query errors), nulls dropped
    as kwok drops them. jq 1.6 spells ``.a.[]`` as ``.a[]``."""
    assert JQ is not None
    program = "try [" + re.sub(r"(?<=[A-Za-z])\.\[\]", "[]", key) + '] catch "__error__"'
    stdin = "\n".join(json.dumps(p) for p in pods)
    out = subprocess.run([JQ, "-c", program], input=stdin, capture_output=True, text=True, check=True).stdout
    results: list[Stream] = []
    for line in out.splitlines():
        value = json.loads(line)
        results.append(None if value == "__error__" else [v for v in value if v is not None])
    return results


@pytest.mark.skipif(JQ is None, reason="no jq binary to compare the evaluator with")
@pytest.mark.parametrize("key", sorted(KEYS))
def test_the_evaluator_agrees_with_jq(key: str) -> None:
    pods = [_state_pod(*state) for state in STATES[::7]]
    pods += [make_pod(containers_ready=None), make_pod(owner="Job"), make_pod(deleted=True)]
    pods += [_pending(unpullable(OLD_IMAGE)), _pending(unpullable(OLD_IMAGE), [_waiting("ErrImagePull")])]
    expected = []
    for pod in pods:
        stream = KEYS[key](pod)
        expected.append(None if stream is None else [v for v in stream if v is not None])
    assert _jq_stream(key, pods) == expected
