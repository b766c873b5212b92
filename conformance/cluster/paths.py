"""Where the harness keeps its per-user state (the binary cache and the cluster run directories),
and where its own shipped sources are (the Go wrapper modules, package data).

One state root, overridable with ``KTHENA_CACHE_DIR`` (CI points it at a warm directory), so that
"remove this folder" is always a complete reset. Nothing the harness needs at run time lives
outside its packages: an installed wheel works from any directory.
"""

from __future__ import annotations

import os
from pathlib import Path


def cache_root() -> Path:
    """The per-user cache root (``$KTHENA_CACHE_DIR``, else ``$XDG_CACHE_HOME/kthena-conformance``)."""
    explicit = os.environ.get("KTHENA_CACHE_DIR")
    if explicit:
        return Path(explicit).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "kthena-conformance"


def check_cache_root() -> Path:
    """The cache root, made if missing; :class:`~.errors.BadInput` naming the variable it came from
    when it cannot be made or written."""
    from .errors import BadInput

    root = cache_root()
    source = "KTHENA_CACHE_DIR" if os.environ.get("KTHENA_CACHE_DIR") else "XDG_CACHE_HOME" if os.environ.get(
        "XDG_CACHE_HOME"
    ) else "the home directory"  # fmt: skip
    try:
        root.mkdir(parents=True, exist_ok=True)
        if not os.access(root, os.W_OK | os.X_OK):
            raise PermissionError(13, "not writable")
    except OSError as exc:
        raise BadInput(
            f"the cache directory {root} (from {source}) cannot be used: {exc.strerror or exc}",
            "point KTHENA_CACHE_DIR at a writable directory",
        ) from None
    return root


def binaries_root() -> Path:
    """Built control-plane binaries, one directory per version set."""
    return cache_root() / "bin"


def runs_root() -> Path:
    """Run directories of live clusters (certificates, data, logs, kubeconfig), one per cluster."""
    return cache_root() / "clusters"


def go_modules_root() -> Path:
    """The Go wrapper modules the binaries are built from (``controlplane``, ``etcd``, ``kwok``,
    ``coredns``): package data of ``conformance.cluster``, so a wheel carries them."""
    return Path(__file__).resolve().parent / "gomodules"


def repo_root() -> Path:
    """The source checkout, for the project's own tests and tools only: an installed package has
    none, and nothing ``kthena-conformance`` runs may depend on it."""
    return Path(__file__).resolve().parents[2]
