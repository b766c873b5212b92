"""The eviction budget (rolloutStrategy.evictionStrategy) through the real Eviction API.

The reference controller answers ``pods/eviction`` as a validating webhook; these tests only look
at what the API server answers (201, or 429 with the webhook's message) and at the Pods that
result: refusals name the budget, concurrent evictions never break it, a node drain (cordon, then
evict through the Eviction API retrying on 429, as ``kubectl drain`` does) waits for the
controller to recreate each evicted group elsewhere, and a rolling update's unavailable group
counts against it.
"""

from __future__ import annotations

import concurrent.futures
import copy
import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from conformance.framework import drain
from conformance.framework.waits import wait_for

from . import modelservings

pytestmark = pytest.mark.cluster

GROUP, VERSION, PLURAL = modelservings.GROUP, modelservings.VERSION, modelservings.PLURAL
NAME = modelservings.NAME_LABEL
GROUP_LABEL = "modelserving.volcano.sh/group-name"
WORKERS = ("worker-0", "worker-1")  # the test cluster's untainted pool


def modelserving(
    name: str,
    replicas: int,
    strategy: dict[str, Any],
    *,
    roles: list[dict[str, Any]] | None = None,
    node_selector: dict[str, str] | None = None,
) -> dict[str, Any]:
    pod: dict[str, Any] = {"spec": {"containers": [{"name": "engine", "image": "engine:v1"}]}}
    if node_selector:
        pod["spec"]["nodeSelector"] = dict(node_selector)
    roles = roles or [{"name": "r", "replicas": 1, "workerReplicas": 0}]
    for role in roles:
        role["entryTemplate"] = copy.deepcopy(pod)
        if role.get("workerReplicas"):
            role["workerTemplate"] = copy.deepcopy(pod)
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "ModelServing",
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "schedulerName": "default-scheduler",
            "template": {"roles": roles},
            "rolloutStrategy": {"evictionStrategy": strategy},
        },
    }


def running_ready(pod: Any) -> bool:
    if pod.metadata.deletion_timestamp or not pod.status or pod.status.phase != "Running":
        return False
    return any(c.type == "Ready" and c.status == "True" for c in pod.status.conditions or [])


@dataclass(frozen=True)
class Answer:
    pod: str
    status: int
    message: str = ""


class World(modelservings.World):
    def evict(self, pod: str, *, dry_run: bool = False) -> Answer:
        """The Eviction API's answer; a 429 the webhook did not give (the API server's own flow
        control under load) is retried, as it is no answer about the budget."""
        body = client.V1Eviction(metadata=client.V1ObjectMeta(name=pod, namespace=self.ns))
        extra = {"dry_run": "All"} if dry_run else {}
        for _ in range(50):
            try:
                self.core.create_namespaced_pod_eviction(pod, self.ns, body, **extra)
            except ApiException as exc:
                message = str(json.loads(exc.body or "{}").get("message", "")) if exc.body else ""
                if exc.status == 429 and "admission webhook" not in message:
                    time.sleep(0.2)
                    continue
                return Answer(pod, int(exc.status or 0), message)
            return Answer(pod, 201)
        raise AssertionError(f"the Eviction of {pod} was throttled 50 times")

    def ready_groups(self, name: str, per_group: int) -> set[str]:
        """ServingGroups whose ``per_group`` Pods are all Running, Ready and not terminating."""
        by_group: dict[str, list[Any]] = {}
        for pod in self.pods(name).values():
            by_group.setdefault(pod.metadata.labels[GROUP_LABEL], []).append(pod)
        return {g for g, pods in by_group.items() if len(pods) == per_group and all(map(running_ready, pods))}

    def all_ready(self, name: str, replicas: int, per_group: int, timeout: float = 60) -> None:
        wait_for(
            f"{name}: {replicas} ready ServingGroups",
            lambda: self.ready_groups(name, per_group),
            until=lambda groups: len(groups) == replicas,
            timeout=timeout,
        )


@pytest.fixture
def world(api_client: Any, namespace: str, reference_controller: dict[str, Any]) -> World:
    if not reference_controller.get("webhook"):
        pytest.skip("the webhook is registered by the harness on the local provider only")
    return World(api_client, namespace)


@pytest.fixture
def node_label(api_client: Any, namespace: str) -> Iterator[tuple[str, str]]:
    """A label unique to this test on both worker Nodes (removed afterwards), to pin Pods there."""
    core = client.CoreV1Api(api_client)
    key = f"kthena-test/{namespace}"
    for node in WORKERS:
        core.patch_node(node, {"metadata": {"labels": {key: "yes"}}})
    try:
        yield key, "yes"
    finally:
        for node in WORKERS:
            core.patch_node(node, {"metadata": {"labels": {key: None}}})


