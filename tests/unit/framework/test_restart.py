"""Controller restarts: the runner's request/answer directory with a real thread and a real
requesting process, and the suite's side (which restart wins, how a failing command is told)."""

from __future__ import annotations

import json
import sys
import threading
from pathlib import Path

import pytest

from conformance.framework.outcomes import Inconclusive
from conformance.framework.restart import NOT_DECLARED, RestartConfigError, restart_controller, restart_from_option
from conformance.framework.support import ControllerRestart, Support
from conformance.run.restarts import RestartService, request_restart

DECLARED = ControllerRestart(("kubectl", "rollout", "restart", "deploy/c"), 30.0, "support.yaml")


def _support(restart: ControllerRestart | None) -> Support:
    return Support(name="impl", version="1", supported=frozenset(), restart=restart)


@pytest.mark.parametrize(
    ("option", "declared", "expected"),
    [
        pytest.param(None, None, None, id="neither"),
        pytest.param(None, DECLARED, DECLARED.command, id="support-file"),
        pytest.param('["restart", "me"]', None, ("restart", "me"), id="harness"),
        pytest.param('["restart", "me"]', DECLARED, ("restart", "me"), id="harness-wins"),
    ],
)
def test_the_harness_restart_wins_over_the_declared_one(
    option: str | None, declared: ControllerRestart | None, expected: tuple[str, ...] | None
) -> None:
    chosen = restart_from_option(option, _support(declared))
    assert (chosen.command if chosen else None) == expected


@pytest.mark.parametrize(
    ("option", "expected"),
    [
        pytest.param("restart me", "--controller-restart: not JSON", id="not-json"),
        pytest.param("[]", "expected a JSON list of non-empty strings", id="empty"),
        pytest.param('{"a": 1}', "expected a JSON list of non-empty strings", id="object"),
        pytest.param('["x", ""]', "expected a JSON list of non-empty strings", id="empty-arg"),
        pytest.param('["x", 3]', "expected a JSON list of non-empty strings", id="number"),
    ],
)
def test_a_bad_option_says_what_is_wrong(option: str, expected: str) -> None:
    with pytest.raises(RestartConfigError, match=expected.replace("-", r"\-")):
        restart_from_option(option, _support(None))


def test_no_declared_restart_is_inconclusive() -> None:
    with pytest.raises(Inconclusive, match="declares no way to restart"):
        restart_controller(None)
    assert "controllerRestart.command" in NOT_DECLARED


@pytest.mark.parametrize(
    ("command", "timeout", "expected"),
    [
        pytest.param(("sh", "-c", "echo broken >&2; exit 3"), 10.0, "exited 3: broken", id="fails"),
        pytest.param(("sleep", "5"), 0.2, "did not return within 0.2s", id="overruns"),
        pytest.param(("/nonexistent/restart",), 10.0, "could not run", id="missing"),
    ],
)
def test_a_failing_restart_command_is_an_error_naming_it(
    command: tuple[str, ...], timeout: float, expected: str
) -> None:
    with pytest.raises(RuntimeError, match=expected) as info:
        restart_controller(ControllerRestart(command, timeout, "support.yaml"))
    assert "support.yaml" in str(info.value) and command[0] in str(info.value)


def test_a_succeeding_restart_command_returns_its_duration() -> None:
    assert restart_controller(ControllerRestart(("true",), 10.0)) >= 0.0


def test_the_runner_restarts_on_a_request_from_another_process(tmp_path: Path) -> None:
    restarted = threading.Event()
    with RestartService(tmp_path / "restarts", restarted.set) as service:
        restart = restart_from_option(json.dumps(service.command()), _support(None))
        assert restart is not None and restart.command[0] == sys.executable
        restart_controller(restart)  # a real child process writes the request and waits for the answer
        assert restarted.is_set() and service.served == 1
    assert not list((tmp_path / "restarts").iterdir()), "request and answer files are removed"


def test_a_failed_restart_reaches_the_requester(tmp_path: Path) -> None:
    def broken() -> None:
        raise OSError("the controller did not come back")

    with RestartService(tmp_path / "restarts", broken) as service:
        answer = request_restart(service.directory, timeout=10)
    assert answer["ok"] is False and "did not come back" in str(answer["message"])


def test_an_unserved_request_times_out_and_leaves_nothing(tmp_path: Path) -> None:
    answer = request_restart(tmp_path, timeout=0.3)
    assert answer["ok"] is False and "did not answer" in str(answer["message"])
    assert not list(tmp_path.iterdir())
    missing = request_restart(tmp_path / "gone", timeout=0.3)
    assert missing["ok"] is False and "no restart service" in str(missing["message"])
