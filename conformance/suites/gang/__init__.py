"""GangScheduling: GangPolicy through the PodGroup handed to the volcano scheduler.

With ``schedulerName: volcano`` every ServingGroup is scheduled as one gang: a Volcano PodGroup
(``scheduling.volcano.sh/v1beta1``) that its Pods name in the annotation
``scheduling.k8s.io/group-name`` (the annotation Volcano reads; the suite never derives the
PodGroup's name, the spec leaves it open). The suite finds each ServingGroup's PodGroup through
its Pods: the annotation must partition the ModelServing's Pods into exactly ``spec.replicas``
sets, each with the Pods of one ServingGroup (what the manifest asks per group), each naming a
PodGroup that exists. Which object owns a PodGroup the spec does not say (issue 31): the
ModelServing's PodGroups are the PodGroups in the test's namespace, where the test's one
ModelServing is the only thing that makes them. What the PodGroup must require is computed
from the manifest by :mod:`conformance.framework.gang`.

No PodGroup CRD served on the cluster: the tests cannot observe the contract and are errors
(inconclusive), never passes. Pods of the volcano scheduler may stay Pending on a cluster without
Volcano; the tests only wait for them to be created.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from conformance.framework.gang import PODGROUP_ANNOTATION, GangExpectation, GangPod
from conformance.framework.modelserving import ModelServings, expected_pod_count, member, role_of
from conformance.framework.outcomes import Inconclusive
from conformance.framework.waits import wait_for

API = "api-reference-workload-v1alpha1.txt"
GANG_POLICY = f"{API}#GangPolicy"


def list_podgroups(ms: ModelServings) -> dict[str, dict[str, Any]]:
    """The PodGroups of the test namespace by name; Inconclusive when the CRD is not served."""
    from kubernetes.client.exceptions import ApiException

    from conformance.framework.gang import PODGROUP_API

    group, version, plural = PODGROUP_API
    try:
        listing = ms.kube.custom.list_namespaced_custom_object(group, version, ms.ns, plural)
    except ApiException as exc:
        if exc.status == 404:
            raise Inconclusive(
                f"the PodGroup CRD ({plural}.{group}/{version}) is not served on this cluster: the PodGroup "
                "contract cannot be observed"
            ) from None
        raise
    return {str(pg["metadata"]["name"]): dict(pg) for pg in listing.get("items") or []}


def require_podgroup_crd(ms: ModelServings) -> None:
    list_podgroups(ms)


@dataclass(repr=False)
class GangView:
    """A ModelServing's live Pods grouped by the PodGroup they name, and the namespace's PodGroups."""

    owner_uid: str
    pods: list[Any]
    groups: dict[str, list[Any]] = field(default_factory=dict)  # PodGroup name -> Pods naming it
    unannotated: list[str] = field(default_factory=list)
    podgroups: dict[str, dict[str, Any]] = field(default_factory=dict)

    def owned(self) -> dict[str, dict[str, Any]]:
        """The ModelServing's PodGroups: every PodGroup in the test's namespace (whatever owns it)."""
        return dict(self.podgroups)

    def spec(self, podgroup: str) -> dict[str, Any]:
        return dict((self.podgroups.get(podgroup) or {}).get("spec") or {})

    def structure(self, body: dict[str, Any], replicas: int) -> list[str]:
        """What keeps this view from showing one owned PodGroup per ServingGroup (empty: nothing)."""
        problems: list[str] = []
        want = expected_pod_count(body, replicas)
        if len(self.pods) != want:
            problems.append(f"{len(self.pods)} live Pods, {want} expected")
        if self.unannotated:
            problems.append(f"Pods without the {PODGROUP_ANNOTATION} annotation: {self.unannotated}")
        if len(self.groups) != replicas:
            problems.append(f"the Pods name {len(self.groups)} PodGroups {sorted(self.groups)}, {replicas} expected")
        composition = group_composition(body)
        for name, pods in sorted(self.groups.items()):
            seen = _composition(pods)
            if seen != composition:
                problems.append(f"the Pods naming PodGroup {name} are not one ServingGroup: {seen} != {composition}")
            pg = self.podgroups.get(name)
            if pg is None:
                problems.append(f"PodGroup {name} (named by {len(pods)} Pods) does not exist")
        extra = sorted(set(self.owned()) - set(self.groups))
        if extra:
            problems.append(f"PodGroups in the namespace that no live Pod names: {extra}")
        return problems

    def describe(self) -> str:
        groups = {n: sorted(p.metadata.name for p in pods) for n, pods in sorted(self.groups.items())}
        specs = {n: self.spec(n) for n in sorted(self.podgroups)}
        return f"Pods by PodGroup: {groups}; unannotated: {self.unannotated}; PodGroups: {specs}"

    __repr__ = describe  # what a timed-out wait shows as last seen


def _composition(pods: list[Any]) -> dict[str, int]:
    out: dict[str, int] = {}
    for pod in pods:
        key = f"{role_of(pod)}/{member(pod)}"
        out[key] = out.get(key, 0) + 1
    return dict(sorted(out.items()))


def group_composition(body: dict[str, Any]) -> dict[str, int]:
    """``role/member`` -> Pods per ServingGroup, from the manifest."""
    out: dict[str, int] = {}
    for role in body["spec"]["template"]["roles"]:
        replicas, workers = int(role.get("replicas", 1)), int(role.get("workerReplicas", 0))
        out[f"{role['name']}/entry"] = replicas
        if workers:
            out[f"{role['name']}/worker"] = replicas * workers
    return dict(sorted(out.items()))


def observe(ms: ModelServings, name: str) -> GangView:
    uid = ms.get(name)["metadata"]["uid"]
    pods = [p for p in ms.pods(name) if not p.metadata.deletion_timestamp]
    view = GangView(uid, pods, podgroups=list_podgroups(ms))
    for pod in pods:
        pg = (pod.metadata.annotations or {}).get(PODGROUP_ANNOTATION)
        if pg:
            view.groups.setdefault(str(pg), []).append(pod)
        else:
            view.unannotated.append(pod.metadata.name)
    return view


def wait_gang(
    ms: ModelServings,
    body: dict[str, Any],
    check: Callable[[GangView], list[str]] | None = None,
    *,
    replicas: int | None = None,
    what: str = "",
    wait: str = "podgroups",
) -> GangView:
    """Wait until the ModelServing's Pods name one owned PodGroup per ServingGroup (and ``check``
    finds no problem); fails with the problems and what was last seen."""
    name = body["metadata"]["name"]
    groups = int(body["spec"].get("replicas", 1)) if replicas is None else replicas
    last: list[str] = []

    def problems(view: GangView) -> bool:
        found = view.structure(body, groups)
        if not found and check is not None:
            found = check(view)
        last[:] = found
        return not found

    try:
        return wait_for(
            f"{what or name}: one PodGroup per ServingGroup ({groups}){' as required' if check else ''}",
            lambda: observe(ms, name), until=problems, timeout=ms.timeouts.seconds(wait), interval=0.3,
        )  # fmt: skip
    except AssertionError as exc:
        if last:
            raise AssertionError(f"{what or name}: {'; '.join(last)} ({exc})") from None
        raise


def start(ms: ModelServings, body: dict[str, Any]) -> None:
    """Create ``body`` once the PodGroup CRD is known to be served, and wait for its Pods to exist
    (Pending is fine: nothing may schedule the volcano scheduler's Pods)."""
    require_podgroup_crd(ms)
    ms.create(body)
    ms.wait_pods(body["metadata"]["name"], expected_pod_count(body), ready=False, wait="pods-created")


def gang_pods(pods: list[Any]) -> list[GangPod]:
    """``pods`` (``V1Pod``) as the pure gang checks see them: name, labels, Role, entry/worker."""
    return [GangPod(p.metadata.name, dict(p.metadata.labels or {}), role_of(p), member(p)) for p in pods]


def each_podgroup(view: GangView, check: Callable[[str, dict[str, Any], list[Any]], list[str]]) -> list[str]:
    """Problems of ``check(podgroup name, its spec, its Pods)`` over every ServingGroup."""
    out: list[str] = []
    for pg, pods in sorted(view.groups.items()):
        out.extend(f"PodGroup {pg}: {p}" for p in check(pg, view.spec(pg), pods))
    return out


__all__ = ["GANG_POLICY", "GangExpectation", "GangView", "each_podgroup", "observe", "start", "wait_gang"]
