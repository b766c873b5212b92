"""Fluent builders for ModelServings and observed Pods, and a tiny in-memory world that applies plans."""

from __future__ import annotations

import copy
import datetime as dt
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from kthena_ref.api.types import ModelServing
from kthena_ref.planner.names import (
    ANNOTATION_DELETION_COST,
    LABEL_GROUP,
    LABEL_REVISION,
    LABEL_ROLE_ID,
)
from kthena_ref.planner.plan import Observed, Plan, plan

T0 = dt.datetime(2026, 1, 1, 12, 0, 0, tzinfo=dt.UTC)


def ts(moment: dt.datetime) -> str:
    """An API timestamp."""
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def container(name: str = "main", image: str = "engine:v1", **extra: Any) -> dict[str, Any]:
    return {"name": name, "image": image, **extra}


def template(
    image: str = "engine:v1",
    *,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    requests: dict[str, str] | None = None,
    env: list[dict[str, Any]] | None = None,
    init_containers: list[dict[str, Any]] | None = None,
    scheduler_name: str | None = None,
) -> dict[str, Any]:
    """A PodTemplateSpec (API dict) with one container."""
    main = container(image=image)
    if requests:
        main["resources"] = {"requests": dict(requests)}
    if env is not None:
        main["env"] = copy.deepcopy(env)
    spec: dict[str, Any] = {"containers": [main]}
    if init_containers is not None:
        spec["initContainers"] = copy.deepcopy(init_containers)
    if scheduler_name is not None:
        spec["schedulerName"] = scheduler_name
    out: dict[str, Any] = {"spec": spec}
    meta: dict[str, Any] = {}
    if labels:
        meta["labels"] = dict(labels)
    if annotations:
        meta["annotations"] = dict(annotations)
    if meta:
        out["metadata"] = meta
    return out


class MS:
    """A ModelServing builder: ``MS("llm").replicas(3).role("r", worker_replicas=1).build()``."""

    def __init__(self, name: str = "ms", namespace: str = "default") -> None:
        self._meta: dict[str, Any] = {"name": name, "namespace": namespace, "uid": f"uid-{name}", "generation": 1}
        self._spec: dict[str, Any] = {"replicas": 1, "template": {"roles": []}}
        self._status: dict[str, Any] | None = None

    # metadata
    def uid(self, uid: str) -> MS:
        self._meta["uid"] = uid
        return self

    def generation(self, generation: int) -> MS:
        self._meta["generation"] = generation
        return self

    def annotation(self, key: str, value: str) -> MS:
        self._meta.setdefault("annotations", {})[key] = value
        return self

    # spec
    def replicas(self, replicas: int) -> MS:
        self._spec["replicas"] = replicas
        return self

    def role(
        self,
        name: str = "r",
        replicas: int | None = 1,
        worker_replicas: int = 0,
        *,
        image: str = "engine:v1",
        worker_image: str | None = None,
        entry: dict[str, Any] | None = None,
        worker: dict[str, Any] | None = None,
        requests: dict[str, str] | None = None,
        **extra: Any,
    ) -> MS:
        """A role; ``worker`` defaults to a template from ``worker_image`` when there are workers."""
        role: dict[str, Any] = {
            "name": name,
            "entryTemplate": entry or template(image, requests=requests),
            "workerReplicas": worker_replicas,
        }
        if replicas is not None:
            role["replicas"] = replicas
        if worker is not None:
            role["workerTemplate"] = worker
        elif worker_replicas > 0:
            role["workerTemplate"] = template(worker_image or f"{image}-worker", requests=requests)
        role.update(extra)
        self._spec["template"]["roles"].append(role)
        return self

    def recovery(self, policy: str) -> MS:
        self._spec["recoveryPolicy"] = policy
        return self

    def rollout(
        self,
        *,
        max_unavailable: int | str | None = None,
        max_surge: int | str | None = None,
        partition: int | str | None = None,
        type: str | None = None,
    ) -> MS:
        strategy: dict[str, Any] = {}
        if type is not None:
            strategy["type"] = type
        config = {
            key: value
            for key, value in (("maxUnavailable", max_unavailable), ("maxSurge", max_surge), ("partition", partition))
            if value is not None
        }
        if config:
            strategy["rollingUpdateConfiguration"] = config
        self._spec["rolloutStrategy"] = strategy
        return self

    def restart_grace(self, seconds: int) -> MS:
        self._spec["template"]["restartGracePeriodSeconds"] = seconds
        return self

    def gang(self, min_role_replicas: dict[str, int] | None = None) -> MS:
        policy: dict[str, Any] = {}
        if min_role_replicas is not None:
            policy["minRoleReplicas"] = dict(min_role_replicas)
        self._spec["template"]["gangPolicy"] = policy
        return self

    def scheduler(self, name: str) -> MS:
        self._spec["schedulerName"] = name
        return self

    def history_limit(self, limit: int) -> MS:
        self._spec["revisionHistoryLimit"] = limit
        return self

    # status
    def current_revision(self, revision: str) -> MS:
        self._status = {**(self._status or {}), "currentRevision": revision}
        return self

    def conditions(self, *conditions: dict[str, Any]) -> MS:
        self._status = {**(self._status or {}), "conditions": [dict(c) for c in conditions]}
        return self

    def build(self) -> ModelServing:
        if not self._spec["template"]["roles"]:
            self.role()
        data: dict[str, Any] = {"metadata": copy.deepcopy(self._meta), "spec": copy.deepcopy(self._spec)}
        if self._status is not None:
            data["status"] = copy.deepcopy(self._status)
        return ModelServing.model_validate(data)


