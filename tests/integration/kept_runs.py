"""``kthena-conformance run`` on a kept embedded cluster, for the tests that run the suite several
times (the control run, self-validation, sharding): each run reuses the cluster and restarts only
the implementation; the cluster still dies with this process, and ``kept_cluster`` downs it at
the end of the module (or the xdist worker's session). Also the waits the control run and the
self-validation variants share (:data:`WAIT_OVERRIDES`)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from conformance.cluster.local.provider import LocalProvider
from conformance.framework.timeouts import WAITS
from conformance.runner import RunOptions, run

# The waits of both the control run and every variant (``--timeout name=seconds``): a behaviour
# that never happens fails at its deadline, so these bound what a caught variant costs. Every wait
# is at most 20 s (twice the slowest whole behaviour of the control run on two loaded cores, see
# reports/suite-duration.json), except the ones that bound a duration the tests themselves set:
# progress-deadline (the tests' progressDeadlineSeconds is 60 s) and steady-state (how long a
# "must not change" observation lasts: shortening it would only make faults harder to catch), and
# recovery: on real nodes a recreated Role starts real containers, and with every profile running
# beside it (Autoscaling's Prometheus and 5 s loops included) that took over 20 s once in CI
# (2026-12-05, core/recovery/role-recreate-other-roles-untouched in the control run).
FAST_WAIT = 20.0
KEPT_WAITS = {"progress-deadline": 90.0, "steady-state": WAITS["steady-state"].seconds, "recovery": 60.0}
WAIT_OVERRIDES = [
    f"{name}={KEPT_WAITS.get(name, min(wait.seconds, FAST_WAIT)):g}" for name, wait in sorted(WAITS.items())
]


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
