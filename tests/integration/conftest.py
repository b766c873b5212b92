"""Fixtures the integration tests share beyond the cluster ones (tests/conftest.py).

``isolated_cache``: a private cache root for clusters of a test's own (see its docstring).

Collection order (:data:`FIRST`): the own-controller pass hands tests out one at a time in this
order (``--maxschedchunk 1``, ci/test_passes.py; the first two per worker at once), so the long
single tests start first, each on a worker of its own, and overlap with the self-validation
variants (many short runs), which come after every other test instead of before the ones whose
files sort after theirs. The installed wheel's two tests come first, as the first pair one worker
gets, so its module's virtualenv is built once.

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

# Files whose tests start first, longest (or first needed) first; then every other test in collection
# order, then the self-validation variants.
FIRST = (
    "test_installed_wheel.py",  # two tests sharing a module venv (pip: ~100 s), then a run waiting its real-node turn
    "test_conformance_suite.py",  # the control run: every profile
    "test_docs_recipe.py",  # the Core profile on a cluster of its own
    "test_suite_interrupts.py",
    "test_sharding.py",
)


def _rank(item: pytest.Item) -> tuple[int, int]:
    if item.get_closest_marker("self_validation") is not None:
        return (2, 0)
    name = item.path.name
    return (0, FIRST.index(name)) if name in FIRST else (1, 0)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The order above (a stable sort: every worker still collects one order)."""
    items.sort(key=_rank)


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
