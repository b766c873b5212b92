"""Binary build plan, go.mod retargeting, cache verification, find_go, and pinned versions vs the Go wrapper modules."""

from __future__ import annotations

import hashlib
import json
import re
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from conformance.cluster import binaries
from conformance.cluster.binaries import (
    ALL_BINARIES,
    CONTROL_PLANE,
    MIN_GO,
    REAL_NODE_BINARIES,
    VERSION_ARGS,
    BinaryCache,
    GoBuild,
    build_plan,
    extras_plan,
    find_go,
    go_mod_edits,
    recipe_digest,
)
from conformance.cluster.errors import HarnessError
from conformance.cluster.paths import go_modules_root
from conformance.cluster.versions import CONTAINERD, CRICTL, FALLBACKS, KIND_NODE_IMAGE, PINNED, Versions

MODULES = go_modules_root()
FALLBACK = Versions(kubernetes="v1.36.1", etcd="v3.6.15", kwok="v0.8.0")
OUT = Path("/cache/staging")


@pytest.fixture(autouse=True)
def _no_bin_dir_override(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KTHENA_BIN_DIR", raising=False)


# -- go.mod parsing (independent of the code under test) ------------------------------------------


def _go_mod(module: str) -> str:
    return (MODULES / module / "go.mod").read_text()


def _directives(text: str, verb: str) -> list[str]:
    """Every line of a ``verb`` directive, single-line or in a ``verb ( ... )`` block, comments dropped."""
    out: list[str] = []
    block = False
    for raw in text.splitlines():
        line = raw.split("//", 1)[0].strip()
        if block:
            if line == ")":
                block = False
            elif line:
                out.append(line)
        elif line == f"{verb} (":
            block = True
        elif line.startswith(f"{verb} "):
            out.append(line[len(verb) + 1 :].strip())
    return out


def _requires(text: str) -> dict[str, str]:
    return dict(line.split() for line in _directives(text, "require"))


def _direct_requires(text: str) -> dict[str, str]:
    """Requirements without ``// indirect``."""
    direct = [raw for raw in text.splitlines() if "// indirect" not in raw]
    return _requires("\n".join(direct))


def _replaces(text: str) -> dict[str, tuple[str, str]]:
    out = {}
    for line in _directives(text, "replace"):
        lhs, arrow, rhs, version = line.split()
        assert arrow == "=>"
        out[lhs] = (rhs, version)
    return out


# -- versions -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("versions", "minor", "staging", "key"),
    [
        (PINNED, "1.36", "v0.36.3", "k8s-v1.36.3_etcd-v3.6.16_kwok-v0.8.0"),
        (FALLBACK, "1.36", "v0.36.1", "k8s-v1.36.1_etcd-v3.6.15_kwok-v0.8.0"),
        (Versions("v1.40.12", "v3.7.0", "v0.9.1"), "1.40", "v0.40.12", "k8s-v1.40.12_etcd-v3.7.0_kwok-v0.9.1"),
    ],
)
def test_versions_derived_fields(versions: Versions, minor: str, staging: str, key: str) -> None:
    assert versions.kubernetes_minor == minor
    assert versions.staging == staging
    assert versions.key() == key


@pytest.mark.parametrize("fallback", FALLBACKS, ids=lambda v: v.key())
def test_fallbacks_keep_the_pinned_minor(fallback: Versions) -> None:
    assert fallback.kubernetes_minor == PINNED.kubernetes_minor
    assert fallback != PINNED


def test_images_follow_the_pinned_kubernetes_version() -> None:
    assert f"kindest/node:{PINNED.kubernetes}" == KIND_NODE_IMAGE


# -- pinned versions match the Go wrapper modules -------------------------------------------------


def test_controlplane_go_mod_requires_pinned_kubernetes() -> None:
    assert _requires(_go_mod("controlplane"))["k8s.io/kubernetes"] == PINNED.kubernetes


def test_controlplane_go_mod_direct_staging_requires_use_pinned_staging() -> None:
    direct = {m: v for m, v in _direct_requires(_go_mod("controlplane")).items() if m != "k8s.io/kubernetes"}
    assert direct, "expected at least one direct k8s.io staging requirement"
    for module, version in direct.items():
        if module.startswith("k8s.io/"):
            assert version == PINNED.staging, module


