"""Start the reference controller against a cluster, as a process, with least privilege.

The suite judges implementations through the cluster only; this module is how the harness puts
the reference implementation there. It installs what ``kthena-ref manifests`` prints (the
ModelServing and AutoscalingPolicy CRDs, the controller's ClusterRole, optionally a minimal
PodGroup CRD), creates a ServiceAccount bound to
that ClusterRole alone, writes a kubeconfig holding a token for it, and runs ``kthena-ref run``
with it: the controller never runs as cluster admin.

It talks to ``kthena-ref`` only through its command line, never its Python internals.
"""

from __future__ import annotations

import copy
import functools
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from .. import yamlio
from ..cluster.errors import HarnessError
from ..cluster.kube import api_client
from ..cluster.provider import ClusterInfo
from ..framework.probes import webhook_answer
from ..framework.waits import wait_for

NAMESPACE = "kthena-system"
SERVICE_ACCOUNT = "kthena-ref-controller"
CRDS = ("crd", "autoscaling-crd", "modelbooster-crd")  # `kthena-ref manifests` names: ModelServing, ...


def _manifests(*which: str, faults: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    """``kthena-ref manifests WHICH...`` as objects (fresh copies: callers may change them).
    ``faults`` (self-validation only) are the reference faults the CRD schema carries."""
    return copy.deepcopy(_rendered_manifests(which, faults))


@functools.cache
def _rendered_manifests(which: tuple[str, ...], faults: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    """Rendered once per process: a Python start-up per call cost every run (and every
    self-validation variant, which deploys the reference again) a second or two."""
    out = subprocess.run(
        [sys.executable, "-m", "kthena_ref.cli", "manifests", *which, *(f"--fault={f}" for f in faults)],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    if out.returncode != 0:
        raise HarnessError(f"`kthena-ref manifests` failed: {out.stderr.strip()[-500:]}", "check the installation")
    return [d for d in yamlio.load_all(out.stdout) if d]


def crds(*, podgroup_crd: bool = True) -> list[dict[str, Any]]:
    """The CRDs :func:`install` creates, for a cluster spec that installs them while it starts
    (``ClusterSpec.crds``: the embedded cluster's garbage collector then knows them at once)."""
    return _manifests(*CRDS, *(["podgroup-crd"] if podgroup_crd else []))


def podgroup_crd() -> list[dict[str, Any]]:
    """The minimal Volcano PodGroup CRD the reference ships (the GangScheduling prerequisite)."""
    return _manifests("podgroup-crd")


def apply(api: Any, doc: dict[str, Any]) -> None:
    """Create ``doc`` or replace it, for the cluster-scoped kinds the harness installs.

    The typed APIs, not the dynamic client: the latter caches discovery in /tmp/osrcp-*.json files
    that nothing removes, and the harness leaves no temporary files behind.
    """
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    handles: dict[str, tuple[Any, str]] = {
        "CustomResourceDefinition": (client.ApiextensionsV1Api(api), "custom_resource_definition"),
        "ClusterRole": (client.RbacAuthorizationV1Api(api), "cluster_role"),
        "ClusterRoleBinding": (client.RbacAuthorizationV1Api(api), "cluster_role_binding"),
        "ValidatingWebhookConfiguration": (client.AdmissionregistrationV1Api(api), "validating_webhook_configuration"),
    }
    if doc["kind"] not in handles:
        raise HarnessError(f"the harness cannot apply a {doc['kind']}", "this is a bug in the manifests it installs")
    api_object, kind = handles[doc["kind"]]
    name = doc["metadata"]["name"]
    try:
        getattr(api_object, f"create_{kind}")(doc)
    except ApiException as exc:
        if exc.status != 409:
            raise

        def replace() -> object:
            current = getattr(api_object, f"read_{kind}")(name)
            doc["metadata"]["resourceVersion"] = current.metadata.resource_version
            return getattr(api_object, f"replace_{kind}")(name, doc)

        wait_for(f"{doc['kind']} {name} replaced", replace, timeout=30)


def install(info: ClusterInfo, *, podgroup_crd: bool = True, faults: tuple[str, ...] = ()) -> None:
    """The CRDs and the ClusterRole, Established and ready to use. ``faults`` (self-validation
    only): reference faults that live in the CRD schema (``no-schema-defaults``, ...) reach it."""

    api = api_client(info.kubeconfig, info.context)
    docs = _manifests(*CRDS, "rbac", *(["podgroup-crd"] if podgroup_crd else []), faults=faults)
    for doc in docs:
        apply(api, doc)
    wait_established(api, [d["metadata"]["name"] for d in docs if d["kind"] == "CustomResourceDefinition"])


def wait_established(api: Any, names: list[str], timeout: float = 30.0) -> None:
    """Wait until every CRD of ``names`` is Established (served)."""
    from kubernetes import client

    ext: Any = client.ApiextensionsV1Api(api)

    def established(name: str) -> bool:
        status = ext.read_custom_resource_definition(name).status
        return any(c.type == "Established" and c.status == "True" for c in (status.conditions or []))

    for name in names:
        wait_for(f"CRD {name} Established", functools.partial(established, name), timeout=timeout)


def token_kubeconfig(info: ClusterInfo, directory: Path) -> Path:
    """A kubeconfig for the controller's ServiceAccount (bound to its ClusterRole only)."""
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    api = api_client(info.kubeconfig, info.context)
    core: Any = client.CoreV1Api(api)
    rbac: Any = client.RbacAuthorizationV1Api(api)
    steps: tuple[Callable[[], object], ...] = (
        lambda: core.create_namespace({"metadata": {"name": NAMESPACE}}),
        lambda: wait_for("ServiceAccount default", lambda: core.read_namespaced_service_account("default", NAMESPACE)),
        lambda: core.create_namespaced_service_account(NAMESPACE, {"metadata": {"name": SERVICE_ACCOUNT}}),
        lambda: rbac.create_cluster_role_binding(
            {
                "metadata": {"name": SERVICE_ACCOUNT},
                "roleRef": {
                    "apiGroup": "rbac.authorization.k8s.io",
                    "kind": "ClusterRole",
                    "name": "kthena-ref-controller",
                },
                "subjects": [{"kind": "ServiceAccount", "name": SERVICE_ACCOUNT, "namespace": NAMESPACE}],
            }
        ),
    )
    for create in steps:
        try:
            create()
        except ApiException as exc:
            if exc.status != 409:
                raise
    token = core.create_namespaced_service_account_token(
        SERVICE_ACCOUNT, NAMESPACE, {"spec": {"audiences": [], "expirationSeconds": 24 * 3600}}
    ).status.token
    admin = yaml.safe_load(info.kubeconfig.read_text())
    cluster = admin["clusters"][0]["cluster"]
    path = directory / "kthena-ref.kubeconfig"
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": cluster}],
                "users": [{"name": SERVICE_ACCOUNT, "user": {"token": token}}],
                "contexts": [{"name": "c", "context": {"cluster": "c", "user": SERVICE_ACCOUNT}}],
                "current-context": "c",
            }
        )
    )
    path.chmod(0o600)
    return path