def test_refused_with_429_and_a_message_saying_why(world: World) -> None:
    world.create(modelserving("tight", 2, {"minAvailable": 2}))
    world.all_ready("tight", 2, 1)
    answer = world.evict("tight-1-r-0-0")
    assert answer.status == 429, answer
    assert "would leave 1 ready ServingGroups of ModelServing" in answer.message, answer.message
    assert "below minAvailable 2" in answer.message and "ServingGroup tight-1" in answer.message
    assert world.pods("tight")["tight-1-r-0-0"].metadata.deletion_timestamp is None


def test_allowed_within_the_budget_and_the_group_comes_back(world: World, api_client: Any) -> None:
    world.create(modelserving("loose", 3, {"minAvailable": "50%"}))  # 1.5 -> 2
    world.all_ready("loose", 3, 1)
    uid = world.pods("loose")["loose-0-r-0-0"].metadata.uid
    assert world.evict("loose-0-r-0-0", dry_run=True).status == 201
    assert world.pods("loose")["loose-0-r-0-0"].metadata.deletion_timestamp is None
    leases = client.CoordinationV1Api(api_client).list_namespaced_lease(world.ns).items
    assert leases == [], "a dry run records nothing (sideEffects: NoneOnDryRun)"
    assert world.evict("loose-0-r-0-0").status == 201
    world.all_ready("loose", 3, 1)
    assert world.pods("loose")["loose-0-r-0-0"].metadata.uid != uid, "the evicted Pod was recreated"


def test_any_pod_disrupts_its_whole_group(world: World, api_client: Any, node_label: tuple[str, str]) -> None:
    key, value = node_label
    roles = [{"name": "r", "replicas": 1, "workerReplicas": 1}]
    world.create(modelserving("grp", 2, {"minAvailable": 1}, roles=roles, node_selector={key: value}))
    world.all_ready("grp", 2, 2)
    core = client.CoreV1Api(api_client)
    for node in WORKERS:  # evicted groups cannot come back until the label returns
        core.patch_node(node, {"metadata": {"labels": {key: None}}})
    assert world.evict("grp-0-r-0-1").status == 201  # a worker: group 0 is disrupted
    answer = world.evict("grp-1-r-0-0")  # group 1 is the only ready one left
    assert answer.status == 429, answer
    assert "would leave 0 ready ServingGroups" in answer.message and "below minAvailable 1" in answer.message
    for node in WORKERS:
        core.patch_node(node, {"metadata": {"labels": {key: value}}})
    world.all_ready("grp", 2, 2)
    assert world.evict("grp-1-r-0-0").status == 201


def test_role_level_protects_the_roles_in_the_map_only(world: World) -> None:
    roles = [
        {"name": "prefill", "replicas": 1, "workerReplicas": 0},
        {"name": "decode", "replicas": 1, "workerReplicas": 0},
    ]
    world.create(modelserving("rl", 2, {"protectionLevel": "Role", "roleMinAvailable": {"prefill": 2}}, roles=roles))
    world.all_ready("rl", 2, 2)
    answer = world.evict("rl-0-prefill-0-0")
    assert answer.status == 429, answer
    assert "ready instances of role prefill" in answer.message and "roleMinAvailable[prefill] 2" in answer.message
    assert world.evict("rl-0-decode-0-0").status == 201, "decode is absent from roleMinAvailable: unprotected"


def test_concurrent_evictions_never_break_the_budget(
    world: World, api_client: Any, node_label: tuple[str, str]
) -> None:
    """10 groups, minAvailable 7: of 10 simultaneous evictions (one per group) exactly 3 pass. The
    Nodes lose the label the Pods select once they run, so evicted groups cannot come back during
    the test: the answers and the Pods show the budget exactly."""
    key, value = node_label
    roles = [{"name": "r", "replicas": 1, "workerReplicas": 1}]
    world.create(modelserving("race", 10, {"minAvailable": 7}, roles=roles, node_selector={key: value}))
    world.all_ready("race", 10, 2, timeout=90)
    core = client.CoreV1Api(api_client)
    for node in WORKERS:
        core.patch_node(node, {"metadata": {"labels": {key: None}}})
    targets = [f"race-{g}-r-0-{g % 2}" for g in range(10)]  # entries and workers
    start = threading.Barrier(len(targets))

    def evict(pod: str) -> Answer:
        start.wait()
        return world.evict(pod)

    with concurrent.futures.ThreadPoolExecutor(len(targets)) as pool:
        answers = list(pool.map(evict, targets))
    allowed = [a.pod for a in answers if a.status == 201]
    refused = [a for a in answers if a.status == 429]
    assert len(allowed) == 3 and len(refused) == 7, answers
    assert all("below minAvailable 7" in a.message for a in refused), refused
    time.sleep(1)  # the evicted groups' replacements stay Pending (no Node has the label any more)
    ready = world.ready_groups("race", 2)
    assert len(ready) == 7, ready
    assert ready.isdisjoint({p.rsplit("-", 3)[0] for p in allowed})