def test_controlplane_go_mod_replaces_every_staging_module_with_pinned_staging() -> None:
    replaces = _replaces(_go_mod("controlplane"))
    staging = {lhs: rv for lhs, rv in replaces.items() if lhs.startswith("k8s.io/")}
    assert len(staging) >= 25  # the parser really found the replace block
    for lhs, (rhs, version) in staging.items():
        assert rhs == lhs, f"{lhs} is replaced by another module ({rhs})"
        assert version == PINNED.staging, f"{lhs} => {version}, expected {PINNED.staging}"


def test_etcd_go_mod_requires_pinned_etcd() -> None:
    text = _go_mod("etcd")
    assert _requires(text)["go.etcd.io/etcd/server/v3"] == PINNED.etcd
    assert "go.etcd.io/etcd/server/v3" in _directives(text, "tool")


def test_kwok_go_mod_requires_pinned_kwok() -> None:
    text = _go_mod("kwok")
    assert _requires(text)["sigs.k8s.io/kwok"] == PINNED.kwok
    assert {"sigs.k8s.io/kwok/cmd/kwok", "sigs.k8s.io/kwok/cmd/kwokctl"} <= set(_directives(text, "tool"))


@pytest.mark.parametrize("module", ["controlplane", "etcd", "kwok"])
def test_go_directive_is_buildable_with_the_minimum_go(module: str) -> None:
    match = re.search(r"^go (\d+)\.(\d+)", _go_mod(module), re.MULTILINE)
    assert match, f"{module}/go.mod has no go directive"
    assert (int(match[1]), int(match[2])) <= MIN_GO, "find_go would accept a toolchain that cannot build this"


@pytest.mark.parametrize("name", CONTROL_PLANE)
def test_controlplane_has_a_main_package_per_binary(name: str) -> None:
    main = MODULES / "controlplane" / "cmd" / name / "main.go"
    assert main.is_file()
    assert main.read_text().startswith("package main") or "\npackage main" in main.read_text()


# -- build plan -----------------------------------------------------------------------------------


def test_build_plan_has_three_steps_covering_every_binary() -> None:
    plan = build_plan(PINNED)
    assert [s.module for s in plan] == ["controlplane", "etcd", "kwok"]
    outputs = [o for s in plan for o in s.outputs]
    assert sorted(outputs) == sorted(ALL_BINARIES)


@pytest.mark.parametrize("pkg", ["k8s.io/component-base/version", "k8s.io/client-go/pkg/version"])
@pytest.mark.parametrize(
    ("var", "value"), [("gitVersion", "v1.36.3"), ("gitMajor", "1"), ("gitMinor", "36"), ("gitTreeState", "clean")]
)
def test_controlplane_ldflags_stamp_the_version(pkg: str, var: str, value: str) -> None:
    step = build_plan(PINNED)[0]
    assert f"-X {pkg}.{var}={value}" in step.ldflags
    argv = step.argv(OUT)
    assert f"-X {pkg}.{var}={value}" in argv[argv.index("-ldflags") + 1]


def test_fallback_ldflags_stamp_the_fallback_version() -> None:
    ldflags = build_plan(FALLBACK)[0].ldflags
    assert "-X k8s.io/component-base/version.gitVersion=v1.36.1" in ldflags
    assert not [f for f in ldflags if "v1.36.3" in f]


KWOK_LDFLAGS = "-s -w -X sigs.k8s.io/kwok/pkg/consts.Version=0.8.0 -X sigs.k8s.io/kwok/pkg/consts.KubeVersion=1.36.3"


@pytest.mark.parametrize(
    ("index", "ldflags", "target", "packages"),
    [
        pytest.param(0, None, f"{OUT}/", ["./cmd/..."], id="controlplane-into-dir"),
        pytest.param(1, "-s -w", f"{OUT}/etcd", ["go.etcd.io/etcd/server/v3"], id="etcd-explicit-file"),
        pytest.param(
            2,
            KWOK_LDFLAGS,
            f"{OUT}/",
            ["sigs.k8s.io/kwok/cmd/kwok", "sigs.k8s.io/kwok/cmd/kwokctl"],
            id="kwok-into-dir",
        ),
    ],
)
def test_build_argv(index: int, ldflags: str | None, target: str, packages: list[str]) -> None:
    step = build_plan(PINNED)[index]
    argv = step.argv(OUT)
    assert argv[:2] == ["go", "build"]
    assert "-trimpath" in argv
    assert argv[argv.index("-ldflags") + 1] == (ldflags if ldflags is not None else " ".join(step.ldflags))
    assert argv[argv.index("-o") + 1] == target
    assert argv[-len(packages) :] == packages
    assert argv.count("-o") == 1
    assert argv.count("-ldflags") == 1


