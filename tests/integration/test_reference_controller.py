"""The reference controller on the embedded cluster, running with least privilege.

Each test creates a ModelServing in its own namespace and checks what the controller made of it:
Pods with upstream's names, labels and env; scale up and down; garbage collection; recovery
under each policy with the restart grace; revisions and their history limit; status and
conditions; events; PodGroups.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest
from kubernetes import watch

from conformance.cluster.faults import Fault, FaultInjector
from conformance.framework.waits import wait_for

from . import modelservings

pytestmark = pytest.mark.cluster

GROUP, VERSION, PLURAL = modelservings.GROUP, modelservings.VERSION, modelservings.PLURAL
NAME = modelservings.NAME_LABEL


def modelserving(
    name: str, *, replicas: int = 2, roles: list[dict[str, Any]] | None = None, **spec: Any
) -> dict[str, Any]:
    roles = roles or [role("prefill", worker_replicas=1), role("decode", worker_replicas=1)]
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "ModelServing",
        "metadata": {"name": name},
        "spec": {"replicas": replicas, "schedulerName": "default-scheduler", "template": {"roles": roles}, **spec},
    }


def role(name: str, *, replicas: int = 1, worker_replicas: int = 0, image: str = "engine:v1") -> dict[str, Any]:
    pod = {"spec": {"containers": [{"name": "engine", "image": image, "resources": {"requests": {"cpu": "1"}}}]}}
    out: dict[str, Any] = {"name": name, "replicas": replicas, "workerReplicas": worker_replicas, "entryTemplate": pod}
    if worker_replicas:
        out["workerTemplate"] = copy.deepcopy(pod)
    return out


class World(modelservings.World):
    """The shared handles, plus waiting for a ModelServing to be available."""

    def available(self, name: str, replicas: int, *, timeout: float = 60) -> dict[str, Any]:
        def status() -> dict[str, Any]:
            return dict(self.get(name).get("status") or {})

        return wait_for(
            f"{name}: {replicas} ServingGroups available",
            status,
            until=lambda s: (
                s.get("availableReplicas") == replicas == s.get("replicas")
                and s.get("observedGeneration") == self.get(name)["metadata"]["generation"]
            ),
            timeout=timeout,
        )


@pytest.fixture
def world(api_client: Any, namespace: str, reference_controller: dict[str, Any]) -> World:
    return World(api_client, namespace)


def uids(pods: dict[str, Any], keep: Callable[[str], bool] = lambda _: True) -> dict[str, str]:
    return {n: p.metadata.uid for n, p in pods.items() if keep(n)}


def test_creates_groups_roles_and_pods_with_upstream_names_labels_env_and_owners(world: World) -> None:
    ms = world.create(modelserving("llm"))
    world.available("llm", 2)
    pods = world.pods("llm")
    assert sorted(pods) == [f"llm-{g}-{r}-0-{k}" for g in (0, 1) for r in ("decode", "prefill") for k in (0, 1)]
    entry = pods["llm-1-prefill-0-0"]
    labels = entry.metadata.labels
    assert labels[NAME] == "llm" and labels["modelserving.volcano.sh/group-name"] == "llm-1"
    assert (
        labels["modelserving.volcano.sh/role"] == "prefill" and labels["modelserving.volcano.sh/role-id"] == "prefill-0"
    )
    assert labels["modelserving.volcano.sh/entry"] == "true"
    assert "modelserving.volcano.sh/entry" not in pods["llm-1-prefill-0-1"].metadata.labels
    env = {e.name: e.value for e in pods["llm-1-prefill-0-1"].spec.containers[0].env}
    assert env == {"GROUP_SIZE": "2", "WORKER_INDEX": "1"}
    owner = entry.metadata.owner_references[0]
    assert (owner.kind, owner.name, owner.uid, owner.controller, owner.block_owner_deletion) == (
        "ModelServing", "llm", ms["metadata"]["uid"], True, True,
    )  # fmt: skip
    assert entry.spec.scheduler_name == "default-scheduler"
    assert not entry.spec.subdomain, "DNS settings belong to the opt-in headless-service plugin"


def test_status_conditions_selector_and_events(world: World) -> None:
    world.create(modelserving("st", replicas=2))
    status = world.available("st", 2)
    assert status["updatedReplicas"] == status["currentReplicas"] == 2
    assert status["currentRevision"] == status["updateRevision"]
    conditions = {c["type"]: (c["status"], c["reason"]) for c in status["conditions"]}
    assert conditions["Available"] == ("True", "AllGroupsReady")
    selected = world.core.list_namespaced_pod(world.ns, label_selector=status["labelSelector"]).items
    assert len(selected) == status["replicas"], "labelSelector selects one Pod per ServingGroup"
    assert "RoleCreating" in world.events("st")
    wait_for("RoleRunning events", lambda: world.events("st"), until=lambda reasons: reasons.count("RoleRunning") >= 4)


def test_scale_up_fills_lowest_ordinals_and_scale_down_removes_highest(world: World) -> None:
    world.create(modelserving("sc", replicas=1, roles=[role("r")]))
    world.available("sc", 1)
    world.patch("sc", {"spec": {"replicas": 3}})
    world.available("sc", 3)
    assert sorted(world.pods("sc")) == ["sc-0-r-0-0", "sc-1-r-0-0", "sc-2-r-0-0"]
    world.patch("sc", {"spec": {"replicas": 2}})
    world.available("sc", 2)
    assert sorted(world.pods("sc")) == ["sc-0-r-0-0", "sc-1-r-0-0"]
    assert "RoleDeleting" in world.events("sc")


def test_scale_down_removes_not_ready_groups_first(world: World, faults: FaultInjector) -> None:
    world.create(modelserving("nr", replicas=3, roles=[role("r")]))
    world.available("nr", 3)
    faults.inject(world.ns, "nr-0-r-0-0", Fault.NOT_READY)
    wait_for("group 0 not ready", lambda: world.get("nr")["status"]["availableReplicas"], until=lambda n: n == 2)
    world.patch("nr", {"spec": {"replicas": 2}})
    wait_for(
        "group 0 removed", lambda: sorted(world.pods("nr")), until=lambda names: names == ["nr-1-r-0-0", "nr-2-r-0-0"]
    )


def test_deleting_the_modelserving_garbage_collects_everything(world: World) -> None:
    world.create(modelserving("gc", replicas=1))
    world.available("gc", 1)
    assert world.apps.list_namespaced_controller_revision(world.ns, label_selector=f"{NAME}=gc").items
    world.custom.delete_namespaced_custom_object(GROUP, VERSION, world.ns, PLURAL, "gc")
    # kube-controller-manager's garbage collector discovers new CRDs every 30 s: a ModelServing
    # deleted right after its CRD was installed waits for that resync.
    wait_for("pods gone", lambda: world.pods("gc"), until=lambda pods: not pods, timeout=90)
    wait_for(
        "revisions gone",
        lambda: world.apps.list_namespaced_controller_revision(world.ns, label_selector=f"{NAME}=gc").items,
        until=lambda items: not items,
    )


@pytest.mark.parametrize(
    ("policy", "rebuilt"),
    [
        ("RoleRecreate", {"rr-0-prefill-0-0", "rr-0-prefill-0-1"}),
        ("ServingGroupRecreate", {"rr-0-prefill-0-0", "rr-0-prefill-0-1", "rr-0-decode-0-0", "rr-0-decode-0-1"}),
        ("None", {"rr-0-prefill-0-1"}),
    ],
)
def test_failed_pod_is_recovered_per_recovery_policy(
    world: World, faults: FaultInjector, policy: str, rebuilt: set[str]
) -> None:
    world.create(modelserving("rr", replicas=2, recoveryPolicy=policy))
    world.available("rr", 2)
    before = uids(world.pods("rr"))
    faults.inject(world.ns, "rr-0-prefill-0-1", Fault.FAIL)

    def changed() -> set[str]:
        now = uids(world.pods("rr"))
        return {n for n in before if now.get(n) != before[n]}

    wait_for(f"{policy} to rebuild {sorted(rebuilt)}", changed, until=lambda c: c >= rebuilt, timeout=60)
    world.available("rr", 2)
    assert changed() == rebuilt, "nothing outside the policy's scope is rebuilt"


def test_restart_grace_period_delays_the_rebuild(world: World, faults: FaultInjector) -> None:
    grace = 6
    body = modelserving("gr", replicas=1, roles=[role("r")])
    body["spec"]["template"]["restartGracePeriodSeconds"] = grace
    world.create(body)
    world.available("gr", 1)
    listed = world.core.list_namespaced_pod(world.ns, field_selector="metadata.name=gr-0-r-0-0")
    uid = listed.items[0].metadata.uid
    # The Pod's history comes from a watch, not a poll: a poller starved for the grace (CI's shared
    # cluster under load) could miss the error window and blame the controller.
    history = _PodHistory(world, "gr-0-r-0-0", listed.metadata.resource_version)
    # Restart first, then not Ready: the Pod is in error from the Ready transition on, so the grace
    # counts from a time the Pod records (injected the other way round, a slow kwok could apply the
    # restart after the grace had already run from the not-Ready transition).
    faults.inject(world.ns, "gr-0-r-0-0", Fault.RESTART)
    faults.inject(world.ns, "gr-0-r-0-0", Fault.NOT_READY)
    seen = history.until(lambda p: p.metadata.uid != uid, timeout=60)
    in_error = [p for p in seen if p.metadata.uid == uid and _restarted_not_ready(p)]
    assert in_error, (
        f"the Pod was rebuilt before it was ever restarted and not Ready: the {grace}s grace was not honoured"
    )
    since = next(c.last_transition_time for c in in_error[0].status.conditions if c.type == "Ready")
    waited = (seen[-1].metadata.creation_timestamp - since).total_seconds()
    assert waited >= grace - 1, (
        f"rebuilt {waited:.1f}s after the error; the grace is {grace}s (1s timestamp resolution)"
    )


def _restarted_not_ready(p: Any) -> bool:
    statuses = p.status.container_statuses or []
    return bool(statuses) and statuses[0].restart_count == 1 and not statuses[0].ready


class _PodHistory:
    """Every version of one Pod (by name, across recreations) from ``resource_version`` on."""

    def __init__(self, world: World, name: str, resource_version: str) -> None:
        self._world, self._name, self._rv = world, name, resource_version

    def until(self, done: Callable[[Any], bool], *, timeout: float) -> list[Any]:
        """The versions seen, in order, up to and including the first for which ``done`` holds."""
        seen: list[Any] = []
        stream = watch.Watch()  # type: ignore[no-untyped-call]
        for event in stream.stream(
            self._world.core.list_namespaced_pod, self._world.ns, field_selector=f"metadata.name={self._name}",
            resource_version=self._rv, timeout_seconds=int(timeout),
        ):  # fmt: skip
            if event["type"] in ("ADDED", "MODIFIED"):
                seen.append(event["object"])
                if done(event["object"]):
                    stream.stop()
                    return seen
        raise AssertionError(
            f"{self._name} did not reach the expected state within {timeout:.0f}s; "
            f"{len(seen)} version(s) seen, the last: {seen[-1].status if seen else None}"
        )


def rolled_out(ms: dict[str, Any]) -> bool:
    status = ms.get("status") or {}
    return bool(
        status.get("observedGeneration") == ms["metadata"]["generation"]
        and status.get("updatedReplicas") == status.get("availableReplicas") == ms["spec"]["replicas"]
        and status.get("currentRevision") == status.get("updateRevision")
    )


def test_template_change_rolls_groups_and_keeps_revision_history(world: World) -> None:
    body = modelserving("rv", replicas=2, roles=[role("r")])
    body["spec"]["revisionHistoryLimit"] = 1
    world.create(body)
    first = world.available("rv", 2)["updateRevision"]
    for image in ("engine:v2", "engine:v3"):
        world.patch("rv", {"spec": {"template": {"roles": [role("r", image=image)]}}})
        status = wait_for("rollout done", lambda: world.get("rv"), until=rolled_out, timeout=60)["status"]
        assert {p.spec.containers[0].image for p in world.pods("rv").values()} == {image}
    revisions = wait_for(
        "history pruned to the limit",
        lambda: world.apps.list_namespaced_controller_revision(world.ns, label_selector=f"{NAME}=rv").items,
        until=lambda items: len(items) == 2,  # the live revision plus one non-live one
    )
    names = {r.metadata.labels["modelserving.volcano.sh/revision"] for r in revisions}
    assert status["updateRevision"] in names and first not in names


def test_replica_changes_do_not_create_revisions(world: World) -> None:
    world.create(modelserving("rp", replicas=1, roles=[role("r")]))
    rev = world.available("rp", 1)["updateRevision"]
    world.patch("rp", {"spec": {"replicas": 2, "template": {"roles": [role("r", replicas=2)]}}})
    status = world.available("rp", 2)
    assert status["updateRevision"] == rev
    assert len(world.pods("rp")) == 4


def test_podgroup_per_serving_group_with_the_gang_contract(world: World) -> None:
    body = modelserving("gang", replicas=2)
    body["spec"]["schedulerName"] = "volcano"
    body["spec"]["template"]["gangPolicy"] = {"minRoleReplicas": {"prefill": 1}}
    body["metadata"]["annotations"] = {"scheduling.volcano.sh/queue-name": "llm"}
    world.create(body)
    world.available("gang", 2)
    groups = wait_for(
        "PodGroups",
        lambda: world.custom.list_namespaced_custom_object("scheduling.volcano.sh", "v1beta1", world.ns, "podgroups")[
            "items"
        ],
        until=lambda items: len(items) == 2,
    )
    spec = {g["metadata"]["name"]: g["spec"] for g in groups}["gang-0"]
    assert spec["minMember"] == 4 and spec["queue"] == "llm"
    assert spec["minTaskMember"] == {"prefill-0": 2, "decode-0": 2}
    pod = world.pods("gang")["gang-0-decode-0-1"]
    assert pod.metadata.annotations["scheduling.k8s.io/group-name"] == "gang-0"
    assert pod.metadata.annotations["volcano.sh/task-spec"] == "decode-0"
