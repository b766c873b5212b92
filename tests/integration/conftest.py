"""Fixtures the integration tests share beyond the cluster ones (tests/conftest.py).

``isolated_cache``: a private cache root for clusters of a test's own (see its docstring).

Collection order: the self-validation variants (many short runs) come after every other test, so
that under xdist the long single tests of the own-controller pass (the control run, the docs
recipe, interrupts, sharding, reliability) start first and overlap with the variants instead of
being the pass's tail.

``alone_on_the_shared_cluster``: tests that start reference controllers of their own on the run's
shared cluster (reliability, leader election) take turns, wherever xdist runs them: every such
controller watches all namespaces, so two at once would serve each other's ModelServings. A file
lock in the directory every worker shares, not an xdist group: ``--dist loadgroup`` silently
stops grouping on pytest 9.2 (pytest-dev/pytest-xdist#1386).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from filelock import FileLock

from conformance.cluster.local.provider import LocalProvider
from conformance.cluster.testing import shared_dir


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Self-validation variants last (a stable sort: every worker still collects one order)."""
    items.sort(key=lambda item: item.get_closest_marker("self_validation") is not None)


@pytest.fixture
def alone_on_the_shared_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    with FileLock(str(shared_dir(tmp_path_factory) / "shared-cluster-controllers.lock")):
        yield


def isolated_cache(tmp_path: Path, bin_dir: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A private cache root (runs and all) under ``tmp_path`` that still uses the already-built
    binaries in ``bin_dir``; yields where its clusters' run directories go and sweeps them after."""
    monkeypatch.setenv("KTHENA_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("KTHENA_BIN_DIR", str(bin_dir))
    yield tmp_path / "cache" / "clusters"
    LocalProvider().sweep()
