"""The wheel, installed into a fresh virtualenv away from the checkout, runs the suite.

`kthena-conformance run` must need nothing outside its Python packages: the Go wrapper modules the
binaries are built from, the fake drivers' capability files, the kwok stages, the CRD, the deploy
manifests, the suite's pytest.ini and catalog all ship as package data. This test builds the wheel
from a copy of the checkout, installs it (dependencies from PyPI, pip's cache allowed) into a new
virtualenv in a temporary directory, checks nothing installed points back into the checkout, and
runs the Accelerators profile with the fake drivers (the smallest whole profile that goes through
the reference controller, the fake DRA drivers and their shipped capability files; a selection by
``--id`` would leave its profiles partial, exit 1) from a working directory outside the checkout
with ``PYTHONPATH`` unset.

The binary cache is the user's (``KTHENA_CACHE_DIR``, else ``~/.cache/kthena-conformance``,
inherited through the environment): the recipe digest hashes the wrapper modules' paths relative
to their root and their contents, which the wheel ships unchanged, so the installed package finds
the binaries the checkout built and does not rebuild them.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from conformance.cluster.binaries import BinaryCache
from conformance.cluster.errors import HarnessError
from conformance.cluster.local.provider import LocalProvider
from conformance.cluster.versions import PINNED
from conformance.framework import catalog, report
from tests.integration.real_nodes import host_turn
from tests.integration.test_conformance_suite import real_nodes_usable

IN_CONTAINER = "accelerators/cdi/container-environment"

# The own-controller pass: mostly waiting (pip, the run), so it overlaps with the other tests there;
# its run's real nodes take turns with the control run's (host_turn).
pytestmark = [pytest.mark.serial, pytest.mark.own_controller, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
# What a source distribution would not carry: the checkout's own state and build leftovers.
NOT_SOURCES = shutil.ignore_patterns(
    ".git", ".venv", "*.egg-info", "build", "dist", "__pycache__", "*.pyc", ".mypy_cache", ".ruff_cache",
    ".pytest_cache", ".hypothesis", "reports", "artifacts", "out",
)  # fmt: skip
PROFILE = "Accelerators"
# Files `run` reads at run time; each must be in the installed distribution.
SHIPPED = [
    "conformance/catalog.yaml",
    "conformance/specmap.yaml",
    "conformance/suites/pytest.ini",
    "conformance/cluster/local/kwok-stages.yaml",
    "conformance/cluster/gomodules/controlplane/go.mod",
    "conformance/cluster/gomodules/controlplane/cmd/kube-apiserver/main.go",
    "conformance/cluster/gomodules/etcd/go.sum",
    "conformance/cluster/gomodules/kwok/go.mod",
    "conformance/cluster/gomodules/coredns/main.go",
    "conformance/cluster/gomodules/prometheus/go.mod",
    "conformance/implementations/kthena-ref-support.yaml",
    "fake_devices/capabilities/gpu.yaml",
    "fake_devices/capabilities/npu.yaml",
]
BUILD_TIMEOUT = 600.0  # the wheel build, the venv, the dependency install (a cold pip cache included)
RUN_TIMEOUT = 900.0  # the run itself: cluster up, controller, the profile, report


def _check(argv: list[str], *, cwd: Path, env: dict[str, str], timeout: float = BUILD_TIMEOUT) -> str:
    """Run a short command; a failure shows its output."""
    proc = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False)
    assert proc.returncode == 0, (
        f"{' '.join(argv)} exited {proc.returncode}:\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}"
    )
    return proc.stdout


def _clean_env(venv: Path) -> dict[str, str]:
    """The environment of a user who installed the wheel: its venv first on PATH, no PYTHONPATH,
    nothing from the checkout's venv (the binary cache and Go settings are inherited)."""
    checkout_bin = str(ROOT / ".venv" / "bin")
    path = [p for p in os.environ.get("PATH", "").split(os.pathsep) if p and p != checkout_bin]
    env = {k: v for k, v in os.environ.items() if k not in {"PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME"}}
    env["PATH"] = os.pathsep.join([str(venv / "bin"), *path])
    return env


@pytest.fixture(scope="module")
def scratch() -> Iterator[Path]:
    """A temporary directory outside the checkout for the source copy, the wheel, the venv and the
    run; removed even when the test fails (a venv is hundreds of MB)."""
    base = Path(tempfile.mkdtemp(prefix="kthena-wheel-"))
    assert not base.resolve().is_relative_to(ROOT)
    try:
        yield base
    finally:
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture(scope="module")
def venv(scratch: Path) -> Path:
    """A fresh virtualenv with the wheel built from a copy of this checkout installed in it."""
    env = _clean_env(scratch / "venv")
    source = scratch / "source"
    shutil.copytree(ROOT, source, ignore=NOT_SOURCES, symlinks=True)
    dist = scratch / "dist"
    _check(
        # No build isolation: the checkout's venv has the build backend (setuptools), so pip does not install
        # one into a throwaway environment first (measured 11.5 s -> 4.4 s on a loaded machine, 2026-12-07).
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(dist), str(source)],
        cwd=scratch,
        env=env,
    )
    shutil.rmtree(source)
    (wheel,) = dist.glob("kthena_conformance-*.whl")
    _check([sys.executable, "-m", "venv", str(scratch / "venv")], cwd=scratch, env=env)
    _check([str(scratch / "venv" / "bin" / "python"), "-m", "pip", "install", "-q", str(wheel)], cwd=scratch, env=env)
    return scratch / "venv"


