"""One line per cause (conformance.framework.causes), table-driven, no cluster."""

from __future__ import annotations

from typing import Any

import pytest

from conformance.framework.causes import causes

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
    ],
)
def test_causes(tests: list[dict[str, Any]], expected: list[tuple[str, list[str]]]) -> None:
    assert [(c["cause"], c["behaviours"]) for c in causes(tests)] == expected
