"""Container images for real nodes, written as docker-archive tarballs without a registry or a build tool.

A real node has no registry to pull from, so the harness writes the images its Pods need and imports
them with ``ctr -n k8s.io images import`` (about 0.1 s each). The format is the one ``docker save``
writes: a ``manifest.json`` naming each image's config file, tags and layer tars; a config JSON
(architecture, os, ``rootfs.diff_ids`` = sha256 of each uncompressed layer tar, entrypoint, command,
environment, working directory); and the layer tars. That is a few dozen lines of stdlib Python
(``tarfile``, ``hashlib``, ``json``), so it is hand-written here rather than delegated: there is no
registry to push to, and buildah or skopeo would be one more host dependency (buildah also leaves
``/etc/cni`` and ``/run/containers`` state behind, which a clean teardown would have to chase).

Everything is deterministic: entries sorted, owner root, no user or group names, mtime 0, PAX
format (which Python writes byte-identically for identical input and which only adds an extended
header when a name does not fit USTAR). The same inputs give the same bytes, so the same image ID,
and a rebuilt image is recognised by containerd as the one already imported.

The images themselves are made from one static busybox (Debian's ``busybox-static`` installs it as
``/bin/busybox``): a sandbox ("pause") image and a workload image with a shell, an HTTP server and
DNS tools, in two variants whose content and therefore image ID differ (for in-place image update
tests).
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import platform
import posixpath
import struct
import tarfile
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple, TypeAlias

SANDBOX_IMAGE = "registry.k8s.io/pause:3.10"
"""The reference the sandbox image is tagged with (the CRI ``sandbox_image`` of the node's containerd)."""

WORKLOAD_IMAGES: Mapping[str, str] = {
    "v1": "kthena-conformance.local/workload:v1",
    "v2": "kthena-conformance.local/workload:v2",
}
"""Workload image variant -> the reference it is tagged with.

Imported images are only found by a kubelet that does not pull: ``imagePullPolicy: IfNotPresent``
or ``Never``. ``Always``, and an omitted policy on an untagged or ``:latest`` reference (which the
API server defaults to ``Always``), make the kubelet go to a registry and the Pod fails with
``ErrImagePull``; see :func:`pull_policy_problem`. Hence tagged references here, never ``:latest``.
"""

BUSYBOX_PATH = Path("/bin/busybox")
"""Where Debian's ``busybox-static`` installs the binary (the dynamic ``busybox`` package uses the same path)."""

DEFAULT_PATH = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

SLEEP_FOREVER = "trap 'exit 0' TERM INT; while :; do sleep 3600 & wait $!; done"
"""A shell loop that sleeps until killed, exits 0 on TERM or INT at once (``wait`` is interruptible,
a foreground ``sleep`` would not be) and, as PID 1, reaps the children it inherits."""

WORKLOAD_APPLETS = (
    "[",
    "cat",
    "cp",
    "date",
    "echo",
    "env",
    "false",
    "grep",
    "head",
    "hostname",
    "httpd",
    "id",
    "kill",
    "ln",
    "ls",
    "mkdir",
    "mv",
    "nslookup",
    "printf",
    "ps",
    "pwd",
    "rm",
    "sed",
    "sh",
    "sleep",
    "sort",
    "tail",
    "test",
    "touch",
    "tr",
    "true",
    "uname",
    "wc",
    "wget",
)
"""Busybox applets linked into the workload image's ``/bin`` (all built into Debian's busybox-static)."""

VARIANT_FILE = "/etc/kthena-image-variant"

PULL_POLICIES = ("Always", "IfNotPresent", "Never")

_EPOCH = "1970-01-01T00:00:00Z"
_PT_INTERP = 3


@dataclass(frozen=True)
class File:
    """A regular file in a layer."""

    content: bytes
    mode: int = 0o644


@dataclass(frozen=True)
class Directory:
    """A directory in a layer (parents a file map leaves out are added with mode 0755)."""

    mode: int = 0o755


@dataclass(frozen=True)
class Symlink:
    """A symbolic link in a layer; ``target`` is stored as given (relative or absolute)."""

    target: str


FileEntry: TypeAlias = File | Directory | Symlink


def host_architecture() -> str:
    """This machine's architecture as an OCI/Go ``GOARCH`` name (containerd imports only matching images)."""
    machine = platform.machine().lower()
    return {
        "x86_64": "amd64",
        "amd64": "amd64",
        "aarch64": "arm64",
        "arm64": "arm64",
        "i386": "386",
        "i686": "386",
        "armv7l": "arm",
        "armv6l": "arm",
    }.get(machine, machine)


@dataclass(frozen=True)
class ImageConfig:
    """The parts of an image config a Pod's container sees (empty entrypoint/cmd are left out)."""

    entrypoint: tuple[str, ...] = ()
    cmd: tuple[str, ...] = ()
    env: tuple[str, ...] = (DEFAULT_PATH,)
    working_dir: str = "/"
    architecture: str = field(default_factory=host_architecture)
    os: str = "linux"


class ImageRecipe(NamedTuple):
    """What an image is made of: one layer's file map and its config."""

    files: Mapping[str, FileEntry]
    config: ImageConfig


def _member_name(path: str) -> str:
    relative = path.lstrip("/")
    name = posixpath.normpath(relative) if relative else ""
    if name in ("", ".") or name.split("/")[0] == ".." or "\0" in name:
        raise ValueError(f"not a usable path inside an image: {path!r}")
    return name


def _check_entry(path: str, entry: FileEntry) -> None:
    if isinstance(entry, Symlink):
        if not entry.target or "\0" in entry.target:
            raise ValueError(f"symlink {path!r} has no usable target: {entry.target!r}")
    elif entry.mode & ~0o7777:
        raise ValueError(f"{path!r} has mode {entry.mode:#o}: only permission bits (0o7777) belong in a mode")


def _with_parents(files: Mapping[str, FileEntry]) -> dict[str, FileEntry]:
    entries: dict[str, FileEntry] = {}
    for path, entry in files.items():
        name = _member_name(path)
        if name in entries:
            raise ValueError(f"{path!r} is given twice")
        _check_entry(path, entry)
        entries[name] = entry
    for name in list(entries):
        parent = posixpath.dirname(name)
        while parent:
            existing = entries.setdefault(parent, Directory())
            if not isinstance(existing, Directory):
                raise ValueError(f"{parent!r} holds {name!r} but is not a directory")
            parent = posixpath.dirname(parent)
    return entries


def layer_tar(files: Mapping[str, FileEntry]) -> bytes:
    """An uncompressed layer tar of ``files`` (path -> entry; a leading ``/`` is optional).

    Entries are sorted by path (so a directory precedes its contents), owned by 0:0 with no user or
    group names and mtime 0; missing parent directories are added with mode 0755. Identical input
    gives byte-identical output.
    """
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT, encoding="utf-8") as tar:
        entries = _with_parents(files)
        for name in sorted(entries):
            entry = entries[name]
            info = tarfile.TarInfo(name)
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            info.mtime = 0
            content: io.BytesIO | None = None
            if isinstance(entry, File):
                info.type = tarfile.REGTYPE
                info.mode = entry.mode
                info.size = len(entry.content)
                content = io.BytesIO(entry.content)
            elif isinstance(entry, Directory):
                info.type = tarfile.DIRTYPE
                info.mode = entry.mode
            else:
                info.type = tarfile.SYMTYPE
                info.mode = 0o777
                info.linkname = entry.target
            tar.addfile(info, content)
    return buf.getvalue()


