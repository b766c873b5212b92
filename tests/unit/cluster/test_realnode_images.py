"""Real-node images: deterministic layer tars and docker-archives, the busybox recipes, the static-busybox check
and the pull-policy check. A few bytes stand in for busybox: nothing here runs it."""

from __future__ import annotations

import hashlib
import io
import json
import stat
import struct
import tarfile
from pathlib import Path
from typing import Any

import pytest

from conformance.cluster.realnode.images import (
    SANDBOX_IMAGE,
    SLEEP_FOREVER,
    VARIANT_FILE,
    WORKLOAD_APPLETS,
    WORKLOAD_IMAGES,
    Directory,
    File,
    FileEntry,
    ImageConfig,
    ImageRecipe,
    Symlink,
    build_archive,
    default_pull_policy,
    elf_interpreter,
    host_architecture,
    image_archive,
    image_id,
    layer_tar,
    pull_policy_problem,
    read_busybox,
    sandbox_image,
    standard_archives,
    workload_image,
    write_archive,
)

BUSYBOX = b"#!fake-busybox\n" + bytes(range(256))

REQUIRED_APPLETS = [
    "sh",
    "sleep",
    "httpd",
    "nslookup",
    "cat",
    "echo",
    "ls",
    "kill",
    "wget",
    "hostname",
    "env",
    "touch",
    "rm",
    "mkdir",
    "test",
    "true",
    "false",
]


def _members(data: bytes) -> list[tarfile.TarInfo]:
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as tar:
        return tar.getmembers()


def _read(data: bytes, name: str) -> bytes:
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as tar:
        member = tar.extractfile(name)
        assert member is not None, name
        return member.read()


def _manifest(archive: bytes) -> list[dict[str, Any]]:
    manifest: list[dict[str, Any]] = json.loads(_read(archive, "manifest.json"))
    return manifest


def _config(archive: bytes) -> dict[str, Any]:
    config: dict[str, Any] = json.loads(_read(archive, _manifest(archive)[0]["Config"]))
    return config


def _layer(archive: bytes) -> bytes:
    (layer,) = _manifest(archive)[0]["Layers"]
    return _read(archive, layer)


RECIPES = {
    "sandbox": lambda: sandbox_image(BUSYBOX),
    "workload-v1": lambda: workload_image(BUSYBOX, "v1"),
    "workload-v2": lambda: workload_image(BUSYBOX, "v2"),
}


@pytest.mark.parametrize("recipe", RECIPES.values(), ids=RECIPES.keys())
def test_builds_are_byte_identical(recipe: Any) -> None:
    first: ImageRecipe = recipe()
    second: ImageRecipe = recipe()
    assert layer_tar(first.files) == layer_tar(second.files)
    reordered = dict(reversed(list(second.files.items())))
    assert layer_tar(first.files) == layer_tar(reordered)
    assert build_archive(first, ["a.local/x:1"]) == build_archive(second, ["a.local/x:1"])


def test_standard_archives_are_byte_identical_and_tagged() -> None:
    first, second = standard_archives(BUSYBOX), standard_archives(BUSYBOX)
    assert first == second
    assert set(first) == {SANDBOX_IMAGE, *WORKLOAD_IMAGES.values()}
    for reference, archive in first.items():
        assert _manifest(archive)[0]["RepoTags"] == [reference]


def test_layer_entries_are_sorted_root_owned_and_timeless() -> None:
    members = _members(layer_tar(workload_image(BUSYBOX, "v1").files))
    names = [m.name for m in members]
    assert names == sorted(names)
    assert len(names) == len(set(names))
    for member in members:
        assert (member.uid, member.gid, member.uname, member.gname, member.mtime) == (0, 0, "", "", 0), member.name
    # parents a file map leaves out are added as directories, before their contents
    assert {"bin", "etc", "var", "var/www"} <= {m.name for m in members if m.isdir()}