WEBHOOK_NAME = "kthena-ref-validating"
WEBHOOK_PATH = "/validate-modelserving"
AUTOSCALING_PATH = "/validate-autoscalingpolicy"
MODELBOOSTER_PATH = "/validate-modelbooster"
EVICTION_PATH = "/validate-pod-eviction"


@dataclass(frozen=True)
class Webhook:
    """Where the controller serves admission and the CA the API server must trust for it."""

    port: int
    cert: Path
    key: Path
    ca_pem: bytes

    def flags(self) -> tuple[str, ...]:
        return ("--webhook-port", str(self.port), "--webhook-host", "127.0.0.1",
                "--webhook-cert", str(self.cert), "--webhook-key", str(self.key))  # fmt: skip


def webhook_certificates(directory: Path, name: str = "kthena-ref-webhook") -> Webhook:
    """A CA and a serving certificate for 127.0.0.1, and a free port (the embedded cluster's API
    server runs on this machine and calls the webhook on loopback); ``name`` names the PKI
    directory and the certificates' common names."""
    from ..cluster.local.processes import free_ports
    from ..cluster.pki import CertificateAuthority

    ca = CertificateAuthority(directory / f"{name}-pki", common_name=f"{name}-ca")
    pair = ca.issue("webhook", common_name=name, hosts=("127.0.0.1", "localhost"), server=True)
    return Webhook(free_ports(1)[0], pair.cert, pair.key, ca.cert_pem)


