"""JUnit XML from the report: each outcome mapped onto JUnit's (a warning is a passed test case
with its finding in system-out, since it does not fail the run), suite counts, properties."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from typing import Any

import pytest

from conformance.framework import junit


def case(id: str, outcome: str, level: str | None = "MUST", message: str = "m") -> dict[str, Any]:
    return {
        "id": id,
        "feature": "Core",
        "profile": "Core",
        "level": level,
        "outcome": outcome,
        "durationSeconds": 1.5,
        "message": message,
        "spec": "a.txt#S",
    }


@pytest.mark.parametrize(
    ("test", "children", "text"),
    [
        pytest.param(case("core/p", "passed"), [], None, id="passed"),
        pytest.param(case("core/n", "non-conformant"), ["failure"], "m", id="non-conformant-is-a-failure"),
        pytest.param(case("core/e", "error"), ["error"], "m", id="error-is-an-error"),
        pytest.param(case("core/s", "not-supported"), ["skipped"], None, id="not-supported-is-skipped"),
        pytest.param(case("core/u", "skipped-by-user"), ["skipped"], None, id="skipped-by-user-is-skipped"),
        pytest.param(
            case("core/w", "warning", "SHOULD", "expected 429, got 403"),
            ["system-out"],
            "warning: SHOULD not met (does not fail the run): expected 429, got 403",
            id="warning-passes-with-a-note",
        ),
        pytest.param(
            case("core/m", "warning", "MAY", "x"),
            ["system-out"],
            "warning: MAY not met (does not fail the run): x",
            id="may-warning",
        ),
    ],
)
def test_each_outcome(test: dict[str, Any], children: list[str], text: str | None) -> None:
    root = ET.fromstring(junit.render({"tests": [test]}))
    (testcase,) = root.iter("testcase")
    kids = [c for c in testcase if c.tag != "properties"]
    assert [c.tag for c in kids] == children
    if text is not None:
        assert kids[0].text == text
    props = {p.get("name"): p.get("value") for p in testcase.iter("property")}
    assert props["outcome"] == test["outcome"] and props["level"] == test["level"]


def test_suite_counts_do_not_count_warnings_as_failures() -> None:
    tests = [
        case("a/p", "passed"),
        case("a/w", "warning", "SHOULD"),
        case("a/n", "non-conformant"),
        case("a/e", "error"),
    ]
    (suite,) = ET.fromstring(junit.render({"tests": tests})).iter("testsuite")
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors"), suite.get("skipped")) == (
        "4",
        "1",
        "1",
        "0",
    )
