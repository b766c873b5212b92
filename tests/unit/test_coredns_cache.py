"""CoreDNS as an optional extra of the binary cache: its own recipe, built on demand into an existing
set, verified like the rest, never required (a fake ``go`` stands in for the toolchain)."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from conformance.cluster import binaries
from conformance.cluster.binaries import (
    ALL_BINARIES,
    BinaryCache,
    extra_recipe_digest,
    extras_plan,
    recipe_digest,
)
from conformance.cluster.errors import HarnessError
from conformance.cluster.paths import go_modules_root
from conformance.cluster.versions import PINNED

MODULES = go_modules_root()
(COREDNS_STEP,) = extras_plan()


@pytest.fixture(autouse=True)
def _no_bin_dir_override(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KTHENA_BIN_DIR", raising=False)


def _script(path: Path, text: str) -> dict[str, Any]:
    data = f"#!/bin/sh\n{text}\n".encode()
    path.write_bytes(data)
    path.chmod(0o755)
    return {"size": len(data), "sha256": hashlib.sha256(data).hexdigest()}


def _populate(directory: Path, *, coredns_recipe: str | None = None) -> None:
    """A complete control-plane set (fake binaries), with a coredns entry when a recipe is given."""
    directory.mkdir(parents=True)
    entries = {name: {**_script(directory / name, f"echo {name}"), "version": name} for name in ALL_BINARIES}
    if coredns_recipe is not None:
        entries["coredns"] = {
            **_script(directory / "coredns", "echo CoreDNS-1.15.0"),
            "version": "CoreDNS-1.15.0",
            "recipe": coredns_recipe,
            "optional": True,
        }
    manifest = {"schema": 1, "recipe": recipe_digest(PINNED), "binaries": entries}
    (directory / "manifest.json").write_text(json.dumps(manifest))


def _manifest(cache: BinaryCache) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((cache.directory(PINNED) / "manifest.json").read_text())
    return data


@pytest.fixture
def fake_go(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A ``go`` on PATH that "builds" a coredns script at ``-o``, counting builds in ``builds``;
    it fails when the file ``fail`` exists."""
    bin_dir = tmp_path / "gobin"
    bin_dir.mkdir()
    counter = tmp_path / "builds"
    fail = tmp_path / "fail"
    script = f"""
if [ "$1 $2" = "env GOVERSION" ]; then echo go1.26.8; exit 0; fi
echo "$PWD" >> {counter}
if [ -e {fail} ]; then echo "go: proxy unreachable" >&2; exit 1; fi
out=""; prev=""
for a in "$@"; do [ "$prev" = "-o" ] && out="$a"; prev="$a"; done
printf '#!/bin/sh\\necho CoreDNS-1.15.0\\necho linux/amd64\\n' > "$out"
chmod +x "$out"
"""
    _script(bin_dir / "go", script)
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    return tmp_path


def _builds(fake: Path) -> list[str]:
    path = fake / "builds"
    return path.read_text().splitlines() if path.exists() else []


# -- recipe ---------------------------------------------------------------------------------------


def test_core_recipe_ignores_the_coredns_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    shutil.copytree(MODULES, tmp_path / "gomodules")
    monkeypatch.setattr(binaries, "go_modules_root", lambda: tmp_path / "gomodules")
    core, extra = recipe_digest(PINNED), extra_recipe_digest(COREDNS_STEP)
    with (tmp_path / "gomodules" / "coredns" / "main.go").open("a") as f:
        f.write("\n// changed\n")
    assert recipe_digest(PINNED) == core  # existing caches stay valid
    assert extra_recipe_digest(COREDNS_STEP) != extra


