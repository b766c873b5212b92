"""The implementation as a command: option parsing and readiness (pure, table-driven), and the
process life with real processes: ready by a log line, early exit, not ready in time, stop,
restart, and the watchdog ending the command's process group when its owner dies."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from conformance.cluster.errors import HarnessError
from conformance.cluster.local.processes import pid_alive as alive
from conformance.run.launch import (
    SETTLE_SECONDS,
    Launch,
    LaunchError,
    LoopbackWebhook,
    RunningCommand,
    crds_of,
    environment,
    is_webhook_configuration,
    read_manifests,
    ready_problem,
    substitute,
)


@pytest.mark.parametrize(
    ("command", "ready_log", "timeout", "expected"),
    [
        pytest.param("", None, 60.0, "--implementation-command: empty", id="empty"),
        pytest.param("   ", None, 60.0, "--implementation-command: empty", id="blank"),
        pytest.param("ctl --name 'unclosed", None, 60.0, "--implementation-command: cannot split", id="quote"),
        pytest.param("ctl", "caches (synced", 60.0, "--implementation-ready-log: 'caches (synced' is not", id="regex"),
        pytest.param("ctl", None, 0.0, "--implementation-ready-timeout: must be above 0", id="timeout"),
    ],
)
def test_bad_launch_options_name_the_option(command: str, ready_log: str | None, timeout: float, expected: str) -> None:
    with pytest.raises(LaunchError, match=re.escape(expected)):
        Launch.parse(command, ready_log, timeout)


def test_a_command_is_split_as_a_shell_would_and_never_run_by_one() -> None:
    launch = Launch.parse("./bin/ctl --log 'a b' --x=$HOME", r"caches synced", 30)
    assert launch.command == ("./bin/ctl", "--log", "a b", "--x=$HOME")  # no expansion: no shell
    assert launch.ready_log is not None and launch.ready_log.pattern == "caches synced"
    assert launch.describe() == "./bin/ctl --log 'a b' '--x=$HOME'"


CRD = "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata: {name: things.example.com}\n"
ROLE = "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata: {name: ctl}\n"


def test_manifests_are_read_in_order_with_where_they_came_from(tmp_path: Path) -> None:
    first, second = tmp_path / "crds.yaml", tmp_path / "rbac.yaml"
    first.write_text(f"{CRD}---\n---\n{ROLE}")  # an empty document is skipped
    second.write_text(ROLE.replace("ctl", "ctl-2"))
    manifests = read_manifests([first, second])
    assert [where for where, _ in manifests] == [
        f"{first}: document 1 (CustomResourceDefinition things.example.com)",
        f"{first}: document 2 (ClusterRole ctl)",
        f"{second}: document 1 (ClusterRole ctl-2)",
    ]
    assert [c["metadata"]["name"] for c in crds_of(manifests)] == ["things.example.com"]
    launch = Launch.parse("ctl", manifests=[first])
    assert len(launch.manifests) == 2


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        pytest.param("{not: [yaml", "cannot read it", id="not-yaml"),
        pytest.param("- a\n- b\n", "document 1 is not a Kubernetes object", id="a-list"),
        pytest.param("kind: ClusterRole\nmetadata: {name: x}\n", "document 1 is not a Kubernetes object", id="no-api"),
        pytest.param(f"{ROLE}---\napiVersion: v1\nkind: Namespace\n", "document 2 is not", id="no-name"),
    ],
)
def test_a_bad_manifest_names_the_file_and_document(tmp_path: Path, content: str, expected: str) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(content)
    with pytest.raises(LaunchError, match=re.escape(f"--implementation-manifest {path}: ")) as info:
        read_manifests([path])
    assert expected in str(info.value)


def test_a_missing_manifest_is_named(tmp_path: Path) -> None:
    with pytest.raises(LaunchError, match=r"missing\.yaml: cannot read it"):
        Launch.parse("ctl", manifests=[tmp_path / "missing.yaml"])


@pytest.mark.parametrize(
    ("tail", "pattern", "up_for", "ready"),
    [
        pytest.param("starting\n", "caches synced", 99.0, False, id="pattern-not-yet"),
        pytest.param("starting\ninformer caches synced\n", "caches synced", 0.1, True, id="pattern-seen"),
        pytest.param("", None, SETTLE_SECONDS - 0.5, False, id="settling"),
        pytest.param("", None, SETTLE_SECONDS, True, id="settled"),
    ],
)
def test_ready_problem(tail: str, pattern: str | None, up_for: float, ready: bool) -> None:
    problem = ready_problem(tail, re.compile(pattern) if pattern else None, up_for)
    assert (problem is None) == ready, problem


def test_the_environment_points_at_the_cluster(tmp_path: Path) -> None:
    env = environment(tmp_path / "kubeconfig", {"EXTRA": "1"})
    assert env["KUBECONFIG"] == str(tmp_path / "kubeconfig") and env["EXTRA"] == "1" and "PATH" in env


def _script(tmp_path: Path, body: str) -> str:
    path = tmp_path / "impl.sh"
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(0o755)
    return str(path)


def _running(tmp_path: Path, body: str, ready_log: str | None = "caches synced", timeout: float = 10) -> RunningCommand:
    launch = Launch.parse(_script(tmp_path, body), ready_log, timeout)
    return RunningCommand(launch, tmp_path / "kubeconfig", tmp_path / "implementation.log", owner_pid=os.getpid())


def _pid_in(path: Path) -> int:
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        if path.exists() and path.read_text().strip():
            return int(path.read_text())
        time.sleep(0.05)
    raise AssertionError(f"{path} never got a pid")


def _gone(pid: int, timeout: float = 10) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not alive(pid):
            return True
        time.sleep(0.05)
    return False


def test_started_ready_by_its_log_line_then_stopped_with_its_children(tmp_path: Path) -> None:
    pids = tmp_path / "child.pid"
    body = f'echo "kubeconfig=$KUBECONFIG"; sleep 60 & echo $! > {pids}; sleep 0.3; echo "caches synced"; wait'
    running = _running(tmp_path, body)
    running.start()
    child = _pid_in(pids)
    log = running.log.read_text()
    assert f"kubeconfig={tmp_path / 'kubeconfig'}" in log and "caches synced" in log
    assert alive(child)
    running.stop()
    assert _gone(child), "a child the command started went with it (its process group)"


def test_the_command_runs_in_its_launch_directory(tmp_path: Path) -> None:
    """A support file's command runs in the file's directory, so ./bin/x and its manifests resolve alike."""
    home = tmp_path / "impl"
    home.mkdir()
    launch = Launch.parse(_script(tmp_path, 'echo "cwd=$(pwd)"; echo "caches synced"; sleep 30'), "caches synced", 10)
    launch = Launch(launch.command, launch.ready_log, launch.ready_timeout, cwd=home)
    running = RunningCommand(launch, tmp_path / "kubeconfig", tmp_path / "implementation.log", owner_pid=os.getpid())
    running.start()
    try:
        assert f"cwd={home}" in running.log.read_text()
    finally:
        running.stop()


def test_a_command_that_exits_before_it_is_ready_is_an_error_naming_its_log(tmp_path: Path) -> None:
    running = _running(tmp_path, "echo 'cannot reach the API server' >&2; exit 4")
    with pytest.raises(HarnessError, match="exited with code 4 before it was ready") as info:
        running.start()
    assert str(running.log) in info.value.hint
    assert "cannot reach the API server" in running.log.read_text()


def test_a_command_never_ready_is_stopped_and_an_error(tmp_path: Path) -> None:
    pids = tmp_path / "self.pid"
    running = _running(tmp_path, f"echo $$ > {pids}; echo starting; exec sleep 60", timeout=1.0)
    with pytest.raises(HarnessError, match=r"not ready within 1s \(no line of its output matches 'caches synced'"):
        running.start()
    assert _gone(_pid_in(pids)), "the command is stopped, not left running"


def test_without_a_pattern_a_command_is_ready_once_it_stayed_up(tmp_path: Path) -> None:
    running = _running(tmp_path, "exec sleep 60", ready_log=None)
    started = time.monotonic()
    running.start()
    assert time.monotonic() - started >= SETTLE_SECONDS
    running.stop()


def test_restart_runs_a_new_process_and_appends_to_the_log(tmp_path: Path) -> None:
    pids = tmp_path / "self.pid"
    running = _running(tmp_path, f'echo $$ > {pids}; echo "caches synced"; exec sleep 60')
    running.start()
    first = _pid_in(pids)
    pids.unlink()
    running.restart()
    second = _pid_in(pids)
    assert first != second and _gone(first) and alive(second) and running.restarts == 1
    assert running.log.read_text().count("caches synced") == 2
    running.stop()
    assert _gone(second)


def test_the_watchdog_ends_the_command_when_its_owner_dies(tmp_path: Path) -> None:
    pids = tmp_path / "cmd.pid"
    owner = subprocess.Popen(["sleep", "1"])
    argv = [sys.executable, "-m", "conformance.run.watchdog", "--owner", str(owner.pid), "--grace", "1", "--"]
    watchdog = subprocess.Popen([*argv, "sh", "-c", f"echo $$ > {pids}; exec sleep 60"])
    command = _pid_in(pids)
    owner.wait()
    assert watchdog.wait(timeout=10) is not None
    assert _gone(command), "the command's group is ended once its owner is gone"


def test_the_watchdog_passes_the_commands_exit_code_on(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "conformance.run.watchdog", "--owner", str(os.getpid()), "--", "sh", "-c", "exit 7"],
        check=False,
        timeout=20,
    )
    assert done.returncode == 7
    missing = subprocess.run(
        [sys.executable, "-m", "conformance.run.watchdog", "--owner", str(os.getpid()), "--", "/nonexistent/ctl"],
        check=False,
        capture_output=True,
        text=True,
        timeout=20,
    )
    assert missing.returncode == 127 and "cannot start '/nonexistent/ctl'" in missing.stderr


WEBHOOK = LoopbackWebhook(9443, Path("/s/tls.crt"), Path("/s/tls.key"), Path("/s/ca.crt"), b"PEM")


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        pytest.param("--port={webhook_port}", "--port=9443", id="arg"),
        pytest.param('{"json": {webhook_port}}', '{"json": 9443}', id="json-braces-kept"),
        pytest.param("{webhook_portal}", "{webhook_portal}", id="not-a-placeholder"),
        pytest.param(
            {"clientConfig": {"url": "https://127.0.0.1:{webhook_port}/v", "caBundle": "{webhook_ca_bundle}"}},
            {"clientConfig": {"url": "https://127.0.0.1:9443/v", "caBundle": "UEVN"}},
            id="webhook-configuration",
        ),
        pytest.param(["{webhook_cert}", 3, None], ["/s/tls.crt", 3, None], id="list"),
    ],
)
def test_substitute_fills_only_the_known_placeholders(value: object, expected: object) -> None:
    assert substitute(value, WEBHOOK.values()) == expected


def test_the_webhook_reaches_the_command_as_arguments_and_environment(tmp_path: Path) -> None:
    launch = Launch.parse("ctl --webhook-port {webhook_port} --cert={webhook_cert}", webhook=True)
    running = RunningCommand(launch, tmp_path / "kc", tmp_path / "log", owner_pid=os.getpid(), webhook=WEBHOOK)
    assert running.argv() == ["ctl", "--webhook-port", "9443", "--cert=/s/tls.crt"]
    assert WEBHOOK.env() == {
        "KTHENA_CONFORMANCE_WEBHOOK_PORT": "9443",
        "KTHENA_CONFORMANCE_WEBHOOK_CERT": "/s/tls.crt",
        "KTHENA_CONFORMANCE_WEBHOOK_KEY": "/s/tls.key",
        "KTHENA_CONFORMANCE_WEBHOOK_CA": "/s/ca.crt",
    }


def test_a_placeholder_without_implementation_webhook_is_refused(tmp_path: Path) -> None:
    with pytest.raises(LaunchError, match=r"use \{webhook_port\}: add --implementation-webhook"):
        Launch.parse("ctl --webhook-port {webhook_port}")
    config = tmp_path / "webhook.yaml"
    config.write_text(
        "apiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingWebhookConfiguration\n"
        "metadata: {name: w}\nwebhooks: [{name: a.b.c, clientConfig: {caBundle: '{webhook_ca_bundle}'}}]\n"
    )
    with pytest.raises(LaunchError, match=r"use \{webhook_ca_bundle\}"):
        Launch.parse("ctl", manifests=[config])
    assert is_webhook_configuration(Launch.parse("ctl", manifests=[config], webhook=True).manifests[0][1])


# -- the launch from a support file, or from the flags (never both) ------------------------------------


def _declared(tmp_path: Path, **launch: Any) -> Any:
    from conformance.framework.support import load_support

    path = tmp_path / "support.yaml"
    body = {"apiVersion": "conformance.kthena.io/v1alpha1", "kind": "ImplementationSupport",
            "implementation": {"name": "x", "version": "1"}, "supportedFeatures": ["Core"], "launch": launch}  # fmt: skip
    path.write_text(yaml.safe_dump(body))
    return load_support(path)


def test_a_support_files_launch_starts_an_external_implementation(tmp_path: Path) -> None:
    from conformance.run.options import RunOptions
    from conformance.run.planning import _launch, _resolve_implementation

    support = _declared(tmp_path, command=["ctl", "--port", "{webhook_port}"], webhook=True, readyLog="ready")
    options = _resolve_implementation(RunOptions(implementation="auto"), support)
    assert options.implementation == "external"
    launch = _launch(options, support)
    assert launch is not None
    assert launch.command == ("ctl", "--port", "{webhook_port}") and launch.webhook
    assert launch.cwd == tmp_path.resolve()  # one rule: the command runs where its manifests are found
    assert launch.ready_log is not None and launch.ready_log.pattern == "ready"
    # without a launch (or command) "auto" is the reference, as before
    assert _resolve_implementation(RunOptions(implementation="auto"), None).implementation == "reference"
    assert _resolve_implementation(
        RunOptions(implementation="auto", implementation_command="c"), None
    ).implementation == ("external")


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        pytest.param(
            {"implementation_command": "other"},
            "launch: the support file already says how to start",
            id="command-flag-too",
        ),
        pytest.param(
            {"implementation_webhook": True}, "drop --implementation-command/-manifest", id="webhook-flag-too"
        ),
        pytest.param({"implementation": "reference"}, "run it with --implementation external", id="reference"),
    ],
)
def test_a_launch_in_the_file_and_on_the_command_line_is_refused(
    tmp_path: Path, options: dict[str, Any], expected: str
) -> None:
    from conformance.run.options import RunOptions
    from conformance.run.planning import _launch

    support = _declared(tmp_path, command="ctl")
    with pytest.raises(LaunchError, match=re.escape(expected)) as info:
        _launch(RunOptions(**{"implementation": "external", **options}), support)
    assert str(tmp_path / "support.yaml") in str(info.value)


def test_a_bad_launch_in_a_file_names_the_files_field(tmp_path: Path) -> None:
    from conformance.run.options import RunOptions
    from conformance.run.planning import _launch

    support = _declared(tmp_path, command="ctl --cert {webhook_cert}", readyLog="(")
    with pytest.raises(LaunchError, match=re.escape(f"{tmp_path / 'support.yaml'}: launch.readyLog: '(' is not")):
        _launch(RunOptions(implementation="external"), support)
    support = _declared(tmp_path, command="ctl --cert {webhook_cert}")
    with pytest.raises(LaunchError, match=re.escape("use {webhook_cert}: add webhook: true (in the launch section)")):
        _launch(RunOptions(implementation="external"), support)


# -- launch.also: more commands beside the controller (issue 31: a controller plus a webhook shim) --------


def test_a_support_files_launch_also_is_parsed_and_split(tmp_path: Path) -> None:
    from conformance.run.options import RunOptions
    from conformance.run.orchestration import _launch

    support = _declared(tmp_path, command=["ctl"], also=[["shim", "--port", "{webhook_port}"], "other 'a b'"],
                        webhook=True)  # fmt: skip
    assert support.launch.also == ("shim --port '{webhook_port}'", "other 'a b'")
    launch = _launch(RunOptions(implementation="external"), support)
    assert launch is not None and launch.also == (("shim", "--port", "{webhook_port}"), ("other", "a b"))


def test_a_bad_launch_also_entry_is_named(tmp_path: Path) -> None:
    from conformance.framework.support import SupportFileError

    with pytest.raises(SupportFileError, match=r"launch\.also\[1\]: expected a list of strings"):
        _declared(tmp_path, command=["ctl"], also=[["ok"], 3])


def test_the_group_starts_every_command_and_stops_them_all(tmp_path: Path) -> None:
    from conformance.run.launch import group

    main_pid, shim_pid = tmp_path / "main.pid", tmp_path / "shim.pid"
    main = _script(tmp_path, f'echo $$ > {main_pid}; echo "caches synced"; exec sleep 60')
    shim = tmp_path / "shim.sh"
    shim.write_text(f"#!/bin/sh\necho $$ > {shim_pid}\nexec sleep 60\n")
    shim.chmod(0o755)
    launch = Launch.parse(main, "caches synced", 10)
    launch = Launch(launch.command, launch.ready_log, launch.ready_timeout, also=((str(shim),),))
    running = group(launch, tmp_path / "kubeconfig", tmp_path / "implementation.log", owner_pid=os.getpid())
    running.start()
    try:
        first, second = _pid_in(main_pid), _pid_in(shim_pid)
        assert alive(first) and alive(second)
        assert running.log == tmp_path / "implementation.log"
        assert (tmp_path / "implementation-also-1.log").exists()
    finally:
        running.stop()
    assert _gone(first) and _gone(second)
