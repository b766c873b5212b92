"""The run's watch on what every test depends on (conformance.run.health): the decisions
table-driven, the thread with a real child process and a failing probe (no cluster)."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from conformance.framework.waits import wait_for
from conformance.run.health import (
    API_GRACE,
    Lost,
    Watch,
    api_lost,
    component_lost,
    controller_lost,
    describe_failure,
    exit_text,
)

T = 1_700_000_000.0  # 22:13:20 UTC


@pytest.mark.parametrize(
    ("code", "text"),
    [(-9, "was killed by SIGKILL"), (-15, "was killed by SIGTERM"), (1, "exited with code 1"), (0, "exited with code 0"),
     (137, "exited with code 137 (SIGKILL)"), (-99, "was killed by signal 99")],
)  # fmt: skip
def test_exit_text(code: int, text: str) -> None:
    assert exit_text(code) == text


@pytest.mark.parametrize(
    ("code", "restarting", "lost"),
    [(None, False, False), (-9, True, False), (-9, False, True), (0, False, True)],
)
def test_controller_lost(code: int | None, restarting: bool, lost: bool) -> None:
    found = controller_lost(code, restarting, T, "reports/kthena-ref.log")
    assert (found is not None) is lost
    if found is not None:
        assert found.what == "controller" and found.exit_code == 1
        assert found.cause.startswith(f"the controller under test {exit_text(code or 0)} at 22:13:20 UTC")
        assert "reports/kthena-ref.log" in found.hint


@pytest.mark.parametrize(
    ("since", "now", "lost"),
    [(None, T, False), (T, T + API_GRACE - 1, False), (T, T + API_GRACE, True)],
)
def test_api_lost_after_its_grace(since: float | None, now: float, lost: bool) -> None:
    found = api_lost(since, now, "connection refused", "https://127.0.0.1:6443")
    assert (found is not None) is lost
    if found is not None:
        assert found.exit_code == 3 and found.what == "api-server"
        assert (
            found.cause
            == "the API server https://127.0.0.1:6443 stopped answering at 22:13:20 UTC (connection refused)"
        )


@pytest.mark.parametrize(
    ("state", "expected"),
    [
        (None, None),
        ({"phase": "ready"}, None),
        ({"phase": "degraded"}, None),
        ({"phase": "degraded", "failed_component": "kube-apiserver", "exit_code": -9},
         ("api-server", "the cluster's kube-apiserver was killed by SIGKILL")),
        ({"phase": "degraded", "failed_component": "kwok", "exit_code": 2},
         ("cluster", "the cluster's kwok exited with code 2")),
        ({"phase": "degraded", "failed_component": "kubelet-real-0"}, ("cluster", "the cluster's kubelet-real-0 exited")),
    ],
)  # fmt: skip
def test_component_lost(state: dict[str, Any] | None, expected: tuple[str, str] | None) -> None:
    found = component_lost(state, T)
    assert (None if found is None else (found.what, found.cause.split(" (seen")[0])) == expected
    if found is not None:
        assert found.exit_code == 3


@pytest.mark.parametrize(
    ("exc", "words"),
    [
        (ConnectionRefusedError("[Errno 111] Connection refused"), "connection refused"),
        (TimeoutError("read timed out"), "timed out"),
        (type("ApiException", (Exception,), {"status": 503, "reason": "Service Unavailable"})(), "HTTP 503 Service Unavailable"),
        (RuntimeError("odd"), "RuntimeError"),
    ],
)  # fmt: skip
def test_describe_failure(exc: BaseException, words: str) -> None:
    assert describe_failure(exc) == words


def test_lost_message_says_what_it_cost() -> None:
    lost = Lost("controller", "the controller under test was killed by SIGKILL at 22:13:20 UTC", "look", 1, T)
    assert lost.as_error() == {
        "message": "the controller under test was killed by SIGKILL at 22:13:20 UTC: the behaviours still running "
        "or not yet run could not be decided",
        "hint": "look",
    }


class Controller:
    def __init__(self) -> None:
        self.process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
        self.log = None

    def restart(self) -> None:
        self.process.kill()
        self.process.wait()
        self.process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])


def test_the_watch_names_a_killed_controller_but_not_a_restart() -> None:
    controller = Controller()
    try:
        with Watch(controller, None, None, interval=0.05) as watch:
            watch.restart_wrapper(controller.restart)()  # a restart a test asked for: no death
            assert watch.check(time.time()) is None
            controller.process.send_signal(signal.SIGKILL)
            lost = wait_for("the watch to see the controller gone", lambda: watch.lost, timeout=10)
        assert lost is not None and lost.what == "controller" and "killed by SIGKILL" in lost.cause
    finally:
        controller.process.kill()
        controller.process.wait()


def test_the_watch_gives_the_api_server_its_grace() -> None:
    def refused() -> None:
        raise ConnectionRefusedError("Connection refused")

    answers = [True]

    def probe() -> None:
        if not answers[0]:
            refused()

    watch = Watch(None, probe, lambda: {"phase": "ready"}, server="https://127.0.0.1:1")
    assert watch.check(T - 1) is None  # it answered once
    answers[0] = False
    assert watch.check(T) is None and watch.check(T + API_GRACE - 0.5) is None
    lost = watch.check(T + API_GRACE)
    assert lost is not None and lost.exit_code == 3 and "connection refused" in lost.cause


@pytest.mark.parametrize(
    ("at_start", "now_ready", "since", "now", "expected_since", "lost"),
    [
        pytest.param({"a", "b"}, {"a": True, "b": True}, {}, T, {}, None, id="all ready"),
        pytest.param({"a"}, {"a": False}, {}, T, {"a": T}, None, id="just went NotReady"),
        pytest.param({"a"}, {"a": False}, {"a": T - 59}, T, {"a": T - 59}, None, id="within the grace"),
        pytest.param({"a"}, {}, {"a": T - 60}, T, {"a": T - 60}, "node a stopped being Ready at 22:12:20 UTC",
                     id="deleted, past the grace"),
        pytest.param({"a", "b"}, {"a": False, "b": False}, {"a": T - 61, "b": T - 90}, T, {"a": T - 61, "b": T - 90},
                     "node b (and 1 more) stopped being Ready at 22:11:50 UTC", id="the longest gone first"),
        pytest.param({"a"}, {"a": True, "c": False}, {"a": T - 100}, T, {}, None, id="back, and a new one ignored"),
    ],
)  # fmt: skip
def test_nodes(
    at_start: set[str],
    now_ready: dict[str, bool],
    since: dict[str, float],
    now: float,
    expected_since: dict[str, float],
    lost: str | None,
) -> None:
    from conformance.run.health import nodes_lost, track_nodes

    tracked = track_nodes(at_start, now_ready, since, now)
    assert tracked == expected_since
    found = nodes_lost(tracked, now)
    assert (found.cause if found else None) == lost
    if found is not None:
        assert found.exit_code == 3 and found.what == "cluster"


def test_the_watch_follows_the_nodes_it_started_with() -> None:
    readiness = [{"n1": True, "n2": True}]
    watch = Watch(None, None, None, nodes=lambda: readiness[0])
    assert watch.check(T) is None  # the Nodes Ready now are the ones watched
    readiness[0] = {"n1": True, "n2": False}
    assert watch.check(T + 20) is None  # NotReady since now
    assert watch.check(T + 25) is None  # not looked at again within NODE_EVERY
    assert watch.check(T + 79) is None  # 59 s: within the grace
    lost = watch.check(T + 90)
    assert lost is not None and lost.cause.startswith("node n2 stopped being Ready")


VERSION = (
    b'{"major": "1", "minor": "36", "gitVersion": "v1.36.3", "gitCommit": "x", "gitTreeState": "clean", '
    b'"buildDate": "2026-01-01T00:00:00Z", "goVersion": "go1.25", "compiler": "gc", "platform": "linux/amd64"}'
)


def _kubeconfig(tmp_path: Path, server: str) -> Path:
    path = tmp_path / "kubeconfig"
    path.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        f"clusters: [{{name: k, cluster: {{server: '{server}'}}}}]\n"
        "users: [{name: u, user: {token: t}}]\n"
        "contexts: [{name: c, context: {cluster: k, user: u}}]\n"
    )
    return path


def test_the_api_probe_answers_and_fails_fast(tmp_path: Path) -> None:
    """The probe against a real HTTP server: an answer is no exception; a closed port is a
    'connection refused' at once (no retries)."""
    import http.server
    import socket
    import threading

    from conformance.run.health import api_probe

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(VERSION)

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        probe, address = api_probe(_kubeconfig(tmp_path, f"http://127.0.0.1:{server.server_port}"), None)
        probe()
        assert address == f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        server.server_close()
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    probe, _ = api_probe(_kubeconfig(tmp_path, f"http://127.0.0.1:{port}"), None)
    started = time.monotonic()
    with pytest.raises(Exception) as failed:
        probe()
    assert time.monotonic() - started < 5
    assert describe_failure(failed.value) == "connection refused"


def test_a_probe_that_never_worked_is_no_verdict() -> None:
    def broken() -> None:
        raise TypeError("call_api() got an unexpected keyword argument")

    watch = Watch(None, broken, None)
    assert all(watch.check(T + s) is None for s in (0, API_GRACE, 10 * API_GRACE))
