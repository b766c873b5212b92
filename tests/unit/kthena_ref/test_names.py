"""names.py: generated names, parse_pod_labels (accept ours, reject anything else), generated_name_problem."""

from __future__ import annotations

import pytest

from kthena_ref.planner.names import (
    LABEL_GROUP,
    LABEL_NAME,
    LABEL_ROLE,
    LABEL_ROLE_ID,
    PodId,
    generated_name_problem,
    group_name,
    parse_pod_labels,
    pod_name,
    revision_name,
    role_id,
)


def _labels(ms: str = "ms", group: str = "ms-0", role: str = "r", rid: str = "r-0") -> dict[str, str]:
    return {LABEL_NAME: ms, LABEL_GROUP: group, LABEL_ROLE: role, LABEL_ROLE_ID: rid}


@pytest.mark.parametrize(
    ("got", "want"),
    [
        pytest.param(group_name("llm", 0), "llm-0", id="group-0"),
        pytest.param(group_name("llm", 12), "llm-12", id="group-12"),
        pytest.param(role_id("prefill", 3), "prefill-3", id="role-id"),
        pytest.param(pod_name("llm", 1, "prefill", 2, 0), "llm-1-prefill-2-0", id="entry-pod"),
        pytest.param(pod_name("llm", 0, "decode", 0, 3), "llm-0-decode-0-3", id="worker-pod"),
        pytest.param(pod_name("a-b", 0, "p-d", 1, 2), "a-b-0-p-d-1-2", id="hyphenated-names"),
        pytest.param(revision_name("llm", "abc123"), "llm-abc123", id="revision"),
    ],
)
def test_generated_names(got: str, want: str) -> None:
    assert got == want


def test_pod_id_properties() -> None:
    entry, worker = PodId(1, "p", 2, 0), PodId(1, "p", 2, 3)
    assert (entry.role_id, entry.is_entry) == ("p-2", True)
    assert (worker.role_id, worker.is_entry) == ("p-2", False)
    assert sorted([worker, PodId(0, "z", 9, 9), entry]) == [PodId(0, "z", 9, 9), entry, worker]


@pytest.mark.parametrize(
    ("ms", "labels", "pod", "want"),
    [
        pytest.param("ms", _labels(), "ms-0-r-0-0", PodId(0, "r", 0, 0), id="entry"),
        pytest.param("ms", _labels(group="ms-3", rid="r-2"), "ms-3-r-2-4", PodId(3, "r", 2, 4), id="worker"),
        pytest.param(
            "my-ms",
            _labels(ms="my-ms", group="my-ms-10", role="pre-fill", rid="pre-fill-1"),
            "my-ms-10-pre-fill-1-0",
            PodId(10, "pre-fill", 1, 0),
            id="hyphens-everywhere",
        ),
        pytest.param(
            "ms",
            {**_labels(), "app": "x", "modelserving.volcano.sh/entry": "true"},
            "ms-0-r-0-0",
            PodId(0, "r", 0, 0),
            id="extra-labels-ignored",
        ),
    ],
)
def test_parse_pod_labels_accepts_our_pods(ms: str, labels: dict[str, str], pod: str, want: PodId) -> None:
    assert parse_pod_labels(labels, ms, pod) == want