def test_etcd_output_is_an_explicit_file_named_etcd() -> None:
    argv = build_plan(PINNED)[1].argv(OUT)
    assert argv[argv.index("-o") + 1].endswith("/etcd")


@pytest.mark.parametrize(
    ("packages", "outputs", "target"),
    [
        pytest.param(("a",), ("x",), f"{OUT}/x", id="one-package-one-output"),
        pytest.param(("a", "b"), ("x", "y"), f"{OUT}/", id="two-packages"),
        pytest.param(("./cmd/...",), ("x", "y"), f"{OUT}/", id="pattern-many-outputs"),
    ],
)
def test_go_build_target(packages: tuple[str, ...], outputs: tuple[str, ...], target: str) -> None:
    argv = GoBuild("m", packages, (), outputs).argv(OUT)
    assert argv[argv.index("-o") + 1] == target
    assert argv[-len(packages) :] == list(packages)


# -- go mod edits ---------------------------------------------------------------------------------


def test_go_mod_edits_controlplane_retargets_kubernetes_and_every_staging_replace() -> None:
    edits = go_mod_edits("controlplane", FALLBACK)
    assert edits[0] == ["-require", "k8s.io/kubernetes@v1.36.1"]
    replaced = {}
    for flag, value in edits[1:]:
        assert flag == "-replace"
        lhs, _, rhs = value.partition("=")
        replaced[lhs] = rhs
    expected = {m for m in _replaces(_go_mod("controlplane")) if m.startswith("k8s.io/")}
    assert set(replaced) == expected
    for module, target in replaced.items():
        assert target == f"{module}@v0.36.1"


@pytest.mark.parametrize(
    ("module", "versions", "edits"),
    [
        ("etcd", FALLBACK, [["-require", "go.etcd.io/etcd/server/v3@v3.6.15"]]),
        ("etcd", PINNED, [["-require", "go.etcd.io/etcd/server/v3@v3.6.16"]]),
        ("kwok", Versions("v1.36.3", "v3.6.16", "v0.9.0"), [["-require", "sigs.k8s.io/kwok@v0.9.0"]]),
    ],
)
def test_go_mod_edits_other_modules(module: str, versions: Versions, edits: list[list[str]]) -> None:
    assert go_mod_edits(module, versions) == edits


# -- recipe digest --------------------------------------------------------------------------------


def test_recipe_digest_is_stable_and_version_specific() -> None:
    assert recipe_digest(PINNED) == recipe_digest(PINNED)
    assert len({recipe_digest(v) for v in (PINNED, *FALLBACKS)}) == 1 + len(FALLBACKS)


@pytest.mark.parametrize(
    ("relative", "changes"),
    [
        pytest.param("etcd/go.sum", True, id="go-sum"),
        pytest.param("kwok/go.mod", True, id="go-mod"),
        pytest.param("controlplane/cmd/kube-scheduler/main.go", True, id="main-go"),
        pytest.param("kwok/README.md", False, id="readme-ignored"),
    ],
)
def test_recipe_digest_tracks_module_sources(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, relative: str, changes: bool
) -> None:
    original = recipe_digest(PINNED)
    shutil.copytree(MODULES, tmp_path / "gomodules")
    monkeypatch.setattr(binaries, "go_modules_root", lambda: tmp_path / "gomodules")
    before = recipe_digest(PINNED)
    assert before == original  # the digest depends on the sources, not on where the package is
    target = tmp_path / "gomodules" / relative
    with target.open("a") as f:
        f.write("\n// changed\n")
    assert (recipe_digest(PINNED) != before) is changes


# -- binary cache ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def pinned_recipe() -> str:
    return recipe_digest(PINNED)


def _populate(directory: Path, recipe: str) -> dict[str, Any]:
    directory.mkdir(parents=True)
    entries = {}
    for name in ALL_BINARIES:
        data = f"#!/bin/sh\necho {name} fake\n".encode()
        path = directory / name
        path.write_bytes(data)
        path.chmod(0o755)
        entries[name] = {"size": len(data), "sha256": hashlib.sha256(data).hexdigest(), "version": name}
    manifest = {"schema": 1, "recipe": recipe, "binaries": entries}
    (directory / "manifest.json").write_text(json.dumps(manifest))
    return manifest