@pytest.mark.parametrize(
    ("name", "kind", "mode", "target"),
    [
        ("bin/busybox", tarfile.REGTYPE, 0o755, ""),
        ("bin/sh", tarfile.SYMTYPE, 0o777, "busybox"),
        ("bin/httpd", tarfile.SYMTYPE, 0o777, "busybox"),
        ("bin/[", tarfile.SYMTYPE, 0o777, "busybox"),
        ("etc/passwd", tarfile.REGTYPE, 0o644, ""),
        ("etc/group", tarfile.REGTYPE, 0o644, ""),
        ("etc/kthena-image-variant", tarfile.REGTYPE, 0o644, ""),
        ("tmp", tarfile.DIRTYPE, 0o1777, ""),
        ("root", tarfile.DIRTYPE, 0o700, ""),
        ("bin", tarfile.DIRTYPE, 0o755, ""),
    ],
)
def test_workload_layer_keeps_kinds_modes_and_links(name: str, kind: bytes, mode: int, target: str) -> None:
    members = {m.name: m for m in _members(layer_tar(workload_image(BUSYBOX, "v1").files))}
    member = members[name]
    assert (member.type, member.mode, member.linkname) == (kind, mode, target)


def test_workload_image_has_the_applets_and_files() -> None:
    layer = layer_tar(workload_image(BUSYBOX, "v2").files)
    names = {m.name for m in _members(layer)}
    assert set(REQUIRED_APPLETS) <= set(WORKLOAD_APPLETS)
    assert {f"bin/{applet}" for applet in WORKLOAD_APPLETS} <= names
    assert _read(layer, "bin/busybox") == BUSYBOX
    assert _read(layer, VARIANT_FILE.lstrip("/")) == b"v2\n"
    assert _read(layer, "etc/passwd").startswith(b"root:x:0:0:")
    assert _read(layer, "etc/group").startswith(b"root:x:0:")


def test_sandbox_image_has_busybox_sh_and_sleep_only() -> None:
    layer = layer_tar(sandbox_image(BUSYBOX).files)
    assert {m.name for m in _members(layer)} == {"bin", "bin/busybox", "bin/sh", "bin/sleep"}
    assert _read(layer, "bin/busybox") == BUSYBOX


@pytest.mark.parametrize("recipe", RECIPES.values(), ids=RECIPES.keys())
def test_archive_manifest_and_diff_ids(recipe: Any) -> None:
    archive = build_archive(recipe(), ["kthena-conformance.local/x:1", "other.local/y:2"])
    manifest = _manifest(archive)
    assert len(manifest) == 1
    assert set(manifest[0]) == {"Config", "RepoTags", "Layers"}
    assert manifest[0]["RepoTags"] == ["kthena-conformance.local/x:1", "other.local/y:2"]
    config_bytes = _read(archive, manifest[0]["Config"])
    assert manifest[0]["Config"] == f"{hashlib.sha256(config_bytes).hexdigest()}.json"
    config = json.loads(config_bytes)
    layers = [_read(archive, name) for name in manifest[0]["Layers"]]
    assert config["rootfs"] == {
        "type": "layers",
        "diff_ids": [f"sha256:{hashlib.sha256(layer).hexdigest()}" for layer in layers],
    }
    assert (config["architecture"], config["os"]) == (host_architecture(), "linux")
    assert image_id(archive) == f"sha256:{hashlib.sha256(config_bytes).hexdigest()}"
    # the outer archive is as deterministic as the layers
    for member in _members(archive):
        assert (member.uid, member.gid, member.mtime) == (0, 0, 0)


@pytest.mark.parametrize(
    ("recipe", "entrypoint", "cmd"),
    [
        (lambda: sandbox_image(BUSYBOX), ["/bin/sh", "-c", SLEEP_FOREVER], None),
        (lambda: workload_image(BUSYBOX, "v1"), None, ["/bin/sh", "-c", SLEEP_FOREVER]),
    ],
    ids=["sandbox", "workload"],
)
def test_config_process(recipe: Any, entrypoint: list[str] | None, cmd: list[str] | None) -> None:
    process = _config(build_archive(recipe(), ["a.local/x:1"]))["config"]
    assert process.get("Entrypoint") == entrypoint
    assert process.get("Cmd") == cmd
    assert process["WorkingDir"] == "/"
    assert any(env.startswith("PATH=") and "/bin" in env for env in process["Env"])
    assert "trap 'exit 0' TERM INT" in SLEEP_FOREVER