@pytest.mark.parametrize(
    ("labels", "pod"),
    [
        pytest.param({}, "ms-0-r-0-0", id="no-labels"),
        pytest.param({"app": "ms"}, "ms-0-r-0-0", id="foreign-labels"),
        pytest.param(_labels(ms="other"), "ms-0-r-0-0", id="other-modelserving"),
        pytest.param({LABEL_NAME: "ms", LABEL_ROLE: "r", LABEL_ROLE_ID: "r-0"}, "ms-0-r-0-0", id="no-group"),
        pytest.param({LABEL_NAME: "ms", LABEL_GROUP: "ms-0", LABEL_ROLE: "r"}, "ms-0-r-0-0", id="no-role-id"),
        pytest.param(_labels(group="other-0"), "ms-0-r-0-0", id="group-of-other-ms"),
        pytest.param(_labels(rid="q-0"), "ms-0-r-0-0", id="role-id-of-other-role"),
        pytest.param(_labels(), "ms-1-r-0-0", id="name-ordinal-mismatch"),
        pytest.param(_labels(), "ms-0-r-1-0", id="name-index-mismatch"),
        pytest.param(_labels(), "ms-0-q-0-0", id="name-role-mismatch"),
        pytest.param(_labels(), "other-0-r-0-0", id="name-ms-mismatch"),
        pytest.param(_labels(), "ms-0-r-0-0-extra", id="name-suffix"),
        pytest.param(_labels(), "ms-0-r-0", id="name-without-k"),
        pytest.param(_labels(), "", id="empty-name"),
        pytest.param(_labels(group="ms--1"), "ms--1-r-0-0", id="negative-ordinal"),
        pytest.param(_labels(rid="r--1"), "ms-0-r--1-0", id="negative-index"),
        pytest.param(_labels(), "ms-0-r-0--1", id="negative-k"),
        pytest.param(_labels(group="ms-x"), "ms-x-r-0-0", id="non-numeric-ordinal"),
        pytest.param(_labels(rid="r-x"), "ms-0-r-x-0", id="non-numeric-index"),
        pytest.param(_labels(), "ms-0-r-0-x", id="non-numeric-k"),
        pytest.param(_labels(group="ms-"), "ms--r-0-0", id="empty-ordinal"),
    ],
)
def test_parse_pod_labels_rejects(labels: dict[str, str], pod: str) -> None:
    assert parse_pod_labels(labels, "ms", pod) is None


@pytest.mark.parametrize(
    ("labels", "pod"),
    [
        pytest.param(_labels(group="ms-00"), "ms-0-r-0-0", id="ordinal-leading-zero"),
        pytest.param(_labels(group="ms-+0"), "ms-0-r-0-0", id="ordinal-plus-sign"),
        pytest.param(_labels(rid="r-1_0"), "ms-0-r-10-0", id="index-underscore"),
    ],
)
def test_parse_pod_labels_rejects_labels_that_differ_from_the_name(labels: dict[str, str], pod: str) -> None:
    assert parse_pod_labels(labels, "ms", pod) is None


@pytest.mark.parametrize(
    ("ms", "replicas", "role", "role_replicas", "workers"),
    [
        pytest.param("llm", 3, "prefill", 2, 1, id="typical"),
        pytest.param("a", 1, "r", 1, 0, id="short"),
        pytest.param("a" * 48, 10, "r" * 6, 10, 9, id="exactly-63"),
        pytest.param("my-llm", 1, "p-d", 1, 0, id="hyphens"),
    ],
)
def test_generated_name_problem_none_for_valid_names(
    ms: str, replicas: int, role: str, role_replicas: int, workers: int
) -> None:
    assert len(f"{ms}-{replicas}-{role}-{role_replicas}-{workers}") <= 63
    assert generated_name_problem(ms, replicas, role, role_replicas, workers) is None


@pytest.mark.parametrize(
    ("ms", "replicas", "role", "role_replicas", "workers", "words"),
    [
        pytest.param("a" * 49, 10, "r" * 6, 10, 9, "exceed 63", id="64-chars"),
        pytest.param("a" * 60, 100, "prefill", 1, 1, "exceed 63", id="long"),
        pytest.param("llm", 1, "Prefill", 1, 0, "DNS-1035", id="uppercase-role"),
        pytest.param("llm", 1, "PREFILL", 1, 0, "DNS-1035", id="all-caps-role"),
        pytest.param("1llm", 1, "r", 1, 0, "DNS-1035", id="ms-leading-digit"),
        pytest.param("l.m", 1, "r", 1, 0, "DNS-1035", id="dot"),
    ],
)
def test_generated_name_problem_explains(
    ms: str, replicas: int, role: str, role_replicas: int, workers: int, words: str
) -> None:
    problem = generated_name_problem(ms, replicas, role, role_replicas, workers)
    assert problem is not None
    assert words in problem
    assert f"{ms}-{replicas}-{role}-{role_replicas}-{workers}" in problem
