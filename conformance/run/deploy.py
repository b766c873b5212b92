"""Deploying the reference controller the way the harness runs it.

Manifests, a least-privilege token, the admission webhook on loopback (embedded cluster) and the
``kthena-ref run`` process. Its own module so the run's orchestration does not carry the details
of one implementation; an external implementation is deployed by its vendor, not here.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path
from typing import Any

from ..cluster.errors import HarnessError
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


def apply_manifests(info: ClusterInfo, paths: list[Path], progress: Any) -> None:
    """Create every object of the YAML files ``paths`` (an implementation's CRDs, RBAC, webhook
    configuration, ...), in order; one that exists already is kept as it is (said in the
    progress). Waits until every CRD among them is Established. A file that cannot be read or an
    object the API server refuses is a :class:`HarnessError` naming the file and the object."""
    import yaml
    from kubernetes import client, utils
    from kubernetes.client.exceptions import ApiException

    from ..cluster.kube import api_client
    from ..framework.waits import wait_for

    api = api_client(info.kubeconfig, info.context)
    crds: list[str] = []
    for path in paths:
        try:
            docs = [d for d in yaml.safe_load_all(path.read_text()) if d]
        except (OSError, yaml.YAMLError) as exc:
            raise HarnessError(f"--implementation-manifest {path}: cannot read it: {exc}", "give a YAML file") from None
        for i, doc in enumerate(docs):
            what = f"{path}: document {i + 1} ({doc.get('kind', '?')} {doc.get('metadata', {}).get('name', '?')})"
            try:
                utils.create_from_dict(api, doc)  # type: ignore[no-untyped-call]
            except utils.FailToCreateError as exc:
                failures = [e for e in exc.api_exceptions if not (isinstance(e, ApiException) and e.status == 409)]
                if failures:
                    raise HarnessError(f"{what}: refused: {failures[0]}", "fix the manifest") from None
                progress(f"  {what} exists already: kept as it is")
            except (ValueError, AttributeError, KeyError) as exc:  # no apiVersion/kind, an unknown kind
                raise HarnessError(f"{what}: cannot be created: {exc}", "give a complete Kubernetes object") from None
            if doc.get("kind") == "CustomResourceDefinition":
                crds.append(doc["metadata"]["name"])
    ext: Any = client.ApiextensionsV1Api(api)

    def established(name: str) -> bool:
        conditions = ext.read_custom_resource_definition(name).status.conditions or []
        return any(c.type == "Established" and c.status == "True" for c in conditions)

    for name in crds:
        wait_for(f"CRD {name} Established", functools.partial(established, name), timeout=30)


def deploy_command(info: ClusterInfo, launch: Any, manifests: list[Path], report_dir: Path, progress: Any) -> Any:
    """The implementation as a command: its manifests applied, then started with the cluster's
    admin kubeconfig and its output in ``REPORT_DIR/implementation.log``, ready (:mod:`.launch`)."""
    from .launch import RunningCommand

    report_dir.mkdir(parents=True, exist_ok=True)
    if manifests:
        progress(f"applying {len(manifests)} implementation manifest file(s)")
        apply_manifests(info, manifests, progress)
    log = report_dir / "implementation.log"
    log.unlink(missing_ok=True)
    running = RunningCommand(launch, info.kubeconfig, log, owner_pid=os.getpid())
    progress(f"starting the implementation: {launch.describe()} (output: {log})")
    running.start()
    return running
