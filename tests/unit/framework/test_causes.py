"""One line per cause (conformance.framework.causes), table-driven, no cluster."""

from __future__ import annotations

from typing import Any

import pytest

from conformance.framework.causes import causes, not_run, stopped_by, undecided

CRD = "the installed CRD lacks spec.rolloutStrategy.rollingUpdateConfiguration.maxSurge (preflight crd-documented-fields), so this cannot pass: "


def t(id: str, feature: str, outcome: str, message: str = "") -> dict[str, Any]:
    return {"id": id, "feature": feature, "outcome": outcome, "message": message}


@pytest.mark.parametrize(
    ("tests", "expected"),
    [
        ([t("a", "Core", "passed"), t("b", "Core", "non-conformant", "x")], []),  # a failure of its own
        (  # every behaviour of a feature failed: one line for the feature
            [t("d1", "HeadlessService", "non-conformant", "no Pod  was\ncreated"), t("d2", "HeadlessService", "error")],
            [
                (
                    "feature HeadlessService: none of its 2 behaviours passed; the first, d1: no Pod was created",
                    ["d1", "d2"],
                )
            ],
        ),
        ([t("d1", "HeadlessService", "non-conformant")], []),  # one behaviour is no pattern
        (  # not-supported and skipped behaviours did not run: they neither count nor break the pattern
            [
                t("d1", "X", "error"),
                t("d2", "X", "error"),
                t("d3", "X", "not-supported"),
                t("d4", "X", "skipped-by-user"),
            ],
            [("feature X: none of its 2 behaviours passed; the first, d1: ", ["d1", "d2"])],
        ),
        (  # the CRD's missing field explains its failures, which no longer count for the feature
            [t("s1", "MaxSurge", "non-conformant", CRD + "a"), t("s2", "MaxSurge", "non-conformant", CRD + "b")],
            [
                (
                    "the installed CRD lacks spec.rolloutStrategy.rollingUpdateConfiguration.maxSurge (preflight "
                    "crd-documented-fields)",
                    ["s1", "s2"],
                )
            ],
        ),
        (  # what stopped the run is one cause, first, with those it left undecided and those it kept from running
            [
                t("c1", "ControllerRevisions", "error", undecided("the controller under test was killed", "HTTP 500")),
                t("c2", "ControllerRevisions", "non-conformant", "x"),
                t("c3", "Core", "error", not_run("the controller under test was killed")),
                t("c4", "Core", "error", not_run("the controller under test was killed")),
                t("c5", "Core", "passed"),
            ],
            [("the controller under test was killed (3 behaviours not decided)", ["c1", "c3", "c4"])],
        ),
        (  # an interruption's not-run behaviours: one line, never one per behaviour; no feature is blamed
            [t(f"i{n}", "Core", "error", not_run("the run was interrupted")) for n in range(47)],
            [("the run was interrupted (47 behaviours not decided)", [f"i{n}" for n in range(47)])],
        ),
        (  # one is still a cause: it names what stopped the run
            [t("i1", "Core", "error", not_run("preflight failed: nodes-ready"))],
            [("preflight failed: nodes-ready (1 behaviour not decided)", ["i1"])],
        ),
        (  # a feature cause quotes a failure as a sentence: no HTTP headers
            [
                t("h1", "X", "error", "ApiException: (500)\nReason: Internal Server Error\nHTTP response headers: "
                  "HTTPHeaderDict({'Audit-Id': 'a'})\nHTTP response body: {\"message\": \"webhook down\"}\n"),
                t("h2", "X", "error", "y"),
            ],
            [("feature X: none of its 2 behaviours passed; the first, h1: HTTP 500 Internal Server "
              "Error: webhook down", ["h1", "h2"])],
        ),
    ],
)  # fmt: skip
def test_causes(tests: list[dict[str, Any]], expected: list[tuple[str, list[str]]]) -> None:
    assert [(c["cause"], c["behaviours"]) for c in causes(tests)] == expected


@pytest.mark.parametrize(
    ("message", "reason"),
    [
        (not_run("the run was interrupted"), "the run was interrupted"),
        (undecided("the API server stopped answering", "MaxRetryError -- more"), "the API server stopped answering"),
        ("not run", None),
        ("a plain failure", None),
        ("", None),
    ],
)
def test_stopped_by(message: str, reason: str | None) -> None:
    assert stopped_by(message) == reason
