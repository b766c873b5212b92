"""The run's terminal progress: profile lines, one line per finished behaviour, and reading the
suite's progress file while a pass runs (a fake pass, no cluster)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest

from conformance.framework import plugin
from conformance.run.options import RunOptions
from conformance.run.passes import _run_pass
from conformance.run.progress import (
    MESSAGE_WIDTH,
    BehaviourCounter,
    ProgressTail,
    behaviour_line,
    eta_text,
    parse_events,
    profile_lines,
)

ALL = ["Core", "Plugins", "Accelerators"]


@pytest.mark.parametrize(
    ("running", "left_out", "expected"),
    [
        pytest.param([], {}, ["profiles: Core, Plugins, Accelerators (3 of 3)"], id="all"),
        pytest.param(
            ["Core", "Plugins"],
            {"Accelerators": "no capability file"},
            ["profiles: Core, Plugins (2 of 3)", "left out: Accelerators: no capability file"],
            id="harness leaves one out",
        ),
        pytest.param(
            ["Core"],
            {},
            ["profiles: Core (1 of 3)", "left out: Plugins, Accelerators: not selected (--profile)"],
            id="user selection",
        ),
        pytest.param(
            ["Core"],
            {"Accelerators": "why"},
            ["profiles: Core (1 of 3)", "left out: Plugins: not selected (--profile)", "left out: Accelerators: why"],
            id="both reasons",
        ),
    ],
)
def test_profile_lines(running: list[str], left_out: dict[str, str], expected: list[str]) -> None:
    assert profile_lines(running, ALL, left_out) == expected


LONG = "x" * (MESSAGE_WIDTH + 50)


@pytest.mark.parametrize(
    ("event", "done", "total", "expected"),
    [
        pytest.param({"id": "dns/services/recreated", "outcome": "passed", "duration": 3.14, "message": ""}, 37, 91,
                     "[37/91] dns/services/recreated passed 3.1s", id="passed"),
        pytest.param({"id": "core/a", "outcome": "passed", "duration": 1, "message": "observed: x"}, 3, 91,
                     "[ 3/91] core/a passed 1.0s", id="a pass prints no message"),
        pytest.param({"id": "core/b", "outcome": "non-conformant", "duration": 12.04,
                      "message": "call: expected 3 Pods\nassert 2 == 3"}, 5, 9,
                     "[5/9] core/b non-conformant 12.0s: call: expected 3 Pods", id="first line of the message"),
        pytest.param({"id": "core/s", "outcome": "warning", "duration": 2.5,
                      "message": "call: expected HTTP 429, got 403"}, 4, 9,
                     "[4/9] core/s warning 2.5s: call: expected HTTP 429, got 403", id="a warning prints its message"),
        pytest.param({"id": "core/c", "outcome": "not-supported", "duration": 0, "message": "setup: Foo: undeclared"},
                     1, 100, "[  1/100] core/c not-supported 0.0s: setup: Foo: undeclared", id="not-supported"),
        pytest.param({"id": "core/d", "outcome": "error", "duration": 0.5, "message": LONG}, 1, 1,
                     f"[1/1] core/d error 0.5s: {'x' * MESSAGE_WIDTH}...", id="long message cut"),
        pytest.param({"id": "core/e", "outcome": "error", "duration": "n/a"}, 1, 1, "[1/1] core/e error ?s",
                     id="bad duration, no message"),
        pytest.param({}, 1, 1, "[1/1] ? ? 0.0s", id="empty event"),
    ],
)  # fmt: skip
def test_behaviour_line(event: dict[str, Any], done: int, total: int, expected: str) -> None:
    assert behaviour_line(event, done, total) == expected


@pytest.mark.parametrize(
    ("chunk", "ids"),
    [
        pytest.param("", [], id="empty"),
        pytest.param('{"id": "a"}\n{"id": "b"}\n', ["a", "b"], id="two"),
        pytest.param('{"id": "a"}\nnot json\n[1]\n{"id": "b"}', ["a", "b"], id="junk skipped"),
    ],
)
def test_parse_events(chunk: str, ids: list[str]) -> None:
    assert [e["id"] for e in parse_events(chunk)] == ids


def test_the_tail_returns_complete_lines_once(tmp_path: Path) -> None:
    path = tmp_path / "progress.jsonl"
    tail = ProgressTail(path)
    steps: list[tuple[bytes, list[str]]] = [
        (b"", []),  # the file does not exist yet
        (b'{"id": "a"}\n{"id": "b', ["a"]),  # a partial line waits for the rest
        (b'"}\n', ["b"]),
        (b"", []),
        ('{"id": "é"}\n{"id": "c"}\n'.encode(), ["é", "c"]),
    ]
    for written, ids in steps:
        if written or path.exists():
            with path.open("ab") as f:
                f.write(written)
        assert [e["id"] for e in tail.poll()] == ids


def test_the_counter_numbers_over_the_whole_run() -> None:
    counter = BehaviourCounter(3)
    first = counter.lines([{"id": "a", "outcome": "passed", "duration": 1}])
    second = counter.lines([{"id": "b", "outcome": "passed", "duration": 1}, {"id": "c", "outcome": "passed"}])
    assert [line.split()[0] for line in first + second] == ["[1/3]", "[2/3]", "[3/3]"]
    assert counter.lines([{"id": "d", "outcome": "passed"}])[0].startswith("[4/4]")  # never [4/3]


@pytest.mark.parametrize(
    ("elapsed", "done", "total", "expected"),
    [
        pytest.param(10.0, 4, 100, "", id="too-early"),
        pytest.param(10.0, 5, 5, "", id="none-left"),
        pytest.param(10.0, 5, 10, ", ~10s left", id="seconds"),
        pytest.param(60.0, 10, 30, ", ~2m left", id="minutes"),
        pytest.param(0.01, 10, 11, ", ~1s left", id="at-least-a-second"),
    ],
)
def test_eta_text(elapsed: float, done: int, total: int, expected: str) -> None:
    assert eta_text(elapsed, done, total) == expected


def test_the_counter_estimates_the_time_left_from_its_pace() -> None:
    now = [0.0]
    counter = BehaviourCounter(10, clock=lambda: now[0])
    lines = []
    for i in range(6):
        now[0] += 4.0
        lines += counter.lines([{"id": f"t{i}", "outcome": "passed", "duration": 4}])
    assert lines[3].startswith("[ 4/10] t3")
    assert lines[4].startswith("[ 5/10, ~20s left] t4") and lines[5].startswith("[ 6/10, ~16s left] t5")


FAKE_PASS = """
import json, sys
args = sys.argv[1:]
progress, results = args[args.index("--progress-file") + 1], args[args.index("--results-file") + 1]
for i, outcome in enumerate(["passed", "non-conformant"]):
    with open(progress, "a") as f:
        f.write(json.dumps({"id": f"core/t{i}", "outcome": outcome, "duration": 1.25, "message": "call: boom"}) + "\\n")