@pytest.fixture
def cache(tmp_path: Path, pinned_recipe: str) -> BinaryCache:
    cache = BinaryCache(root=tmp_path / "bin")
    _populate(cache.directory(PINNED), pinned_recipe)
    return cache


def test_cache_directory_is_keyed_by_versions(tmp_path: Path) -> None:
    assert BinaryCache(root=tmp_path).directory(PINNED) == tmp_path / PINNED.key()


@pytest.mark.parametrize(
    "setup",
    [
        pytest.param(lambda root: None, id="root-missing"),
        pytest.param(lambda root: root.mkdir(), id="root-empty"),
        pytest.param(lambda root: (root / PINNED.key()).mkdir(parents=True), id="version-dir-empty"),
        pytest.param(
            lambda root: (root / f".{PINNED.key()}.tmp1").mkdir(parents=True), id="only-an-interrupted-staging-dir"
        ),
    ],
)
def test_load_returns_none_when_nothing_is_built(tmp_path: Path, setup: Callable[[Path], Any]) -> None:
    root = tmp_path / "bin"
    setup(root)
    assert BinaryCache(root=root).load(PINNED) is None


def test_load_returns_a_verified_set(cache: BinaryCache) -> None:
    found = cache.load(PINNED, deep=True)
    assert found is not None
    assert found.directory == cache.directory(PINNED)
    assert found.versions == PINNED
    assert found.path("etcd") == cache.directory(PINNED) / "etcd"
    assert found.build_seconds is None


def _rewrite_manifest(directory: Path, change: Callable[[dict[str, Any]], Any]) -> None:
    path = directory / "manifest.json"
    manifest = json.loads(path.read_text())
    change(manifest)
    path.write_text(json.dumps(manifest))


def _remove_manifest(d: Path) -> None:
    (d / "manifest.json").unlink()


def _same_size_other_bytes(d: Path) -> None:
    path = d / "kube-apiserver"
    data = bytearray(path.read_bytes())
    data[-2] ^= 0x01
    path.write_bytes(bytes(data))


CORRUPTIONS = [
    pytest.param(_remove_manifest, "it has no manifest.json", id="files-without-manifest"),
    pytest.param(lambda d: (d / "manifest.json").write_text("{not json"), "manifest.json is unreadable", id="bad-json"),
    pytest.param(lambda d: (d / "manifest.json").write_text(""), "manifest.json is unreadable", id="empty-manifest"),
    pytest.param(
        lambda d: _rewrite_manifest(d, lambda m: m.pop("binaries")), "manifest.json is unreadable", id="no-binaries-key"
    ),
    pytest.param(
        lambda d: _rewrite_manifest(d, lambda m: m.update(binaries=[])),
        "manifest.json is unreadable",
        id="binaries-not-a-mapping",
    ),
    pytest.param(
        lambda d: _rewrite_manifest(d, lambda m: m["binaries"].pop("kwok")),
        "manifest.json does not list kwok",
        id="entry-missing",
    ),
    pytest.param(lambda d: (d / "kube-scheduler").unlink(), "kube-scheduler is missing", id="binary-missing"),
    pytest.param(
        lambda d: ((d / "etcd").unlink(), (d / "etcd").mkdir()), "etcd is missing", id="binary-is-a-directory"
    ),
    pytest.param(
        lambda d: (d / "kwokctl").write_bytes(b"truncated"),
        "kwokctl is 9 bytes, the manifest says",
        id="size-differs",
    ),
    pytest.param(lambda d: (d / "kwok").chmod(0o644), "kwok is not executable", id="not-executable"),
]


@pytest.mark.parametrize(("corrupt", "why"), CORRUPTIONS)
def test_load_reports_a_corrupt_cache(cache: BinaryCache, corrupt: Callable[[Path], Any], why: str) -> None:
    directory = cache.directory(PINNED)
    corrupt(directory)
    with pytest.raises(HarnessError) as info:
        cache.load(PINNED)
    assert info.value.message.startswith(f"the binary cache at {directory} is corrupt: ")
    assert why in info.value.message
    assert "make binaries FORCE=1" in info.value.hint


