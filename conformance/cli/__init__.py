"""``kthena-conformance``: the command line of the harness.

``run`` runs the suite; ``cluster up|down|status|kubeconfig|sweep`` manage clusters of any
provider; ``binaries build|path`` manage the control-plane binary cache. Every failure a user can
act on is printed as one message and one hint, with exit code 2 for bad input; nothing prints a
stack trace unless ``KTHENA_DEBUG=1`` asks for it (:mod:`.entry`).

One module per command group (:mod:`.cluster`, :mod:`.binaries`, :mod:`.run_command`, ...), each
registering its commands on the root group of :mod:`.base`; importing this package registers them all.
"""

from __future__ import annotations

from . import (
    binaries,
    capabilities,
    catalog,
    cluster,
    coverage,
    entry,
    install,
    report,
    run_command,
    support,
    sweep,
    webhook,
)
from .base import main
from .cluster import device_pools
from .entry import invoke

__all__ = ["device_pools", "invoke", "main", "run"]

# the command modules register their commands on ``main`` when imported
_COMMAND_MODULES = (binaries, capabilities, catalog, cluster, coverage, install, report, run_command, support, sweep,
                    webhook)  # fmt: skip


def run() -> None:  # pragma: no cover - the console script
    entry.run()