def test_variants_differ_in_image_id_and_sandbox_is_stable() -> None:
    archives = standard_archives(BUSYBOX)
    ids = {reference: image_id(archive) for reference, archive in archives.items()}
    assert ids[WORKLOAD_IMAGES["v1"]] != ids[WORKLOAD_IMAGES["v2"]]
    assert image_id(standard_archives(BUSYBOX)[SANDBOX_IMAGE]) == ids[SANDBOX_IMAGE]
    assert image_id(build_archive(sandbox_image(BUSYBOX), [SANDBOX_IMAGE, "x.local/pause:1"])) == ids[SANDBOX_IMAGE]
    # a different busybox or architecture is a different image
    assert image_id(build_archive(sandbox_image(BUSYBOX + b"!"), [SANDBOX_IMAGE])) != ids[SANDBOX_IMAGE]
    other = "riscv64" if host_architecture() != "riscv64" else "arm64"
    assert image_id(build_archive(sandbox_image(BUSYBOX, other), [SANDBOX_IMAGE])) != ids[SANDBOX_IMAGE]


def test_layer_tar_round_trips_long_and_non_ascii_names() -> None:
    long_name = "/opt/" + "d" * 120 + "/file"
    files: dict[str, FileEntry] = {
        long_name: File(b"long", 0o600),
        "/opt/caf\u00e9": File(b"cafe", 0o4755),
        "/opt/link": Symlink("/" + "t" * 150),
        "/empty": Directory(0o750),
    }
    data = layer_tar(files)
    assert data == layer_tar(dict(files))
    assert len(data) % tarfile.RECORDSIZE == 0
    members = {m.name: m for m in _members(data)}
    assert _read(data, long_name.lstrip("/")) == b"long"
    assert members["opt/caf\u00e9"].mode == 0o4755
    assert members["opt/link"].linkname == "/" + "t" * 150
    assert members["empty"].isdir() and members["empty"].mode == 0o750


