"""Prometheus as an optional extra of the binary cache: its wrapper module and build (tags, version
stamp), its own recipe, built only when asked for into an existing set, never invalidating the
control plane; the ``binaries build --prometheus`` option and ``make test`` asking for it (a fake
``go`` stands in for the toolchain)."""

from __future__ import annotations

import hashlib
import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from conformance import cli
from conformance.cluster import binaries
from conformance.cluster.binaries import (
    ALL_BINARIES,
    MIN_GO,
    PROMETHEUS_BINARY,
    BinaryCache,
    extra_recipe_digest,
    extras_plan,
    prometheus_build,
    recipe_digest,
)
from conformance.cluster.errors import HarnessError
from conformance.cluster.local.prometheus import prometheus_binary
from conformance.cluster.paths import go_modules_root, repo_root
from conformance.cluster.versions import PINNED, PROMETHEUS, prometheus_release

MODULES = go_modules_root()
STEP = prometheus_build()


@pytest.fixture(autouse=True)
def _no_bin_dir_override(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KTHENA_BIN_DIR", raising=False)


# -- versions and the wrapper module --------------------------------------------------------------


@pytest.mark.parametrize(
    ("module_version", "release"),
    [("v0.316.0", "3.16.0"), ("v0.300.1", "3.0.1"), ("v0.316.12", "3.16.12"), ("v0.1002.3", "10.2.3")],
)
def test_prometheus_release_of_a_module_version(module_version: str, release: str) -> None:
    assert prometheus_release(module_version) == release


@pytest.mark.parametrize("module_version", ["v2.53.0", "v0.55.0", "v1.316.0"])
def test_prometheus_release_rejects_other_versions(module_version: str) -> None:
    with pytest.raises(ValueError, match="not a Prometheus"):
        prometheus_release(module_version)


def test_the_pinned_version_is_prometheus_3() -> None:
    assert prometheus_release().startswith("3.")


def test_wrapper_go_mod_requires_the_pinned_prometheus_and_lists_the_server_as_a_tool() -> None:
    text = (MODULES / "prometheus" / "go.mod").read_text()
    assert re.search(rf"^\s*github.com/prometheus/prometheus {re.escape(PROMETHEUS)}( |$)", text, re.MULTILINE)
    assert re.search(r"^tool github.com/prometheus/prometheus/cmd/prometheus$", text, re.MULTILINE)
    assert "replace" not in text
    match = re.search(r"^go (\d+)\.(\d+)", text, re.MULTILINE)
    assert match and (int(match[1]), int(match[2])) <= MIN_GO
    assert (MODULES / "prometheus" / "go.sum").is_file()


# -- the build ------------------------------------------------------------------------------------


def test_prometheus_is_built_only_when_asked_for() -> None:
    assert [s.module for s in extras_plan()] == ["coredns"]
    assert "prometheus" not in [s.module for s in extras_plan(real_nodes=True)]
    assert [s.module for s in extras_plan(prometheus=True)] == ["coredns", "prometheus"]
    both = [s.module for s in extras_plan(real_nodes=True, prometheus=True)]
    assert both[:2] == ["coredns", "prometheus"] and "containerd" in both


def test_prometheus_build_drops_the_discovery_plugins_and_stamps_the_release() -> None:
    argv = STEP.argv(Path("/out"))
    assert argv[argv.index("-tags") + 1] == "remove_all_sd"
    assert "builtinassets" not in argv  # the web UI is not embedded: the API is all the tests use
    assert argv[argv.index("-o") + 1] == "/out/prometheus"
    assert argv[-1] == "github.com/prometheus/prometheus/cmd/prometheus"
    ldflags = argv[argv.index("-ldflags") + 1]
    assert "-X github.com/prometheus/common/version.Version=3.16.0" in ldflags
    assert ldflags.startswith("-s -w")
    assert STEP.outputs == (PROMETHEUS_BINARY,) == ("prometheus",)


def test_core_recipe_ignores_the_prometheus_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    shutil.copytree(MODULES, tmp_path / "gomodules")
    monkeypatch.setattr(binaries, "go_modules_root", lambda: tmp_path / "gomodules")
    core, extra = recipe_digest(PINNED), extra_recipe_digest(STEP)
    coredns = extra_recipe_digest(extras_plan()[0])
    with (tmp_path / "gomodules" / "prometheus" / "go.sum").open("a") as f:
        f.write("\n")
    assert recipe_digest(PINNED) == core  # existing control-plane sets stay valid
    assert extra_recipe_digest(extras_plan()[0]) == coredns
    assert extra_recipe_digest(STEP) != extra


# -- the cache ------------------------------------------------------------------------------------


def _script(path: Path, text: str) -> dict[str, Any]:
    data = f"#!/bin/sh\n{text}\n".encode()
    path.write_bytes(data)
    path.chmod(0o755)
    return {"size": len(data), "sha256": hashlib.sha256(data).hexdigest()}


def _populate(directory: Path) -> None:
    """A complete control-plane set with CoreDNS (fake binaries): only Prometheus is missing."""
    directory.mkdir(parents=True)
    entries: dict[str, Any] = {
        name: {**_script(directory / name, f"echo {name}"), "version": name} for name in ALL_BINARIES
    }
    entries["coredns"] = {
        **_script(directory / "coredns", "echo CoreDNS-1.15.0"),
        "version": "CoreDNS-1.15.0",
        "recipe": extra_recipe_digest(extras_plan()[0]),
        "optional": True,
    }
    manifest = {"schema": 1, "recipe": recipe_digest(PINNED), "binaries": entries}
    (directory / "manifest.json").write_text(json.dumps(manifest))


def _manifest(cache: BinaryCache) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((cache.directory(PINNED) / "manifest.json").read_text())
    return data


@pytest.fixture
def fake_go(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A ``go`` on PATH that "builds" a script printing Prometheus's version at ``-o``, logging each
    build's directory and arguments to ``builds``; it fails when the file ``fail`` exists."""
    bin_dir = tmp_path / "gobin"
    bin_dir.mkdir()
    script = f"""
if [ "$1 $2" = "env GOVERSION" ]; then echo go1.26.8; exit 0; fi
echo "$PWD $*" >> {tmp_path / "builds"}
if [ -e {tmp_path / "fail"} ]; then echo "go: proxy unreachable" >&2; exit 1; fi
out=""; prev=""
for a in "$@"; do [ "$prev" = "-o" ] && out="$a"; prev="$a"; done
printf '#!/bin/sh\\necho "prometheus, version 3.16.0 (branch: , revision: unknown)"\\n' > "$out"
chmod +x "$out"
"""
    _script(bin_dir / "go", script)
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    return tmp_path


def _builds(fake: Path) -> list[str]:
    path = fake / "builds"
    return path.read_text().splitlines() if path.exists() else []


def test_ensure_builds_prometheus_into_the_existing_set_only_when_asked(tmp_path: Path, fake_go: Path) -> None:
    cache = BinaryCache(root=tmp_path / "bin")
    _populate(cache.directory(PINNED))
    before = {n: (cache.directory(PINNED) / n).read_bytes() for n in (*ALL_BINARIES, "coredns")}
    assert cache.ensure().optional("prometheus") is None
    assert _builds(fake_go) == []
    messages: list[str] = []
    found = cache.ensure(prometheus=True, progress=messages.append)
    assert found.optional("prometheus") == cache.directory(PINNED) / "prometheus"
    (build,) = _builds(fake_go)
    assert build.startswith(f"{MODULES / 'prometheus'} build ")
    assert "-tags remove_all_sd" in build
    entry = _manifest(cache)["binaries"]["prometheus"]
    assert entry["version"] == "prometheus, version 3.16.0 (branch: , revision: unknown)"
    assert entry["recipe"] == extra_recipe_digest(STEP)
    assert entry["optional"] is True
    assert {n: (cache.directory(PINNED) / n).read_bytes() for n in before} == before  # nothing else rebuilt
    assert any("built prometheus" in m for m in messages)
    assert found.build_seconds is not None
    # Built once; later loads list it whether or not they ask for it.
    cache.ensure(prometheus=True)
    assert len(_builds(fake_go)) == 1
    loaded = cache.load(PINNED, deep=True)
    assert loaded is not None and loaded.optional("prometheus") == cache.directory(PINNED) / "prometheus"
    assert not [p for p in cache.root.iterdir() if p.name.startswith(".prometheus.")]  # staging removed


def test_a_failed_prometheus_build_is_recorded_and_named_by_prometheus_binary(tmp_path: Path, fake_go: Path) -> None:
    cache = BinaryCache(root=tmp_path / "bin")
    _populate(cache.directory(PINNED))
    (fake_go / "fail").touch()
    found = cache.ensure(prometheus=True)  # does not raise: the set works without it
    assert found.optional("prometheus") is None
    failed = _manifest(cache)["extras_failed"]["prometheus"]
    assert failed["recipe"] == extra_recipe_digest(STEP)
    with pytest.raises(HarnessError) as info:
        prometheus_binary(cache)
    assert info.value.message.startswith("the Prometheus server is not built: ")
    assert "binaries build --prometheus" in info.value.hint
    (fake_go / "fail").unlink()
    assert prometheus_binary(cache) == cache.directory(PINNED) / "prometheus"
    assert "extras_failed" not in _manifest(cache)


def test_a_prometheus_from_another_recipe_is_rebuilt(tmp_path: Path, fake_go: Path) -> None:
    cache = BinaryCache(root=tmp_path / "bin")
    _populate(cache.directory(PINNED))
    cache.ensure(prometheus=True)
    path = cache.directory(PINNED) / "manifest.json"
    manifest = json.loads(path.read_text())
    manifest["binaries"]["prometheus"]["recipe"] = "0" * 64
    path.write_text(json.dumps(manifest))
    loaded = cache.load(PINNED)
    assert loaded is not None and loaded.optional("prometheus") is None  # not used, not damage
    assert cache.ensure(prometheus=True).optional("prometheus") is not None
    assert len(_builds(fake_go)) == 2


@pytest.mark.parametrize("present", [True, False])
def test_bin_dir_override_uses_prometheus_when_present(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, present: bool
) -> None:
    for name in (*ALL_BINARIES, *(["prometheus"] if present else [])):
        (tmp_path / name).write_text("x")
    monkeypatch.setenv("KTHENA_BIN_DIR", str(tmp_path))
    found = BinaryCache(root=tmp_path / "unused").ensure(prometheus=True)
    assert found.optional("prometheus") == (tmp_path / "prometheus" if present else None)


# -- the command line and make test ----------------------------------------------------------------


class _RecordingCache:
    calls: list[dict[str, Any]] = []

    def __init__(self, root: Path) -> None:
        self.root = root

    def ensure(self, **options: Any) -> binaries.BinarySet:
        self.calls.append(options)
        return binaries.BinarySet(self.root, PINNED, {"binaries": {"prometheus": {"version": "3.16.0"}}})

    def load(self, versions: object, *, deep: bool = False) -> None:
        return None


@pytest.mark.parametrize(("args", "wanted"), [([], False), (["--prometheus"], True)])
def test_binaries_build_prometheus_option(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, args: list[str], wanted: bool
) -> None:
    _RecordingCache.calls = []
    monkeypatch.setattr(binaries, "BinaryCache", lambda: _RecordingCache(tmp_path))
    result = CliRunner().invoke(cli.main, ["binaries", "build", *args])
    assert result.exit_code == 0, result.output
    (call,) = _RecordingCache.calls
    assert call["prometheus"] is wanted
    assert call["real_nodes"] is False


def test_make_test_builds_prometheus_before_the_tests() -> None:
    makefile = (repo_root() / "Makefile").read_text()
    for target in ("test", "test-all"):
        recipe = makefile.split(f"\n{target}: ", 1)[1].split("\n\n", 1)[0]
        assert "binaries build --real-nodes --prometheus" in recipe, target