def test_deep_load_detects_a_sha_mismatch(cache: BinaryCache) -> None:
    _same_size_other_bytes(cache.directory(PINNED))
    assert cache.load(PINNED) is not None  # size and mode still match: the shallow check passes
    with pytest.raises(HarnessError) as info:
        cache.load(PINNED, deep=True)
    assert "corrupt" in info.value.message
    assert "kube-apiserver does not match its SHA-256" in info.value.message
    assert "make binaries FORCE=1" in info.value.hint


@pytest.mark.parametrize(
    "change",
    [
        pytest.param(lambda m: m.update(recipe="0" * 64), id="other-recipe"),
        pytest.param(lambda m: m.pop("recipe"), id="no-recipe"),
    ],
)
def test_load_returns_none_for_another_recipe(cache: BinaryCache, change: Callable[[dict[str, Any]], Any]) -> None:
    directory = cache.directory(PINNED)
    _rewrite_manifest(directory, change)
    (directory / "etcd").unlink()  # even a damaged set is not an error: it is rebuilt
    assert cache.load(PINNED) is None


def test_load_for_other_versions_ignores_the_pinned_set(cache: BinaryCache) -> None:
    assert cache.load(FALLBACK) is None


@pytest.mark.parametrize("content", [pytest.param("[]", id="list"), pytest.param("null", id="null")])
def test_load_non_object_manifest_is_reported_corrupt(cache: BinaryCache, content: str) -> None:
    (cache.directory(PINNED) / "manifest.json").write_text(content)
    with pytest.raises(HarnessError, match="corrupt"):
        cache.load(PINNED)


@pytest.mark.parametrize(
    ("present", "missing"),
    [
        pytest.param(ALL_BINARIES, None, id="all"),
        pytest.param(tuple(n for n in ALL_BINARIES if n != "kwokctl"), None, id="kwokctl-optional"),
        pytest.param(("etcd", "kwok"), "kube-apiserver, kube-controller-manager, kube-scheduler", id="no-controlplane"),
        pytest.param((), "etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok", id="empty"),
    ],
)
def test_bin_dir_override(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, present: tuple[str, ...], missing: str | None
) -> None:
    override = tmp_path / "prebuilt"
    override.mkdir()
    for name in present:
        (override / name).write_text("x")
    monkeypatch.setenv("KTHENA_BIN_DIR", str(override))
    cache = BinaryCache(root=tmp_path / "unused")
    if missing is None:
        found = cache.load(PINNED)
        assert found is not None
        assert found.directory == override
        assert found.manifest == {"source": "KTHENA_BIN_DIR"}
    else:
        with pytest.raises(HarnessError) as info:
            cache.load(PINNED)
        assert info.value.message == f"KTHENA_BIN_DIR={override} lacks {missing}"


# -- find_go --------------------------------------------------------------------------------------


def _fake_go(directory: Path, script: str, *, executable: bool = True) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    go = directory / "go"
    go.write_text(f"#!/bin/sh\n{script}\n")
    go.chmod(0o755 if executable else 0o644)
    return go


def test_find_go_without_go_on_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    with pytest.raises(HarnessError) as info:
        find_go()
    assert "Go toolchain was not found on PATH" in info.value.message
    assert "install Go 1.26 or newer" in info.value.hint
    assert "KTHENA_BIN_DIR" in info.value.hint


