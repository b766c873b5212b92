"""``kthena-conformance``: the command line of the harness.

``cluster up|down|status|kubeconfig|sweep`` manage clusters of any provider; ``binaries build|path``
manage the control-plane binary cache. Every failure a user can act on is printed as one message
and one hint, with exit code 1; nothing prints a stack trace (``KTHENA_DEBUG=1`` shows it).

One module per command group (:mod:`.cluster`, :mod:`.binaries`, :mod:`.run_command`, ...), each
registering its commands on the root group of :mod:`.base`; importing this package registers them all.
"""

from __future__ import annotations

import os
import sys

import click

from . import (
    binaries,
    capabilities,
    catalog,
    cluster,
    coverage,
    install,
    report,
    run_command,
    support,
    sweep,
    webhook,
)
from .base import main
from .cluster import device_pools

__all__ = ["device_pools", "main", "run"]

# the command modules register their commands on ``main`` when imported
_COMMAND_MODULES = (binaries, capabilities, catalog, cluster, coverage, install, report, run_command, support, sweep,
                    webhook)  # fmt: skip


def run() -> None:  # pragma: no cover - console entry with debug switch
    from ..run.signals import terminate_like_interrupt

    terminate_like_interrupt()
    if os.environ.get("KTHENA_DEBUG") == "1":
        main()
    else:
        try:
            main()
        except KeyboardInterrupt:
            click.echo("interrupted", err=True)
            sys.exit(130)
