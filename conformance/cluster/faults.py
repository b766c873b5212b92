"""Fault injection: the capabilities tests ask for, and the annotation contract behind them.

Tests never know how a cluster is made; they ask for a capability ("make this pod NotReady") and
a provider either does it or raises :class:`~conformance.cluster.errors.UnsupportedOperation`,
which the suite reports as not-supported.

On the embedded cluster the kubelet is kwok, and the faults are kwok Stages keyed on the
annotations below (see ``local/kwok-stages.yaml``). Setting the annotation is the whole
interface, so it is deterministic and works from any client, including ``kubectl annotate``.

An init container is restarted as a real kubelet restarts one in a running Pod: only a sidecar (an
init container with ``restartPolicy: Always``) runs, and so restarts, once the Pod has started; a
regular init container has run to completion by then. :attr:`Fault.RESTART_SIDECAR` therefore
needs the Pod's first init container to be a sidecar; a provider that cannot restart one leaves the
fault out of :meth:`FaultInjector.supported_faults`, and a test needing it is inconclusive there.

An image that cannot be pulled needs no capability: a test names an image in the registry
:data:`PULL_FAILS_REGISTRY` (:func:`unpullable`). ``.invalid`` is reserved and never resolves
(RFC 2606, RFC 6761), so no such image can exist and a real kubelet fails its pull as surely as the
embedded cluster's kwok stages do (ErrImagePull, then ImagePullBackOff; the container never runs).
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from typing import Protocol

from .errors import UnsupportedOperation

FAULT_ANNOTATION = "conformance.kthena.io/fault"
RESTARTS_ANNOTATION = "conformance.kthena.io/restarts"
SIDECAR_RESTARTS_ANNOTATION = "conformance.kthena.io/sidecar-restarts"
# Images in this registry never pull (kwok-stages.yaml spells the same prefix in its selectors).
PULL_FAILS_REGISTRY = "pull-fails.conformance.invalid"
# The container waiting reasons of a failed pull, in the order a kubelet shows them.
PULL_FAILURE_REASONS = ("ErrImagePull", "ImagePullBackOff")


def unpullable(image: str) -> str:
    """``image`` moved to :data:`PULL_FAILS_REGISTRY` (same path and tag): an image no cluster can
    pull. ``registry.example/engine:v2`` becomes ``pull-fails.conformance.invalid/engine:v2``."""
    first, slash, rest = image.partition("/")
    # A first component with a dot or colon (or localhost) names a registry; otherwise there is none.
    path = rest if slash and ("." in first or ":" in first or first == "localhost") else image
    return f"{PULL_FAILS_REGISTRY}/{path}"


def is_unpullable(image: str) -> bool:
    """Whether ``image`` is in :data:`PULL_FAILS_REGISTRY` (the embedded cluster fails its pull)."""
    return image.startswith(PULL_FAILS_REGISTRY + "/")


class Fault(enum.StrEnum):
    """What can be done to a running Pod."""

    NOT_READY = "not-ready"  # Ready=False until cleared
    FAIL = "fail"  # phase Failed, containers exit 1 (terminal)
    RESTART = "restart"  # the first container's restartCount goes up by one
    RESTART_SIDECAR = "restart-sidecar"  # the first init container's (a sidecar's) restartCount goes up by one
    CLEAR = "clear"  # undo NOT_READY: the Pod is Ready again


class PodPatcher(Protocol):
    """Whatever can merge-patch a Pod's metadata (the official client's ``patch_namespaced_pod``)."""

    def __call__(self, name: str, namespace: str, body: dict[str, object]) -> object: ...


def fault_patch(fault: Fault, current_restarts: int = 0) -> dict[str, object]:
    """The merge patch that asks the embedded cluster's kwok stages for ``fault`` (pure)."""
    if fault is Fault.RESTART:
        return {"metadata": {"annotations": {RESTARTS_ANNOTATION: str(current_restarts + 1)}}}
    if fault is Fault.RESTART_SIDECAR:
        return {"metadata": {"annotations": {SIDECAR_RESTARTS_ANNOTATION: str(current_restarts + 1)}}}
    if fault is Fault.CLEAR:
        return {"metadata": {"annotations": {FAULT_ANNOTATION: None}}}
    return {"metadata": {"annotations": {FAULT_ANNOTATION: fault.value}}}


class FaultInjector(Protocol):
    """The fault-injection half of a provider."""

    def supported_faults(self) -> frozenset[Fault]: ...

    def inject(self, namespace: str, pod: str, fault: Fault) -> None: ...


class AnnotationFaultInjector:
    """Injects faults by annotating the Pod; used with the embedded cluster's kwok stages.

    ``restart_count`` gives the restarts of a Pod's first container, ``sidecar_restart_count`` those
    of its first init container (and refuses a Pod whose first init container is not a sidecar);
    without the latter, :attr:`Fault.RESTART_SIDECAR` is not supported."""

    def __init__(
        self,
        patch: PodPatcher,
        restart_count: Callable[[str, str], int],
        sidecar_restart_count: Callable[[str, str], int] | None = None,
    ) -> None:
        self._patch = patch
        self._counts = {Fault.RESTART: restart_count}
        if sidecar_restart_count is not None:
            self._counts[Fault.RESTART_SIDECAR] = sidecar_restart_count

    def supported_faults(self) -> frozenset[Fault]:
        return frozenset(f for f in Fault if f is not Fault.RESTART_SIDECAR or f in self._counts)

    def inject(self, namespace: str, pod: str, fault: Fault) -> None:
        if fault not in self.supported_faults():
            raise UnsupportedOperation(
                f"this cluster cannot inject '{fault.value}' into pods", "run the test on the local (embedded) provider"
            )
        count = self._counts.get(fault)
        current = count(namespace, pod) if count is not None else 0
        self._patch(pod, namespace, fault_patch(fault, current))
