"""The one place a kubeconfig becomes an official-client ``ApiClient``.

Imported lazily by its callers: the ``kubernetes`` package takes 1-2.5 s to import here, and
``cluster up`` must not pay that.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any


def api_client(kubeconfig: Path, context: str | None = None) -> Any:
    """An ``ApiClient`` for ``kubeconfig`` (and ``context``; the current one when None)."""
    from kubernetes import config

    return config.new_client_from_config(config_file=str(kubeconfig), context=context)  # type: ignore[no-untyped-call]
