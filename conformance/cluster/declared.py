"""What a cluster the harness made can do, written into the cluster, so any later run finds it.

Why this module exists: capabilities belong to clusters, not to the provider a run names. A cluster
the local provider made injects every Pod fault (kwok stages) and serves DNS on a loopback
address; a run that reaches the same cluster with ``--provider existing`` (a kept cluster, an
implementation started by hand or in a debugger) knew none of that and reported the fault and DNS
behaviours inconclusive. The local provider now records the capabilities in the ConfigMap
``kube-public/kthena-conformance-cluster`` when it brings a cluster up, and the existing provider
reads it: fault injection and DNS then work there as on the local provider.

The record is a declaration by whoever wrote it; a cluster without one declares nothing and the
existing provider injects nothing. :func:`record` and :func:`parse` are pure.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .faults import Fault

NAMESPACE = "kube-public"
NAME = "kthena-conformance-cluster"


@dataclass(frozen=True)
class Declared:
    """A cluster's declared capabilities: the Pod faults it injects, its DNS server, who made it."""

    faults: frozenset[Fault]
    dns: str | None
    made_by: str


def record(declared: Declared) -> dict[str, Any]:
    """The ConfigMap that declares ``declared``. Pure."""
    data = {"faults": ",".join(f.value for f in Fault if f in declared.faults), "madeBy": declared.made_by}
    if declared.dns:
        data["dns"] = declared.dns
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": NAME,
            "namespace": NAMESPACE,
            "labels": {"app.kubernetes.io/managed-by": "kthena-conformance"},
        },
        "data": data,
    }


def parse(data: dict[str, str] | None) -> Declared | None:
    """The declaration in a ConfigMap's data (None without one; unknown fault names are ignored). Pure."""
    if not data:
        return None
    known = {f.value: f for f in Fault}
    faults = frozenset(known[name] for name in (data.get("faults") or "").split(",") if name in known)
    return Declared(faults, data.get("dns") or None, data.get("madeBy", "unknown"))


def publish(api: Any, declared: Declared) -> None:
    """Write the declaration into the cluster (``api``: a CoreV1Api), replacing an older one."""
    from kubernetes.client.exceptions import ApiException

    body = record(declared)
    try:
        api.create_namespaced_config_map(NAMESPACE, body)
    except ApiException as exc:
        if exc.status != 409:
            raise
        api.replace_namespaced_config_map(NAME, NAMESPACE, body)


def read(api: Any) -> Declared | None:
    """The cluster's declaration (``api``: a CoreV1Api); None when it has none or it cannot be read."""
    try:
        found = api.read_namespaced_config_map(NAME, NAMESPACE, _request_timeout=10)
    except Exception:  # absent, forbidden or unreachable: nothing is declared
        return None
    return parse(found.data)