def webhook_configuration(base_url: str, ca_bundle: str) -> dict[str, Any]:
    """The ValidatingWebhookConfiguration of the reference's webhook at ``base_url`` (scheme, host
    and port), trusting ``ca_bundle`` (base64 PEM). Pure."""
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": WEBHOOK_NAME},
        "webhooks": [
            {
                "name": "validate.modelservings.workload.serving.volcano.sh",
                "clientConfig": {
                    "url": f"{base_url}{WEBHOOK_PATH}",
                    "caBundle": ca_bundle,
                },
                "rules": [
                    {
                        "apiGroups": ["workload.serving.volcano.sh"],
                        "apiVersions": ["v1alpha1"],
                        "operations": ["CREATE", "UPDATE"],
                        "resources": ["modelservings"],
                    }
                ],
                "admissionReviewVersions": ["v1"],
                "sideEffects": "None",
                "failurePolicy": "Fail",
                "timeoutSeconds": 10,
            },
            {  # AutoscalingPolicy rules CEL cannot say (kthena_ref/admission/autoscaling_rules.py)
                "name": "validate.autoscalingpolicies.workload.serving.volcano.sh",
                "clientConfig": {
                    "url": f"{base_url}{AUTOSCALING_PATH}",
                    "caBundle": ca_bundle,
                },
                "rules": [
                    {
                        "apiGroups": ["workload.serving.volcano.sh"],
                        "apiVersions": ["v1alpha1"],
                        "operations": ["CREATE", "UPDATE"],
                        "resources": ["autoscalingpolicies"],
                    }
                ],
                "admissionReviewVersions": ["v1"],
                "sideEffects": "None",
                "failurePolicy": "Fail",
                "timeoutSeconds": 10,
            },
            {  # ModelBooster rules CEL cannot say (kthena_ref/admission/modelbooster_rules.py)
                "name": "validate.modelboosters.workload.serving.volcano.sh",
                "clientConfig": {
                    "url": f"{base_url}{MODELBOOSTER_PATH}",
                    "caBundle": ca_bundle,
                },
                "rules": [
                    {
                        "apiGroups": ["workload.serving.volcano.sh"],
                        "apiVersions": ["v1alpha1"],
                        "operations": ["CREATE", "UPDATE"],
                        "resources": ["modelboosters"],
                    }
                ],
                "admissionReviewVersions": ["v1"],
                "sideEffects": "None",
                "failurePolicy": "Fail",
                "timeoutSeconds": 10,
            },
            {  # the eviction budget (kthena_ref/deploy/controller.yaml says why Fail and NoneOnDryRun)
                "name": "eviction-budget.modelservings.workload.serving.volcano.sh",
                "clientConfig": {
                    "url": f"{base_url}{EVICTION_PATH}",
                    "caBundle": ca_bundle,
                },
                "rules": [
                    {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["pods/eviction"]}
                ],
                "namespaceSelector": {
                    "matchExpressions": [
                        {
                            "key": "kubernetes.io/metadata.name",
                            "operator": "NotIn",
                            "values": ["kube-system", NAMESPACE],
                        }
                    ]
                },
                "admissionReviewVersions": ["v1"],
                "sideEffects": "NoneOnDryRun",
                "failurePolicy": "Fail",
                "timeoutSeconds": 10,
            },
        ],
    }


def register_webhook(info: ClusterInfo, webhook: Webhook) -> None:
    """Point the API server at the webhook and wait until it answers for ModelServings."""
    import base64

    api = api_client(info.kubeconfig, info.context)
    body = webhook_configuration(f"https://127.0.0.1:{webhook.port}", base64.b64encode(webhook.ca_pem).decode())
    apply(api, body)

    def rejected() -> bool:
        status, answer = webhook_answer(api)
        return status is not None and "validation failed" in answer

    wait_for("the ModelServing webhook to answer", rejected, timeout=30)