@pytest.mark.parametrize(
    ("files", "message"),
    [
        ({"/": File(b"")}, "not a usable path"),
        ({"": File(b"")}, "not a usable path"),
        ({"../etc/passwd": File(b"")}, "not a usable path"),
        ({"/a": File(b""), "a": File(b"")}, "given twice"),
        ({"/a": File(b""), "/a/b": File(b"")}, "not a directory"),
        ({"/a": Symlink("x"), "/a/b": File(b"")}, "not a directory"),
        ({"/a": File(b"", 0o100644)}, "permission bits"),
        ({"/a": Symlink("")}, "no usable target"),
    ],
)
def test_layer_tar_rejects_bad_maps(files: dict[str, FileEntry], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        layer_tar(files)


@pytest.mark.parametrize(
    ("layers", "tags", "message"),
    [
        ([], ["a.local/x:1"], "at least one layer"),
        ([b"x"], ["a.local/x@sha256:" + "0" * 64], "not a usable image tag"),
        ([b"x"], [""], "not a usable image tag"),
    ],
)
def test_image_archive_rejects(layers: list[bytes], tags: list[str], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        image_archive(layers, ImageConfig(), tags)


def test_workload_image_rejects_unusable_variants() -> None:
    for variant in ("", "a\nb"):
        with pytest.raises(ValueError, match="variant"):
            workload_image(BUSYBOX, variant)


def test_write_archive_is_atomic_and_readable(tmp_path: Path) -> None:
    target = tmp_path / "pause.tar"
    write_archive(target, b"first")
    write_archive(target, b"second")
    assert target.read_bytes() == b"second"
    assert stat.S_IMODE(target.stat().st_mode) == 0o644
    assert [p.name for p in tmp_path.iterdir()] == ["pause.tar"]


def test_write_archive_leaves_no_temporary_file_on_failure(tmp_path: Path) -> None:
    (tmp_path / "dir.tar").mkdir()
    with pytest.raises(OSError):
        write_archive(tmp_path / "dir.tar", b"x")
    assert [p.name for p in tmp_path.iterdir()] == ["dir.tar"]


def _elf(bits: int, interpreter: bytes | None, endian: str = "<") -> bytes:
    """A minimal ELF header with one PT_LOAD and, when given, one PT_INTERP program header."""
    headers = [(1, b"")] + ([(3, interpreter + b"\0")] if interpreter is not None else [])
    ident = b"\x7fELF" + bytes([2 if bits == 64 else 1, 1 if endian == "<" else 2, 1]) + bytes(9)
    if bits == 64:
        ehsize, phentsize = 64, 56
        data_at = ehsize + phentsize * len(headers)
        head = ident + struct.pack(
            endian + "HHIQQQIHHHHHH", 2, 62, 1, 0, ehsize, 0, 0, ehsize, phentsize, len(headers), 0, 0, 0
        )
        phdrs = b"".join(
            struct.pack(endian + "IIQQQQQQ", kind, 0, data_at, 0, 0, len(payload), len(payload), 0)
            for kind, payload in headers
        )
    else:
        ehsize, phentsize = 52, 32
        data_at = ehsize + phentsize * len(headers)
        head = ident + struct.pack(
            endian + "HHIIIIIHHHHHH", 2, 3, 1, 0, ehsize, 0, 0, ehsize, phentsize, len(headers), 0, 0, 0
        )
        phdrs = b"".join(
            struct.pack(endian + "IIIIIIII", kind, data_at, 0, 0, len(payload), len(payload), 0, 0)
            for kind, payload in headers
        )
    assert len(head) == ehsize
    return head + phdrs + b"".join(payload for _, payload in headers)


@pytest.mark.parametrize(
    ("binary", "interpreter"),
    [
        (_elf(64, b"/lib64/ld-linux-x86-64.so.2"), "/lib64/ld-linux-x86-64.so.2"),
        (_elf(64, b"/lib/ld-linux-aarch64.so.1", ">"), "/lib/ld-linux-aarch64.so.1"),
        (_elf(32, b"/lib/ld-linux.so.2"), "/lib/ld-linux.so.2"),
        (_elf(64, None), None),
        (_elf(32, None), None),
        (BUSYBOX, None),
        (b"", None),
    ],
    ids=["dynamic64", "dynamic64-big-endian", "dynamic32", "static64", "static32", "not-elf", "empty"],
)
def test_elf_interpreter(binary: bytes, interpreter: str | None) -> None:
    assert elf_interpreter(binary) == interpreter


def test_elf_interpreter_rejects_truncated_files() -> None:
    with pytest.raises(ValueError, match="malformed ELF"):
        elf_interpreter(_elf(64, b"/lib64/ld-linux-x86-64.so.2")[:70])


@pytest.mark.parametrize("recipe", [sandbox_image, lambda b: workload_image(b, "v1")], ids=["sandbox", "workload"])
def test_recipes_refuse_a_dynamic_busybox(recipe: Any) -> None:
    with pytest.raises(ValueError, match="busybox-static"):
        recipe(_elf(64, b"/lib64/ld-linux-x86-64.so.2"))


def test_read_busybox(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="busybox-static"):
        read_busybox(tmp_path / "missing")
    dynamic = tmp_path / "dynamic"
    dynamic.write_bytes(_elf(64, b"/lib64/ld-linux-x86-64.so.2"))
    with pytest.raises(ValueError, match=r"dynamic.*busybox-static"):
        read_busybox(dynamic)
    static = tmp_path / "static"
    static.write_bytes(_elf(64, None))
    assert read_busybox(static) == _elf(64, None)


@pytest.mark.parametrize(
    ("image", "policy", "problem"),
    [
        ("kthena-conformance.local/workload:v1", "IfNotPresent", None),
        ("kthena-conformance.local/workload:v1", "Never", None),
        ("kthena-conformance.local/workload", "Never", None),
        ("kthena-conformance.local/workload:latest", "IfNotPresent", None),
        ("kthena-conformance.local/workload:v1", "Always", "imagePullPolicy Always"),
        ("kthena-conformance.local/workload:latest", None, "the tag :latest"),
        ("kthena-conformance.local/workload:latest", "", "the tag :latest"),
        ("kthena-conformance.local/workload", None, "no tag"),
        ("localhost:5000/workload", None, "no tag"),
        ("busybox", None, "no tag"),
        ("kthena-conformance.local/workload:v1", None, None),
        ("localhost:5000/workload:v1", None, None),
        ("registry.k8s.io/pause:3.10", None, None),
        ("kthena-conformance.local/workload@sha256:" + "a" * 64, None, None),
        ("kthena-conformance.local/workload:v1@sha256:" + "a" * 64, None, None),
        ("kthena-conformance.local/workload:latest@sha256:" + "a" * 64, None, "the tag :latest"),
        ("kthena-conformance.local/workload:v1", "always", "not one of Always, IfNotPresent, Never"),
    ],
)
def test_pull_policy_problem(image: str, policy: str | None, problem: str | None) -> None:
    message = pull_policy_problem(image, policy)
    if problem is None:
        assert message is None
    else:
        assert message is not None
        assert problem in message
        assert repr(image) in message
        assert "Always" in message


@pytest.mark.parametrize(
    ("image", "policy"),
    [
        ("a.local/x:v1", "IfNotPresent"),
        ("a.local/x", "Always"),
        ("a.local/x:latest", "Always"),
        ("a.local:5000/x", "Always"),
        ("a.local/x@sha256:" + "b" * 64, "IfNotPresent"),
    ],
)
def test_default_pull_policy(image: str, policy: str) -> None:
    assert default_pull_policy(image) == policy


def test_standard_references_do_not_make_the_kubelet_pull() -> None:
    for reference in (SANDBOX_IMAGE, *WORKLOAD_IMAGES.values()):
        assert pull_policy_problem(reference, None) is None
    assert set(WORKLOAD_IMAGES) == {"v1", "v2"}


def test_ctr_images_ls_gives_each_reference_its_digest() -> None:
    from conformance.cluster.realnode.images import parse_ctr_images

    listed = (
        "REF                                  TYPE                                                 DIGEST"
        "                                                                  SIZE    PLATFORMS   LABELS\n"
        "kthena-conformance.local/workload:v1 application/vnd.docker.distribution.manifest.v2+json "
        "sha256:3f1c0a2b7d9e8f6a5b4c3d2e1f0a9b8c7d6e5f4a3b2c1d0e9f8a7b6c5d4e3f2a 1.0 MiB linux/amd64 "
        "io.cri-containerd.image=managed\n"
        "sha256:77aa                          application/vnd.docker.distribution.manifest.v2+json "
        "sha256:3f1c0a2b7d9e8f6a5b4c3d2e1f0a9b8c7d6e5f4a3b2c1d0e9f8a7b6c5d4e3f2a 1.0 MiB linux/amd64 -\n"
        "broken line\n"
    )
    assert parse_ctr_images(listed) == {
        "kthena-conformance.local/workload:v1": "sha256:3f1c0a2b7d9e8f6a5b4c3d2e1f0a9b8c7d6e5f4a3b2c1d0e9f8a7b6c5d4e3f2a",
        "sha256:77aa": "sha256:3f1c0a2b7d9e8f6a5b4c3d2e1f0a9b8c7d6e5f4a3b2c1d0e9f8a7b6c5d4e3f2a",
    }
    assert parse_ctr_images("") == {}
