"""EvictionBudget: what the Eviction API answers under ``rolloutStrategy.evictionStrategy``.

The tests observe ONLY the Eviction API's answers (``policy/v1`` Evictions, the ``pods/eviction``
subresource ``kubectl drain`` uses) and the Pods: 201 for an Eviction the budget allows, a refusal
(any 4xx but 404) for one it refuses, and from a Pod watch
(:class:`~conformance.framework.rollout_watch.RolloutWatch`) the fewest ready ServingGroups or Role
instances at any moment. How an implementation enforces the budget (a webhook on
``pods/eviction``, PodDisruptionBudgets, ...) is its own business.

**Holding recovery back.** A controller recreates what an Eviction removed, and on a simulated
cluster the replacement is Ready within a second, which would let a wrong budget slip through
between two Evictions. So the manifests use ``schedulerName: conformance-manual``, a scheduler
nobody runs, and the suite itself plays the scheduler (:class:`Binder`, the ``pods/binding``
subresource): it binds the Pods it wants to run and leaves a replacement Pending, its ServingGroup
not ready, until the test lets it recover. Every budget boundary is then exact and deterministic.

**Readings.** A ServingGroup (Role instance) is ready when all its Pods are Running and Ready and
none is terminating; evicting any of its Pods disrupts the whole unit. Refused means any HTTP 4xx
but 404 (the Pod gone): the spec fixes only the API, and a ``pods/eviction`` webhook answers 403
unless it chooses otherwise. HTTP 429 with a message, what PodDisruptionBudgets answer and
``kubectl drain`` retries, is the convention: one SHOULD behaviour
(eviction/servinggroup/refusal-too-many-requests).
Percentages are only used where they are exact (50% of 4 ServingGroups, 50% of 2 Role instances):
the suite does not assert rounding (spec reading 28). Role instances are counted in one
ServingGroup, where "per ServingGroup" and "across ServingGroups" agree.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from conformance.framework.modelserving import EvictionAnswer, ModelServings, expected_pod_count
from conformance.framework.outcomes import Inconclusive
from conformance.framework.rollout_watch import Layout, PodState, RolloutWatch, Snapshot, Timeline, ordinal
from conformance.framework.waits import wait_for

API = "api-reference-workload-v1alpha1.txt"
EVICTION = f"{API}#EvictionStrategySpec"
MANUAL_SCHEDULER = "conformance-manual"
_NO_SCHEDULE = ("NoSchedule", "NoExecute")


# -- playing the scheduler ------------------------------------------------------------------------


def schedulable_nodes(kube: Any) -> list[str]:
    """Ready nodes that take new Pods (not cordoned, no NoSchedule/NoExecute taint), sorted."""
    out = []
    for node in kube.core.list_node().items:
        if node.spec.unschedulable:
            continue
        if any(t.effect in _NO_SCHEDULE for t in node.spec.taints or []):
            continue
        if any(c.type == "Ready" and c.status == "True" for c in (node.status.conditions or [])):
            out.append(str(node.metadata.name))
    return sorted(out)


Placement = Callable[[Any, list[str]], str | None]


class Binder:
    """Binds the test namespace's Pending Pods of the manual scheduler to nodes.

    ``place(pod, schedulable nodes)`` picks a node (None: round robin). :meth:`bind_pending` binds
    once; :meth:`running` keeps binding in a background thread (what a scheduler would do)."""

    def __init__(self, ms: ModelServings, place: Placement | None = None) -> None:
        self.ms = ms
        self.place = place
        self.bound: dict[str, str] = {}  # pod uid -> node
        self.errors: list[str] = []
        self._turn = itertools.count()

    def pending(self) -> list[Any]:
        return [
            p for p in self.ms.kube.core.list_namespaced_pod(self.ms.ns).items
            if p.spec.scheduler_name == MANUAL_SCHEDULER and not p.spec.node_name
            and not p.metadata.deletion_timestamp
        ]  # fmt: skip

    def bind_pending(self) -> list[str]:
        """Bind every Pending Pod now; the names bound."""
        from kubernetes import client
        from kubernetes.client.exceptions import ApiException

        pods = self.pending()
        if not pods:
            return []
        nodes = schedulable_nodes(self.ms.kube)
        if not nodes:
            raise Inconclusive("no schedulable node to bind the test's Pods to")
        done = []
        for pod in sorted(pods, key=lambda p: p.metadata.name):
            node = (self.place(pod, nodes) if self.place else None) or nodes[next(self._turn) % len(nodes)]
            binding = client.V1Binding(
                metadata=client.V1ObjectMeta(name=pod.metadata.name, namespace=self.ms.ns, uid=pod.metadata.uid),
                target=client.V1ObjectReference(api_version="v1", kind="Node", name=node),
            )
            try:
                self.ms.kube.core.create_namespaced_pod_binding(
                    pod.metadata.name, self.ms.ns, binding, _preload_content=False
                )
            except ApiException as exc:
                if exc.status in (404, 409):  # gone, or already bound / replaced meanwhile
                    continue
                raise
            self.bound[str(pod.metadata.uid)] = node
            done.append(str(pod.metadata.name))
        return done

    @contextmanager
    def running(self, interval: float = 0.2) -> Iterator[Binder]:
        """Bind in a background thread while the block runs; its errors fail the block's exit."""
        stop = threading.Event()

        def loop() -> None:
            while not stop.is_set():
                try:
                    self.bind_pending()
                except Exception as exc:
                    self.errors.append(f"{type(exc).__name__}: {exc}")
                stop.wait(interval)

        thread = threading.Thread(target=loop, name=f"binder-{self.ms.ns}", daemon=True)
        thread.start()
        try:
            yield self
        finally:
            stop.set()
            thread.join(timeout=5)
        if len(self.errors) > 3:
            raise Inconclusive(f"the suite could not bind the test's Pods: {self.errors[-1]}")


