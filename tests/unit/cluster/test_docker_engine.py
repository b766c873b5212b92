"""The harness's Docker engine: dockerd's command line, the runtime wrapper (run for real against a
recording runc), the capability check, and package installation's refusals."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conformance.cluster.docker_engine import (
    MISSING_CAPABILITY,
    RUNTIME_NAME,
    EnginePaths,
    capability_missing,
    dockerd_argv,
    ensure_packages,
    install_commands,
    wrapper_script,
)
from conformance.cluster.errors import HarnessError

PATHS = EnginePaths(Path("/run-dir"), Path("/data"))


def test_dockerd_argv_has_its_own_roots_and_no_bridge() -> None:
    argv = dockerd_argv(PATHS, wrapper=False)
    assert argv[0] == "dockerd"
    pairs = dict(zip(argv[1::2], argv[2::2], strict=False))
    assert pairs["--data-root"] == "/data"
    assert pairs["--exec-root"] == "/run-dir/exec"
    assert pairs["--host"] == "unix:///run-dir/docker.sock"
    assert pairs["--pidfile"] == "/run-dir/docker.pid"
    assert pairs["--bridge"] == "none"
    assert "--add-runtime" not in argv


def test_dockerd_argv_registers_the_wrapper_as_default_runtime() -> None:
    argv = dockerd_argv(PATHS, wrapper=True)
    assert argv[argv.index("--add-runtime") + 1] == f"{RUNTIME_NAME}=/run-dir/runc-wrapper"
    assert argv[argv.index("--default-runtime") + 1] == RUNTIME_NAME


@pytest.mark.parametrize(
    ("capbnd", "missing"),
    [("000001fffeffffff", True), ("000001ffffffffff", False), ("0000000001000000", False)],
)
def test_capability_missing(capbnd: str, missing: bool) -> None:
    assert capability_missing(f"Name:\tx\nCapBnd:\t{capbnd}\n") is missing


def test_install_commands() -> None:
    update, install = install_commands(("docker.io",))
    assert update[:2] == ["apt-get", "update"]
    assert install[0] == "apt-get" and install[-1] == "docker.io"
    assert "--no-install-recommends" in install and "-y" in install


def test_ensure_packages_is_a_no_op_when_the_programs_exist() -> None:
    ensure_packages({"sh": "dash"})


def test_ensure_packages_refuses_without_root(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    with pytest.raises(HarnessError) as info:
        ensure_packages({"no-such-program-kthena": "docker.io"})
    assert "not root" in info.value.message and "docker.io" in info.value.message
    assert "sudo apt-get install -y docker.io" in info.value.hint


def test_ensure_packages_without_apt(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(HarnessError, match="has no apt-get"):
        ensure_packages({"no-such-program-kthena": "docker.io"})


def test_ensure_packages_names_a_failing_apt(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    apt = tmp_path / "apt-get"
    apt.write_text("#!/bin/sh\necho 'E: Unable to locate package docker.io' >&2\nexit 100\n")
    apt.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(HarnessError) as info:
        ensure_packages({"no-such-program-kthena": "docker.io"})
    assert "exit 100" in info.value.message and "Unable to locate package docker.io" in info.value.message


# -- the runtime wrapper, run for real ----------------------------------------------------------------


@pytest.fixture
def wrapper(tmp_path: Path) -> tuple[Path, Path]:
    """The wrapper, calling a fake runc that records its arguments and the files it was given."""
    record = tmp_path / "record.json"
    runc = tmp_path / "runc"
    runc.write_text(f"#!{sys.executable}\nimport json, sys\njson.dump(sys.argv[1:], open({str(record)!r}, 'w'))\n")
    runc.chmod(0o755)
    script = tmp_path / "wrapper"
    script.write_text(wrapper_script(sys.executable, str(runc)))
    script.chmod(0o755)
    return script, record


CAPS = ["CAP_CHOWN", MISSING_CAPABILITY, "CAP_SYS_ADMIN"]


def _caps() -> dict[str, list[str]]:
    return {k: list(CAPS) for k in ("bounding", "effective", "permitted", "inheritable", "ambient")}


def test_wrapper_strips_the_capability_from_the_bundle_on_create(wrapper: tuple[Path, Path], tmp_path: Path) -> None:
    script, record = wrapper
    bundle = tmp_path / "bundle"
    bundle.mkdir()
    (bundle / "config.json").write_text(json.dumps({"process": {"capabilities": _caps()}, "root": {"path": "rootfs"}}))
    argv = ["--root", "/r", "--log", "/l.json", "create", "--bundle", str(bundle), "--pid-file", "p", "id1"]
    subprocess.run([str(script), *argv], check=True, timeout=30)
    assert json.loads(record.read_text()) == argv
    config = json.loads((bundle / "config.json").read_text())
    assert all(caps == ["CAP_CHOWN", "CAP_SYS_ADMIN"] for caps in config["process"]["capabilities"].values())
    assert config["root"] == {"path": "rootfs"}


def test_wrapper_uses_the_working_directory_as_default_bundle(wrapper: tuple[Path, Path], tmp_path: Path) -> None:
    script, _ = wrapper
    (tmp_path / "config.json").write_text(json.dumps({"process": {"capabilities": _caps()}}))
    subprocess.run([str(script), "run", "id2"], check=True, cwd=tmp_path, timeout=30)
    assert MISSING_CAPABILITY not in (tmp_path / "config.json").read_text()


def test_wrapper_strips_the_capability_from_the_process_file_on_exec(
    wrapper: tuple[Path, Path], tmp_path: Path
) -> None:
    script, record = wrapper
    process = tmp_path / "process.json"
    process.write_text(json.dumps({"args": ["sh"], "capabilities": _caps()}))
    subprocess.run([str(script), "--root", "/r", "exec", "--process", str(process), "--detach", "id3"], check=True,
                   timeout=30)  # fmt: skip
    assert MISSING_CAPABILITY not in process.read_text()
    assert json.loads(record.read_text())[2:4] == ["exec", "--process"]


@pytest.mark.parametrize("argv", [["state", "id4"], ["--version"], ["delete", "--force", "id5"]])
def test_wrapper_passes_other_commands_through(wrapper: tuple[Path, Path], argv: list[str]) -> None:
    script, record = wrapper
    subprocess.run([str(script), *argv], check=True, timeout=30)
    assert json.loads(record.read_text()) == argv


def test_engine_paths_default_under_the_cache(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("KTHENA_CACHE_DIR", str(tmp_path))
    paths = EnginePaths.default()
    assert paths.data_root == tmp_path / "docker"
    assert paths.run_dir == tmp_path / "kind" / "dockerd"
    assert os.fspath(paths.socket).endswith("docker.sock")
