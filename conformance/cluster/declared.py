"""What a cluster the harness made can do, written into the cluster, so any later run finds it.

Why this module exists: capabilities belong to clusters, not to the provider a run names. A cluster
the local provider made injects every Pod fault (kwok stages) and serves DNS on a loopback
address; a run that reaches the same cluster with ``--provider existing`` (a kept cluster, an
implementation started by hand or in a debugger) knew none of that and reported the fault and DNS
behaviours inconclusive. The local provider now records the capabilities in the ConfigMap
``kube-public/kthena-conformance-cluster`` when it brings a cluster up, and the existing provider
reads it: fault injection and DNS then work there as on the local provider.

It also declares the cluster's **real nodes** (:class:`RealNodes`): which nodes run containers
for real (a kubelet and a container runtime, not kwok) and which images with a shell are there
without a pull. Behaviours observable only inside a running container (a hostname, the DNS a Pod
sees, the environment a DRA driver's CDI spec gives) run on those nodes; without a declaration
they cannot be observed and say so.

The record is a declaration by whoever wrote it; a cluster without one declares nothing and the
existing provider injects nothing. :func:`record` and :func:`parse` are pure.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .faults import Fault

NAMESPACE = "kube-public"
NAME = "kthena-conformance-cluster"


@dataclass(frozen=True)
class RealNodes:
    """Nodes that run containers for real, and the images a test may run there without a pull.

    ``selector`` picks the nodes (labels; empty: every node); ``images`` maps a variant to an
    image reference present on them: ``v1`` has a POSIX shell with ``env``, ``hostname``,
    ``nslookup`` and ``sleep``; ``v2`` the same tools in an image with other content (an in-place
    image update). Pull policy ``IfNotPresent`` finds them."""

    selector: Mapping[str, str]
    images: Mapping[str, str]
    tolerations: tuple[Mapping[str, str], ...] = ()  # what a Pod needs to run there (their taints)

    def as_details(self) -> dict[str, Any]:
        """The ``realNodes`` entry of a cluster's details (and its report)."""
        return {
            "selector": dict(self.selector),
            "images": dict(self.images),
            "tolerations": [dict(t) for t in self.tolerations],
        }

    @classmethod
    def from_details(cls, details: Mapping[str, Any] | None) -> RealNodes | None:
        """The declaration in ``details["realNodes"]``; None without one, or without a ``v1`` image."""
        entry = (details or {}).get("realNodes")
        if not isinstance(entry, Mapping):
            return None
        selector, images = entry.get("selector") or {}, entry.get("images") or {}
        if not isinstance(selector, Mapping) or not isinstance(images, Mapping) or not images.get("v1"):
            return None
        tolerations = entry.get("tolerations") or []
        if not isinstance(tolerations, list) or not all(isinstance(t, Mapping) for t in tolerations):
            return None
        return cls(
            {str(k): str(v) for k, v in selector.items()},
            {str(k): str(v) for k, v in images.items()},
            tuple({str(k): str(v) for k, v in t.items()} for t in tolerations),
        )


def _pairs(text: str) -> dict[str, str]:
    """``a=1,b=2`` -> ``{"a": "1", "b": "2"}`` (entries without ``=`` are ignored)."""
    return dict(item.split("=", 1) for item in text.split(",") if "=" in item)


def _joined(pairs: Mapping[str, str]) -> str:
    return ",".join(f"{k}={v}" for k, v in sorted(pairs.items()))


@dataclass(frozen=True)
class Declared:
    """A cluster's declared capabilities: the Pod faults it injects, its DNS server, who made it,
    and its real nodes (None: none)."""

    faults: frozenset[Fault]
    dns: str | None
    made_by: str
    real_nodes: RealNodes | None = None
    # DRA drivers whoever made the cluster installed: each {"name", "installedBy", and what identifies
    # the build: "executable" and "sha256", or "image" and "digest"}, for the Accelerators report.
    drivers: tuple[Mapping[str, Any], ...] = ()


def record(declared: Declared) -> dict[str, Any]:
    """The ConfigMap that declares ``declared``. Pure."""
    data = {"faults": ",".join(f.value for f in Fault if f in declared.faults), "madeBy": declared.made_by}
    if declared.dns:
        data["dns"] = declared.dns
    if declared.real_nodes is not None:
        data["realNodes.selector"] = _joined(declared.real_nodes.selector)
        data["realNodes.images"] = _joined(declared.real_nodes.images)
        if declared.real_nodes.tolerations:
            data["realNodes.tolerations"] = json.dumps([dict(t) for t in declared.real_nodes.tolerations])
    if declared.drivers:
        data["draDrivers"] = json.dumps([dict(d) for d in declared.drivers])
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
    images = _pairs(data.get("realNodes.images") or "")
    try:
        loaded = json.loads(data.get("realNodes.tolerations") or "[]")
        tolerations = tuple({str(k): str(v) for k, v in t.items()} for t in loaded if isinstance(t, dict))
    except (ValueError, AttributeError, TypeError):
        tolerations = ()
    selector = _pairs(data.get("realNodes.selector") or "")
    real = RealNodes(selector, images, tolerations) if images.get("v1") else None
    try:
        listed = json.loads(data.get("draDrivers") or "[]")
        drivers = tuple(d for d in listed if isinstance(d, dict) and isinstance(d.get("name"), str))
    except (ValueError, TypeError):
        drivers = ()
    return Declared(faults, data.get("dns") or None, data.get("madeBy", "unknown"), real, drivers)


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
