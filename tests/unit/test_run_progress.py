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
    RUNNING_SHOWN,
    ProgressTail,
    RunProgress,
    behaviour_line,
    clock_text,
    parse_events,
    profile_lines,
    running_line,
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
    counter = RunProgress(3)
    first = counter.lines([{"id": "a", "outcome": "passed", "duration": 1}])
    second = counter.lines([{"id": "b", "outcome": "passed", "duration": 1}, {"id": "c", "outcome": "passed"}])
    assert [line.split()[0] for line in first + second] == ["[1/3]", "[2/3]", "[3/3]"]
    assert counter.lines([{"id": "d", "outcome": "passed"}])[0].startswith("[4/4]")  # never [4/3]


def test_the_counter_counts_behaviours_not_cases() -> None:
    """A parametrized behaviour's line comes once all its cases finished, with the worst outcome."""
    progress = RunProgress(2)
    assert progress.lines([{"event": "collected", "cases": {"core/p": 2, "core/q": 1}}]) == []
    assert progress.lines([_case("core/p", "core/p[a]", "passed", 1.0)]) == []
    assert progress.lines([_case("core/q", "core/q", "passed", 2.0)]) == ["[1/2] core/q passed 2.0s"]
    assert progress.lines([_case("core/p", "core/p[b]", "non-conformant", 1.5, "call: boom")]) == [
        "[2/2] core/p non-conformant 2.5s: call: boom"
    ]
    assert progress.done == 2 and set(progress.finished) == {"core/p[a]", "core/p[b]", "core/q"}


def test_a_behaviour_whose_cases_did_not_all_report_is_flushed_at_the_end() -> None:
    progress = RunProgress(1)
    progress.lines([{"event": "collected", "cases": {"core/p": 3}}, _case("core/p", "core/p[a]", "passed", 1)])
    assert progress.flush() == ["[1/1] core/p passed 1.0s"]
    assert progress.flush() == []


def _case(bid: str, nodeid: str, outcome: str, duration: float, message: str = "") -> dict[str, Any]:
    return {"event": "finished", "id": bid, "nodeid": nodeid, "outcome": outcome, "duration": duration,
            "message": message}  # fmt: skip


@pytest.mark.parametrize(
    ("seconds", "expected"),
    [
        pytest.param(0, "0s", id="zero"),
        pytest.param(42.9, "42s", id="seconds"),
        pytest.param(65, "1m05s", id="minutes"),
        pytest.param(3720, "1h02m", id="hours"),
        pytest.param(-3, "0s", id="negative"),
    ],
)
def test_clock_text(seconds: float, expected: str) -> None:
    assert clock_text(seconds) == expected


@pytest.mark.parametrize(
    ("what", "waited", "limit", "expected"),
    [
        pytest.param(None, 0, None, "running: core/x for 1m05s", id="not waiting"),
        pytest.param("Pods to be Ready", 42, 120, "running: core/x for 1m05s, waiting 42s (of 2m00s) for Pods to be "
                     "Ready", id="waiting"),
        pytest.param("it", 3, None, "running: core/x for 1m05s, waiting 3s for it", id="no deadline known"),
    ],
)  # fmt: skip
def test_running_line(what: str | None, waited: float, limit: float | None, expected: str) -> None:
    assert running_line("core/x", 65, what, waited, limit) == expected


def test_never_silent_for_more_than_fifteen_seconds() -> None:
    """Silence is broken every QUIET_SECONDS by what each slow behaviour is waiting for."""
    now = [1000.0]
    progress = RunProgress(5, clock=lambda: now[0])
    progress.started()
    progress.lines([{"event": "started", "id": "core/slow", "nodeid": "n1", "at": 1000.0}])
    progress.lines([{"event": "started", "id": "core/fresh", "nodeid": "n2", "at": 1010.0}])
    now[0] = 1010.0
    assert progress.quiet_lines() == []  # 10 s of silence: nothing yet
    progress.lines([{"event": "waiting", "id": "core/slow", "nodeid": "n1", "what": "3 Pods Running", "seconds": 120,
                     "at": 1005.0}])  # fmt: skip
    now[0] = 1015.0
    assert progress.quiet_lines() == [
        "running: core/slow for 15s, waiting 10s (of 2m00s) for 3 Pods Running",
        "running: core/fresh for 5s",
    ]
    now[0] = 1020.0
    assert progress.quiet_lines() == []  # said 5 s ago
    now[0] = 1030.0
    progress.lines([{"event": "waited", "id": "core/slow", "nodeid": "n1", "at": 1029.0}])
    assert progress.quiet_lines() == ["running: core/slow for 30s", "running: core/fresh for 20s"]
    progress.lines([_case("core/slow", "n1", "passed", 30.0)])  # a line: the silence starts again
    now[0] = 1040.0
    assert progress.quiet_lines() == []
    now[0] = 1045.0
    assert progress.quiet_lines() == ["running: core/fresh for 35s"]
    progress.lines([_case("core/fresh", "n2", "passed", 35.0)])
    now[0] = 1061.0
    assert progress.quiet_lines() == ["running: 2 of 5 behaviours done; no test has started since"]


