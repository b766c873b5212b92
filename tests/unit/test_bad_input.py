"""Every bad input and early failure ends cleanly: one line naming the option, file or variable and
the fix, the documented exit code (the process and the report agree), a report written or a line
saying why none could be, nothing of an earlier run left in the report directory, and no stack
trace unless ``KTHENA_DEBUG=1`` asks for one. One table per class of input; no cluster.

The command line runs in-process through :func:`conformance.cli.entry.invoke` (the console
script's own path: usage errors, Ctrl-C, unexpected errors and their exit codes included)."""

from __future__ import annotations

import contextlib
import datetime as dt
import io
import json
import os
from pathlib import Path
from typing import Any

import pytest

from conformance.cli.entry import invoke
from conformance.cluster.errors import BadInput
from conformance.cluster.existing import kubeconfig_problem
from conformance.cluster.local.provider import effective_phase
from conformance.cluster.local.supervisor import start_timeout
from conformance.framework import catalog
from conformance.framework.selection import Selection
from conformance.framework.support import support_from_flags
from conformance.run.finish import RunResult, _assemble, _finish
from conformance.run.options import RunOptions

KUBECONFIG = """\
apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: 'https://127.0.0.1:1'}}]
users: [{name: u, user: {token: x}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
"""


def cli(*args: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    """Run the command line in-process: (exit code, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    saved = {k: os.environ.get(k) for k in (env or {})}
    os.environ.update(env or {})
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = invoke(list(args))
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    return code, out.getvalue(), err.getvalue()


@pytest.fixture(autouse=True)
def _isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KTHENA_CACHE_DIR", str(tmp_path / "cache"))
    for name in ("KTHENA_DEBUG", "KTHENA_PROVIDER", "KTHENA_REAL_NODES", "KTHENA_CLUSTER_START_TIMEOUT", "KUBECONFIG"):
        monkeypatch.delenv(name, raising=False)


def _report(directory: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((directory / "conformance-report.json").read_text())
    return data


# -- run: the cluster inputs (provider, kubeconfig, environment) --------------------------------------


@pytest.mark.parametrize(
    ("args", "env", "line"),
    [
        pytest.param(
            ["--provider", "lokal"], {}, "error: --provider: unknown cluster provider 'lokal'", id="provider-typo"
        ),
        pytest.param(
            [],
            {"KTHENA_PROVIDER": "kynd"},
            "unknown cluster provider 'kynd' (from --provider or KTHENA_PROVIDER)",
            id="provider-env-typo",
        ),
        pytest.param(
            ["--provider", "existing", "--kubeconfig", "{notyaml}"],
            {},
            "is not YAML: line 2, column 5:",
            id="kubeconfig-not-yaml",
        ),
        pytest.param(
            ["--provider", "existing", "--kubeconfig", "{alist}"], {}, "is not a kubeconfig", id="kubeconfig-a-list"
        ),
        pytest.param(
            ["--provider", "existing", "--kubeconfig", "{missing}"], {}, "does not exist", id="kubeconfig-missing"
        ),
        pytest.param(
            ["--provider", "existing", "--kubeconfig", "{good}", "--context", "prod"],
            {},
            "--context 'prod' is not one of its contexts (c)",
            id="kubeconfig-no-such-context",
        ),
        pytest.param(
            [],
            {"KTHENA_REAL_NODES": "maybe"},
            "KTHENA_REAL_NODES='maybe': expected on, off or auto",
            id="real-nodes-env",
        ),
        pytest.param(
            [],
            {"KTHENA_CLUSTER_START_TIMEOUT": "soon"},
            "KTHENA_CLUSTER_START_TIMEOUT='soon': expected a positive number",
            id="start-timeout-env",
        ),
        pytest.param(["--timeout-scale", "fast"], {}, "error: ", id="timeout-scale"),
    ],
)
def test_bad_cluster_input_is_exit_2_with_a_report_that_says_2(
    tmp_path: Path, args: list[str], env: dict[str, str], line: str
) -> None:
    files = {"notyaml": "not: [yaml\n  - :", "alist": "- a\n- b\n", "good": KUBECONFIG}
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    argv = [a.format(missing=tmp_path / "missing", **{n: tmp_path / n for n in files}) for a in args]
    report_dir = tmp_path / "r"
    code, out, err = cli(
        "run", *argv, "--implementation", "external", "--all-features", "--report-dir", str(report_dir), env=env
    )
    assert code == 2, err
    assert line in err
    assert "Traceback" not in err + out
    assert "\n  -> " in err  # the fix
    assert _report(report_dir)["exitCode"] == 2
    assert _report(report_dir)["verdict"] == "error"


# -- run: the report directory -------------------------------------------------------------------------


def test_a_used_report_directory_keeps_nothing_of_the_previous_run(tmp_path: Path) -> None:
    report_dir = tmp_path / "r"
    for stale in (
        "allure-results/old-result.json",
        "artifacts/core/x.txt",
        ".passes/parallel.log",
        "kthena-ref.log",
        "implementation.log",
    ):
        (report_dir / stale).parent.mkdir(parents=True, exist_ok=True)
        (report_dir / stale).write_text("previous run\n")
    (report_dir / "notes-of-mine.txt").write_text("not the harness's\n")
    code, _, err = cli("run", "--profile", "Nope", "--report-dir", str(report_dir))
    assert code == 2, err
    left = sorted(p.name for p in report_dir.iterdir())
    assert left == [
        "conformance-report.json",
        "conformance-report.yaml",
        "index.html",
        "junit.xml",
        "notes-of-mine.txt",
    ]


@pytest.mark.parametrize("under", ["a-file/sub", "a-file"], ids=["below-a-file", "is-a-file"])
def test_a_report_directory_that_cannot_be_written_says_no_report_was_written(tmp_path: Path, under: str) -> None:
    (tmp_path / "a-file").write_text("x")
    code, out, err = cli("run", "--report-dir", str(tmp_path / under))
    assert code == 2, err
    assert "Traceback" not in err + out
    assert "report-dir" in err and str(tmp_path / under) in err
    if under != "a-file":  # else click refuses the option before the run starts: no run, no report
        assert "no report" in err.splitlines()[-1]
    assert sorted(p.name for p in tmp_path.iterdir() if p.name != "cache") == ["a-file"]


def test_a_report_that_cannot_be_written_at_the_end_is_named_and_half_files_removed(tmp_path: Path) -> None:
    """The disk fills during the run (here: the report directory's path is taken by a file)."""
    code, _, err = cli("run", "--profile", "Nope", "--report-dir", str(tmp_path / "first"))
    assert code == 2, err
    data = _report(tmp_path / "first")
    blocker = tmp_path / "r"
    blocker.write_text("x")
    result = _finish(RunResult(data), RunOptions(report_dir=blocker), dt.datetime.now(dt.UTC))
    assert result.unwritten is not None and "--report-dir" in result.unwritten
    assert result.exit_code == 2 and result.paths == []


# -- run: an early failure of a vendor's first run ----------------------------------------------------


def test_a_partial_declaration_whose_run_stopped_before_its_tests_is_assembled() -> None:
    """The KeyError of issue 30: a not-supported behaviour's feature overwrote the CRD's missing fields."""
    data: dict[str, Any] = {
        "run": {},
        "notes": [],
        "cluster": {},
        "error": {"message": "the launch command exited 127", "hint": ""},
    }
    support = support_from_flags("vendor", "1.0", ["Core,Recovery"], False)
    result = RunResult(data, exit_code=3)
    _assemble(data, [], catalog.collect(), Selection.parse([], [], []), support, result)
    outcomes = {t["outcome"] for t in data["tests"]}
    assert {"not-supported", "error"} <= outcomes
    assert data["verdict"] == "error" and result.exit_code == 3


def test_an_unexpected_error_in_a_run_is_named_in_the_report_with_exit_1(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from conformance.run import orchestration

    def broken(*_: Any, **__: Any) -> Any:
        raise RuntimeError("a bug\nover two lines")

    monkeypatch.setattr(orchestration, "_support", broken)
    code, out, err = cli("run", "--report-dir", str(tmp_path / "r"))
    assert code == 1
    assert "error: internal error: RuntimeError: a bug over two lines" in err
    assert "Traceback" not in err + out
    assert _report(tmp_path / "r")["exitCode"] == 1


# -- cluster status of a cluster that is not running --------------------------------------------------


@pytest.mark.parametrize(
    ("state", "phase"),
    [
        pytest.param({"phase": "ready", "live": True, "components_alive": {"etcd": True}}, "ready", id="ready"),
        pytest.param(
            {"phase": "ready", "live": False, "components_alive": {"etcd": False}}, "dead", id="supervisor-gone"
        ),
        pytest.param({"phase": "starting", "live": False}, "dead", id="died-starting"),
        pytest.param(
            {"phase": "ready", "live": True, "components_alive": {"etcd": True, "kwok": False}},
            "degraded",
            id="component-dead",
        ),
        pytest.param({"phase": "stopped", "live": False}, "stopped", id="stopped"),
        pytest.param({"live": False}, None, id="no-state"),
    ],
)
def test_a_local_cluster_s_phase_is_what_it_is_now(state: dict[str, Any], phase: str | None) -> None:
    assert effective_phase(state).get("phase") == phase


def test_cluster_status_of_a_dead_cluster_exits_3(tmp_path: Path) -> None:
    root = tmp_path / "cache" / "clusters" / "gone"
    root.mkdir(parents=True)
    (root / "state.json").write_text(json.dumps({"phase": "ready", "components": {"etcd": 2**22 + 12345}}))
    code, out, err = cli("cluster", "status", "--provider", "local", "--name", "gone")
    assert code == 3, err
    assert "phase: dead" in out and "recordedPhase: ready" in out
    assert "cluster 'gone' is not running: phase dead" in err
    assert "cluster down --name gone" in err


# -- the environment -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        (None, 90.0),
        ("", 90.0),
        ("120", 120.0),
        ("2.5", 2.5),
        ("0", None),
        ("-1", None),
        ("nan", None),
        ("inf", None),
        ("ninety", None),
    ],
)
def test_the_cluster_start_timeout_variable(value: str | None, seconds: float | None) -> None:
    if seconds is None:
        with pytest.raises(BadInput, match="KTHENA_CLUSTER_START_TIMEOUT"):
            start_timeout(value)
    else:
        assert start_timeout(value) == seconds


@pytest.mark.parametrize(
    ("text", "context", "problem"),
    [
        pytest.param(KUBECONFIG, None, None, id="good"),
        pytest.param(KUBECONFIG, "c", None, id="good-context"),
        pytest.param(KUBECONFIG, "x", "--context 'x' is not one of its contexts (c)", id="no-such-context"),
        pytest.param(KUBECONFIG.replace("current-context: c\n", ""), None, "has no current-context", id="no-current"),
        pytest.param(
            KUBECONFIG.replace("current-context: c", "current-context: z"),
            None,
            "its current-context 'z' is not one",
            id="bad-current",
        ),
        pytest.param("contexts: []\n", None, "names no context", id="no-contexts"),
        pytest.param("just text", None, "is not a kubeconfig", id="a-string"),
        pytest.param("a: [b", None, "is not YAML: line", id="not-yaml"),
        pytest.param(b"\xff\xfe", None, "is not UTF-8", id="binary"),
    ],
)
def test_kubeconfig_problems(tmp_path: Path, text: str | bytes, context: str | None, problem: str | None) -> None:
    path = tmp_path / "kc"
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    found = kubeconfig_problem(path, context)
    assert found == problem if problem is None else problem in str(found)


def test_a_kubeconfig_that_is_a_directory(tmp_path: Path) -> None:
    assert kubeconfig_problem(tmp_path, None) == "is not a file"


# -- the console entry: usage errors, interrupts, bugs, and the debug switch ---------------------------


def _catalog_raises(monkeypatch: pytest.MonkeyPatch, exc: BaseException) -> None:
    def collect(*_: Any, **__: Any) -> Any:
        raise exc

    monkeypatch.setattr(catalog, "collect", collect)


@pytest.mark.parametrize(
    ("args", "exc", "code", "line"),
    [
        pytest.param(["no-such-command"], None, 2, "No such command 'no-such-command'", id="unknown-command"),
        pytest.param(["run", "--no-such-option"], None, 2, "No such option '--no-such-option'", id="unknown-option"),
        pytest.param(["run", "--workers", "0"], None, 2, "Invalid value for '--workers'", id="out-of-range"),
        pytest.param(["--help"], None, 0, "", id="help"),
        pytest.param(["catalog"], KeyboardInterrupt(), 130, "interrupted", id="ctrl-c"),
        pytest.param(["catalog"], RuntimeError("boom"), 1, "error: internal error: RuntimeError: boom", id="a-bug"),
        pytest.param(
            ["catalog"],
            PermissionError(13, "Permission denied", "/some/file"),
            2,
            "error: /some/file: Permission denied",
            id="os-error",
        ),
    ],
)
def test_what_escapes_a_command(
    monkeypatch: pytest.MonkeyPatch, args: list[str], exc: BaseException | None, code: int, line: str
) -> None:
    if exc is not None:
        _catalog_raises(monkeypatch, exc)
    got, out, err = cli(*args)
    assert got == code, err
    assert line in err
    assert "Traceback" not in err + out


def test_kthena_debug_shows_the_stack_trace_of_a_bug(monkeypatch: pytest.MonkeyPatch) -> None:
    _catalog_raises(monkeypatch, RuntimeError("boom"))
    code, _, err = cli("catalog", env={"KTHENA_DEBUG": "1"})
    assert code == 1
    assert "Traceback (most recent call last)" in err
    assert err.rstrip().splitlines()[-1].startswith("  -> a bug in kthena-conformance")


def test_kthena_debug_shows_the_stack_trace_of_a_harness_error() -> None:
    code, _, err = cli("cluster", "up", "--node-label", "bad", env={"KTHENA_DEBUG": "1"})
    assert code == 2
    assert "Traceback (most recent call last)" in err
    assert "error: node-label 'bad' is not KEY=VALUE" in err
    code, _, err = cli("cluster", "up", "--node-label", "bad")
    assert code == 2 and "Traceback" not in err


def test_kthena_debug_shows_the_stack_trace_of_a_run_s_internal_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from conformance.run import orchestration

    def broken(*_: Any, **__: Any) -> Any:
        raise RuntimeError("boom")

    monkeypatch.setattr(orchestration, "_support", broken)
    code, _, err = cli("run", "--report-dir", str(tmp_path / "r"), env={"KTHENA_DEBUG": "1"})
    assert code == 1
    assert "Traceback (most recent call last)" in err


# -- the other commands: files and environment they are given -----------------------------------------


@pytest.mark.parametrize(
    ("args", "env", "code", "line"),
    [
        pytest.param(
            ["run", "--profile", "Core", "--report-dir", "{tmp}/r"],
            {"KTHENA_CACHE_DIR": "/proc/no-such-dir"},
            2,
            "the cache directory /proc/no-such-dir (from KTHENA_CACHE_DIR) cannot be used",
            id="run-cache-dir",
        ),
        pytest.param(
            ["binaries", "path"],
            {"KTHENA_BIN_DIR": "{tmp}/empty"},
            2,
            "KTHENA_BIN_DIR={tmp}/empty lacks etcd",
            id="bin-dir",
        ),
        pytest.param(
            ["webhook", "register", "--url", "https://127.0.0.1:9/v", "--ca-file", "{tmp}/bad.pem", "--print"],
            {},
            2,
            "--ca-file {tmp}/bad.pem: holds no PEM certificate",
            id="ca-file-not-pem",
        ),
        pytest.param(
            ["webhook", "serve-cert", "--dir", "/proc/no-such-dir"],
            {},
            2,
            "error: /proc/no-such-dir",
            id="serve-cert-dir",
        ),
        pytest.param(
            ["support", "init", "-o", "{tmp}/no/such/dir/s.yaml"],
            {},
            2,
            "No such file or directory",
            id="support-init-output",
        ),
        pytest.param(
            ["cluster", "up", "--provider", "existing", "--kubeconfig", "{tmp}/bad.pem"],
            {},
            2,
            "--kubeconfig {tmp}/bad.pem: is not a kubeconfig",
            id="cluster-up-kubeconfig",
        ),
        pytest.param(["cluster", "up", "--config", "{tmp}/bad.pem"], {}, 2, "is invalid", id="cluster-up-config"),
        pytest.param(
            ["sweep", "--provider", "existing", "--kubeconfig", "{tmp}/missing"],
            {},
            2,
            "does not exist",
            id="sweep-kubeconfig",
        ),
        pytest.param(
            ["report", "verify", "{tmp}/bad.pem"],
            {},
            2,
            "expected a .yaml, .yml or .json report",
            id="report-not-a-report",
        ),
        pytest.param(
            ["coverage", "--spec-map", "{tmp}/bad.pem"], {}, 2, "expected a SpecMap mapping", id="spec-map-not-one"
        ),
    ],
)
def test_bad_input_to_the_other_commands(
    tmp_path: Path, args: list[str], env: dict[str, str], code: int, line: str
) -> None:
    (tmp_path / "bad.pem").write_text("not a certificate\n")
    (tmp_path / "empty").mkdir()
    argv = [a.format(tmp=tmp_path) for a in args]
    got, out, err = cli(*argv, env={k: v.format(tmp=tmp_path) for k, v in env.items()})
    assert got == code, err
    assert line.format(tmp=tmp_path) in err
    assert "Traceback" not in out + err and "internal error" not in err
