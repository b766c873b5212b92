"""Draining a node the way ``kubectl drain`` does: cordon it, then evict its Pods through the
Eviction API, retrying every refusal (HTTP 429) until they are gone or a deadline passes.

What ``kubectl drain --ignore-daemonsets`` does, and so what this does:

* cordon: ``spec.unschedulable: true``, so nothing new lands on the node (the node also gets the
  annotation :data:`CORDONED_BY` naming the run, so a cordon left by an interrupted run is found);
* Pods owned by a DaemonSet and mirror Pods (static Pods) are left alone;
* every other Pod (of the selection) gets a ``policy/v1`` Eviction; a 429 means "not now, a
  disruption budget forbids it": retry later; a 404 means it is already gone;
* a Pod that is terminating is waited for, not evicted again;
* the drain is done when no selected Pod is left on the node; any other answer is an error.

``retry_refusals=True`` retries every refusal (any 4xx but 404), not only 429: the spec fixes no
status code for a refused Eviction, and the conformance drain judges whether the budget lets a
drain finish, not which code it refuses with (429 is a SHOULD of its own).

Deadlines are cooperative (the drain checks its deadline between rounds) and the wait is the
documented ``drain`` wait. :func:`plan` and :func:`classify` are pure and unit tested.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from .modelserving import EvictionAnswer, evict

MIRROR_ANNOTATION = "kubernetes.io/config.mirror"
CORDONED_BY = "conformance.kthena.io/cordoned-by"


@dataclass(frozen=True)
class NodePod:
    """What a drain needs to know of one Pod on the node."""

    namespace: str
    name: str
    uid: str = ""
    terminating: bool = False
    daemonset: bool = False
    mirror: bool = False

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @classmethod
    def of(cls, pod: Any) -> NodePod:
        """From a client ``V1Pod``."""
        meta = pod.metadata
        owners = meta.owner_references or []
        return cls(
            namespace=str(meta.namespace),
            name=str(meta.name),
            uid=str(meta.uid or ""),
            terminating=meta.deletion_timestamp is not None,
            daemonset=any(r.kind == "DaemonSet" and r.controller for r in owners),
            mirror=MIRROR_ANNOTATION in (meta.annotations or {}),
        )


@dataclass(frozen=True)
class DrainPlan:
    """One round of a drain: whom to evict, whom to wait for, whom to leave alone (and why)."""

    evict: tuple[NodePod, ...]
    waiting: tuple[NodePod, ...]
    skipped: dict[str, str] = field(default_factory=dict)

    @property
    def done(self) -> bool:
        return not self.evict and not self.waiting


def plan(pods: Iterable[NodePod], select: Callable[[NodePod], bool] | None = None) -> DrainPlan:
    """The next round for the Pods now on the node (``select``: only these are the drain's business)."""
    to_evict: list[NodePod] = []
    waiting: list[NodePod] = []
    skipped: dict[str, str] = {}
    for pod in sorted(pods, key=lambda p: p.key):
        if select is not None and not select(pod):
            skipped[pod.key] = "not selected"
        elif pod.mirror:
            skipped[pod.key] = "mirror Pod"
        elif pod.daemonset:
            skipped[pod.key] = "DaemonSet Pod"
        elif pod.terminating:
            waiting.append(pod)
        else:
            to_evict.append(pod)
    return DrainPlan(tuple(to_evict), tuple(waiting), skipped)


class Answer(StrEnum):
    EVICTED = "evicted"
    RETRY = "retry"  # 429: a disruption budget refuses it for now
    GONE = "gone"  # 404: nothing to evict
    FAILED = "failed"  # anything else: the drain cannot go on


def classify(status: int, *, retry_refusals: bool = False) -> Answer:
    """What an Eviction's HTTP status means to a drain (``retry_refusals``: every 4xx but 404 is
    retried, as 429 always is)."""
    if status in (200, 201):
        return Answer.EVICTED
    if status == 429 or (retry_refusals and 400 <= status < 500 and status != 404):
        return Answer.RETRY
    if status == 404:
        return Answer.GONE
    return Answer.FAILED


class DrainError(AssertionError):
    """The drain got an answer it cannot retry, or did not finish before its deadline."""


@dataclass
class DrainResult:
    """What a finished drain did."""

    node: str
    evicted: list[str] = field(default_factory=list)  # namespace/name, in order
    refused: list[EvictionAnswer] = field(default_factory=list)  # every retried refusal, in order
    rounds: int = 0
    seconds: float = 0.0


def cordon(kube: Any, node: str, run_id: str = "") -> None:
    """Mark ``node`` unschedulable (and say which run did it)."""
    body = {"spec": {"unschedulable": True}, "metadata": {"annotations": {CORDONED_BY: run_id or "unknown"}}}
    kube.core.patch_node(node, body)


def uncordon(kube: Any, node: str) -> None:
    body = {"spec": {"unschedulable": None}, "metadata": {"annotations": {CORDONED_BY: None}}}
    kube.core.patch_node(node, body)


def node_pods(kube: Any, node: str, namespace: str | None = None) -> list[NodePod]:
    selector = f"spec.nodeName={node}"
    if namespace is None:
        items = kube.core.list_pod_for_all_namespaces(field_selector=selector).items
    else:
        items = kube.core.list_namespaced_pod(namespace, field_selector=selector).items
    return [NodePod.of(p) for p in items]


def drain(
    kube: Any,
    node: str,
    *,
    timeout: float,
    namespace: str | None = None,
    select: Callable[[NodePod], bool] | None = None,
    interval: float = 0.5,
    run_id: str = "",
    on_answer: Callable[[EvictionAnswer], None] | None = None,
    retry_refusals: bool = False,
) -> DrainResult:
    """Cordon ``node`` and evict its (selected) Pods, retrying refusals, until none is left.

    Only Pods in ``namespace`` are looked at when it is given. Raises :class:`DrainError` on an
    answer other than 201, 404 or 429 (or any refusal, with ``retry_refusals``), or when Pods are
    left at the deadline (naming them and the last refusal). The caller uncordons
    (:func:`uncordon`) when it is done with the node."""
    started = time.monotonic()
    deadline = started + timeout
    result = DrainResult(node)
    cordon(kube, node, run_id)
    last_refusal: dict[str, EvictionAnswer] = {}
    while True:
        result.rounds += 1
        step = plan(node_pods(kube, node, namespace), select)
        if step.done:
            result.seconds = round(time.monotonic() - started, 3)
            return result
        for pod in step.evict:
            answer = evict(kube, pod.namespace, pod.name)
            if on_answer is not None:
                on_answer(answer)
            kind = classify(answer.status, retry_refusals=retry_refusals)
            if kind is Answer.EVICTED:
                result.evicted.append(pod.key)
                last_refusal.pop(pod.key, None)
            elif kind is Answer.RETRY:
                result.refused.append(answer)
                last_refusal[pod.key] = answer
            elif kind is Answer.FAILED:
                raise DrainError(f"draining {node}: the Eviction of {pod.key} was answered {answer.describe()}")
        if time.monotonic() >= deadline:
            left = [p.key for p in (*step.evict, *step.waiting)]
            refusals = "; ".join(a.describe() for a in last_refusal.values()) or "none"
            raise DrainError(
                f"draining {node}: waited {timeout:g}s; Pods still on the node: {left}; last refusals: {refusals}"
            )
        time.sleep(interval)
