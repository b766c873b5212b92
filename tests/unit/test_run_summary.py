"""What ``run`` prints at its end (conformance.run.summary): the cause first and once, its hint,
one line per shared cause, the verdict with what the run was judged on. Table-driven, no cluster."""

from __future__ import annotations

from typing import Any

import pytest

from conformance.framework.causes import causes, not_run, undecided
from conformance.run.summary import summary, verdict_text

LOST = "the controller under test was killed by SIGKILL at 04:50:12 UTC"


def test(id: str, outcome: str, message: str = "", feature: str = "Core") -> dict[str, Any]:
    return {"id": id, "feature": feature, "outcome": outcome, "message": message}


test.__test__ = False  # type: ignore[attr-defined]


def report(tests: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    return {"verdict": "error", "tests": tests, "causes": causes(tests), "profiles": [], **extra}


def texts(data: dict[str, Any]) -> list[str]:
    return [line.text for line in summary(data, ["r/conformance-report.yaml"])]


def test_one_root_cause_is_one_line_with_its_count_and_hint() -> None:
    tests = [test(f"core/t{i}", "error", not_run(LOST)) for i in range(47)]
    tests += [test("core/r", "error", undecided(LOST, "HTTP 500 Internal Server Error")), test("core/p", "passed")]
    data = report(tests, error={"message": f"{LOST}: what was running or not yet run could not be decided",
                                "hint": "find why it stopped"})  # fmt: skip
    assert texts(data) == [
        f"error: {LOST}: what was running or not yet run could not be decided (48 behaviours not decided)",
        "  -> find why it stopped",
        "verdict: error; report: r/conformance-report.yaml",
    ]
    assert [line.error for line in summary(data, [])][:2] == [True, False]  # the error in red, its hint plain


def test_an_interruption_is_one_cause_line_not_one_per_behaviour() -> None:
    tests = [test(f"core/t{i}", "error", not_run("the run was interrupted")) for i in range(3)]
    tests.append(test("core/f", "non-conformant", "expected 3 Pods, saw 2"))
    assert texts(report(tests, notes=["n" * 600])) == [
        "  cause (3 behaviours): the run was interrupted (3 behaviours not decided)",
        "  non-conformant  core/f: expected 3 Pods, saw 2",
        f"  note: {'n' * 500}",
        "verdict: error; report: r/conformance-report.yaml",
    ]


def test_only_failed_preflight_checks_are_repeated_and_profiles_follow() -> None:
    data = report(
        [],
        preflight=[{"name": "nodes-ready", "result": "ok", "message": "1/1"},
                   {"name": "garbage-collection", "result": "missing", "message": "no"}],
        profiles=[{"profile": "Core", "verdict": "partial", "counts": {"passed": 3, "error": 1, "warning": 0}},
                  {"profile": "Plugins", "verdict": "partial", "counts": {"passed": 0, "skipped-by-user": 31}}],
    )  # fmt: skip
    assert texts(data)[:3] == [  # Plugins: nothing of it selected, no line
        f"  preflight {'garbage-collection':28} {'missing':8} no",
        f"  profile {'Core':20} {'partial':9} 3 passed, 1 error",
        "verdict: error; report: r/conformance-report.yaml",
    ]


@pytest.mark.parametrize(
    ("data", "text"),
    [
        ({"verdict": "success"}, "success"),
        ({"verdict": "success", "judged": {"verdict": "success", "fullyRun": ["Core"], "narrowed": []}}, "success"),
        (
            {"verdict": "partial", "judged": {"verdict": "success", "fullyRun": ["Plugins"],
                                              "narrowed": [{"profile": "Core", "selected": 2, "of": 47}]}},
            "partial (judged on the selection: success; fully run: Plugins; narrowed: Core (2 of 47))",
        ),
    ],
)  # fmt: skip
def test_verdict_text(data: dict[str, Any], text: str) -> None:
    assert verdict_text(data) == text


def test_the_error_comes_last_before_the_verdict_and_an_unwritten_report_is_said() -> None:
    tests = [test("core/f", "non-conformant", "expected 3 Pods, saw 2")]
    data = report(tests, error={"message": "--report-dir r: no report could be written (No space left on device)"},
                  exitCode=2, run={"interrupted": True, "interruption": "interrupted (SIGINT) while running"})  # fmt: skip
    lines = [line.text for line in summary(data, [], "--report-dir r: no report could be written (No space left)")]
    assert lines == [
        "  non-conformant  core/f: expected 3 Pods, saw 2",
        "error: --report-dir r: no report could be written (No space left on device)",
        "interrupted (SIGINT) while running",
        "verdict: error (exit code 2); no report was written",
    ]