def _json(value: object) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode()


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def config_json(layers: Sequence[bytes], config: ImageConfig) -> bytes:
    """The image config document for ``layers`` (uncompressed tars, bottom first) and ``config``."""
    container: dict[str, object] = {"Env": list(config.env), "WorkingDir": config.working_dir}
    if config.entrypoint:
        container["Entrypoint"] = list(config.entrypoint)
    if config.cmd:
        container["Cmd"] = list(config.cmd)
    return _json(
        {
            "architecture": config.architecture,
            "os": config.os,
            "created": _EPOCH,
            "config": container,
            "rootfs": {"type": "layers", "diff_ids": [f"sha256:{_sha256(layer)}" for layer in layers]},
        }
    )


def image_archive(layers: list[bytes], config: ImageConfig, tags: list[str]) -> bytes:
    """A docker-archive (``docker save`` format) of one image, tagged with each of ``tags``.

    Layout: ``<config sha256>.json``, ``<layer sha256>/layer.tar`` per layer and ``manifest.json``.
    Deterministic like :func:`layer_tar`. Tags are full references with a tag (``name:tag``); a
    digest cannot be a tag.
    """
    if not layers:
        raise ValueError("an image needs at least one layer")
    for tag in tags:
        if not tag or "@" in tag or any(c.isspace() for c in tag):
            raise ValueError(f"not a usable image tag: {tag!r}")
    config_bytes = config_json(layers, config)
    config_name = f"{_sha256(config_bytes)}.json"
    layer_names = [f"{_sha256(layer)}/layer.tar" for layer in layers]
    manifest = _json([{"Config": config_name, "RepoTags": list(tags), "Layers": layer_names}])
    files: dict[str, FileEntry] = {"manifest.json": File(manifest), config_name: File(config_bytes)}
    for name, layer in zip(layer_names, layers, strict=True):
        files[name] = File(layer)
    return layer_tar(files)