def edit_spec(ms: ModelServing, change: Callable[[dict[str, Any]], None]) -> ModelServing:
    """A copy of ``ms`` (status kept) with ``change`` applied to its spec as an API dict."""
    data = ms.to_api()
    change(data["spec"])
    return ModelServing.model_validate(data)


def set_image(image: str, role: int = 0) -> Callable[[dict[str, Any]], None]:
    """Set the entry image of a role (and ``<image>-worker`` on its workers, if it has a worker template)."""

    def change(spec: dict[str, Any]) -> None:
        target = spec["template"]["roles"][role]
        target["entryTemplate"]["spec"]["containers"][0]["image"] = image
        if "workerTemplate" in target:
            target["workerTemplate"]["spec"]["containers"][0]["image"] = f"{image}-worker"

    return change


def with_status(ms: ModelServing, status: dict[str, Any]) -> ModelServing:
    data = ms.to_api()
    data["status"] = copy.deepcopy(status)
    return ModelServing.model_validate(data)


# -- observed Pods ---------------------------------------------------------------------------------


def _copy(pod: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(pod)
    meta = out.setdefault("metadata", {})
    meta.setdefault("uid", f"uid-{meta['name']}")
    meta.setdefault("creationTimestamp", ts(T0))
    return out


def _status(
    phase: str, ready: bool, since: dt.datetime, restarts: int = 0, *, conditions: bool = True
) -> dict[str, Any]:
    status: dict[str, Any] = {
        "phase": phase,
        "containerStatuses": [{"name": "main", "restartCount": restarts, "ready": ready}],
    }
    if conditions:
        status["conditions"] = [
            {"type": "PodScheduled", "status": "True", "lastTransitionTime": ts(T0)},
            {"type": "Ready", "status": "True" if ready else "False", "lastTransitionTime": ts(since)},
        ]
    return status


def ready(pod: dict[str, Any], since: dt.datetime = T0) -> dict[str, Any]:
    """Running and Ready."""
    out = _copy(pod)
    out["status"] = _status("Running", True, since)
    return out


def pending(pod: dict[str, Any], since: dt.datetime = T0) -> dict[str, Any]:
    out = _copy(pod)
    out["status"] = _status("Pending", False, since)
    return out


def running_not_ready(pod: dict[str, Any], since: dt.datetime = T0) -> dict[str, Any]:
    out = _copy(pod)
    out["status"] = _status("Running", False, since)
    return out


def failed(pod: dict[str, Any], since: dt.datetime = T0, *, conditions: bool = True) -> dict[str, Any]:
    out = _copy(pod)
    out["status"] = _status("Failed", False, since, conditions=conditions)
    return out


def restarted(
    pod: dict[str, Any], restarts: int, *, ready_now: bool = False, since: dt.datetime = T0
) -> dict[str, Any]:
    """Restarted ``restarts`` times; Running and NotReady since ``since`` unless ``ready_now``."""
    out = _copy(pod)
    out["status"] = _status("Running", ready_now, since, restarts)
    return out


def deleting(pod: dict[str, Any]) -> dict[str, Any]:
    out = _copy(pod)
    if "status" not in out:
        out["status"] = _status("Running", True, T0)
    out["metadata"]["deletionTimestamp"] = ts(T0)
    return out


def with_cost(pod: dict[str, Any], cost: int | str) -> dict[str, Any]:
    out = _copy(pod)
    out["metadata"].setdefault("annotations", {})[ANNOTATION_DELETION_COST] = str(cost)
    return out


# -- reading Pods and plans ------------------------------------------------------------------------


def name_of(obj: dict[str, Any]) -> str:
    return str(obj["metadata"]["name"])


def names(objs: Iterable[dict[str, Any]]) -> list[str]:
    return [name_of(o) for o in objs]


def label(obj: dict[str, Any], key: str) -> str | None:
    return (obj["metadata"].get("labels") or {}).get(key)


def revision(obj: dict[str, Any]) -> str | None:
    return label(obj, LABEL_REVISION)


def ordinal(obj: dict[str, Any]) -> int:
    return int(str(label(obj, LABEL_GROUP)).rsplit("-", 1)[1])


def ordinals(objs: Iterable[dict[str, Any]]) -> set[int]:
    return {ordinal(o) for o in objs}


def instances(objs: Iterable[dict[str, Any]]) -> set[tuple[int, str]]:
    """(group ordinal, role-id) of every Pod."""
    return {(ordinal(o), str(label(o, LABEL_ROLE_ID))) for o in objs}


def deleted(p: Plan) -> list[str]:
    return sorted(d.name for d in p.delete_pods)


def env_of(c: dict[str, Any]) -> dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in c.get("env") or []}