def start(ms: ModelServings, binder: Binder, body: dict[str, Any]) -> Layout:
    """Create ``body``, bind its Pods, and wait until every ServingGroup is available."""
    name = body["metadata"]["name"]
    count = expected_pod_count(body)
    ms.create(body)

    def bound() -> int:
        binder.bind_pending()
        pods = [p for p in ms.pods(name) if not p.metadata.deletion_timestamp]
        return sum(1 for p in pods if p.spec.node_name) if len(pods) == count else -1

    ms.wait("pods-created", f"{count} Pods of {ms.ns}/{name} created and bound", bound, lambda n: n == count)
    ms.wait_pods(name, count)
    ms.wait_settled(name)
    return Layout.of(body)


def recover(watch: RolloutWatch, binder: Binder, until: Callable[[Snapshot], bool], what: str) -> Snapshot:
    """Let recreated Pods run (bind them) until ``until`` holds on the Pod timeline."""

    def probe() -> Snapshot:
        binder.bind_pending()
        watch.check()
        return watch.latest()

    return wait_for(what, probe, until=until, timeout=watch.ms.timeouts.seconds("recovery"), interval=0.2)


# -- picking Pods ---------------------------------------------------------------------------------


def groups_by_ordinal(snapshot: Snapshot) -> list[str]:
    return sorted(snapshot.existing_groups(), key=ordinal)


def pod_of(snapshot: Snapshot, group: str, member: str, role_id: str | None = None) -> PodState:
    """The live Pod of ``group`` (and Role instance ``role_id``) that is the ``member``."""
    for pod in snapshot.pods:
        wanted = role_id is None or pod.role_id == role_id
        if pod.group == group and pod.member == member and not pod.terminating and wanted:
            return pod
    raise Inconclusive(f"no live {member} Pod of {group} {role_id or ''} in {snapshot.describe()}")


def instances_by_index(snapshot: Snapshot, role: str) -> list[tuple[str, str]]:
    """The (group, role id) Role instances of ``role``, by index."""
    return sorted(snapshot.existing_instances(role), key=lambda k: (ordinal(k[0]), ordinal(k[1])))


# -- judging answers ------------------------------------------------------------------------------


def expect_allowed(answer: EvictionAnswer, what: str) -> None:
    assert answer.allowed, f"{what}: expected the Eviction to be allowed (HTTP 201); answered {answer.describe()}"


def expect_budget_refused(answer: EvictionAnswer, what: str) -> None:
    assert answer.refused, (
        f"{what}: expected the Eviction to be refused (HTTP 4xx, 429 by convention: the budget); answered "
        f"{answer.describe()}"
    )


def evict_when_allowed(ms: ModelServings, pod: str, what: str) -> EvictionAnswer:
    """Retry an Eviction until it is allowed (the budget catching up with recovered Pods)."""
    return ms.wait("eviction", f"{what}: the Eviction of {pod} to be allowed", lambda: ms.evict(pod),
                   lambda a: a.allowed)  # fmt: skip


def expect_ready_floor(timeline: Timeline, layout: Layout, minimum: int, what: str, *, since: int = 0) -> None:
    value, at = timeline.min_ready_groups(layout, since=since)
    assert value >= minimum, (
        f"{what}: at least {minimum} ServingGroups must be ready at every moment; {value} were at {at.describe()}"
    )


def expect_instance_floor(timeline: Timeline, layout: Layout, role: str, minimum: int, what: str) -> None:
    value, at = timeline.min_ready_instances(layout, role)
    assert value >= minimum, (
        f"{what}: at least {minimum} instances of Role {role} must be ready at every moment; {value} were at "
        f"{at.describe()}"
    )


def with_strategy(body: dict[str, Any], **eviction: Any) -> dict[str, Any]:
    body["spec"].setdefault("rolloutStrategy", {})["evictionStrategy"] = eviction
    return body