def build_archive(recipe: ImageRecipe, tags: list[str]) -> bytes:
    """The docker-archive of a single-layer ``recipe``."""
    return image_archive([layer_tar(recipe.files)], recipe.config, tags)


def image_id(archive: bytes) -> str:
    """``sha256:<config digest>`` of the one image in a docker-archive: the ID containerd and the CRI report."""
    with tarfile.open(fileobj=io.BytesIO(archive), mode="r:") as tar:
        manifest_file = tar.extractfile("manifest.json")
        if manifest_file is None:
            raise ValueError("manifest.json is not a regular file")
        manifest = json.loads(manifest_file.read())
        if not isinstance(manifest, list) or len(manifest) != 1:
            raise ValueError("the archive does not hold exactly one image")
        config_file = tar.extractfile(manifest[0]["Config"])
        if config_file is None:
            raise ValueError(f"image config {manifest[0]['Config']!r} is not a regular file")
        return f"sha256:{_sha256(config_file.read())}"


def write_archive(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically (a temporary file beside it, then ``os.replace``), mode 0644."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
            out.flush()
            os.fchmod(out.fileno(), 0o644)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def elf_interpreter(binary: bytes) -> str | None:
    """The program interpreter (``PT_INTERP``) of an ELF executable, None if static or not ELF at all.

    A dynamic busybox (Debian's ``busybox`` package, same path as ``busybox-static``) cannot run in
    an image with no libc; the kernel then reports ``no such file or directory`` for a file that is
    there, so it is caught here instead.
    """
    if binary[:4] != b"\x7fELF":
        return None
    try:
        endian = {1: "<", 2: ">"}[binary[5]]
        if binary[4] == 2:  # ELFCLASS64
            (phoff,) = struct.unpack_from(endian + "Q", binary, 32)
            phentsize, phnum = struct.unpack_from(endian + "HH", binary, 54)
            offset_format, offset_at, size_at = "Q", 8, 32
        elif binary[4] == 1:  # ELFCLASS32
            (phoff,) = struct.unpack_from(endian + "I", binary, 28)
            phentsize, phnum = struct.unpack_from(endian + "HH", binary, 42)
            offset_format, offset_at, size_at = "I", 4, 16
        else:
            raise ValueError(f"unknown ELF class {binary[4]}")
        for index in range(phnum):
            header = phoff + index * phentsize
            (p_type,) = struct.unpack_from(endian + "I", binary, header)
            if p_type == _PT_INTERP:
                (start,) = struct.unpack_from(endian + offset_format, binary, header + offset_at)
                (size,) = struct.unpack_from(endian + offset_format, binary, header + size_at)
                return binary[start : start + size].split(b"\0", 1)[0].decode("utf-8", "replace")
    except (IndexError, KeyError, struct.error) as error:
        raise ValueError(f"truncated or malformed ELF file: {error}") from error
    return None


def _require_static(busybox: bytes) -> None:
    interpreter = elf_interpreter(busybox)
    if interpreter is not None:
        raise ValueError(
            f"busybox is dynamically linked (interpreter {interpreter}) and cannot run in an image without "
            "a libc: install the Debian package busybox-static, not busybox"
        )


def read_busybox(path: Path = BUSYBOX_PATH) -> bytes:
    """The static busybox binary at ``path``, with an actionable error if it is missing or dynamic."""
    try:
        binary = path.read_bytes()
    except FileNotFoundError:
        raise FileNotFoundError(
            f"{path} not found: real-node images are made from a static busybox (apt-get install busybox-static)"
        ) from None
    try:
        _require_static(binary)
    except ValueError as error:
        raise ValueError(f"{path}: {error}") from None
    return binary


def sandbox_image(busybox: bytes, architecture: str | None = None) -> ImageRecipe:
    """The sandbox ("pause") image: busybox, ``sh`` and ``sleep`` links, and an entrypoint that sleeps
    until TERM or INT (then exits 0) and reaps the children it inherits."""
    _require_static(busybox)
    files: dict[str, FileEntry] = {
        "/bin/busybox": File(busybox, 0o755),
        "/bin/sh": Symlink("busybox"),
        "/bin/sleep": Symlink("busybox"),
    }
    config = ImageConfig(
        entrypoint=("/bin/sh", "-c", SLEEP_FOREVER),
        architecture=architecture or host_architecture(),
    )
    return ImageRecipe(files, config)


def workload_image(busybox: bytes, variant: str, architecture: str | None = None) -> ImageRecipe:
    """A workload image: busybox with the :data:`WORKLOAD_APPLETS` linked in ``/bin`` (a shell,
    ``httpd``, ``nslookup``, ``wget``...), root in ``/etc/passwd`` and ``/etc/group``, a 1777 ``/tmp``,
    ``/var/www/index.html`` for ``httpd -h /var/www``, and ``variant`` in :data:`VARIANT_FILE` so each
    variant has its own image ID. The default command sleeps until TERM (then exits 0); Pods that
    set ``command`` replace it (there is no entrypoint)."""
    _require_static(busybox)
    if not variant or "\n" in variant:
        raise ValueError(f"not a usable image variant: {variant!r}")
    files: dict[str, FileEntry] = {"/bin/busybox": File(busybox, 0o755)}
    for applet in WORKLOAD_APPLETS:
        files[f"/bin/{applet}"] = Symlink("busybox")
    files.update(
        {
            "/etc/passwd": File(
                b"root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n"
            ),
            "/etc/group": File(b"root:x:0:\nnogroup:x:65534:\n"),
            VARIANT_FILE: File(f"{variant}\n".encode()),
            "/root": Directory(0o700),
            "/tmp": Directory(0o1777),
            "/var/www/index.html": File(f"kthena-conformance workload {variant}\n".encode()),
        }
    )
    config = ImageConfig(cmd=("/bin/sh", "-c", SLEEP_FOREVER), architecture=architecture or host_architecture())
    return ImageRecipe(files, config)


def standard_archives(busybox: bytes, architecture: str | None = None) -> dict[str, bytes]:
    """Reference -> docker-archive for every image a real node needs: the sandbox image and each
    workload variant, tagged with :data:`SANDBOX_IMAGE` and :data:`WORKLOAD_IMAGES`."""
    archives = {SANDBOX_IMAGE: build_archive(sandbox_image(busybox, architecture), [SANDBOX_IMAGE])}
    archives.update(workload_archives(busybox, architecture))
    return archives


def workload_archives(busybox: bytes, architecture: str | None = None) -> dict[str, bytes]:
    """Reference -> docker-archive for each workload variant (:data:`WORKLOAD_IMAGES`): what a node
    with its own sandbox image (a kind node) needs to run the suite's in-container tests."""
    return {
        reference: build_archive(workload_image(busybox, variant, architecture), [reference])
        for variant, reference in WORKLOAD_IMAGES.items()
    }


def _tag_and_digest(image: str) -> tuple[str, str]:
    name, _, digest = image.partition("@")
    last = name.rsplit("/", 1)[-1]  # a registry port ("host:5000/x") is not a tag
    return last.partition(":")[2], digest


def default_pull_policy(image: str) -> str:
    """The ``imagePullPolicy`` the API server gives a container that sets none, as Kubernetes does:
    ``Always`` for a ``:latest`` tag (even with a digest) or a reference with neither tag nor digest,
    else ``IfNotPresent``."""
    tag, digest = _tag_and_digest(image)
    if tag == "latest" or (not tag and not digest):
        return "Always"
    return "IfNotPresent"


def pull_policy_problem(image: str, policy: str | None) -> str | None:
    """Why a container with ``image`` and ``imagePullPolicy: policy`` (None or "" when not set) would
    make a real node's kubelet pull from a registry, which it has none of; None when it would not."""
    if policy and policy not in PULL_POLICIES:
        return f"container image {image!r}: imagePullPolicy {policy!r} is not one of {', '.join(PULL_POLICIES)}"
    if policy == "Always":
        return (
            f"container image {image!r} has imagePullPolicy Always: the kubelet would pull it from a registry and "
            "real nodes have none; use IfNotPresent or Never (the images are imported into containerd)"
        )
    if not policy and default_pull_policy(image) == "Always":
        why = "the tag :latest" if _tag_and_digest(image)[0] == "latest" else "no tag"
        return (
            f"container image {image!r} has no imagePullPolicy and {why}, so it defaults to Always: the kubelet "
            "would pull it from a registry and real nodes have none; set imagePullPolicy IfNotPresent or Never, "
            "or use a tagged reference"
        )
    return None


def parse_ctr_images(text: str) -> dict[str, str]:
    """Reference -> manifest digest in ``ctr images ls`` output (columns REF TYPE DIGEST ...;
    the header and short lines are skipped). Pure."""
    found = {}
    for line in text.splitlines()[1:]:
        words = line.split()
        if len(words) >= 3 and words[2].startswith("sha256:"):
            found[words[0]] = words[2]
    return found
