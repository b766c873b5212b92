"""Pinned versions of everything the cluster harness runs, in one place.

The embedded cluster and the kind node image must serve the same Kubernetes
minor so that a conformance result means the same thing on each provider. Every other module
reads versions from here; the Go wrapper modules under ``conformance/cluster/gomodules/`` pin the same ones
(a unit test keeps the two in step).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Versions:
    """A set of component versions that are known to work together."""

    kubernetes: str
    etcd: str
    kwok: str

    @property
    def kubernetes_minor(self) -> str:
        """``"1.36"`` for ``"v1.36.3"``."""
        major, minor, _ = self.kubernetes.lstrip("v").split(".", 2)
        return f"{major}.{minor}"

    @property
    def staging(self) -> str:
        """The published version of the k8s.io staging modules (``v0.36.3`` for ``v1.36.3``)."""
        _, minor, patch = self.kubernetes.lstrip("v").split(".", 2)
        return f"v0.{minor}.{patch}"

    def key(self) -> str:
        """A file-name-safe key, used for the binary cache directory."""
        return f"k8s-{self.kubernetes}_etcd-{self.etcd}_kwok-{self.kwok}"


PINNED = Versions(kubernetes="v1.36.3", etcd="v3.6.16", kwok="v0.8.0")

# Tried in order when a pinned version does not build (cluster-in-a-box notes): the nearest
# patch releases the Go module proxy serves for the same minor.
FALLBACKS: tuple[Versions, ...] = (
    Versions(kubernetes="v1.36.1", etcd="v3.6.16", kwok="v0.8.0"),
    Versions(kubernetes="v1.36.3", etcd="v3.6.15", kwok="v0.8.0"),
)

# CoreDNS for the embedded cluster's optional DNS server (conformance/cluster/gomodules/coredns). Not part of
# ``Versions``: it is an optional extra built into the same cache directory with its own recipe
# digest, so pinning or changing it never invalidates the control-plane binaries.
COREDNS = "v1.15.0"

# The real nodes' container runtime and CRI client (conformance/cluster/gomodules/containerd and
# critools), optional extras like CoreDNS: containerd 2.x for CDI (DRA devices reach containers) and
# the CRI RuntimeConfig the kubelet reads its cgroup driver from; crictl of the Kubernetes minor.
CONTAINERD = "v2.4.2"
CRICTL = "v1.36.0"

# kind, built from the Go module proxy for the kind provider (conformance/cluster/gomodules/kind), an
# optional extra like CoreDNS; its node image is built locally (conformance/cluster/kindnode.py).
KIND = "v0.33.0"

# Prometheus for the autoscaling tests' metrics (conformance/cluster/gomodules/prometheus), an optional
# extra like CoreDNS. Prometheus 3.x is published on the Go module proxy as v0.3MM.P for release
# 3.MM.P (``prometheus_release`` maps one to the other).
PROMETHEUS = "v0.316.0"


def prometheus_release(module_version: str = PROMETHEUS) -> str:
    """The Prometheus release of its Go module version: ``"3.16.0"`` for ``"v0.316.0"`` (pure)."""
    zero, combined, patch = module_version.lstrip("v").split(".", 2)
    if zero != "0" or len(combined) < 3:
        raise ValueError(f"{module_version} is not a Prometheus v0.MMM.P module version")
    major, minor = divmod(int(combined), 100)
    return f"{major}.{minor}.{patch}"


# The upstream kind node image of the same Kubernetes minor, for kind on machines that can pull it
# (``KTHENA_KIND_NODE_IMAGE``); the kind provider builds its own (conformance/cluster/kindnode.py).
KIND_NODE_IMAGE = f"kindest/node:{PINNED.kubernetes}"