def test_extra_recipe_ignores_the_control_plane_modules(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    shutil.copytree(MODULES, tmp_path / "gomodules")
    monkeypatch.setattr(binaries, "go_modules_root", lambda: tmp_path / "gomodules")
    extra = extra_recipe_digest(COREDNS_STEP)
    with (tmp_path / "gomodules" / "etcd" / "go.sum").open("a") as f:
        f.write("\n")
    assert extra_recipe_digest(COREDNS_STEP) == extra


# -- load -----------------------------------------------------------------------------------------


def test_a_set_without_coredns_is_complete(tmp_path: Path) -> None:
    cache = BinaryCache(root=tmp_path / "bin")
    _populate(cache.directory(PINNED))
    found = cache.load(PINNED, deep=True)
    assert found is not None
    assert found.optional("coredns") is None


def test_load_lists_a_current_coredns(tmp_path: Path) -> None:
    cache = BinaryCache(root=tmp_path / "bin")
    _populate(cache.directory(PINNED), coredns_recipe=extra_recipe_digest(COREDNS_STEP))
    found = cache.load(PINNED, deep=True)
    assert found is not None
    assert found.optional("coredns") == cache.directory(PINNED) / "coredns"


def test_a_coredns_from_another_recipe_is_not_used_and_not_damage(tmp_path: Path) -> None:
    cache = BinaryCache(root=tmp_path / "bin")
    _populate(cache.directory(PINNED), coredns_recipe="0" * 64)
    (cache.directory(PINNED) / "coredns").unlink()
    found = cache.load(PINNED)
    assert found is not None
    assert found.optional("coredns") is None


@pytest.mark.parametrize(
    ("damage", "why"),
    [
        pytest.param(lambda p: p.unlink(), "coredns is missing", id="missing"),
        pytest.param(lambda p: p.chmod(0o644), "coredns is not executable", id="not-executable"),
        pytest.param(lambda p: p.write_text("short"), "coredns is 5 bytes", id="size"),
    ],
)
def test_a_damaged_current_coredns_is_a_corrupt_cache(tmp_path: Path, damage: Any, why: str) -> None:
    cache = BinaryCache(root=tmp_path / "bin")
    _populate(cache.directory(PINNED), coredns_recipe=extra_recipe_digest(COREDNS_STEP))
    damage(cache.directory(PINNED) / "coredns")
    with pytest.raises(HarnessError, match=why) as info:
        cache.load(PINNED)
    assert "make binaries FORCE=1" in info.value.hint


def test_deep_load_checks_the_coredns_digest(tmp_path: Path) -> None:
    cache = BinaryCache(root=tmp_path / "bin")
    _populate(cache.directory(PINNED), coredns_recipe=extra_recipe_digest(COREDNS_STEP))
    path = cache.directory(PINNED) / "coredns"
    data = bytearray(path.read_bytes())
    data[-2] ^= 1
    path.write_bytes(bytes(data))
    assert cache.load(PINNED) is not None
    with pytest.raises(HarnessError, match="coredns does not match its SHA-256"):
        cache.load(PINNED, deep=True)


@pytest.mark.parametrize("present", [True, False])
def test_bin_dir_override_uses_coredns_when_present(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, present: bool
) -> None:
    for name in (*ALL_BINARIES, *(["coredns"] if present else [])):
        (tmp_path / name).write_text("x")
    monkeypatch.setenv("KTHENA_BIN_DIR", str(tmp_path))
    found = BinaryCache(root=tmp_path / "unused").ensure()
    assert found.optional("coredns") == (tmp_path / "coredns" if present else None)


# -- ensure: built on demand into the existing set ------------------------------------------------


def test_ensure_adds_coredns_to_an_existing_set(tmp_path: Path, fake_go: Path) -> None:
    cache = BinaryCache(root=tmp_path / "bin")
    _populate(cache.directory(PINNED))
    before = {n: (cache.directory(PINNED) / n).read_bytes() for n in ALL_BINARIES}
    messages: list[str] = []
    found = cache.ensure(progress=messages.append)
    assert found.optional("coredns") == cache.directory(PINNED) / "coredns"
    assert _builds(fake_go) == [str(MODULES / "coredns")]  # built in the checked-in module
    entry = _manifest(cache)["binaries"]["coredns"]
    assert entry["version"] == "CoreDNS-1.15.0"
    assert entry["recipe"] == extra_recipe_digest(COREDNS_STEP)
    assert entry["optional"] is True
    assert {n: (cache.directory(PINNED) / n).read_bytes() for n in ALL_BINARIES} == before  # not rebuilt
    assert found.build_seconds is not None
    assert any("built coredns" in m for m in messages)
    assert cache.load(PINNED, deep=True) is not None
    assert not [p for p in cache.root.iterdir() if p.name.startswith(".coredns.")]  # staging removed


def test_ensure_builds_coredns_once(tmp_path: Path, fake_go: Path) -> None:
    cache = BinaryCache(root=tmp_path / "bin")
    _populate(cache.directory(PINNED))
    cache.ensure()
    cache.ensure()
    assert len(_builds(fake_go)) == 1


def test_ensure_without_extras_builds_nothing(tmp_path: Path, fake_go: Path) -> None:
    cache = BinaryCache(root=tmp_path / "bin")
    _populate(cache.directory(PINNED))
    assert cache.ensure(extras=False).optional("coredns") is None
    assert _builds(fake_go) == []


def test_a_failed_coredns_build_leaves_a_working_set_and_is_recorded(tmp_path: Path, fake_go: Path) -> None:
    cache = BinaryCache(root=tmp_path / "bin")
    _populate(cache.directory(PINNED))
    (fake_go / "fail").touch()
    messages: list[str] = []
    found = cache.ensure(progress=messages.append)  # does not raise
    assert found.optional("coredns") is None
    assert any("optional coredns not built" in m and "runs without it" in m for m in messages)
    failed = _manifest(cache)["extras_failed"]["coredns"]
    assert failed["recipe"] == extra_recipe_digest(COREDNS_STEP)
    assert "failed" in failed["error"]
    assert "coredns" not in _manifest(cache)["binaries"]
    # `cluster up` does not retry the same recipe; `make binaries` (the default) does.
    cache.ensure(retry_failed_extras=False)
    assert len(_builds(fake_go)) == 1
    (fake_go / "fail").unlink()
    assert cache.ensure().optional("coredns") is not None
    assert len(_builds(fake_go)) == 2
    assert "extras_failed" not in _manifest(cache)


def test_without_go_a_set_is_returned_without_coredns(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    cache = BinaryCache(root=tmp_path / "bin")
    _populate(cache.directory(PINNED))
    messages: list[str] = []
    found = cache.ensure(progress=messages.append)
    assert found.optional("coredns") is None
    assert any("Go toolchain was not found" in m for m in messages)
