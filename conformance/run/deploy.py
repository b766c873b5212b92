"""Deploying the reference controller the way the harness runs it.

Manifests, a least-privilege token, the admission webhook on loopback (embedded cluster) and the
``kthena-ref run`` process. Its own module so the run's orchestration does not carry the details
of one implementation; an external implementation is deployed by its vendor, not here.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ..cluster.errors import HarnessError
from ..cluster.provider import ClusterInfo
from .launch import LoopbackWebhook, Manifest

# Starts of the reference whose webhook port was taken meanwhile are tried again on a new port.
PORT_ATTEMPTS = 3


def deploy_reference(info: ClusterInfo, secrets_dir: Path, report_dir: Path, faults: list[str]) -> Any:
    """The reference controller as the harness runs it: manifests, token, webhook on loopback.
    The token and keys go to ``secrets_dir`` (a private temporary directory), never to the report."""
    from ..implementations import reference

    report_dir.mkdir(parents=True, exist_ok=True)
    reference.install(info, faults=tuple(faults))  # faults of the CRD schema are in the CRD it installs
    kubeconfig = reference.token_kubeconfig(info, secrets_dir)
    log = report_dir / "kthena-ref.log"
    log.unlink(missing_ok=True)
    for attempt in range(PORT_ATTEMPTS):  # its port is picked free, then bound: another process may take it
        webhook = reference.webhook_certificates(secrets_dir) if info.provider == "local" else None
        extra = [*(webhook.flags() if webhook else ()), *(f"--fault={f}" for f in faults)]
        try:
            controller = reference.start(kubeconfig, log, owner_pid=os.getpid(), extra=tuple(extra))
            break
        except HarnessError as exc:
            if webhook is None or attempt == PORT_ATTEMPTS - 1 or not reference.port_taken(exc):
                raise
    if webhook is not None:
        reference.register_webhook(info, webhook)
    return controller


def apply_manifests(info: ClusterInfo, manifests: list[Manifest], installed: set[str], progress: Any) -> None:
    """Create every object of ``manifests`` (an implementation's CRDs, RBAC, webhook
    configuration, ...), in order, except the CRDs named in ``installed`` (the cluster created them
    at start); one that exists already is kept as it is (said in the progress). Waits until every
    CRD among them is Established. An object the API server refuses is a :class:`HarnessError`
    naming its file and document."""
    from kubernetes import utils
    from kubernetes.client.exceptions import ApiException

    from ..cluster.kube import api_client
    from ..implementations import reference

    api = api_client(info.kubeconfig, info.context)
    crds: list[str] = []
    for where, doc in manifests:
        name = doc["metadata"]["name"]
        if doc["kind"] == "CustomResourceDefinition":
            crds.append(name)
            if name in installed:
                continue
        try:
            utils.create_from_dict(api, doc)  # type: ignore[no-untyped-call]
        except utils.FailToCreateError as exc:
            failures = [e for e in exc.api_exceptions if not (isinstance(e, ApiException) and e.status == 409)]
            if failures:
                raise HarnessError(f"{where}: refused: {failures[0]}", "fix the manifest") from None
            progress(f"  {where} exists already: kept as it is")
        except (ValueError, AttributeError, KeyError) as exc:  # an unknown kind, a malformed object
            raise HarnessError(f"{where}: cannot be created: {exc}", "give a complete Kubernetes object") from None
    reference.wait_established(api, crds)


def loopback_webhook(directory: Path) -> LoopbackWebhook:
    """A CA, a serving certificate for 127.0.0.1 and localhost, and a free port, in ``directory``
    (the run's private secrets directory, removed afterwards), as the reference's webhook gets."""
    from ..implementations import reference

    made = reference.webhook_certificates(directory, "implementation-webhook")
    ca_file = directory / "implementation-webhook-ca.crt"
    ca_file.write_bytes(made.ca_pem)
    return LoopbackWebhook(made.port, made.cert, made.key, ca_file, made.ca_pem)


def deploy_command(
    info: ClusterInfo, launch: Any, installed: set[str], secrets_dir: Path, report_dir: Path, progress: Any
) -> Any:
    """The implementation as a command: its manifests applied (but the CRDs in ``installed``),
    then started with the cluster's admin kubeconfig and its output in
    ``REPORT_DIR/implementation.log``, ready (:mod:`.launch`); then its webhook configurations.
    With ``launch.webhook``, the placeholders ({webhook_port}, ...) are filled in everywhere."""
    from .launch import group, is_webhook_configuration, substitute

    report_dir.mkdir(parents=True, exist_ok=True)
    webhook = loopback_webhook(secrets_dir) if launch.webhook else None
    values = webhook.values() if webhook else {}
    manifests = [(where, substitute(doc, values)) for where, doc in launch.manifests]
    first = [m for m in manifests if not is_webhook_configuration(m[1])]
    last = [m for m in manifests if is_webhook_configuration(m[1])]
    if first:
        progress(f"applying {len(first)} object(s) of the implementation's manifests")
        apply_manifests(info, first, installed, progress)
    log = report_dir / "implementation.log"
    log.unlink(missing_ok=True)
    running = group(launch, info.kubeconfig, log, owner_pid=os.getpid(), webhook=webhook)
    where = f", its webhook on https://127.0.0.1:{webhook.port}" if webhook else ""
    also = f" and {len(launch.also)} more command(s) (launch.also)" if launch.also else ""
    progress(f"starting the implementation: {launch.describe()}{also} (output: {log}{where})")
    running.start()
    if last:  # only now: with failurePolicy Fail, a configuration without its server refuses everything
        progress(f"registering {len(last)} webhook configuration(s) of the implementation")
        apply_manifests(info, last, installed, progress)
    return running
