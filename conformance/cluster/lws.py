"""The LeaderWorkerSet CRD, taken from its Go module on the module proxy, and its installation.

Kthena converts a LeaderWorkerSet (``leaderworkerset.x-k8s.io/v1``) into a ModelServing; a cluster
only needs the LWS CRD for that, never the LWS controller. The CRD is not vendored here: it is the
file ``config/crd/bases/leaderworkerset.x-k8s.io_leaderworkersets.yaml`` of the module
``sigs.k8s.io/lws`` at the version upstream Kthena requires (:data:`LWS_VERSION`), fetched the way
the harness fetches everything else it builds on, ``go mod download -json`` against the Go module
proxy (the checksum database vouches for the module's content). The verified CRD is then kept in
the per-user cache (:func:`.paths.cache_root`), so later runs need neither Go nor the network.

:func:`module_dir` is the pure parser of ``go mod download -json``'s answer; :func:`lws_crd` runs it
and loads the CRD; :func:`install_lws_crd` creates (or replaces) it in a cluster and waits until
it is Established, with the helpers the reference implementation installs its own CRDs with.
"""

from __future__ import annotations

import copy
import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from .. import yamlio
from .errors import HarnessError
from .paths import cache_root

Progress = Callable[[str], None]

LWS_MODULE = "sigs.k8s.io/lws"
LWS_VERSION = "v0.7.0"  # upstream Kthena's go.mod requires sigs.k8s.io/lws v0.7.0
CRD_PATH = "config/crd/bases/leaderworkerset.x-k8s.io_leaderworkersets.yaml"  # inside the module
CRD_NAME = "leaderworkersets.leaderworkerset.x-k8s.io"
GROUP = "leaderworkerset.x-k8s.io"
SERVED_VERSION = "v1"
KIND = "LeaderWorkerSet"
DOWNLOAD_TIMEOUT = 300.0  # seconds for `go mod download` (a cold module cache fetches one zip)
PROXY_HINT = (
    "check that `go env GOPROXY` reaches the Go module proxy (or a mirror of it) and that "
    f"{LWS_MODULE} is allowed by GOPRIVATE/GONOSUMDB/GOFLAGS; set GOPROXY and retry"
)


def _quiet(_: str) -> None:
    pass


def module_dir(go_json: str) -> Path:
    """The module's directory in the Go module cache, from what ``go mod download -json`` printed
    for one module (pure). A :class:`HarnessError` names what is wrong: no JSON object, more than
    one, an ``Error`` field (the proxy refused, the version does not exist), or no ``Dir``."""
    text = go_json.strip()
    if not text:
        raise HarnessError("`go mod download -json` printed nothing", PROXY_HINT)
    try:
        info, end = json.JSONDecoder().raw_decode(text)
    except json.JSONDecodeError as exc:
        raise HarnessError(
            f"`go mod download -json` printed no JSON object ({exc.msg} at character {exc.pos}): {text[:200]!r}",
            "check the Go installation (`go version`, `go env`)",
        ) from None
    if not isinstance(info, dict):
        raise HarnessError(
            f"`go mod download -json` printed {type(info).__name__}, not a JSON object: {text[:200]!r}",
            "check the Go installation (`go version`, `go env`)",
        )
    if text[end:].strip():
        raise HarnessError(
            "`go mod download -json` printed more than one module, expected exactly one",
            "ask for a single module@version",
        )
    module = f"{info.get('Path') or '?'}@{info.get('Version') or '?'}"
    error = info.get("Error")
    if error:
        raise HarnessError(f"`go mod download` could not fetch {module}: {str(error).strip()}", PROXY_HINT)
    directory = info.get("Dir")
    if not isinstance(directory, str) or not directory:
        raise HarnessError(
            f"`go mod download -json` reported no Dir for {module} (fields: {', '.join(sorted(info)) or 'none'})",
            "check the Go installation; GOFLAGS=-mod=mod and a writable GOMODCACHE are needed",
        )
    return Path(directory)


def check_crd(doc: Any, where: str) -> dict[str, Any]:
    """``doc`` if it is the LeaderWorkerSet CRD serving ``v1`` (pure); a :class:`HarnessError`
    naming what differs otherwise. ``where`` says where the document came from."""
    hint = f"the file is not the LeaderWorkerSet CRD {LWS_MODULE} ships; remove it and fetch it again"
    if not isinstance(doc, dict):
        raise HarnessError(f"{where}: not a YAML mapping", hint)
    if doc.get("kind") != "CustomResourceDefinition":
        raise HarnessError(f"{where}: kind is {doc.get('kind')!r}, not CustomResourceDefinition", hint)
    name = (doc.get("metadata") or {}).get("name")
    if name != CRD_NAME:
        raise HarnessError(f"{where}: the CRD is named {name!r}, not {CRD_NAME}", hint)
    spec = doc.get("spec") or {}
    if spec.get("group") != GROUP or (spec.get("names") or {}).get("kind") != KIND:
        raise HarnessError(f"{where}: the CRD is not {GROUP} {KIND}", hint)
    served = [v.get("name") for v in spec.get("versions") or [] if isinstance(v, dict) and v.get("served")]
    if SERVED_VERSION not in served:
        raise HarnessError(f"{where}: the CRD serves {served or 'no versions'}, not {SERVED_VERSION}", hint)
    return doc


def crd_from_module(directory: Path, version: str = LWS_VERSION) -> dict[str, Any]:
    """The CRD file of the module checked out at ``directory``, verified."""
    path = directory / CRD_PATH
    try:
        text = path.read_text()
    except OSError as exc:
        raise HarnessError(
            f"{LWS_MODULE}@{version} has no readable {CRD_PATH} ({exc.strerror or exc})",
            f"this version of {LWS_MODULE} may keep its CRD elsewhere; use {LWS_VERSION}",
        ) from None
    return _single_crd(text, str(path))