def unregister_webhook(info: ClusterInfo) -> None:
    """Remove the reference's ValidatingWebhookConfiguration (gone already is fine): once its server
    stops, a configuration with failurePolicy Fail would refuse every ModelServing."""
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    api = api_client(info.kubeconfig, info.context)
    try:
        client.AdmissionregistrationV1Api(api).delete_validating_webhook_configuration(WEBHOOK_NAME)
    except ApiException as exc:
        if exc.status != 404:
            what = f"cannot remove ValidatingWebhookConfiguration {WEBHOOK_NAME}: HTTP {exc.status}"
            raise HarnessError(what) from None


@dataclass
class RunningController:
    process: subprocess.Popen[bytes]
    log: Path
    argv: tuple[str, ...] = ()
    restarts: int = 0

    @property
    def pid(self) -> int:
        return self.process.pid

    def stop(self, timeout: float = 10.0) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def kill(self) -> None:
        """SIGKILL, as a crash would."""
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()

    def restart(self) -> None:
        """Stop the process (SIGTERM, as a rollout would) and start it again with the same
        arguments, its log appended; returns once the new one has synced its caches."""
        self.stop()
        self.process = _synced(_spawn(self.argv, self.log), self.log, _log_size(self.log))
        self.restarts += 1


def start(
    kubeconfig: Path,
    log: Path,
    *,
    owner_pid: int | None = None,
    extra: tuple[str, ...] = (),
    wait_synced: bool = True,
) -> RunningController:
    """``kthena-ref run`` in its own session, logging to ``log``; stops with ``owner_pid`` if given.

    ``wait_synced=False`` returns at once: a controller with ``--leader-elect`` syncs its caches
    only once it holds the Lease, which a standby may never do."""
    argv = [sys.executable, "-m", "kthena_ref.cli", "run", "--kubeconfig", str(kubeconfig), *extra]
    if owner_pid is not None:
        argv += ["--owner-pid", str(owner_pid)]
    offset = _log_size(log)  # a restart appends: read only its own lines
    proc = _spawn(tuple(argv), log)
    if wait_synced:
        proc = _synced(proc, log, offset)
    return RunningController(proc, log, tuple(argv))


def _log_size(log: Path) -> int:
    return log.stat().st_size if log.exists() else 0


def _spawn(argv: tuple[str, ...], log: Path) -> subprocess.Popen[bytes]:
    with log.open("ab") as out:
        return subprocess.Popen(
            argv,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )


def _synced(proc: subprocess.Popen[bytes], log: Path, offset: int) -> subprocess.Popen[bytes]:
    """``proc`` once its log (after ``offset``) says its caches synced; killed and an error after 30 s."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise HarnessError(
                f"the reference controller exited with code {proc.returncode} at start; its last output:"
                f"\n      {_shown_tail(log, offset)}",
                f"see {log}",
            )
        if b"caches synced" in log.read_bytes()[offset:]:
            return proc
        time.sleep(0.05)
    proc.kill()
    proc.wait()
    raise HarnessError(
        "the reference controller did not sync its caches within 30s; its last output:"
        f"\n      {_shown_tail(log, offset)}",
        f"see {log}",
    )


def _shown_tail(log: Path, offset: int, lines: int = 8) -> str:
    """The last ``lines`` non-blank lines the controller wrote after ``offset``, indented for an error
    (the log may be in a temporary directory the reader never sees)."""
    try:
        text = log.read_bytes()[offset:].decode(errors="replace")
    except OSError:
        return "(no log)"
    shown = [line for line in text.splitlines() if line.strip()][-lines:]
    return "\n      ".join(shown) or "(no output)"


def port_taken(error: HarnessError) -> bool:
    """Did a start fail because its webhook port was taken between the pick and the bind? Pure."""
    return "address already in use" in error.message.lower()
