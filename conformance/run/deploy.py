"""Deploying the reference controller the way the harness runs it.

Manifests, a least-privilege token, the admission webhook on loopback (embedded cluster) and the
``kthena-ref run`` process. Its own module so the run's orchestration does not carry the details
of one implementation; an external implementation is deployed by its vendor, not here.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ..cluster.provider import ClusterInfo


def deploy_reference(info: ClusterInfo, secrets_dir: Path, report_dir: Path, faults: list[str]) -> Any:
    """The reference controller as the harness runs it: manifests, token, webhook on loopback.
    The token and keys go to ``secrets_dir`` (a private temporary directory), never to the report."""
    from ..implementations import reference

    report_dir.mkdir(parents=True, exist_ok=True)
    reference.install(info, faults=tuple(faults))  # faults of the CRD schema are in the CRD it installs
    kubeconfig = reference.token_kubeconfig(info, secrets_dir)
    webhook = reference.webhook_certificates(secrets_dir) if info.provider == "local" else None
    log = report_dir / "kthena-ref.log"
    log.unlink(missing_ok=True)
    extra = [*(webhook.flags() if webhook else ()), *(f"--fault={f}" for f in faults)]
    controller = reference.start(kubeconfig, log, owner_pid=os.getpid(), extra=tuple(extra))
    if webhook is not None:
        reference.register_webhook(info, webhook)
    return controller