with open(results, "w") as f:
    json.dump({"pass": "parallel", "exitStatus": 1, "interrupted": False, "results": []}, f)
print("the full pytest output goes to the log")
sys.exit(1)
"""


def test_a_pass_forwards_each_finished_behaviour_and_keeps_its_log(tmp_path: Path) -> None:
    printed: list[str] = []
    counter = BehaviourCounter(2)
    payload = _run_pass(
        [sys.executable, "-c", FAKE_PASS], "parallel", RunOptions(workers=1), tmp_path, printed.append, counter
    )
    assert payload["exitStatus"] == 1 and payload["interrupted"] is False
    assert printed[:2] == ["[1/2] core/t0 passed 1.2s", "[2/2] core/t1 non-conformant 1.2s: call: boom"]
    assert printed[2].startswith("parallel pass finished in")
    assert "the full pytest output goes to the log" in (tmp_path / "parallel.log").read_text()


def test_the_plugin_appends_one_line_per_finished_test(tmp_path: Path) -> None:
    path = tmp_path / "progress.jsonl"
    state = cast(plugin.SuiteState, SimpleNamespace(progress_file=path, pass_name="serial"))
    plugin._progress(state, "suites/core/test_x.py::test_y", {"phases": ["passed", "passed", "passed"],
                     "messages": [], "duration": 0.5, "behaviour": "core/x"})  # fmt: skip
    plugin._progress(state, "suites/core/test_x.py::test_z", {"phases": ["passed", "non-conformant", "passed"],
                     "messages": ["call: boom"], "duration": 2.0})  # fmt: skip
    events = [json.loads(line) for line in path.read_text().splitlines()]
    assert events == [
        {"id": "core/x", "pass": "serial", "outcome": "passed", "duration": 0.5, "message": ""},
        {"id": "suites/core/test_x.py::test_z", "pass": "serial", "outcome": "non-conformant", "duration": 2.0,
         "message": "call: boom"},
    ]  # fmt: skip
    silent = cast(plugin.SuiteState, SimpleNamespace(progress_file=None, pass_name="serial"))
    plugin._progress(silent, "n", {"phases": ["passed"], "messages": [], "duration": 0.0})  # no file: nothing
