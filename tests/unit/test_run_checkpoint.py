"""The report written as results arrive (conformance.run.checkpoint): results read back from the
progress events, the provisional marks, the throttle. No cluster."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from conformance.framework.catalog import REGISTRY, collect
from conformance.run.checkpoint import UNFINISHED, Checkpoint, partial_pass, provisional, results_from_progress


def test_results_come_back_from_the_progress_events() -> None:
    collect()
    some = sorted(REGISTRY)[:2]
    finished: dict[str, dict[str, Any]] = {
        f"n/{some[0]}": {"event": "finished", "id": some[0], "nodeid": f"n/{some[0]}", "outcome": "passed",
                         "duration": 1.5, "message": "", "evidence": None},
        f"n/{some[1]}": {"event": "finished", "id": some[1], "nodeid": f"n/{some[1]}", "outcome": "non-conformant",
                         "duration": "bad", "message": "call: boom", "evidence": "/r/artifacts/x"},
        "n/unknown": {"event": "finished", "id": "not/a/behaviour", "outcome": "passed"},
    }  # fmt: skip
    results = results_from_progress(finished, REGISTRY)
    assert [(r["id"], r["outcome"], r["durationSeconds"]) for r in results] == [
        (some[0], "passed", 1.5),
        (some[1], "error", 0.0),  # a garbled event is an error, never a pass
    ]
    assert results[0]["statement"] == REGISTRY[some[0]].statement and results[0]["level"] == REGISTRY[some[0]].level
    assert partial_pass("serial", results)["interrupted"] is True


def test_a_provisional_report_is_marked_and_leaves_the_run_data_alone() -> None:
    data: dict[str, Any] = {"run": {"id": "r", "finishedAt": "x", "durationSeconds": 3.0}, "exitCode": 0}
    now = dt.datetime(2026, 12, 7, 5, 0, tzinfo=dt.UTC)
    out = provisional(data, 17, 47, now)
    assert out["run"] == {
        "id": "r",
        "interrupted": True,
        "interruption": f"{UNFINISHED} (17 of 47 behaviours done)",
        "progress": {"done": 17, "selected": 47, "updatedAt": "2026-12-07T05:00:00+00:00"},
    }
    assert out["exitCode"] is None and data == {
        "run": {"id": "r", "finishedAt": "x", "durationSeconds": 3.0},
        "exitCode": 0,
    }


@pytest.mark.parametrize(
    ("steps", "writes"),
    [
        pytest.param([(0.0, False, False)], 0, id="nothing new: no write"),
        pytest.param([(0.0, True, False)], 1, id="something new: a write"),
        pytest.param([(0.0, True, False), (1.0, True, False)], 1, id="throttled"),
        pytest.param([(0.0, True, False), (1.0, True, False), (5.0, False, False)], 2, id="the pending one later"),
        pytest.param([(0.0, True, False), (1.0, False, True)], 2, id="forced"),
    ],
)
def test_the_checkpoint_throttles(steps: list[tuple[float, bool, bool]], writes: int) -> None:
    now = [0.0]
    written: list[float] = []
    checkpoint = Checkpoint(lambda: written.append(now[0]), clock=lambda: now[0], every=5.0)
    for at, changed, force in steps:
        now[0] = at
        if changed:
            checkpoint.changed()
        checkpoint.maybe(force=force)
    assert checkpoint.writes == len(written) == writes


def test_a_failed_write_is_kept_not_raised() -> None:
    def broken() -> None:
        raise OSError("No space left on device")

    checkpoint = Checkpoint(broken)
    checkpoint.changed()
    assert checkpoint.maybe() is False and checkpoint.failure == "OSError: No space left on device"
