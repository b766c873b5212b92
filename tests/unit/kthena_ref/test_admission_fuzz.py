"""Fuzzing the admission path with hypothesis: no generated spec crashes it or goes unexplained.

Specs are generated in two shapes: near-valid ModelServings with fields replaced by values of
the wrong type, range or shape, and arbitrary JSON. For each, ``validate`` and the webhook's
``review_response`` must return (never raise), and every rejection must name a field and a
reason. The number of specs tried is printed (``pytest -s``) and checked against a floor.
"""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kthena_ref.admission.rules import validate
from kthena_ref.admission.server import review_response

EXAMPLES = 1500
TRIED = {"structured": 0, "json": 0, "rejected": 0}

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**40), 2**40) | st.floats(allow_nan=False) | st.text(max_size=12),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=20,
)
odd_scalars = st.one_of(
    st.integers(-5, 200), st.text(max_size=10), st.sampled_from(["10%", "0%", "150%", "-1%", "", "1", "abc", "Ki"]),
    st.none(), st.booleans(), st.floats(allow_nan=False),
)  # fmt: skip

PATHS = [
    ("spec", "replicas"), ("spec", "schedulerName"), ("spec", "recoveryPolicy"), ("spec", "revisionHistoryLimit"),
    ("spec", "plugins"), ("spec", "rolloutStrategy"), ("spec", "template", "restartGracePeriodSeconds"),
    ("spec", "template", "gangPolicy"), ("spec", "template", "roles"),
    ("spec", "template", "roles", 0, "name"), ("spec", "template", "roles", 0, "replicas"),
    ("spec", "template", "roles", 0, "workerReplicas"), ("spec", "template", "roles", 0, "maxUnavailable"),
    ("spec", "template", "roles", 0, "maxSurge"), ("spec", "template", "roles", 0, "partition"),
    ("spec", "template", "roles", 0, "entryTemplate"), ("spec", "template", "roles", 0, "workerTemplate"),
    ("spec", "template", "roles", 0, "entryTemplate", "spec", "containers"), ("metadata", "name"),
]  # fmt: skip


def base() -> dict[str, Any]:
    pod = {"spec": {"containers": [{"name": "c", "image": "engine:v1"}]}}
    return {
        "apiVersion": "workload.serving.volcano.sh/v1alpha1",
        "kind": "ModelServing",
        "metadata": {"name": "fuzz"},
        "spec": {
            "replicas": 1,
            "template": {
                "roles": [
                    {"name": "r", "workerReplicas": 1, "entryTemplate": pod, "workerTemplate": copy.deepcopy(pod)}
                ]
            },
        },
    }


def replace(obj: dict[str, Any], path: tuple[Any, ...], value: Any) -> dict[str, Any]:
    node: Any = obj
    for part in path[:-1]:
        node = node[part]
    node[path[-1]] = value
    return obj


def check(obj: Any) -> None:
    errors = validate(obj) if isinstance(obj, dict) else []
    for error in errors:
        assert error.field and error.reason
    answer = review_response({"request": {"uid": "u", "operation": "CREATE", "object": obj}})
    assert answer["response"]["uid"] == "u"
    if isinstance(obj, dict) and errors:
        TRIED["rejected"] += 1
        assert answer["response"]["allowed"] is False


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(edits=st.lists(st.tuples(st.sampled_from(PATHS), odd_scalars | json_values), min_size=1, max_size=4))
def test_structured_specs_never_crash_admission(edits: list[tuple[tuple[Any, ...], Any]]) -> None:
    obj = base()
    for path, value in edits:
        try:
            replace(obj, path, value)
        except (KeyError, IndexError, TypeError):
            continue  # an earlier edit removed the parent: the spec is still worth checking
    TRIED["structured"] += 1
    check(obj)


@settings(max_examples=EXAMPLES // 3, deadline=None)
@given(obj=json_values)
def test_arbitrary_json_never_crashes_admission(obj: Any) -> None:
    TRIED["json"] += 1
    check(obj)


def test_report_how_many_specs_were_tried() -> None:
    total = TRIED["structured"] + TRIED["json"]
    print(
        f"\nadmission fuzz: {TRIED['structured']} structured + {TRIED['json']} JSON specs tried, {TRIED['rejected']} rejected"
    )
    if total:  # the fuzz tests ran in this process (not deselected or on another xdist worker)
        assert TRIED["structured"] >= EXAMPLES // 2 and TRIED["rejected"] > 0