def test_the_installed_package_holds_everything_and_nothing_points_back(venv: Path, scratch: Path) -> None:
    env = _clean_env(venv)
    python = str(venv / "bin" / "python")
    files = _check(
        [python, "-c", "import conformance, kthena_ref, fake_devices, json; "
         "print(json.dumps([m.__file__ for m in (conformance, kthena_ref, fake_devices)]))"],
        cwd=scratch, env=env,
    )  # fmt: skip
    for module_file in json.loads(files):
        assert Path(module_file).resolve().is_relative_to(venv.resolve()), f"{module_file} is not in the venv"
    shown = _check([python, "-m", "pip", "show", "-f", "kthena-conformance"], cwd=scratch, env=env)
    listed = {line.strip() for line in shown.splitlines() if line.startswith("  ")}
    (location,) = [line.split(":", 1)[1].strip() for line in shown.splitlines() if line.startswith("Location:")]
    site = Path(location)
    assert site.resolve().is_relative_to(venv.resolve()), f"installed at {site}"
    missing = [f for f in SHIPPED if f not in listed]
    assert not missing, f"not in the installed distribution: {missing}"
    assert not [f for f in listed if f.endswith(".pth") or "__editable__" in f], "an editable or path install"
    leaks = []
    for name in sorted(listed):
        path = site / name
        text = path.suffix in {".py", ".yaml", ".json", ".ini", ".txt", ".mod", ".sum", ".go"} and path.is_file()
        if text and str(ROOT) in path.read_text(errors="replace"):
            leaks.append(name)
    leaks += [p.name for p in site.glob("*.pth") if str(ROOT) in p.read_text(errors="replace")]
    assert not leaks, f"installed files naming the checkout {ROOT}: {leaks}"


def test_the_installed_package_runs_the_suite_from_outside_the_checkout(
    venv: Path, scratch: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    env = _clean_env(venv)
    cli = str(venv / "bin" / "kthena-conformance")
    work = scratch / "work"
    work.mkdir()
    try:
        built = BinaryCache().load(PINNED)
    except HarnessError:
        built = None
    if built is not None:  # the same cache, the same recipe digest: found, not rebuilt
        found = _check([cli, "binaries", "path"], cwd=work, env=env).strip()
        assert found == str(built.directory), f"the installed package looks for its binaries in {found}"
    real = real_nodes_usable()  # the Accelerators profile's container-environment needs them
    argv = [cli, "run", "--fake-devices", "--profile", PROFILE, "--report-dir", str(work / "reports"),
            "--real-nodes" if real else "--no-real-nodes"]  # fmt: skip
    with host_turn(tmp_path_factory):
        started = time.monotonic()
        proc = subprocess.Popen(
            argv, cwd=work, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True
        )
        try:
            output, _ = proc.communicate(timeout=RUN_TIMEOUT)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            output, _ = proc.communicate()
            pytest.fail(f"the run did not finish in {RUN_TIMEOUT:.0f}s:\n{output[-6000:]}")
        finally:
            LocalProvider().down(f"conformance-{proc.pid}")  # the run's own cluster, if it outlived the run
    print(f"installed-wheel run: {time.monotonic() - started:.1f}s")
    assert proc.returncode == (0 if real else 1), f"exit {proc.returncode}:\n{output[-6000:]}"
    data = json.loads((work / "reports" / "conformance-report.json").read_text())
    outcomes = {t["id"]: t["outcome"] for t in data["tests"] if t["outcome"] != "skipped-by-user"}
    undecided = set() if real else {IN_CONTAINER}  # without real nodes it cannot decide, never passes
    assert outcomes and {o for i, o in outcomes.items() if i not in undecided} == {"passed"}, outcomes
    assert all(outcomes[i] == "error" for i in undecided), outcomes
    assert all(i.startswith("accelerators/") for i in outcomes), outcomes
    verdict = "success" if real else "partial"
    assert {p["profile"]: p["verdict"] for p in data["profiles"]} == {PROFILE: verdict}
    assert data["verdict"] == verdict and data["exitCode"] == (0 if real else 1)
    assert data.get("coverage"), f"no spec coverage in the report (the spec map not shipped?): {data['notes']}"
    assert report.verify(work / "reports" / "conformance-report.json", digest=catalog.suite_digest()) == []
    _check([cli, "report", "verify", str(work / "reports" / "conformance-report.json")], cwd=work, env=env)
