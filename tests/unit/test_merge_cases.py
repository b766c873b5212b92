"""conformance.run.finish.merge_cases: a parametrized behaviour's cases become one result in
which the worst outcome wins (a failing case is never hidden by a passing one), table-driven."""

from __future__ import annotations

import pytest

from conformance.framework.features import Feature
from conformance.framework.outcomes import Outcome, TestResult
from conformance.run.finish import merge_cases


def case(param: str, outcome: Outcome, message: str = "") -> TestResult:
    nodeid = f"suites/x/test_x.py::test_x[{param}]"
    return TestResult("x/y/z", nodeid, Feature.CORE, outcome, 1.0, message)


ROWS = {
    "failing-after-passing": ([case("a", Outcome.PASSED), case("b", Outcome.NON_CONFORMANT, "boom")],
                              Outcome.NON_CONFORMANT, "[b] boom"),
    "failing-before-passing": ([case("a", Outcome.NON_CONFORMANT, "boom"), case("b", Outcome.PASSED)],
                               Outcome.NON_CONFORMANT, "[a] boom"),
    "all-passing": ([case("a", Outcome.PASSED), case("b", Outcome.PASSED)], Outcome.PASSED, ""),
    "error-beats-warning": ([case("a", Outcome.WARNING, "w"), case("b", Outcome.ERROR, "e"), case("c", Outcome.PASSED)],
                            Outcome.ERROR, "[a] w; [b] e"),
}  # fmt: skip


@pytest.mark.parametrize("cases,outcome,message", ROWS.values(), ids=ROWS.keys())
def test_worst_case_wins(cases: list[TestResult], outcome: Outcome, message: str) -> None:
    merged = cases[0]
    for other in cases[1:]:
        merged = merge_cases(merged, other)
    assert (merged.outcome, merged.message) == (outcome, message)
    assert merged.duration == len(cases)
