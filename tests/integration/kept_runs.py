"""``kthena-conformance run`` on a kept embedded cluster, for the tests that run the suite several
times (the control run, self-validation, sharding): each run reuses the cluster and restarts only
the implementation; the cluster still dies with this process, and ``kept_cluster`` downs it at
the end of the module (or the xdist worker's session)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from conformance.cluster.local.provider import LocalProvider
from conformance.runner import RunOptions, run


def kept_run(report_dir: Path, cluster: str, **options: Any) -> dict[str, Any]:
    """One run on ``cluster`` (made on first use, kept afterwards); its report data."""
    result = run(
        RunOptions(
            report_dir=report_dir, keep_cluster=True, cluster_name=cluster, cluster_owner_pid=os.getpid(), **options
        )
    )
    return result.report


def kept_cluster(name: str) -> Iterator[str]:
    """A fixture body: the name of a kept cluster, taken down afterwards."""
    yield name
    LocalProvider().down(name)
