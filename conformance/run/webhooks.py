"""Admission webhooks of an implementation served on this machine: a loopback serving certificate
and the ValidatingWebhookConfiguration that points the API server at it.

Why this module exists: an implementation run out of cluster (by hand, or with
``run --implementation-command``) serves its webhook on loopback, where the embedded cluster's API
server calls it; that takes a CA, a serving certificate for 127.0.0.1, and a webhook
configuration carrying the CA as ``caBundle``. The harness makes these for the reference; the
``kthena-conformance webhook`` commands make them for anyone (``serve-cert``, ``register``).

:func:`configuration` is pure. The ModelServing webhook validates CREATE and UPDATE of
``modelservings``; an optional one validates CREATE and UPDATE of ``autoscalingpolicies`` (the
spec leaves "exactly one target" to "the autoscalingpolicy validating webhook"); an optional one
receives ``pods/eviction`` (the EvictionBudget profile's mechanism in upstream Kthena and the
reference; the spec does not prescribe it), outside ``kube-system``; an optional one validates
``modelboosters``. :func:`mutating_configuration` is the MutatingWebhookConfiguration for an
implementation that declares a mutating webhook. ``failurePolicy: Fail`` for all: a webhook that
cannot be reached must not let an invalid object or an over-budget eviction through.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

GROUP = "workload.serving.volcano.sh"
PLACEHOLDER_CA_BUNDLE = "{webhook_ca_bundle}"  # filled by run --implementation-webhook


class WebhookInputError(ValueError):
    """A webhook URL or name that the API server would refuse, with the option and the reason."""


def check_url(option: str, url: str) -> str:
    """``url`` when the API server can call it (https, a host); else :class:`WebhookInputError`. Pure."""
    parsed = urlparse(url)
    if parsed.scheme != "https" or not parsed.netloc:
        raise WebhookInputError(
            f"{option}: {url!r} is not an https:// URL with a host (the API server calls only https)"
        )
    return url


def configuration(
    name: str,
    url: str,
    ca_bundle: str,
    eviction_url: str | None = None,
    autoscaling_url: str | None = None,
    modelbooster_url: str | None = None,
) -> dict[str, Any]:
    """A ValidatingWebhookConfiguration named ``name`` sending ModelServing CREATE/UPDATE to ``url``
    (AutoscalingPolicy CREATE/UPDATE to ``autoscaling_url``, ModelBooster CREATE/UPDATE to
    ``modelbooster_url``, and Pod evictions to ``eviction_url``), trusting ``ca_bundle`` (base64
    PEM). Pure."""
    webhooks: list[dict[str, Any]] = [_validating(f"modelservings.{name}", url, ca_bundle, "modelservings")]
    if autoscaling_url is not None:
        webhooks.append(_validating(f"autoscalingpolicies.{name}", autoscaling_url, ca_bundle, "autoscalingpolicies"))
    if modelbooster_url is not None:
        webhooks.append(_validating(f"modelboosters.{name}", modelbooster_url, ca_bundle, "modelboosters"))
    if eviction_url is not None:
        webhooks.append(
            {
                "name": f"evictions.{name}.conformance.kthena.io",
                "clientConfig": {"url": eviction_url, "caBundle": ca_bundle},
                "rules": [
                    {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["pods/eviction"]}
                ],
                "namespaceSelector": {
                    "matchExpressions": [
                        {"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": ["kube-system"]}
                    ]
                },
                "admissionReviewVersions": ["v1"],
                "sideEffects": "NoneOnDryRun",
                "failurePolicy": "Fail",
                "timeoutSeconds": 10,
            }
        )
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": name},
        "webhooks": webhooks,
    }


def mutating_configuration(name: str, ca_bundle: str, urls: dict[str, str]) -> dict[str, Any]:
    """A MutatingWebhookConfiguration named ``name`` sending CREATE/UPDATE of each resource
    (``modelservings``, ``modelboosters``, ...) to its URL in ``urls``, trusting ``ca_bundle``: for an
    implementation whose webhook also defaults or mutates (upstream Kthena's does). Pure."""
    webhooks = [
        {**_validating(f"{resource}.{name}", url, ca_bundle, resource), "reinvocationPolicy": "Never"}
        for resource, url in urls.items()
    ]
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": name},
        "webhooks": webhooks,
    }


def _validating(prefix: str, url: str, ca_bundle: str, resource: str) -> dict[str, Any]:
    """A webhook validating CREATE and UPDATE of ``resource`` (group workload.serving.volcano.sh)."""
    return {
        "name": f"{prefix}.conformance.kthena.io",
        "clientConfig": {"url": url, "caBundle": ca_bundle},
        "rules": [
            {
                "apiGroups": [GROUP],
                "apiVersions": ["v1alpha1"],
                "operations": ["CREATE", "UPDATE"],
                "resources": [resource],
            }
        ],
        "admissionReviewVersions": ["v1"],
        "sideEffects": "None",
        "failurePolicy": "Fail",
        "timeoutSeconds": 10,
    }


@dataclass(frozen=True)
class ServingCert:
    """Files of a loopback serving certificate: the CA (for caBundle), the certificate and its key."""

    ca: Path
    cert: Path
    key: Path

    def ca_bundle(self) -> str:
        return ca_bundle_of(self.ca)


def ca_bundle_of(ca_file: Path) -> str:
    """A PEM CA file as a webhook's ``caBundle`` (base64); :class:`WebhookInputError` when the file
    holds no PEM certificate (the API server would refuse every call to the webhook)."""
    from cryptography import x509

    data = ca_file.read_bytes()
    try:
        x509.load_pem_x509_certificates(data)
    except ValueError:
        raise WebhookInputError(f"--ca-file {ca_file}: holds no PEM certificate (serve-cert's ca.crt does)") from None
    return base64.b64encode(data).decode()


def serve_cert(directory: Path, hosts: tuple[str, ...] = ("127.0.0.1", "localhost")) -> ServingCert:
    """A new CA and a serving certificate for ``hosts`` under ``directory`` (ca.crt, tls.crt, tls.key)."""
    from ..cluster.pki import CertificateAuthority

    ca = CertificateAuthority(directory, common_name="kthena-conformance-webhook-ca")  # ca.crt, ca.key
    pair = ca.issue("tls", common_name="kthena-conformance-webhook", hosts=hosts, server=True)  # tls.crt, tls.key
    ca.pair.key.unlink()  # nothing more is signed with it: a CA key left behind only widens what trusts it
    return ServingCert(ca.pair.cert, pair.cert, pair.key)