def fresh_pods(ms: ModelServing, **kw: Any) -> list[dict[str, Any]]:
    """The Pods a fresh plan creates for ``ms`` (API dicts, no status)."""
    return plan(Observed(ms=ms, pods=[], now=T0, **kw)).create_pods


def fresh_revision(ms: ModelServing) -> dict[str, Any]:
    revisions = plan(Observed(ms=ms, pods=[], now=T0)).create_revisions
    assert len(revisions) == 1
    return revisions[0]


def selector_matches(selector: str, labels: dict[str, str]) -> bool:
    """Evaluate a label selector: ``k=v``, ``k==v``, ``k!=v``, ``k in (a,b)``, ``k notin (..)``, ``k``, ``!k``."""
    terms = re.findall(r"[^,()]+(?:\([^)]*\))?", selector)
    for raw in terms:
        term = raw.strip()
        if not term:
            continue
        if m := re.fullmatch(r"(\S+)\s+(in|notin)\s+\(([^)]*)\)", term):
            key, op, values = m.group(1), m.group(2), {v.strip() for v in m.group(3).split(",")}
            if (labels.get(key) in values) != (op == "in"):
                return False
        elif "!=" in term:
            key, value = (s.strip() for s in term.split("!=", 1))
            if labels.get(key) == value:
                return False
        elif "=" in term:
            key, value = (s.strip() for s in term.replace("==", "=").split("=", 1))
            if labels.get(key) != value:
                return False
        elif term.startswith("!"):
            if term[1:].strip() in labels:
                return False
        elif term not in labels:
            return False
    return True


# -- a tiny world that applies plans ---------------------------------------------------------------