def _single_crd(text: str, where: str) -> dict[str, Any]:
    try:
        docs = [d for d in yamlio.load_all(text) if d]
    except yaml.YAMLError as exc:
        raise HarnessError(f"{where}: not valid YAML: {exc}", "remove the file and fetch it again") from None
    if len(docs) != 1:
        raise HarnessError(f"{where}: {len(docs)} YAML documents, expected the CRD alone", "remove it and retry")
    return check_crd(docs[0], where)


def cached_crd_path(version: str = LWS_VERSION) -> Path:
    """Where the verified CRD of ``version`` is kept in the per-user cache."""
    return cache_root() / "crds" / f"lws-{version}" / Path(CRD_PATH).name


def download(version: str = LWS_VERSION, *, timeout: float = DOWNLOAD_TIMEOUT) -> Path:
    """``go mod download -json sigs.k8s.io/lws@version``: the module's directory in the Go cache.

    Run in an empty scratch directory (a ``go.mod`` around the caller must not take part) with
    ``GOFLAGS=-mod=mod``. A missing Go, a timeout or a refusal is a :class:`HarnessError`."""
    go = shutil.which("go")
    if go is None:
        raise HarnessError(
            f"the Go toolchain was not found on PATH: the LeaderWorkerSet CRD comes from the Go module {LWS_MODULE}",
            "install Go (https://go.dev/dl/) and put it on PATH; once fetched, the CRD is kept in "
            f"{cached_crd_path(version).parent} and Go is no longer needed",
        )
    env = {**os.environ, "GOFLAGS": "-mod=mod", "GO111MODULE": "on"}
    argv = [go, "mod", "download", "-json", f"{LWS_MODULE}@{version}"]
    with tempfile.TemporaryDirectory(prefix="kthena-lws-") as scratch:
        try:
            out = subprocess.run(
                argv, cwd=scratch, env=env, capture_output=True, text=True, timeout=timeout, check=False
            )
        except subprocess.TimeoutExpired:
            raise HarnessError(
                f"`go mod download {LWS_MODULE}@{version}` did not finish within {timeout:.0f}s", PROXY_HINT
            ) from None
        except OSError as exc:
            raise HarnessError(f"`{go} mod download` could not run: {exc}", "check the Go installation") from None
    if out.returncode != 0 and not out.stdout.strip():
        tail = " | ".join(out.stderr.strip().splitlines()[-3:])
        raise HarnessError(
            f"`go mod download {LWS_MODULE}@{version}` failed (exit {out.returncode}): {tail}", PROXY_HINT
        )
    return module_dir(out.stdout)


def lws_crd(version: str = LWS_VERSION, *, progress: Progress = _quiet) -> dict[str, Any]:
    """The LeaderWorkerSet CRD of ``sigs.k8s.io/lws@version`` as an object (a fresh copy).

    From the per-user cache when a verified copy is there; otherwise fetched with
    ``go mod download``, verified (kind, name, group, ``v1`` served) and cached. A cached file
    that no longer verifies is fetched again."""
    cached = cached_crd_path(version)
    if cached.is_file():
        try:
            return _single_crd(cached.read_text(), str(cached))
        except (HarnessError, OSError):
            progress(f"the cached LeaderWorkerSet CRD {cached} does not verify: fetching it again")
    progress(f"fetching the LeaderWorkerSet CRD from {LWS_MODULE}@{version} (go mod download)")
    directory = download(version)
    crd = crd_from_module(directory, version)
    cached.parent.mkdir(parents=True, exist_ok=True)
    staging = cached.with_name(f".{cached.name}.{os.getpid()}.tmp")
    staging.write_text((directory / CRD_PATH).read_text())
    os.replace(staging, cached)  # a reader never sees half a file
    progress(f"LeaderWorkerSet CRD {version} kept in {cached}")
    return crd


def install_lws_crd(
    cluster: Any,
    *,
    context: str | None = None,
    version: str = LWS_VERSION,
    timeout: float = 60.0,
    progress: Progress = _quiet,
) -> dict[str, Any]:
    """Create the LeaderWorkerSet CRD in a cluster, or replace the one there, and wait until it is
    Established (polled against a deadline of ``timeout`` seconds). ``cluster`` is an official-client
    ``ApiClient`` or the path of a kubeconfig (with ``context``). Returns the CRD installed."""
    from kubernetes.client.exceptions import ApiException

    from ..framework.waits import WaitTimeout
    from ..implementations import reference
    from .kube import api_client

    api = api_client(Path(cluster), context) if isinstance(cluster, (str, Path)) else cluster
    crd = lws_crd(version, progress=progress)
    try:
        reference.apply(api, copy.deepcopy(crd))  # apply writes resourceVersion into its argument
    except ApiException as exc:
        raise HarnessError(
            f"the API server refused the LeaderWorkerSet CRD: {exc.status} {exc.reason}: {str(exc.body)[:300]}",
            "the credentials need create and update on customresourcedefinitions (apiextensions.k8s.io)",
        ) from None
    try:
        reference.wait_established(api, [CRD_NAME], timeout=timeout)
    except WaitTimeout as exc:
        raise HarnessError(
            f"the LeaderWorkerSet CRD was not Established: {exc}",
            f"see `kubectl get crd {CRD_NAME} -o yaml` (status.conditions: NamesAccepted, Established)",
        ) from None
    progress(f"LeaderWorkerSet CRD {version} installed and Established")
    return crd