def test_at_most_a_few_running_lines() -> None:
    now = [0.0]
    progress = RunProgress(9, clock=lambda: now[0])
    progress.lines([{"event": "started", "id": f"core/t{i}", "nodeid": f"n{i}", "at": float(i)} for i in range(6)])
    now[0] = 100.0
    lines = progress.quiet_lines()
    assert [line.split()[1] for line in lines[:RUNNING_SHOWN]] == [f"core/t{i}" for i in range(RUNNING_SHOWN)]
    assert lines[RUNNING_SHOWN:] == [f"running: {6 - RUNNING_SHOWN} more behaviours"]


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
    counter = RunProgress(2)
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
                     "messages": ["call: boom"], "duration": 2.0, "warnings": "w1"})  # fmt: skip
    events = [json.loads(line) for line in path.read_text().splitlines()]
    for event in events:
        assert isinstance(event.pop("at"), float)
    assert events == [
        {"event": "finished", "id": "core/x", "nodeid": "suites/core/test_x.py::test_y", "pass": "serial",
         "outcome": "passed", "duration": 0.5, "message": "", "evidence": None, "observed": None},
        {"event": "finished", "id": "suites/core/test_x.py::test_z", "nodeid": "suites/core/test_x.py::test_z",
         "pass": "serial", "outcome": "non-conformant", "duration": 2.0, "message": "call: boom; warnings: w1",
         "evidence": None, "observed": None},
    ]  # fmt: skip
    silent = cast(plugin.SuiteState, SimpleNamespace(progress_file=None, pass_name="serial"))
    plugin._progress(silent, "n", {"phases": ["passed"], "messages": [], "duration": 0.0})  # no file: nothing


def test_a_wait_tells_the_plugin_what_it_waits_for(tmp_path: Path) -> None:
    """wait_for and holds_for tell their observer when they start and end (the plugin writes it)."""
    from conformance.framework import waits

    seen: list[tuple[str | None, float | None]] = []
    waits.observe(lambda what, seconds: seen.append((what, seconds)))
    try:
        waits.wait_for("the thing", lambda: True, timeout=5)
        waits.holds_for("the other", lambda: 1, lambda v: v == 1, seconds=0.01)
        with pytest.raises(waits.WaitTimeout):
            waits.wait_for("never", lambda: False, timeout=0.01, interval=0.005)
    finally:
        waits.observe(None)
    assert seen == [("the thing", 5), (None, None), ("the other to keep holding", 0.01), (None, None),
                    ("never", 0.01), (None, None)]  # fmt: skip

    def broken(what: str | None, seconds: float | None) -> None:
        raise RuntimeError("a broken observer")

    waits.observe(broken)  # a broken observer never breaks a wait
    try:
        assert waits.wait_for("x", lambda: 3, timeout=1) == 3
    finally:
        waits.observe(None)


SLOW_PASS = """
import json, sys, time
args = sys.argv[1:]
progress = args[args.index("--progress-file") + 1]
def say(event):
    with open(progress, "a") as f:
        f.write(json.dumps(event) + "\\n")
say({"event": "finished", "id": "core/scale/subresource-up", "nodeid": "n0", "pass": "parallel", "outcome": "passed", "duration": 1.0,
     "message": "", "at": time.time()})
say({"event": "started", "id": "core/t1", "nodeid": "n1", "at": time.time()})
time.sleep(120)  # never writes its results file: stopped, or killed
"""


def test_a_pass_is_stopped_at_once_when_the_controller_dies(tmp_path: Path) -> None:
    """A watch that finds the controller gone stops the pass (Ctrl-C, then SIGKILL after the grace)
    and the pass's results come from its progress file."""
    import subprocess
    import time

    from conformance.run import passes
    from conformance.run.health import Watch

    controller = SimpleNamespace(
        process=subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"]), log=None
    )
    printed: list[str] = []
    old = passes.LOST_GRACE
    passes.LOST_GRACE = 2.0
    try:
        with Watch(controller, None, None, interval=0.1) as watch:
            controller.process.kill()
            started = time.monotonic()
            payload = _run_pass(
                [sys.executable, "-c", SLOW_PASS], "parallel", RunOptions(workers=1), tmp_path, printed.append,
                RunProgress(2), watch,
            )  # fmt: skip
    finally:
        passes.LOST_GRACE = old
        controller.process.wait()
    assert time.monotonic() - started < 30
    assert payload["lost"].what == "controller" and "crashed" not in payload
    assert [r["id"] for r in payload["results"]] == ["core/scale/subresource-up"] and payload["fromProgress"] == 1
    assert any(line.startswith("stopping the parallel pass: the controller under test was killed by SIGKILL")
               for line in printed), printed  # fmt: skip


def test_a_pass_that_is_finishing_says_so() -> None:
    now = [0.0]
    progress = RunProgress(1, clock=lambda: now[0])
    progress.lines([_case("core/a", "n", "passed", 1.0)])
    now[0] = 20.0
    assert progress.quiet_lines() == ["running: all 1 behaviours done; the pass is finishing (cleanup, results)"]
