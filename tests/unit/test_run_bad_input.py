"""`kthena-conformance run` with bad input: one clear message, a report saying what happened, and
the documented exit code (2 bad input, 3 cluster unreachable). No cluster is needed for these."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from conformance.cli import main
from conformance.cluster.faults import Fault
from conformance.framework import catalog

BAD_SUPPORT = """\
apiVersion: conformance.kthena.io/v1alpha1
kind: ImplementationSupport
implementation: {name: vendor, version: "1.0"}
supportedFeatures: [Core, Bogus]
"""

UNREACHABLE = """\
apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: 'https://127.0.0.1:1'}}]
users: [{name: u, user: {token: x}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
"""


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        pytest.param(["--profile", "Nope"], 2, "unknown profile 'Nope'", id="unknown-profile"),
        pytest.param(["--id", "nothing/here"], 2, "--id 'nothing/here' matches no behaviour", id="unknown-id"),
        pytest.param(["--feature", "Teleport"], 2, "unknown feature 'Teleport'", id="unknown-feature"),
        pytest.param(
            ["--support-file", "{bad}", "--implementation", "external"],
            2,
            "supportedFeatures[1]",
            id="malformed-support-file",
        ),
        pytest.param(["--support-file", "{missing}"], 2, "missing.yaml", id="missing-support-file"),
        pytest.param(["--implementation", "external"], 2, "must declare what it supports", id="no-declaration"),
        pytest.param(
            ["--implementation-command", "ctl 'unclosed", "--all-features"],
            2,
            "--implementation-command: cannot split",
            id="unsplittable-command",
        ),
        pytest.param(
            ["--implementation-command", "ctl", "--all-features", "--implementation-ready-log", "("],
            2,
            "--implementation-ready-log: '(' is not a regular expression",
            id="bad-ready-pattern",
        ),
        pytest.param(
            ["--implementation-command", "ctl", "--implementation", "reference"],
            2,
            "give --implementation external with it",
            id="command-with-the-reference",
        ),
        pytest.param(["--implementation-command", "ctl"], 2, "must declare what it supports", id="command-undeclared"),
        pytest.param(
            ["--implementation-ready-log", "ready", "--implementation", "external", "--all-features"],
            2,
            "need --implementation-command",
            id="ready-log-without-command",
        ),
        pytest.param(
            ["--implementation-webhook", "--implementation", "external", "--all-features"],
            2,
            "--implementation-webhook need --implementation-command",
            id="webhook-without-command",
        ),
        pytest.param(["--name", "mine"], 2, "--name mine: names a cluster the run keeps", id="name-not-kept"),
        pytest.param(
            ["--provider", "existing", "--name", "mine", "--implementation", "external", "--all-features"],
            2,
            "the existing provider's cluster is the one --kubeconfig/--context name",
            id="name-with-existing",
        ),
        pytest.param(
            ["--runner-address", "http://172.18.0.1:9090"],
            2,
            "--runner-address: 'http://172.18.0.1:9090' is a URL",
            id="runner-address-url",
        ),
        pytest.param(["--runner-address", "host:9090"], 2, "has a port", id="runner-address-port"),
        pytest.param(["--timeout", "pods-running=abc"], 2, "--timeout", id="bad-timeout"),
        pytest.param(["--timeout", "nap=3"], 2, "nap", id="unknown-timeout"),
        pytest.param(["--timeout-scale", "0"], 2, "--timeout-scale", id="bad-scale"),
        pytest.param(
            [
                "--provider",
                "existing",
                "--kubeconfig",
                "{kubeconfig}",
                "--implementation",
                "external",
                "--all-features",
            ],
            3,
            "did not answer",
            id="unreachable-cluster",
        ),
    ],
)
def test_bad_input_is_one_message_a_report_and_an_exit_code(
    tmp_path: Path, args: list[str], code: int, message: str
) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(BAD_SUPPORT)
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(UNREACHABLE)
    argv = [a.format(bad=bad, missing=tmp_path / "missing.yaml", kubeconfig=kubeconfig) for a in args]
    result = CliRunner().invoke(main, ["run", *argv, "--report-dir", str(tmp_path / "r")])
    assert result.exit_code == code, result.output
    assert message in result.output
    assert "Traceback" not in result.output
    report = json.loads((tmp_path / "r" / "conformance-report.json").read_text())
    assert report["verdict"] == "error" and report["exitCode"] == code
    assert message in report["error"]["message"]
    assert (tmp_path / "r" / "junit.xml").exists()


def test_dry_run_lists_the_selection_and_runs_nothing(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["run", "--dry-run", "--profile", "Core", "--report-dir", str(tmp_path)])
    assert result.exit_code == 0, result.output
    lines = [line for line in result.output.splitlines() if line.startswith("core/")]
    assert lines and all("Core" in line for line in lines)
    assert not (tmp_path / "conformance-report.json").exists()


def _behaviour(injects_faults: bool, faults: tuple[str, ...] = ()) -> Any:
    from conformance.framework.catalog import Behaviour

    return Behaviour(
        "core/x/y", "A ModelServing MUST do y.", "api-reference-workload-v1alpha1.txt#ModelServingSpec", "Core",
        injects_faults=injects_faults, faults=faults,
    )  # fmt: skip


NOT_READY_AND_RESTART = ("not-ready", "restart")


@pytest.mark.parametrize(
    ("injects_faults", "faults", "provider", "injects", "supported", "expected"),
    [
        pytest.param(False, (), "existing", frozenset(), True, "run", id="no-faults-needed"),
        pytest.param(True, (), "local", frozenset({"not-ready"}), True, "run", id="local-injects"),
        pytest.param(
            True, (), "existing", frozenset(), True, "inconclusive here: the existing provider", id="existing"
        ),
        pytest.param(True, (), "existing", frozenset(), False, "not-supported", id="unsupported-first"),
        pytest.param(True, NOT_READY_AND_RESTART, "local", frozenset(Fault), True, "run", id="local-every-kind"),
        pytest.param(  # kind restarts containers but cannot hold a Pod NotReady
            True,
            NOT_READY_AND_RESTART,
            "kind",
            frozenset({Fault.RESTART}),
            True,
            "inconclusive here: the kind provider cannot inject not-ready into Pods",
            id="kind-lacks-one-kind",
        ),
        pytest.param(True, ("restart",), "kind", frozenset({Fault.RESTART}), True, "run", id="kind-restart-only"),
    ],
)
def test_dry_run_says_which_behaviours_the_cluster_cannot_run(
    injects_faults: bool,
    faults: tuple[str, ...],
    provider: str,
    injects: frozenset[Any],
    supported: bool,
    expected: str,
) -> None:
    from conformance.framework.support import support_from_flags
    from conformance.run.planning import dry_run_verdict

    support = support_from_flags("impl", "1", None if not supported else [], supported)
    verdict = dry_run_verdict(_behaviour(injects_faults, faults), support, provider, injects)
    assert verdict.startswith(expected), verdict


def test_the_catalog_knows_which_tests_inject_faults() -> None:
    behaviours = {b.id: b for b in catalog.collect()}
    assert behaviours["core/recovery/role-recreate-failed-pod"].injects_faults
    assert behaviours["core/recovery/role-recreate-failed-pod"].faults == ("fail",)
    assert behaviours["rollout/sg/unready-counts-against-budget"].faults == ("not-ready", "clear")  # via helpers
    assert not behaviours["core/spec/defaults"].injects_faults
    missing = [b.id for b in behaviours.values() if b.injects_faults and not b.faults]
    assert missing == [], "a test taking the faults fixture names no Fault kind the catalog could read"