def test_budget_during_a_rolling_update(world: World) -> None:
    """A rollout whose new Pods cannot be scheduled stalls with one group down (maxUnavailable 1):
    that group counts against minAvailable, so no ready group may be evicted until it is back."""
    world.create(modelserving("roll", 4, {"minAvailable": 3}))
    world.all_ready("roll", 4, 1)
    world.patch("roll", {"spec": {"template": {"roles": [_role_with(nodeSelector={"kthena-test/nowhere": "x"})]}}})

    def stalled() -> tuple[set[str], int]:
        pods = world.pods("roll").values()
        return world.ready_groups("roll", 1), sum(1 for p in pods if p.status.phase == "Pending")

    wait_for("the rollout to stall with one group Pending", stalled, until=lambda s: len(s[0]) == 3 and s[1] == 1)
    ready = sorted(stalled()[0])
    answer = world.evict(f"{ready[0]}-r-0-0")
    assert answer.status == 429, answer
    assert "would leave 2 ready ServingGroups" in answer.message and "below minAvailable 3" in answer.message
    world.patch("roll", {"spec": {"template": {"roles": [_role_with(image="engine:v2")]}}})
    wait_for(
        "the rollout to finish",
        lambda: world.pods("roll").values(),
        until=lambda pods: (
            len(pods) == 4 and all(p.spec.containers[0].image == "engine:v2" and running_ready(p) for p in pods)
        ),
        timeout=90,
    )
    assert world.evict("roll-0-r-0-0").status == 201


def _role_with(*, image: str = "engine:v1", **spec: Any) -> dict[str, Any]:
    pod = {"spec": {"containers": [{"name": "engine", "image": image}], **spec}}
    return {"name": "r", "replicas": 1, "workerReplicas": 0, "entryTemplate": pod}


# -- a node drain -----------------------------------------------------------------------------------


@pytest.mark.serial
def test_a_node_drain_respects_the_budget_and_completes_once_groups_are_back_elsewhere(
    world: World, api_client: Any, node_label: tuple[str, str]
) -> None:
    key, value = node_label
    world.create(modelserving("dr", 4, {"minAvailable": 3}, node_selector={key: value}))
    world.all_ready("dr", 4, 1)
    core = client.CoreV1Api(api_client)
    placed: dict[str, list[str]] = {}
    for pod in world.pods("dr").values():
        placed.setdefault(pod.spec.node_name, []).append(pod.metadata.name)
    node = max(placed, key=lambda n: len(placed[n]))
    assert len(placed[node]) >= 2, placed
    # The other Node only takes the Pods again 3 s into the drain (as if capacity arrived late), so
    # evicted groups cannot come back at once and the drain must wait for the budget.
    other = next(n for n in WORKERS if n != node)
    core.patch_node(other, {"metadata": {"labels": {key: None}}})
    capacity = threading.Timer(3.0, lambda: core.patch_node(other, {"metadata": {"labels": {key: value}}}))
    capacity.start()
    lowest = [4]
    stop = threading.Event()

    def watch() -> None:
        while not stop.is_set():
            lowest[0] = min(lowest[0], len(world.ready_groups("dr", 1)))
            time.sleep(0.05)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        # kubectl drain semantics (cordon, evict, retry 429s, wait until the node is empty), as the suite drains
        report = drain.drain(SimpleNamespace(core=core), node, timeout=120, namespace=world.ns)
    finally:
        stop.set()
        watcher.join()
        capacity.join()
        drain.uncordon(SimpleNamespace(core=core), node)
    assert lowest[0] >= 3, f"ready ServingGroups fell to {lowest[0]} during the drain: {report}"
    assert sorted(report.evicted) == sorted(f"{world.ns}/{name}" for name in placed[node]), report
    # 429s from the webhook (others can come from the API server's own flow control under load)
    budget = [a.message for a in report.refused if "admission webhook" in a.message]
    assert budget, f"the drain had to wait for the budget at least once: {report}"
    assert all("below minAvailable 3" in m for m in budget), budget
    world.all_ready("dr", 4, 1)
    assert all(p.spec.node_name != node for p in world.pods("dr").values())
