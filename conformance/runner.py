"""``kthena-conformance run``: provision a cluster, check it, write the report.

Today this is the harness half of the main job: it brings up the chosen cluster, deploys the
implementation under test (the reference controller, with a least-privilege token and its
webhook; or ``--implementation external`` for one already running), runs the preflight checks
(Nodes Ready, the ModelServing CRD served at v1alpha1, the admission webhook answering), and
always writes a schema-versioned report saying exactly what ran. The ModelServing profiles
(Core, Plugins, HeadlessServiceDNS, ...) arrive with later issues; until then the verdict is
``not-run`` and says why, never ``success``.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from . import __version__
from .cluster.errors import HarnessError
from .cluster.provider import ClusterInfo, Progress, quiet
from .cluster.registry import get_provider
from .cluster.spec import ClusterSpec

REPORT_SCHEMA = "conformance.kthena.io/report/v1alpha1"
MODELSERVING_CRD = "modelservings.workload.serving.volcano.sh"


@dataclass
class Check:
    name: str
    ok: bool
    message: str

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "result": "ok" if self.ok else "missing", "message": self.message}


@dataclass
class RunResult:
    report: dict[str, Any]
    paths: list[Path] = field(default_factory=list)


def webhook_check(info: ClusterInfo) -> Check:
    """Does an admission webhook answer for ModelServings? (see :mod:`.framework.probes`)"""
    from .cluster.kube import api_client
    from .framework.probes import webhook_answer

    status, _ = webhook_answer(api_client(info.kubeconfig, info.context))
    if status in (400, 403, 422):
        return Check("admission-webhook", True, "a spec without the required workerTemplate was rejected")
    if status is not None:
        return Check("admission-webhook", False, f"the probe failed with HTTP {status}")
    return Check(
        "admission-webhook", False, "a spec missing its workerTemplate was accepted: no validating webhook answers"
    )


def preflight(info: ClusterInfo) -> list[Check]:
    """What the cluster must provide before any ModelServing test can mean anything."""
    from kubernetes import client

    from .cluster.kube import api_client

    api = api_client(info.kubeconfig, info.context)
    checks = []
    nodes: list[Any] = client.CoreV1Api(api).list_node().items
    ready = [
        n.metadata.name
        for n in nodes
        if any(c.type == "Ready" and c.status == "True" for c in (n.status.conditions or []))
    ]
    checks.append(
        Check("nodes-ready", bool(ready) and len(ready) == len(nodes), f"{len(ready)}/{len(nodes)} nodes Ready")
    )
    items: list[Any] = client.ApiextensionsV1Api(api).list_custom_resource_definition().items
    crds = {c.metadata.name: c for c in items}
    crd = crds.get(MODELSERVING_CRD)
    served = [v.name for v in crd.spec.versions if v.served] if crd else []
    checks.append(
        Check(
            "crd-modelserving-v1alpha1",
            "v1alpha1" in served,
            f"CRD {MODELSERVING_CRD} serves {served}" if crd else f"CRD {MODELSERVING_CRD} is not installed",
        )
    )
    return checks


def run(
    *,
    provider_name: str,
    report_dir: Path,
    kubeconfig: str | None = None,
    context: str | None = None,
    keep_cluster: bool = False,
    implementation: str = "reference",
    progress: Progress = quiet,
) -> RunResult:
    provider = get_provider(provider_name, kubeconfig=kubeconfig, context=context)
    spec = ClusterSpec(name=f"conformance-{os.getpid()}")
    started = dt.datetime.now(dt.UTC)
    report: dict[str, Any] = {
        "schemaVersion": REPORT_SCHEMA,
        "suite": {"name": "kthena-conformance", "version": __version__},
        "startedAt": started.isoformat(timespec="seconds"),
        "implementation": {"name": implementation},
        "profiles": [],
        "verdict": "not-run",
        "notes": [
            "The ModelServing profiles (Core, Plugins, HeadlessServiceDNS, Rollout, InPlaceUpdate, Accelerators, "
            "EvictionBudget, Autoscaling) are not implemented yet; this run provisions the cluster, deploys the "
            "implementation and runs the preflight checks only.",
        ],
    }
    info: ClusterInfo | None = None
    controller: Any = None
    secrets = tempfile.TemporaryDirectory(prefix="kthena-conformance-secrets-")
    try:
        owner = None if keep_cluster else os.getpid()
        info = provider.up(spec, progress=progress, owner_pid=owner)
        report["cluster"] = info.as_report()
        if implementation == "reference":
            progress("deploying the reference controller (least-privilege token, webhook)")
            controller = _deploy_reference(info, Path(secrets.name), report_dir)
            report["implementation"] = {"name": "kthena-ref", "version": __version__, "deployedBy": "harness",
                                        "log": str(controller.log)}  # fmt: skip
        progress("running preflight checks")
        checks = preflight(info)
        if info.provider == "local" or implementation == "external":
            checks.append(webhook_check(info))
        report["preflight"] = [c.as_dict() for c in checks]
    except HarnessError as exc:
        report["verdict"] = "error"
        report["error"] = {"message": exc.message, "hint": exc.hint}
    finally:
        if controller is not None:
            controller.stop()
        secrets.cleanup()
        if info is not None and not keep_cluster:
            provider.down(info.name)
        report["finishedAt"] = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
        paths = write_report(report, report_dir)
    return RunResult(report, paths)


def _deploy_reference(info: ClusterInfo, secrets: Path, report_dir: Path) -> Any:
    """The reference controller as the harness runs it: manifests, token, webhook on loopback.
    The token and keys go to ``secrets`` (a private temporary directory), never to the report."""
    from .implementations import reference

    report_dir.mkdir(parents=True, exist_ok=True)
    reference.install(info)
    kubeconfig = reference.token_kubeconfig(info, secrets)
    webhook = reference.webhook_certificates(secrets) if info.provider == "local" else None
    log = report_dir / "kthena-ref.log"
    log.unlink(missing_ok=True)
    controller = reference.start(kubeconfig, log, owner_pid=os.getpid(), extra=webhook.flags() if webhook else ())
    if webhook is not None:
        reference.register_webhook(info, webhook)
    return controller


def write_report(report: dict[str, Any], report_dir: Path) -> list[Path]:
    report_dir.mkdir(parents=True, exist_ok=True)
    yaml_path = report_dir / "conformance-report.yaml"
    json_path = report_dir / "conformance-report.json"
    yaml_path.write_text(yaml.safe_dump(report, sort_keys=False))
    json_path.write_text(json.dumps(report, indent=2) + "\n")
    return [yaml_path, json_path]