def test_find_go_ignores_a_non_executable_go(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_go(tmp_path / "bin", "echo go1.26.8", executable=False)
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    with pytest.raises(HarnessError, match="not found on PATH"):
        find_go()


@pytest.mark.parametrize(
    ("script", "shown"),
    [
        pytest.param("echo go1.20.1", "Go go1.20.1 at", id="go1.20.1"),
        pytest.param("echo go1.25.9", "Go go1.25.9 at", id="previous-minor"),
        pytest.param("echo go1.9", "Go go1.9 at", id="single-digit-minor"),
        pytest.param("echo", "Go of unknown version at", id="empty-output"),
        pytest.param("echo garbage", "Go garbage at", id="garbage"),
        pytest.param("exit 2", "Go of unknown version at", id="failing-go"),
    ],
)
def test_find_go_too_old(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, script: str, shown: str) -> None:
    go = _fake_go(tmp_path / "bin", script)
    monkeypatch.setenv("PATH", str(go.parent))
    with pytest.raises(HarnessError) as info:
        find_go()
    assert shown in info.value.message
    assert "too old" in info.value.message
    assert str(go) in info.value.message
    assert "install Go 1.26 or newer" in info.value.hint


@pytest.mark.parametrize("version", ["go1.26.8", "go1.26", "go1.26.0", "go1.27.1", "go2.0.0"])
def test_find_go_accepts_new_enough(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, version: str) -> None:
    go = _fake_go(tmp_path / "bin", f'[ "$1 $2" = "env GOVERSION" ] || exit 9\necho {version}')
    monkeypatch.setenv("PATH", str(go.parent))
    assert find_go() == str(go)


def test_min_go_matches_the_hint() -> None:
    assert MIN_GO == (1, 26)


# -- the real nodes' binaries: optional extras, built only when asked for -------------------------------


def test_real_node_binaries_are_extras_built_only_when_asked_for() -> None:
    assert [s.module for s in extras_plan()] == ["coredns"]
    steps = {s.module: s for s in extras_plan(real_nodes=True)}
    assert set(steps) == {"coredns", "controlplane", "containerd", "critools"}
    outputs = [name for s in steps.values() if s.module != "coredns" for name in s.outputs]
    assert sorted(outputs) == sorted(REAL_NODE_BINARIES)
    assert steps["controlplane"].packages == ("./realnode/kubelet",)  # outside ./cmd/...: the core build skips it


def test_kubelet_is_stamped_with_the_pinned_kubernetes_version() -> None:
    kubelet = next(s for s in extras_plan(real_nodes=True) if s.outputs == ("kubelet",))
    assert f"-X k8s.io/component-base/version.gitVersion={PINNED.kubernetes}" in kubelet.ldflags
    main = MODULES / "controlplane" / "realnode" / "kubelet" / "main.go"
    assert "k8s.io/kubernetes/cmd/kubelet/app" in main.read_text()


def test_containerd_is_built_without_the_optional_snapshotters_and_stamped() -> None:
    step = next(s for s in extras_plan(real_nodes=True) if s.module == "containerd")
    argv = step.argv(Path("/out"))
    assert argv[argv.index("-tags") + 1] == "no_btrfs no_devmapper no_zfs"
    assert f"-X github.com/containerd/containerd/v2/version.Version={CONTAINERD}" in argv[argv.index("-ldflags") + 1]
    assert argv[-3:] == [
        f"github.com/containerd/containerd/v2/cmd/{n}" for n in ("containerd", "containerd-shim-runc-v2", "ctr")
    ]


@pytest.mark.parametrize(
    ("module", "path", "version", "tools"),
    [
        ("containerd", "github.com/containerd/containerd/v2", CONTAINERD,
         {f"github.com/containerd/containerd/v2/cmd/{n}" for n in ("containerd", "containerd-shim-runc-v2", "ctr")}),
        ("critools", "sigs.k8s.io/cri-tools", CRICTL, {"sigs.k8s.io/cri-tools/cmd/crictl"}),
    ],
)  # fmt: skip
def test_real_node_go_mods_pin_the_versions_and_list_the_tools(
    module: str, path: str, version: str, tools: set[str]
) -> None:
    text = _go_mod(module)
    assert _requires(text)[path] == version
    assert tools <= set(_directives(text, "tool"))


def test_version_flags_of_the_binaries_without_a_version_option() -> None:
    assert VERSION_ARGS == {
        "containerd-shim-runc-v2": ("-v",),
        "kind": ("version",),
        "kubeadm": ("version", "-o", "short"),
        "kubectl": ("version", "--client"),
    }


def test_kind_builds_are_extras_of_their_own_modules() -> None:
    from conformance.cluster.binaries import KIND_BINARIES, kind_plan
    from conformance.cluster.versions import KIND

    steps = {s.module: s for s in extras_plan(kind=True)}
    assert set(steps) == {"coredns", "kind", "kindnode"}
    assert {o for s in kind_plan() for o in s.outputs} == set(KIND_BINARIES)
    assert steps["kind"].packages == ("sigs.k8s.io/kind",)
    assert _requires(_go_mod("kind"))["sigs.k8s.io/kind"] == KIND
    assert "sigs.k8s.io/kind" in _directives(_go_mod("kind"), "tool")
    kindnode = _go_mod("kindnode")
    assert _requires(kindnode)["k8s.io/kubernetes"] == PINNED.kubernetes
    assert "-X k8s.io/component-base/version.gitVersion=" + PINNED.kubernetes in steps["kindnode"].ldflags
