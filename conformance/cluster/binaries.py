"""Build the control-plane binaries from the Go module proxy, once, into a per-user cache.

The embedded cluster runs real upstream binaries: etcd, kube-apiserver, kube-controller-manager,
kube-scheduler, and kwok (the simulated kubelet), plus kwokctl for the side-by-side benchmark.
They come from three small Go wrapper modules kept in ``gomodules/`` beside this file and shipped
as package data, so an installed wheel builds them too (the Kubernetes one
needs a ``replace`` per staging module, etcd and kwok are kept apart so their dependency graphs
do not couple). The first build takes many minutes on two cores; afterwards every run finds the
binaries in ``<cache>/bin/<versions>/`` and starts in seconds.

CoreDNS (the optional DNS server, ``gomodules/coredns``) is an *extra*: built on demand into
the same directory with its own recipe digest and manifest entry, never required. So are the
real-node binaries (kubelet from the control-plane module's ``realnode/kubelet``, containerd with
its runc shim and ``ctr`` from ``gomodules/containerd``, crictl from ``gomodules/critools``),
built only when asked for (``ensure(real_nodes=True)``, ``binaries build --real-nodes``), and
Prometheus (``gomodules/prometheus``: its server without the service-discovery plugins, for the
autoscaling tests' metrics), built only when asked for (``ensure(prometheus=True)``, ``binaries
build --prometheus``). A set without them is complete (the cluster then runs without DNS);
adding, changing or failing to build one never invalidates the control-plane binaries.

A cache directory is complete only when its ``manifest.json`` exists: the build writes into a
temporary sibling and renames it into place, so an interrupted build never looks finished. The
manifest records each binary's size and SHA-256 and the digest of the recipe (go.mod, go.sum,
main packages, linker flags; paths relative to ``gomodules/``, so where the package is installed
does not matter) it was built from: a changed recipe rebuilds, a binary that no
longer matches its manifest is reported as a corrupt cache with what to do.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

from filelock import FileLock

from .errors import BadInput, HarnessError
from .paths import binaries_root, go_modules_root
from .versions import CONTAINERD, COREDNS, CRICTL, FALLBACKS, PINNED, PROMETHEUS, Versions, prometheus_release

Progress = Callable[[str], None]

MANIFEST = "manifest.json"
MANIFEST_SCHEMA = 1

CONTROL_PLANE = ("kube-apiserver", "kube-controller-manager", "kube-scheduler")
ALL_BINARIES = ("etcd", *CONTROL_PLANE, "kwok", "kwokctl")
# Optional binaries built next to a set on demand; a set is complete without them.
EXTRAS = ("coredns",)
REAL_NODE_BINARIES = ("kubelet", "containerd", "containerd-shim-runc-v2", "ctr", "crictl")
PROMETHEUS_BINARY = "prometheus"
# Prometheus's own build tags: ``remove_all_sd`` leaves out every service-discovery plugin but the
# file and HTTP ones (plugins/*.go; the cloud SDKs are most of a full build). Without
# ``builtinassets`` the web UI is not embedded; the HTTP API (/api/v1/*, /-/ready) works as usual.
PROMETHEUS_TAGS = ("remove_all_sd",)
# How a binary prints its version when ``--version`` is not it (the runc shim uses Go's flag package).
VERSION_ARGS: dict[str, tuple[str, ...]] = {"containerd-shim-runc-v2": ("-v",)}
MIN_GO = (1, 26)
HEARTBEAT = 30.0  # seconds between "still compiling" lines during a build
MODULE_MISSING_HINT = (
    "the installation is incomplete (the Go wrapper modules ship as package data of conformance.cluster): "
    "reinstall kthena-conformance, or set KTHENA_BIN_DIR to prebuilt binaries"
)


def _quiet(_: str) -> None:
    pass


@dataclass(frozen=True)
class GoBuild:
    """One ``go build`` invocation: a wrapper module, the packages to build and its linker flags."""

    module: str  # directory name under gomodules/
    packages: tuple[str, ...]
    ldflags: tuple[str, ...]
    outputs: tuple[str, ...]
    tags: tuple[str, ...] = ()  # build tags (containerd: leave out the btrfs, devmapper, zfs snapshotters)

    def argv(self, out_dir: Path) -> list[str]:
        # A single package is written to an explicit file name: `go build` would name etcd's
        # binary after its module path ("server"), not "etcd".
        single = len(self.packages) == 1 and len(self.outputs) == 1
        target = str(out_dir / self.outputs[0]) if single else str(out_dir) + os.sep
        tags = ["-tags", " ".join(self.tags)] if self.tags else []
        return ["go", "build", "-v", "-trimpath", *tags, "-ldflags", " ".join(self.ldflags), "-o", target,
                *self.packages]  # fmt: skip


def kubernetes_ldflags(versions: Versions) -> list[str]:
    """Linker flags that stamp a Kubernetes binary with its version (``--version`` shows it). Pure."""
    flags = ["-s", "-w"]
    major, minor = versions.kubernetes_minor.split(".")
    for pkg in ("k8s.io/component-base/version", "k8s.io/client-go/pkg/version"):
        flags += [
            f"-X {pkg}.gitVersion={versions.kubernetes}",
            f"-X {pkg}.gitMajor={major}",
            f"-X {pkg}.gitMinor={minor}",
            f"-X {pkg}.gitTreeState=clean",
        ]
    return flags


def build_plan(versions: Versions) -> tuple[GoBuild, ...]:
    """The ``go build`` invocations that produce every binary for ``versions`` (pure)."""
    k8s_ld = kubernetes_ldflags(versions)
    kwok_ld = [
        "-s",
        "-w",
        f"-X sigs.k8s.io/kwok/pkg/consts.Version={versions.kwok.lstrip('v')}",
        f"-X sigs.k8s.io/kwok/pkg/consts.KubeVersion={versions.kubernetes.lstrip('v')}",
    ]
    return (
        GoBuild("controlplane", ("./cmd/...",), tuple(k8s_ld), CONTROL_PLANE),
        GoBuild("etcd", ("go.etcd.io/etcd/server/v3",), ("-s", "-w"), ("etcd",)),
        GoBuild(
            "kwok",
            ("sigs.k8s.io/kwok/cmd/kwok", "sigs.k8s.io/kwok/cmd/kwokctl"),
            tuple(kwok_ld),
            ("kwok", "kwokctl"),
        ),
    )


def go_mod_edits(module: str, versions: Versions) -> list[list[str]]:
    """``go mod edit`` argument lists that retarget a wrapper module to ``versions`` (pure)."""
    if module == "controlplane":
        edits = [["-require", f"k8s.io/kubernetes@{versions.kubernetes}"]]
        for line in (go_modules_root() / "controlplane" / "go.mod").read_text().splitlines():
            parts = line.split()
            if len(parts) == 4 and parts[1] == "=>" and parts[0].startswith("k8s.io/"):
                edits.append(["-replace", f"{parts[0]}={parts[0]}@{versions.staging}"])
        return edits
    if module == "etcd":
        return [["-require", f"go.etcd.io/etcd/server/v3@{versions.etcd}"]]
    return [["-require", f"sigs.k8s.io/kwok@{versions.kwok}"]]


def extras_plan(real_nodes: bool = False, prometheus: bool = False) -> tuple[GoBuild, ...]:
    """The ``go build`` invocations of the optional binaries (pure): CoreDNS; with ``prometheus``
    the Prometheus server; with ``real_nodes`` the kubelet, containerd (its runc shim, ``ctr``)
    and crictl.

    CoreDNS is built from its checked-in wrapper module for every version set: it talks to the
    API server through client-go and does not follow the control plane's patch version. The
    kubelet comes from the control-plane module, so it is the pinned Kubernetes version.
    """
    coredns = GoBuild(
        "coredns",
        (".",),
        ("-s", "-w", f"-X github.com/coredns/coredns/coremain.GitCommit={COREDNS}"),
        ("coredns",),
    )
    steps = [coredns]
    if prometheus:
        steps.append(prometheus_build())
    if not real_nodes:
        return tuple(steps)
    containerd = "github.com/containerd/containerd/v2"
    return (
        *steps,
        GoBuild("controlplane", ("./realnode/kubelet",), tuple(kubernetes_ldflags(PINNED)), ("kubelet",)),
        GoBuild(
            "containerd",
            tuple(f"{containerd}/cmd/{name}" for name in ("containerd", "containerd-shim-runc-v2", "ctr")),
            ("-s", "-w", f"-X {containerd}/version.Version={CONTAINERD}"),
            ("containerd", "containerd-shim-runc-v2", "ctr"),
            tags=("no_btrfs", "no_devmapper", "no_zfs"),
        ),
        GoBuild(
            "critools",
            ("sigs.k8s.io/cri-tools/cmd/crictl",),
            ("-s", "-w", f"-X sigs.k8s.io/cri-tools/pkg/version.Version={CRICTL}"),
            ("crictl",),
        ),
    )


def prometheus_build() -> GoBuild:
    """The ``go build`` of the Prometheus server (pure): its ``cmd/prometheus`` package from the
    wrapper module's ``tool`` dependency, without the service-discovery plugins, stamped with its
    release (``prometheus --version`` shows it)."""
    return GoBuild(
        "prometheus",
        ("github.com/prometheus/prometheus/cmd/prometheus",),
        ("-s", "-w", f"-X github.com/prometheus/common/version.Version={prometheus_release(PROMETHEUS)}"),
        (PROMETHEUS_BINARY,),
        tags=PROMETHEUS_TAGS,
    )


def _all_extras() -> tuple[GoBuild, ...]:
    """Every optional build, whether asked for or not: what :meth:`BinaryCache.load` recognises."""
    return extras_plan(real_nodes=True, prometheus=True)


def _digest_step(h: hashlib._Hash, step: GoBuild) -> None:
    src = go_modules_root()
    h.update(" ".join(step.argv(Path("/out"))).encode())
    for path in sorted((src / step.module).rglob("*")):
        if path.is_file() and path.suffix in {".go", ".mod", ".sum"}:
            h.update(str(path.relative_to(src)).encode())
            h.update(path.read_bytes())


def recipe_digest(versions: Versions) -> str:
    """A digest of everything a build depends on besides the Go toolchain (extras excluded)."""
    h = hashlib.sha256(versions.key().encode())
    for step in build_plan(versions):
        _digest_step(h, step)
    return h.hexdigest()


def extra_recipe_digest(step: GoBuild) -> str:
    """The recipe digest of one optional build (its module's sources and its command line)."""
    h = hashlib.sha256(f"extra:{step.module}".encode())
    _digest_step(h, step)
    return h.hexdigest()


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


@dataclass
class BinarySet:
    """A complete, verified set of binaries in one directory."""

    directory: Path
    versions: Versions
    manifest: dict[str, object] = field(default_factory=dict)
    # Optional binaries (EXTRAS) that are built, verified and current, by name.
    extras: dict[str, Path] = field(default_factory=dict)

    def path(self, name: str) -> Path:
        return self.directory / name

    def optional(self, name: str) -> Path | None:
        """The path of an optional binary (``coredns``), or None when it is not available."""
        return self.extras.get(name)

    @property
    def build_seconds(self) -> float | None:
        """How long the build that produced this set took, if this process built it."""
        value = self.manifest.get("built_in_this_process_seconds")
        return float(value) if isinstance(value, (int, float)) else None


def find_go() -> str:
    """The ``go`` executable, or a clear error when there is none or it is too old."""
    go = shutil.which("go")
    if go is None:
        raise HarnessError(
            "the Go toolchain was not found on PATH: the control-plane binaries are built from the Go module proxy",
            f"install Go {MIN_GO[0]}.{MIN_GO[1]} or newer (https://go.dev/dl/) and put it on PATH, or "
            "set KTHENA_BIN_DIR to a directory holding prebuilt etcd, kube-apiserver, "
            "kube-controller-manager, kube-scheduler and kwok binaries",
        )
    try:
        out = subprocess.run([go, "env", "GOVERSION"], check=False, capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise HarnessError(f"`{go} env GOVERSION` failed: {exc}", "check the Go installation") from exc
    digits = out.strip().removeprefix("go").split(".")
    try:
        have = (int(digits[0]), int(digits[1]))
    except (IndexError, ValueError):
        have = (0, 0)
    if have < MIN_GO:
        raise HarnessError(
            f"Go {out.strip() or 'of unknown version'} at {go} is too old: Kubernetes "
            f"{PINNED.kubernetes} needs go{MIN_GO[0]}.{MIN_GO[1]}",
            f"install Go {MIN_GO[0]}.{MIN_GO[1]} or newer and put it first on PATH",
        )
    return go


class BinaryCache:
    """Finds, verifies and builds binary sets under the per-user cache."""

    def __init__(self, root: Path | None = None) -> None:
        self.root = root or binaries_root()

    def directory(self, versions: Versions) -> Path:
        return self.root / versions.key()

    # -- lookup ---------------------------------------------------------------------------------

    def load(self, versions: Versions, *, deep: bool = False) -> BinarySet | None:
        """The cached set for ``versions``; None when absent or built from an older recipe.

        Raises a :class:`HarnessError` when the directory is there but damaged. ``deep`` checks
        SHA-256 digests too (slow: hundreds of MB); the default checks presence, size and mode.
        """
        override = os.environ.get("KTHENA_BIN_DIR")
        if override:
            return self._load_override(Path(override), versions)
        directory = self.directory(versions)
        manifest_path = directory / MANIFEST
        if not manifest_path.exists():
            if directory.exists() and any(directory.iterdir()):
                raise self._corrupt(directory, "it has no manifest.json (an interrupted build?)")
            return None
        try:
            manifest = json.loads(manifest_path.read_text())
        except (OSError, ValueError) as exc:
            raise self._corrupt(directory, f"manifest.json is unreadable ({exc})") from exc
        entries = manifest.get("binaries") if isinstance(manifest, dict) else None
        if not isinstance(entries, dict):
            raise self._corrupt(directory, "manifest.json is unreadable (not an object with a 'binaries' map)")
        if manifest.get("recipe") != recipe_digest(versions):
            return None  # built from another recipe: rebuild, this is not damage
        for name in ALL_BINARIES:
            entry = entries.get(name)
            if not isinstance(entry, dict):
                raise self._corrupt(directory, f"manifest.json does not list {name}")
            self._verify(directory, name, entry, deep=deep)
        extras: dict[str, Path] = {}
        for step in _all_extras():
            digest = extra_recipe_digest(step)
            for name in step.outputs:
                entry = entries.get(name)
                if not isinstance(entry, dict) or entry.get("recipe") != digest:
                    continue  # not built yet, or from another recipe: built on demand, not damage
                self._verify(directory, name, entry, deep=deep)
                extras[name] = directory / name
        return BinarySet(directory, versions, manifest, extras)

    def _verify(self, directory: Path, name: str, entry: dict[str, object], *, deep: bool) -> None:
        path = directory / name
        if not path.is_file():
            raise self._corrupt(directory, f"{name} is missing")
        if path.stat().st_size != entry.get("size"):
            size = path.stat().st_size
            raise self._corrupt(directory, f"{name} is {size} bytes, the manifest says {entry.get('size')}")
        if not os.access(path, os.X_OK):
            raise self._corrupt(directory, f"{name} is not executable")
        if deep and _sha256(path) != entry.get("sha256"):
            raise self._corrupt(directory, f"{name} does not match its SHA-256 in manifest.json")

    def _load_override(self, directory: Path, versions: Versions) -> BinarySet:
        missing = [n for n in ALL_BINARIES if n != "kwokctl" and not (directory / n).is_file()]
        if missing:
            raise BadInput(
                f"KTHENA_BIN_DIR={directory} lacks {', '.join(missing)}",
                "point KTHENA_BIN_DIR at a directory with all control-plane binaries, or unset it "
                "to build them with `make binaries`",
            )
        names = (*EXTRAS, PROMETHEUS_BINARY, *REAL_NODE_BINARIES)
        extras = {n: directory / n for n in names if (directory / n).is_file()}
        return BinarySet(directory, versions, {"source": "KTHENA_BIN_DIR"}, extras)

    @staticmethod
    def _corrupt(directory: Path, why: str) -> HarnessError:
        return HarnessError(
            f"the binary cache at {directory} is corrupt: {why}",
            "rebuild it with `make binaries FORCE=1` (or `kthena-conformance binaries build --force`)",
        )

    # -- build ----------------------------------------------------------------------------------

    def ensure(
        self,
        versions: Versions = PINNED,
        *,
        force: bool = False,
        try_fallbacks: bool = True,
        progress: Progress = _quiet,
        extras: bool = True,
        retry_failed_extras: bool = True,
        real_nodes: bool = False,
        prometheus: bool = False,
    ) -> BinarySet:
        """A verified binary set, building it (or a fallback version set) when needed.

        ``extras``: also build the optional binaries (CoreDNS; with ``real_nodes`` the real
        nodes', with ``prometheus`` the Prometheus server) the set lacks. Their failure is
        reported through ``progress`` and recorded in the manifest, never raised: the set works
        without them. ``retry_failed_extras=False`` skips an extra whose current recipe already
        failed to build here (``cluster up`` does not retry a failed build every time).
        """
        if not force:
            found = self.load(versions)
            if found is not None:
                return (
                    self._ensure_extras(found, progress, retry_failed_extras, real_nodes, prometheus)
                    if extras
                    else found
                )
        if os.environ.get("KTHENA_BIN_DIR"):
            return self._load_override(Path(os.environ["KTHENA_BIN_DIR"]), versions)
        go = find_go()
        self.root.mkdir(parents=True, exist_ok=True)
        with FileLock(str(self.root / ".build.lock")):
            built = None if force else self.load(versions)  # another process may have built it meanwhile
            if built is None:
                built = self._build_with_fallbacks(go, versions, try_fallbacks, progress)
        return self._ensure_extras(built, progress, retry_failed_extras, real_nodes, prometheus) if extras else built

    def _build_with_fallbacks(self, go: str, versions: Versions, try_fallbacks: bool, progress: Progress) -> BinarySet:
        candidates = [versions, *FALLBACKS] if try_fallbacks and versions == PINNED else [versions]
        failures: list[str] = []
        for candidate in candidates:
            try:
                return self._build(go, candidate, progress)
            except HarnessError as exc:
                failures.append(f"{candidate.key()}: {exc.message}")
                progress(f"build of {candidate.key()} failed; {len(candidates) - len(failures)} fallback(s) left")
        raise HarnessError(
            "no version set could be built:\n    " + "\n    ".join(failures),
            f"see the build logs under {self.root}; check `go env GOPROXY` reaches the Go module proxy",
        )

    # -- optional extras ------------------------------------------------------------------------

    @staticmethod
    def _missing_extras(
        found: BinarySet, retry_failed: bool, real_nodes: bool = False, prometheus: bool = False
    ) -> list[GoBuild]:
        failed = found.manifest.get("extras_failed")
        failed = failed if isinstance(failed, dict) else {}
        missing = []
        for step in extras_plan(real_nodes, prometheus):
            if all(name in found.extras for name in step.outputs):
                continue
            earlier = failed.get(step.module)
            if not retry_failed and isinstance(earlier, dict) and earlier.get("recipe") == extra_recipe_digest(step):
                continue
            missing.append(step)
        return missing

    def _ensure_extras(
        self, found: BinarySet, progress: Progress, retry_failed: bool, real_nodes: bool, prometheus: bool = False
    ) -> BinarySet:
        """``found`` with its missing optional binaries built into its directory (best effort)."""
        if found.manifest.get("source") == "KTHENA_BIN_DIR" or not self._missing_extras(
            found, retry_failed, real_nodes, prometheus
        ):
            return found
        try:
            go = find_go()
        except HarnessError as exc:
            progress(f"optional binaries not built ({exc.message}); the cluster runs without them")
            return found
        with FileLock(str(self.root / ".build.lock")):
            current = self.load(found.versions) or found  # another process may have built them
            spent = 0.0
            for step in self._missing_extras(current, retry_failed, real_nodes, prometheus):
                t0 = time.monotonic()
                self._build_extra(go, current, step, progress)
                spent += time.monotonic() - t0
            result = self.load(found.versions) or current
        before = found.build_seconds or 0.0
        if spent or found.build_seconds is not None:
            result.manifest["built_in_this_process_seconds"] = before + spent
        return result

    def _build_extra(self, go: str, target: BinarySet, step: GoBuild, progress: Progress) -> None:
        """Build one optional binary into ``target``'s directory and list it in the manifest; a
        failure is recorded in the manifest (``extras_failed``) and reported, not raised."""
        digest = extra_recipe_digest(step)
        log_path = self.root / f"build-{target.versions.key()}.log"
        staging = Path(tempfile.mkdtemp(prefix=f".{step.module}.", dir=self.root))
        source = go_modules_root() / step.module
        started = time.monotonic()
        entries: dict[str, dict[str, object]] = {}
        failure: str | None = None
        try:
            if not source.is_dir():
                raise HarnessError(f"the Go wrapper module {source} is missing", MODULE_MISSING_HINT)
            progress(f"go build {step.module} (optional, once; the cluster runs without it if this fails) ...")
            with log_path.open("a") as log:
                self._run(go, step.argv(staging)[1:], source, log, log_path, progress)
            for name in step.outputs:
                path = staging / name
                if not path.is_file():
                    raise HarnessError(f"the build did not produce {name}", f"see {log_path}")
                entries[name] = {
                    "size": path.stat().st_size,
                    "sha256": _sha256(path),
                    "version": _version_of(path),
                    "recipe": digest,
                    "optional": True,
                }
            for name in step.outputs:
                os.replace(staging / name, target.directory / name)
            progress(f"  built {', '.join(step.outputs)} in {time.monotonic() - started:.0f}s")
        except HarnessError as exc:
            failure = exc.message
            progress(f"optional {step.module} not built: {exc.message} ({exc.hint}); the cluster runs without it")
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        self._update_manifest(target.directory, step.module, entries, digest, failure)

    @staticmethod
    def _update_manifest(
        directory: Path, module: str, entries: dict[str, dict[str, object]], digest: str, failure: str | None
    ) -> None:
        path = directory / MANIFEST
        manifest = json.loads(path.read_text())
        binaries = manifest.setdefault("binaries", {})
        failed = manifest.setdefault("extras_failed", {})
        if failure is None:
            binaries.update(entries)
            failed.pop(module, None)
        else:
            at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
            failed[module] = {"recipe": digest, "error": failure, "at": at}
        if not failed:
            manifest.pop("extras_failed")
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(manifest, indent=2) + "\n")
        tmp.replace(path)

    def _build(self, go: str, versions: Versions, progress: Progress) -> BinarySet:
        final = self.directory(versions)
        staging = Path(tempfile.mkdtemp(prefix=f".{versions.key()}.", dir=self.root))
        log_path = self.root / f"build-{versions.key()}.log"
        started = time.monotonic()
        try:
            with log_path.open("w") as log, tempfile.TemporaryDirectory(prefix="kthena-gobuild-") as work:
                for step in build_plan(versions):
                    module_dir = self._module_dir(go, step.module, versions, Path(work), log)
                    progress(f"go build {' '.join(step.packages)} (module {step.module}) ...")
                    t0 = time.monotonic()
                    self._run(go, step.argv(staging)[1:], module_dir, log, log_path, progress)
                    progress(f"  built {', '.join(step.outputs)} in {time.monotonic() - t0:.0f}s")
            entries: dict[str, dict[str, object]] = {}
            for name in ALL_BINARIES:
                path = staging / name
                if not path.is_file():
                    raise HarnessError(f"the build did not produce {name}", f"see {log_path}")
                entries[name] = {"size": path.stat().st_size, "sha256": _sha256(path), "version": _version_of(path)}
            elapsed = time.monotonic() - started
            manifest: dict[str, object] = {
                "schema": MANIFEST_SCHEMA,
                "versions": {"kubernetes": versions.kubernetes, "etcd": versions.etcd, "kwok": versions.kwok},
                "recipe": recipe_digest(versions),
                "built_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                "build_seconds": round(elapsed, 1),
                "binaries": entries,
            }
            (staging / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n")
            if final.exists():
                shutil.rmtree(final)
            staging.rename(final)
        finally:
            if staging.exists():
                shutil.rmtree(staging, ignore_errors=True)
        progress(f"binaries for {versions.key()} built in {elapsed:.0f}s into {final}")
        manifest["built_in_this_process_seconds"] = elapsed
        return BinarySet(final, versions, manifest)

    def _module_dir(self, go: str, module: str, versions: Versions, work: Path, log: TextIO) -> Path:
        """The wrapper module to build in: the checked-in one for the pinned versions, else a
        retargeted copy (``go mod edit`` + ``go mod tidy``) in a scratch directory."""
        source = go_modules_root() / module
        if not source.is_dir():
            raise HarnessError(f"the Go wrapper module {source} is missing", MODULE_MISSING_HINT)
        if versions == PINNED:
            return source
        target = work / module
        shutil.copytree(source, target)
        log_path = self.root / f"build-{versions.key()}.log"
        for edit in go_mod_edits(module, versions):
            self._run(go, ["mod", "edit", *edit], target, log, log_path)
        self._run(go, ["mod", "tidy"], target, log, log_path)
        return target

    @staticmethod
    def _run(go: str, args: Sequence[str], cwd: Path, log: TextIO, log_path: Path, progress: Progress = _quiet) -> None:
        """Run one go command with its output in the build log; report progress every 30 s
        (``go build -v`` names each package it compiles, so the count shows it is moving)."""
        env = {**os.environ, "CGO_ENABLED": "0"}
        log.write(f"$ (cd {cwd} && go {' '.join(args)})\n")
        log.flush()
        start_offset = log_path.stat().st_size
        started = time.monotonic()
        proc = subprocess.Popen([go, *args], cwd=cwd, env=env, stdout=log, stderr=subprocess.STDOUT)
        next_report = started + HEARTBEAT
        try:
            while proc.poll() is None:
                time.sleep(0.2)
                if time.monotonic() >= next_report:
                    next_report += HEARTBEAT
                    with log_path.open("rb") as f:
                        f.seek(start_offset)
                        packages = f.read().count(b"\n")
                    progress(f"  ... still compiling: {packages} packages so far, {time.monotonic() - started:.0f}s")
        except BaseException:
            proc.kill()
            proc.wait()
            raise
        if proc.returncode != 0:
            tail = "\n      ".join(_tail(log_path, 8))
            raise HarnessError(
                f"`go {' '.join(args[:2])}` in {cwd.name} failed:\n      {tail}", f"full log: {log_path}"
            )


def _tail(path: Path, n: int) -> list[str]:
    try:
        return path.read_text(errors="replace").splitlines()[-n:]
    except OSError:
        return []


def _version_of(path: Path) -> str:
    """The first line ``BINARY --version`` prints (proves the version stamp took)."""
    args: Iterable[str] = VERSION_ARGS.get(path.name, ("--version",))
    try:
        out = subprocess.run([str(path), *args], check=False, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise HarnessError(f"{path} does not run: {exc}", "rebuild with `make binaries FORCE=1`") from exc
    text = (out.stdout or out.stderr).strip()
    return text.splitlines()[0] if text else ""
