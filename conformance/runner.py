"""Compatibility module: the run's public names, from where they used to live.

``kthena-conformance run`` is implemented in :mod:`conformance.run` (options, orchestration,
preflight, accelerators, deploy); this module re-exports the public names so existing importers
(``from conformance.runner import RunOptions, run``) keep working.
"""

from __future__ import annotations

from .run.accelerators import ACCELERATOR_LABEL, FAKE_POOL_NODES, device_pools, fake_capability_files
from .run.deploy import deploy_reference
from .run.options import (
    EXIT_CLUSTER,
    EXIT_INTERRUPTED,
    EXIT_NONCONFORMANT,
    EXIT_OK,
    EXIT_USAGE,
    PACKAGE_DIR,
    REFERENCE_SUPPORT,
    RunOptions,
)
from .run.orchestration import RunResult, options_wait, run
from .run.preflight import MODELSERVING_CRD, Check, preflight, webhook_check

__all__ = [
    "ACCELERATOR_LABEL",
    "EXIT_CLUSTER",
    "EXIT_INTERRUPTED",
    "EXIT_NONCONFORMANT",
    "EXIT_OK",
    "EXIT_USAGE",
    "FAKE_POOL_NODES",
    "MODELSERVING_CRD",
    "PACKAGE_DIR",
    "REFERENCE_SUPPORT",
    "Check",
    "RunOptions",
    "RunResult",
    "deploy_reference",
    "device_pools",
    "fake_capability_files",
    "options_wait",
    "preflight",
    "run",
    "webhook_check",
]
