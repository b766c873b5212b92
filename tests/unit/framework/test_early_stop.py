"""The early-stop rule of waits (conformance.framework.early_stop), table-driven, no cluster."""

from __future__ import annotations

from pathlib import Path

import pytest

from conformance.framework.early_stop import LogTail, WarningEvent, decided, error_lines, names_object, reports_error
from conformance.framework.waits import WaitTimeout, wait_for

NS, NAME = "kc-1a2b-7", "llm"


@pytest.mark.parametrize(
    ("line", "names"),
    [
        ("reconcile kc-1a2b-7/llm failed (boom); retrying in 0.2s", True),
        ('{"msg":"Reconciler error","namespace":"kc-1a2b-7","name":"llm","error":"x"}', True),
        ("reconcile kc-1a2b-7/llm-2 failed", False),  # another object of the same test
        ("reconcile kc-1a2b-8/llm failed", False),  # another test's namespace
        ("llm kc-1a2b-7", True),
    ],
)
def test_a_line_names_the_object(line: str, names: bool) -> None:
    assert names_object(line, NS, NAME) is names


@pytest.mark.parametrize(
    ("line", "error"),
    [
        ("reconcile x failed (boom)", True),
        ("E1203 10:00:00.000000 1 controller.go:1] sync x", True),
        ('{"level":"error","msg":"Reconciler error"}', True),
        ("unknown plugin headless-service", True),
        ("I1203 10:00:00 synced kc-1a2b-7/llm", False),
        ("created Pod kc-1a2b-7/llm-0-entry", False),
    ],
)
def test_a_line_reports_an_error(line: str, error: bool) -> None:
    assert reports_error(line) is error


LOG = ["reconcile kc-1a2b-7/llm failed (unknown plugin)", "synced kc-1a2b-7/llm"]
WARN = WarningEvent("PluginError", "headless-service is not registered")


@pytest.mark.parametrize(
    ("created", "elapsed", "warnings", "log", "stops"),
    [
        (0, 6.0, [], LOG * 2, True),  # nothing created, two error lines
        (0, 6.0, [WARN, WARN], [], True),  # two Warning Events
        (0, 6.0, [WarningEvent("X", "y", count=3)], [], True),  # one Event that happened three times
        (0, 6.0, [WARN], LOG, True),  # an Event and a log line
        (0, 6.0, [], LOG, False),  # one report could be transient
        (0, 4.0, [], LOG * 3, False),  # too soon: time to reconcile once
        (1, 60.0, [WARN, WARN], LOG * 5, False),  # something was created: the implementation acts
    ],
)
def test_decided(created: int, elapsed: float, warnings: list[WarningEvent], log: list[str], stops: bool) -> None:
    errors = error_lines(log, NS, NAME)
    reason = decided(created=created, elapsed=elapsed, warnings=warnings, log_errors=errors, namespace=NS, name=NAME)
    assert (reason is not None) is stops, reason
    if reason is not None:
        assert f"no Pod of ModelServing {NS}/{NAME} was created" in reason and "stopped waiting early" in reason


def test_the_log_tail_reads_only_new_complete_lines(tmp_path: Path) -> None:
    log = tmp_path / "impl.log"
    log.write_text("before the test\n")
    tail = LogTail.from_now(log)
    assert tail.new_lines() == []
    with log.open("a") as f:
        f.write("one\ntw")
    assert tail.new_lines() == ["one"]
    with log.open("a") as f:
        f.write("o\n")
    assert tail.new_lines() == ["two"]
    assert LogTail.from_now(tmp_path / "absent.log").new_lines() == []


def test_a_wait_gives_up_with_the_reason_before_its_deadline() -> None:
    with pytest.raises(WaitTimeout) as caught:
        wait_for("3 Pods", lambda: [], until=bool, timeout=60, interval=0.01,
                 give_up=lambda seen, elapsed: "nothing will come" if elapsed > 0.05 else None)  # fmt: skip
    assert str(caught.value) == "gave up on 3 Pods before the 60s deadline: nothing will come"