@dataclass
class World:
    """The cluster as the planner sees it; :meth:`step` plans and applies (created Pods come up Ready)."""

    ms: ModelServing
    pods: dict[str, dict[str, Any]] = field(default_factory=dict)
    revisions: dict[str, dict[str, Any]] = field(default_factory=dict)
    podgroups: dict[str, dict[str, Any]] | None = None
    now: dt.datetime = T0
    plans: list[Plan] = field(default_factory=list)
    # What kubelet does with a patched image: restart the container on it and come back Ready
    # (True), or never get there (False: the Pod keeps reporting its old image and NotReady).
    patched_pods_arrive: bool = True

    def add(self, *pods: dict[str, Any]) -> World:
        for pod in pods:
            self.pods[name_of(pod)] = _copy(pod)
        return self

    def observed(self, lost: frozenset[str] = frozenset()) -> Observed:
        return Observed(
            ms=self.ms,
            pods=[copy.deepcopy(p) for p in self.pods.values()],
            revisions=[copy.deepcopy(r) for r in self.revisions.values()],
            podgroups=None if self.podgroups is None else list(self.podgroups.values()),
            lost=lost,
            now=self.now,
        )

    def plan(self, lost: frozenset[str] = frozenset()) -> Plan:
        return plan(self.observed(lost))

    def apply(self, p: Plan, *, create_as: Callable[[dict[str, Any]], dict[str, Any]] = ready) -> None:
        for gone in p.delete_pods:
            assert gone.name in self.pods, f"deleting {gone.name}, which does not exist"
            assert gone.uid == self.pods[gone.name]["metadata"]["uid"], "deletion precondition names another uid"
            del self.pods[gone.name]
        for pod in p.create_pods:
            assert name_of(pod) not in self.pods, f"creating {name_of(pod)}, which still exists"
            self.pods[name_of(pod)] = create_as(pod)
        for patch in p.patch_pods:
            self._patch(patch.name, patch.body)
        for cr in p.create_revisions:
            self.revisions[name_of(cr)] = copy.deepcopy(cr)
        for cr_name in p.delete_revisions:
            del self.revisions[cr_name]
        if self.podgroups is not None:
            for pg in p.apply_podgroups:
                self.podgroups[name_of(pg)] = copy.deepcopy(pg)
            for pg_name in p.delete_podgroups:
                del self.podgroups[pg_name]
        if p.status:
            self.ms = with_status(self.ms, p.status)
        self.plans.append(p)

    def _patch(self, name: str, body: dict[str, Any]) -> None:
        """A strategic-merge patch as the API server and kubelet (kwok) would apply it."""
        pod = self.pods[name]
        meta = body.get("metadata") or {}
        assert meta.get("uid") == pod["metadata"]["uid"], "patch precondition names another uid"
        for key in ("labels", "annotations"):
            target = pod["metadata"].setdefault(key, {})
            for k, v in (meta.get(key) or {}).items():
                if v is None:
                    target.pop(k, None)
                else:
                    target[k] = v
        images = {c["name"]: c["image"] for c in (body.get("spec") or {}).get("containers") or []}
        for container in pod["spec"]["containers"]:
            container["image"] = images.get(container["name"], container["image"])
        if not images:
            return
        status = pod.setdefault("status", {})
        old = {s.get("name"): s for s in status.get("containerStatuses") or []}
        if self.patched_pods_arrive:
            status["containerStatuses"] = [
                {
                    "name": c["name"],
                    "image": c["image"],
                    "ready": True,
                    "restartCount": int(old.get(c["name"], {}).get("restartCount", 0)) + 1,
                }
                for c in pod["spec"]["containers"]
            ]
            for condition in status.get("conditions") or []:
                if condition["type"] == "Ready" and condition["status"] != "True":
                    condition.update(status="True", lastTransitionTime=ts(self.now))
        else:  # restarted once, never Ready on the new image
            status["containerStatuses"] = [
                {"name": c["name"], "image": "old-image", "ready": False, "restartCount": 1}
                for c in pod["spec"]["containers"]
            ]
            for condition in status.get("conditions") or []:
                if condition["type"] == "Ready":
                    condition.update(status="False", lastTransitionTime=ts(self.now))

    def step(self, lost: frozenset[str] = frozenset()) -> Plan:
        p = self.plan(lost)
        self.apply(p)
        return p

    def converge(self, max_steps: int = 30) -> int:
        """Step until a plan neither creates nor deletes anything; the number of steps taken."""
        for steps in range(1, max_steps + 1):
            p = self.step()
            if not (
                p.create_pods
                or p.delete_pods
                or p.patch_pods
                or p.create_revisions
                or p.delete_revisions
                or p.apply_podgroups
            ):
                return steps
        raise AssertionError(f"no convergence in {max_steps} steps")

    def by_revision(self) -> dict[str, set[int]]:
        out: dict[str, set[int]] = {}
        for pod in self.pods.values():
            out.setdefault(str(revision(pod)), set()).add(ordinal(pod))
        return out


def world(ms: ModelServing, *, podgroups: bool = False) -> World:
    """A world with every Pod of ``ms`` created, Running and Ready, and its revision stored."""
    w = World(ms=ms, podgroups={} if podgroups else None)
    w.converge()
    return w
