"""pytest fixture: the reference controller running against the test cluster, once per run.

The first test that needs it installs the manifests and starts ``kthena-ref run`` with a
least-privilege token (under a file lock shared by xdist workers); the process watches the test
run's controller process and stops when the run ends, however it ends.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from typing import Any

import pytest
from filelock import FileLock

from ..cluster.local.processes import pid_alive
from ..cluster.provider import ClusterInfo
from ..cluster.testing import OWNER_ENV, shared_dir
from . import reference


@pytest.fixture(scope="session")
def reference_controller(cluster: ClusterInfo, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """``{"pid": ..., "log": ...}`` of the running reference controller."""
    shared = shared_dir(tmp_path_factory)
    record = shared / "reference-controller.json"
    with FileLock(str(shared / "reference-controller.lock")):
        if record.exists():
            known = json.loads(record.read_text())
            if pid_alive(known["pid"]):
                yield known
                return
        reference.install(cluster)
        kubeconfig = reference.token_kubeconfig(cluster, shared)
        owner = int(os.environ.get(OWNER_ENV, os.getpid()))
        webhook = reference.webhook_certificates(shared) if cluster.provider == "local" else None
        extra = webhook.flags() if webhook else ()
        running = reference.start(kubeconfig, shared / "kthena-ref.log", owner_pid=owner, extra=extra)
        if webhook is not None:
            reference.register_webhook(cluster, webhook)
        known = {"pid": running.pid, "log": str(running.log), "webhook": webhook is not None}
        record.write_text(json.dumps(known))
    yield known
