"""A narrowed run is judged on what it selected (conformance.framework.judged), table-driven."""

from __future__ import annotations

from typing import Any

import pytest

from conformance.framework.features import PROFILES, Feature
from conformance.framework.judged import judge, judged_text
from conformance.framework.outcomes import Outcome, TestResult

from .samples import SUPPORT

CORE, PLUGINS = PROFILES["Core"], PROFILES["Plugins"]


def r(id: str, outcome: Outcome, feature: Feature = Feature.CORE) -> TestResult:
    return TestResult(id, id, feature, outcome, 1.0)


PLUGIN = Feature.PLUGIN_FRAMEWORK


@pytest.mark.parametrize(
    ("tests", "flags", "expected"),
    [
        pytest.param([r("a", Outcome.PASSED), r("b", Outcome.SKIPPED_BY_USER)], {},
                     {"verdict": "success", "fullyRun": [], "narrowed": [{"profile": "Core", "selected": 1, "of": 2}]},
                     id="--id: all selected passed"),
        pytest.param([r("a", Outcome.PASSED), r("b", Outcome.PASSED), r("p", Outcome.PASSED, PLUGIN),
                      r("q", Outcome.SKIPPED_BY_USER, PLUGIN)], {},
                     {"verdict": "success", "fullyRun": ["Core"],
                      "narrowed": [{"profile": "Plugins", "selected": 1, "of": 2}]}, id="one full, one narrowed"),
        pytest.param([r("a", Outcome.NON_CONFORMANT), r("b", Outcome.SKIPPED_BY_USER)], {},
                     {"verdict": "failure", "fullyRun": [], "narrowed": [{"profile": "Core", "selected": 1, "of": 2}]},
                     id="a selected failure"),
        pytest.param([r("a", Outcome.ERROR), r("b", Outcome.SKIPPED_BY_USER)], {},
                     {"verdict": "partial", "fullyRun": [], "narrowed": [{"profile": "Core", "selected": 1, "of": 2}]},
                     id="a selected error"),
        pytest.param([r("a", Outcome.PASSED), r("p", Outcome.SKIPPED_BY_USER, PLUGIN)], {},
                     {"verdict": "success", "fullyRun": ["Core"], "narrowed": []}, id="a profile not selected at all"),
        pytest.param([r("a", Outcome.PASSED)], {"interrupted": True},
                     {"verdict": "error", "fullyRun": ["Core"], "narrowed": []}, id="interrupted"),
        pytest.param([r("a", Outcome.PASSED)], {"error": True},
                     {"verdict": "error", "fullyRun": ["Core"], "narrowed": []}, id="stopped on an error"),
        pytest.param([r("a", Outcome.PASSED)], {"preflight_ok": False},
                     {"verdict": "error", "fullyRun": ["Core"], "narrowed": []}, id="preflight failed"),
    ],
)  # fmt: skip
def test_judge(tests: list[TestResult], flags: dict[str, bool], expected: dict[str, Any]) -> None:
    options = {"preflight_ok": True, "interrupted": False, **flags}
    assert judge([CORE, PLUGINS], tests, SUPPORT, **options) == expected


@pytest.mark.parametrize(
    ("judged", "text"),
    [
        ({"verdict": "success", "fullyRun": ["Core", "Plugins"], "narrowed": []}, "success; fully run: Core, Plugins"),
        (
            {
                "verdict": "success",
                "fullyRun": ["Plugins"],
                "narrowed": [{"profile": "Core", "selected": 12, "of": 47}],
            },
            "success on the selection; fully run: Plugins; narrowed: Core (12 of 47)",
        ),
        ({"verdict": "failure", "fullyRun": [], "narrowed": []}, "failure"),
    ],
)
def test_judged_text(judged: dict[str, Any], text: str) -> None:
    assert judged_text(judged) == text
