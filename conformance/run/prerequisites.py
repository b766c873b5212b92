"""What each profile needs in the cluster besides the implementation, and installing it.

Why this module exists: an implementer should not find out from a dozen failed gang tests that
the cluster has no PodGroup CRD. :data:`PREREQUISITES` says, per profile, what the suite needs
that is neither the implementation's nor Kubernetes' own; ``kthena-conformance install
prerequisites --profile P`` installs what can be installed, and a run on a cluster the harness
creates installs it for the selected profiles by itself (never on an ``existing`` cluster: the
harness does not change a cluster it did not make; the hint says how).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

Loader = Callable[[], list[dict[str, Any]]]


def _podgroup_crd() -> list[dict[str, Any]]:
    from ..implementations import reference

    return reference.podgroup_crd()


def _lws_crd() -> list[dict[str, Any]]:
    """The LeaderWorkerSet CRD of ``sigs.k8s.io/lws`` (:mod:`..cluster.lws`): from the per-user cache,
    else fetched once with ``go mod download`` (a :class:`~..cluster.errors.HarnessError` says what
    is missing: Go, or the module proxy)."""
    from ..cluster.lws import lws_crd

    return [lws_crd()]


@dataclass(frozen=True)
class Prerequisite:
    profile: str
    what: str
    load: Loader | None = None  # None: not something the harness can install


PREREQUISITES: tuple[Prerequisite, ...] = (
    Prerequisite(
        "GangScheduling",
        "Volcano's PodGroup CRD (podgroups.scheduling.volcano.sh, v1beta1), through which the gang tests read the "
        "PodGroups the implementation writes; a minimal copy is installed where Volcano is absent (it schedules "
        "nothing)",
        _podgroup_crd,
    ),
    Prerequisite(
        "Accelerators",
        "a DRA driver with its capability file (--capabilities FILE); on the local provider the harness runs the "
        "fake GPU and NPU drivers by default",
    ),
    Prerequisite(
        "Autoscaling",
        "the AutoscalingPolicy CRD (the implementation's), and a Prometheus server binary the suite runs to set the "
        "metrics (`kthena-conformance binaries build --prometheus`); the implementation's autoscaler must reach "
        "the machine running the suite at the runner address, where that server listens: 127.0.0.1 on the local "
        "provider, the Docker network's gateway on kind, --runner-address HOST anywhere else (an in-cluster "
        "controller of an existing cluster)",
    ),
    Prerequisite(
        "ModelBooster",
        "the ModelBooster CRD (modelboosters.workload.serving.volcano.sh, v1alpha1: the implementation's, installed "
        "with it); without it the profile's tests are inconclusive",
    ),
    Prerequisite(
        "LWSConversion",
        "the LeaderWorkerSet CRD (leaderworkersets.leaderworkerset.x-k8s.io, v1) of sigs.k8s.io/lws v0.7.0, taken "
        "from its Go module (Go and the module proxy the first time, then the per-user cache); the LWS controller "
        "is not needed. Without the CRD the profile's tests are inconclusive",
        _lws_crd,
    ),
)


def for_profiles(profiles: Iterable[str]) -> list[Prerequisite]:
    """The prerequisites of ``profiles`` (every profile when empty). Pure."""
    wanted = set(profiles)
    return [p for p in PREREQUISITES if not wanted or p.profile in wanted]


def installable(profiles: Iterable[str]) -> list[dict[str, Any]]:
    """The objects to create for ``profiles``: what the installable prerequisites load."""
    return [doc for p in for_profiles(profiles) if p.load is not None for doc in p.load()]
