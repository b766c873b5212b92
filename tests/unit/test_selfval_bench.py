"""bench/selfval_bench.py's pure parts: runs from records, the fitted model, the doubled table."""

from __future__ import annotations

import pytest

from bench.selfval_bench import Run, doubled, fit, modelled, runs_of
from tests.integration.selfval_rounds import Round, alone


def test_records_of_one_round_are_one_run_and_a_fault_alone_its_own() -> None:
    records = [
        {"fault": "f", "seconds": 10, "round": "round-1", "roundFaults": 2, "roundBehaviours": 6,
         "roundWorkers": 4, "roundSeconds": 20.0},
        {"fault": "g", "seconds": 10, "round": "round-1", "roundFaults": 2, "roundBehaviours": 6,
         "roundWorkers": 4, "roundSeconds": 20.0},
        {"fault": "h", "seconds": 30.0, "outcomes": {"a": "non-conformant"}},
    ]  # fmt: skip
    assert sorted(runs_of(records), key=lambda r: r.name) == [Run("h", 1, 1, 1, 30.0), Run("round-1", 2, 6, 4, 20.0)]


@pytest.mark.parametrize(
    ("runs", "line"),
    [
        ([Run("a", 1, 1, 1, 12.0), Run("b", 2, 8, 4, 14.0), Run("c", 3, 16, 4, 18.0)], (10.0, 2.0)),
        ([Run("a", 1, 4, 4, 12.0), Run("b", 1, 4, 4, 14.0)], (13.0, 0.0)),  # one x: the mean, no slope
    ],
)
def test_fit(runs: list[Run], line: tuple[float, float]) -> None:
    assert fit(runs) == pytest.approx(line)


def test_the_model_and_the_doubled_table() -> None:
    rounds = [Round({"f": ("a", "b")}, ("s",)), alone("g", ("c",))]
    assert modelled(rounds, 10.0, 4.0) == pytest.approx((10 + 4 * 3 / 4) + (10 + 4 * 1))
    table, ids = doubled({"f": ["a/*"]}, ["a/1"])
    assert table == {"f": ["a/*"], "f~twin": ["a/*~twin"]} and ids == ["a/1", "a/1~twin"]
