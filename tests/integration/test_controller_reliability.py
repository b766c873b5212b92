"""The reference controller survives crashes: SIGKILL at random points, and changes made while it is down.

Each test runs a controller of its own on the embedded cluster (least privilege, as the harness
runs it), kills it with SIGKILL a random 0-300 ms after a change, starts a new one and checks that
the new process finishes the job exactly: the expected Pods and no others, each created once, with
the ModelServing as controller owner, and the status converged. A watch running in a thread records
every Pod event of the namespace, so "created once" and "left alone" are checked from the event
history, not guessed from a final listing.

Serial (they kill and restart a controller; a second controller acting on the same objects would
make the results meaningless) and slow (about a minute each). Run with ``-s`` to see the trial
counts and where the kills landed.
"""

from __future__ import annotations

import collections
import copy
import json
import os
import random
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client, watch

from conformance.cluster.faults import Fault, FaultInjector
from conformance.cluster.kube import api_client as make_api_client
from conformance.cluster.local.processes import pid_alive
from conformance.cluster.provider import ClusterInfo
from conformance.cluster.testing import shared_dir
from conformance.framework.waits import wait_for
from conformance.implementations import reference

from . import modelservings

# The own-controller pass runs on xdist workers: these tests take turns on the shared cluster
# (the alone_on_the_shared_cluster fixture), so no two of their controllers act on it at once.
pytestmark = [pytest.mark.cluster, pytest.mark.serial, pytest.mark.slow, pytest.mark.own_controller]

GROUP, VERSION, PLURAL = modelservings.GROUP, modelservings.VERSION, modelservings.PLURAL
NAME_LABEL = modelservings.NAME_LABEL
GROUP_LABEL = "modelserving.volcano.sh/group-name"
ROLE_ID_LABEL = "modelserving.volcano.sh/role-id"
WAIT = 60.0
MAX_KILL_DELAY = 0.3
SCALE_TRIALS = 26  # alternately up and down: 13 scale-ups, 13 scale-downs
RECOVERY_TRIALS = 6
WORKERS = 2  # each group: one role instance of an entry Pod and two worker Pods
PODS_PER_GROUP = 1 + WORKERS

SEED = int(os.environ.get("KTHENA_RELIABILITY_SEED", random.randrange(2**32)))


# -- the test's own controller ----------------------------------------------------------------------


class Controllers:
    """The reference controller as a crashing process: started, SIGKILLed and started again.

    Each process logs to a file of its own: ``reference.start`` waits for "caches synced" anywhere
    in its log file, so a log shared across restarts would let it return before the new process
    has synced (or even started successfully).
    """

    def __init__(self, kubeconfig: Path, directory: Path) -> None:
        self.kubeconfig = kubeconfig
        self.directory = directory
        self.starts = 0
        self.current: reference.RunningController | None = None

    def start(self) -> None:
        assert self.current is None or self.current.process.poll() is not None, "one controller at a time"
        self.starts += 1
        log = self.directory / f"ctrl-{self.starts}.log"
        self.current = reference.start(self.kubeconfig, log, owner_pid=os.getpid())

    def kill(self) -> None:
        assert self.current is not None
        self.current.kill()

    def stop(self) -> None:
        if self.current is not None:
            self.current.stop()

    def logs(self, lines: int = 15) -> str:
        """The last lines of every controller process's log (the killed ones' too)."""
        parts = []
        for n in range(1, self.starts + 1):
            log = self.directory / f"ctrl-{n}.log"
            text = log.read_text(errors="replace").splitlines()[-lines:] if log.exists() else ["<no log>"]
            parts.append(f"--- controller {n} log ---\n" + "\n".join(text))
        return "\n".join(parts)

    def tail(self, lines: int = 30) -> str:
        if self.current is None or not self.current.log.exists():
            return "<no log>"
        text = self.current.log.read_text(errors="replace").splitlines()
        return "\n".join(text[-lines:])


@pytest.fixture
def controllers(
    alone_on_the_shared_cluster: None,
    cluster: ClusterInfo,
    namespace: str,
    tmp_path: Path,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Controllers]:
    """The test's controller, stopped before its namespace is deleted (it watches every namespace)."""
    record = shared_dir(tmp_path_factory) / "reference-controller.json"
    if record.exists() and pid_alive(json.loads(record.read_text())["pid"]):
        pytest.skip("the shared reference controller runs in this session; run these in the serial pass (-m serial)")
    reference.install(cluster)
    kubeconfig = reference.token_kubeconfig(cluster, tmp_path)
    ctl = Controllers(kubeconfig, tmp_path)
    ctl.start()
    try:
        yield ctl
    finally:
        ctl.stop()


# -- the cluster side -------------------------------------------------------------------------------


def modelserving(name: str, replicas: int, **spec: Any) -> dict[str, Any]:
    pod = {"spec": {"containers": [{"name": "engine", "image": "engine:v1", "resources": {"requests": {"cpu": "1"}}}]}}
    role = {
        "name": "r",
        "replicas": 1,
        "workerReplicas": WORKERS,
        "entryTemplate": pod,
        "workerTemplate": copy.deepcopy(pod),
    }
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "ModelServing",
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "schedulerName": "default-scheduler",
            "template": {"roles": [role]},
            **spec,
        },
    }


def pod_names(ms: str, ordinals: range | list[int]) -> set[str]:
    return {f"{ms}-{o}-r-0-{k}" for o in ordinals for k in range(PODS_PER_GROUP)}


def running_ready(pod: Any) -> bool:
    ready = any(c.type == "Ready" and c.status == "True" for c in pod.status.conditions or [])
    return bool(pod.status.phase == "Running" and ready and pod.metadata.deletion_timestamp is None)


class World(modelservings.World):
    """The shared handles, plus the checks these trials need."""

    def scrub_status(self, name: str) -> None:
        """Make the status say nothing is available, so only a new write can say otherwise."""
        self.custom.patch_namespaced_custom_object_status(
            GROUP, VERSION, self.ns, PLURAL, name, {"status": {"availableReplicas": 0}}
        )

    def converged(self, name: str, replicas: int, ctl: Controllers) -> dict[str, Any]:
        def settled(ms: dict[str, Any]) -> bool:
            status = ms.get("status") or {}
            return bool(
                ms["spec"]["replicas"] == replicas
                and status.get("availableReplicas") == status.get("replicas") == replicas
                and status.get("observedGeneration") == ms["metadata"]["generation"]
            )

        try:
            return wait_for(f"{name}: {replicas} ServingGroups available", lambda: self.get(name), until=settled,
                            timeout=WAIT)  # fmt: skip
        except AssertionError as exc:
            raise AssertionError(f"{exc}\n--- controller log ---\n{ctl.tail()}") from None

    def assert_exact(self, name: str, uid: str, replicas: int) -> dict[str, Any]:
        """Exactly the Pods of ordinals 0..replicas-1, each owned by the ModelServing, Running and Ready."""
        pods = self.pods(name)
        expected = pod_names(name, range(replicas))
        assert set(pods) == expected, (
            f"missing {sorted(expected - set(pods))}, unexpected {sorted(set(pods) - expected)}"
        )
        assert len(pods) == replicas * PODS_PER_GROUP
        everything = {p.metadata.name for p in self.core.list_namespaced_pod(self.ns).items}
        assert everything == expected, f"Pods without the label: {sorted(everything - expected)}"
        for pod_name, pod in pods.items():
            ordinal = int(pod_name.split("-")[-4])
            labels = pod.metadata.labels
            assert labels[GROUP_LABEL] == f"{name}-{ordinal}" and labels[ROLE_ID_LABEL] == "r-0", pod_name
            owners = [o for o in pod.metadata.owner_references or [] if o.controller]
            assert [(o.kind, o.name, o.uid) for o in owners] == [("ModelServing", name, uid)], pod_name
            assert running_ready(pod), (
                f"{pod_name}: phase {pod.status.phase}, deleting {pod.metadata.deletion_timestamp}"
            )
        return pods


# -- every Pod event, recorded ------------------------------------------------------------------------


@dataclass(frozen=True)
class PodEvent:
    type: str  # ADDED | MODIFIED | DELETED
    name: str
    uid: str
    deleting: bool = False  # the Pod had a deletionTimestamp (a graceful deletion was asked for)


@dataclass
class PodHistory:
    """A watch (in a thread) on the namespace's Pods of one ModelServing, from a resourceVersion on."""

    api: Any
    namespace: str
    selector: str
    events: list[PodEvent] = field(default_factory=list)
    live: dict[str, str] = field(default_factory=dict)  # name -> uid, as the events tell it
    error: BaseException | None = None

    def __post_init__(self) -> None:
        self.core = client.CoreV1Api(self.api)
        listed = self.core.list_namespaced_pod(self.namespace, label_selector=self.selector)
        self.live = {p.metadata.name: p.metadata.uid for p in listed.items}
        self._lock = threading.Lock()
        self._watch = watch.Watch()
        self._thread = threading.Thread(
            target=self._run, args=(listed.metadata.resource_version,), name="pod-history", daemon=True
        )
        self._thread.start()

    def _run(self, resource_version: str) -> None:
        try:
            for raw in self._watch.stream(
                self.core.list_namespaced_pod,
                self.namespace,
                label_selector=self.selector,
                resource_version=resource_version,
            ):
                obj = raw["raw_object"]
                if raw["type"] not in ("ADDED", "MODIFIED", "DELETED"):
                    raise RuntimeError(f"watch: {raw['type']} {obj}")
                meta = obj["metadata"]
                with self._lock:
                    self.events.append(PodEvent(raw["type"], meta["name"], meta["uid"], "deletionTimestamp" in meta))
                    if raw["type"] == "DELETED":
                        self.live.pop(meta["name"], None)
                    else:
                        self.live[meta["name"]] = meta["uid"]
        except BaseException as exc:
            self.error = exc

    def mark(self) -> Window:
        with self._lock:
            return Window(len(self.events), dict(self.live))

    def since(self, mark: Window) -> Window:
        with self._lock:
            return Window(mark.start, mark.live, list(self.events[mark.start :]))

    def catch_up(self, pods: dict[str, Any]) -> None:
        """Wait until the recorded history has reached the listed state ``pods``."""
        want = {name: p.metadata.uid for name, p in pods.items()}

        def view() -> dict[str, str]:
            assert self.error is None, f"the history watch failed: {self.error!r}"
            with self._lock:
                return dict(self.live)

        wait_for("the Pod history to catch up", view, until=lambda v: v == want, timeout=WAIT)

    def stop(self) -> None:
        self._watch.stop()


@pytest.fixture
def world(api_client: Any, namespace: str) -> Iterator[World]:
    w = World(api_client, namespace)
    yield w
    # Delete the ModelServings first: the next test's controller watches every namespace and would
    # otherwise keep recreating this one's Pods while the namespace terminates.
    for ms in w.custom.list_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL)["items"]:
        w.custom.delete_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, ms["metadata"]["name"])


def history_for(cluster: ClusterInfo, world: World, name: str) -> PodHistory:
    return PodHistory(make_api_client(cluster.kubeconfig, cluster.context), world.ns, f"{NAME_LABEL}={name}")


@dataclass
class Window:
    """The events from a mark on, and which Pods lived at the mark."""

    start: int
    live: dict[str, str]
    events: list[PodEvent] = field(default_factory=list)

    def created(self, name: str) -> list[str]:
        """The UIDs Pod ``name`` was created with in the window."""
        seen: list[str] = []
        for e in self.events:
            if e.name == name and e.type != "DELETED" and e.uid != self.live.get(name) and e.uid not in seen:
                seen.append(e.uid)
        return seen

    def deleted(self, name: str) -> list[str]:
        return [e.uid for e in self.events if e.name == name and e.type == "DELETED"]

    def story(self, names: set[str]) -> str:
        """The window's events of ``names``, one line each, to explain a failed trial."""
        return "\n".join(
            f"{e.type:8} {e.name} {e.uid}{' (deleting)' if e.deleting else ''}" for e in self.events if e.name in names
        )

    def touched(self, name: str) -> list[PodEvent]:
        """Creations and deletions of ``name`` (status updates aside)."""
        return [e for e in self.events if e.name == name and e.type != "MODIFIED"]


def kill_after_random_delay(rng: random.Random, ctl: Controllers) -> float:
    # Random in [0, 300 ms], denser near 0 (median 75 ms): the controller acts within tens of
    # milliseconds of a change, so a uniform delay would mostly kill it after it has finished.
    delay = MAX_KILL_DELAY * rng.random() ** 2
    time.sleep(delay)  # the experiment: where the crash lands, not synchronisation
    ctl.kill()
    return delay


def fresh(names: set[str], before: dict[str, str]) -> Callable[[dict[str, Any]], bool]:
    """Every Pod in ``names`` exists with a UID other than its UID ``before``, Running and Ready."""

    def check(pods: dict[str, Any]) -> bool:
        return all(n in pods and pods[n].metadata.uid != before[n] and running_ready(pods[n]) for n in names)

    return check


# -- a. kill -9 while scaling --------------------------------------------------------------------------


def test_sigkill_during_scaling_converges_to_exactly_the_wanted_pods(
    cluster: ClusterInfo, controllers: Controllers, world: World
) -> None:
    rng = random.Random(SEED)
    name = "chaos"
    ms = world.create(modelserving(name, replicas=1))
    uid = ms["metadata"]["uid"]
    world.converged(name, 1, controllers)
    world.assert_exact(name, uid, 1)
    history = history_for(cluster, world, name)
    current = 1
    trials = collections.Counter[str]()
    landed = collections.Counter[str]()
    try:
        for trial in range(SCALE_TRIALS):
            up = trial % 2 == 0
            target = rng.randint(5, 7) if up else rng.randint(1, 3)
            direction = "up" if up else "down"
            mark = history.mark()
            world.patch(name, {"spec": {"replicas": target}})
            delay = kill_after_random_delay(rng, controllers)
            # How far the killed process got: the Pods it had created or started deleting.
            snapshot = world.pods(name)
            if up:
                done = len(set(snapshot) - pod_names(name, range(current)))
                needed = (target - current) * PODS_PER_GROUP
            else:
                going = pod_names(name, range(target, current))
                done = sum(1 for n in going if n not in snapshot or snapshot[n].metadata.deletion_timestamp)
                needed = len(going)
            stage = "before any write" if done == 0 else "after every write" if done == needed else "mid-way"
            landed[f"{direction}: {stage}"] += 1
            controllers.start()
            world.converged(name, target, controllers)
            pods = world.assert_exact(name, uid, target)
            history.catch_up(pods)
            events = history.since(mark)
            kept = pod_names(name, range(min(current, target)))
            for pod_name in sorted(kept):
                touched = events.touched(pod_name)
                assert not touched, f"trial {trial}: {pod_name} of a kept group was recreated: {touched}"
            if up:
                for pod_name in sorted(pod_names(name, range(current, target))):
                    assert len(events.created(pod_name)) == 1, f"trial {trial}: {pod_name} created more than once"
                    assert not events.deleted(pod_name), f"trial {trial}: new {pod_name} was deleted"
            else:
                for pod_name in sorted(pod_names(name, range(target, current))):
                    assert len(events.deleted(pod_name)) == 1, f"trial {trial}: {pod_name} not deleted once"
                    assert not events.created(pod_name), f"trial {trial}: removed {pod_name} was recreated"
            print(f"trial {trial:2d}: {current} -> {target} ({direction}), killed after {delay * 1000:3.0f} ms "
                  f"({done}/{needed} writes done)")  # fmt: skip
            trials[direction] += 1
            current = target
    finally:
        history.stop()
    total = sum(trials.values())
    print(f"seed {SEED}: {total} SIGKILL trials ({dict(trials)}), kills landed: {dict(landed)}")
    assert total >= 20
    assert controllers.starts == total + 1


# -- b. kill -9 during recovery ------------------------------------------------------------------------


def test_sigkill_during_role_recreate_rebuilds_the_instance_exactly_once(
    cluster: ClusterInfo, controllers: Controllers, world: World, faults: FaultInjector
) -> None:
    rng = random.Random(SEED + 1)
    name = "heal"
    replicas = 2
    ms = world.create(modelserving(name, replicas=replicas, recoveryPolicy="RoleRecreate"))
    uid = ms["metadata"]["uid"]
    world.converged(name, replicas, controllers)
    pods = world.assert_exact(name, uid, replicas)
    history = history_for(cluster, world, name)
    trials = 0
    try:
        for trial in range(RECOVERY_TRIALS):
            before = {n: p.metadata.uid for n, p in pods.items()}
            ordinal, k = rng.randrange(replicas), rng.randrange(PODS_PER_GROUP)
            victim = f"{name}-{ordinal}-r-0-{k}"
            instance = pod_names(name, [ordinal])
            history.catch_up(pods)
            mark = history.mark()
            world.scrub_status(name)
            faults.inject(world.ns, victim, Fault.FAIL)
            delay = kill_after_random_delay(rng, controllers)
            snapshot = world.pods(name)  # how far the killed process got with the instance
            progress = sorted(
                "gone" if n not in snapshot
                else "new" if snapshot[n].metadata.uid != before[n]
                else "deleting" if snapshot[n].metadata.deletion_timestamp
                else snapshot[n].status.phase
                for n in instance
            )  # fmt: skip
            controllers.start()
            try:
                wait_for(
                    f"the instance of {victim} rebuilt",
                    lambda: world.pods(name),
                    until=fresh(instance, before),
                    timeout=WAIT,
                )
            except AssertionError as exc:
                raise AssertionError(f"{exc}\n--- controller log ---\n{controllers.tail()}") from None
            world.converged(name, replicas, controllers)
            pods = world.assert_exact(name, uid, replicas)
            history.catch_up(pods)
            events = history.since(mark)
            for pod_name in sorted(instance):
                story = f"\n--- events of the instance ---\n{events.story(instance)}\n{controllers.logs()}"
                assert events.deleted(pod_name) == [before[pod_name]], f"trial {trial}: {pod_name} deleted once{story}"
                assert events.created(pod_name) == [pods[pod_name].metadata.uid], (
                    f"trial {trial}: {pod_name} rebuilt more than once: {events.created(pod_name)}{story}"
                )
            for pod_name in sorted(set(pods) - instance):
                assert pods[pod_name].metadata.uid == before[pod_name], f"trial {trial}: {pod_name} was rebuilt"
                assert not events.touched(pod_name), f"trial {trial}: {pod_name} was recreated"
            print(
                f"recovery trial {trial}: failed {victim}, killed after {delay * 1000:3.0f} ms "
                f"(instance then: {', '.join(progress)}); rebuilt once"
            )
            trials += 1
    finally:
        history.stop()
    print(f"seed {SEED + 1}: {trials} SIGKILL-during-recovery trials")
    assert trials == RECOVERY_TRIALS


class RefuseDeletion:
    """A ValidatingAdmissionPolicy refusing the deletion of one Pod: it freezes the controller
    between the deletions of one plan, where a crash could land, for as long as the test needs."""

    def __init__(self, api: Any, namespace: str, pod: str) -> None:
        self.admission = client.AdmissionregistrationV1Api(api)
        self.core = client.CoreV1Api(api)
        self.namespace, self.pod = namespace, pod
        self.name = f"refuse-delete-{namespace}"
        self.lifted = False

    def _refused(self) -> bool:
        try:
            self.core.delete_namespaced_pod(self.pod, self.namespace, dry_run="All")
        except client.ApiException as exc:
            if exc.status in (403, 422) and "refused by the test" in str(exc.body):
                return True
            if exc.status == 404:
                return False  # gone: nothing left to refuse
            raise
        return False

    def __enter__(self) -> RefuseDeletion:
        self.admission.create_validating_admission_policy(
            {
                "metadata": {"name": self.name},
                "spec": {
                    "failurePolicy": "Fail",
                    "matchConstraints": {
                        "resourceRules": [
                            {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["DELETE"], "resources": ["pods"]}
                        ]
                    },
                    "validations": [
                        {"expression": f"oldObject.metadata.name != '{self.pod}'", "message": "refused by the test"}
                    ],
                },
            }
        )
        self.admission.create_validating_admission_policy_binding(
            {
                "metadata": {"name": self.name},
                "spec": {
                    "policyName": self.name,
                    "validationActions": ["Deny"],
                    "matchResources": {
                        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": self.namespace}}
                    },
                },
            }
        )
        wait_for(f"the deletion of {self.pod} refused", self._refused, timeout=WAIT)
        return self

    def lift(self) -> None:
        if self.lifted:
            return
        self.lifted = True
        for delete in (
            self.admission.delete_validating_admission_policy_binding,
            self.admission.delete_validating_admission_policy,
        ):
            try:
                delete(self.name)
            except client.ApiException as exc:
                if exc.status != 404:
                    raise
        wait_for(f"the deletion of {self.pod} allowed again", lambda: not self._refused(), timeout=WAIT)

    def __exit__(self, *_: object) -> None:
        self.lift()


def test_a_crash_between_the_deletions_of_a_rebuild_still_rebuilds_the_whole_instance(
    api_client: Any, controllers: Controllers, world: World, faults: FaultInjector
) -> None:
    name = "half"
    ms = world.create(modelserving(name, replicas=1, recoveryPolicy="RoleRecreate"))
    uid = ms["metadata"]["uid"]
    world.converged(name, 1, controllers)
    before = {n: p.metadata.uid for n, p in world.assert_exact(name, uid, 1).items()}
    entry, failing, other = (f"{name}-0-r-0-{k}" for k in range(3))
    with RefuseDeletion(api_client, world.ns, entry) as refusal:
        faults.inject(world.ns, failing, Fault.FAIL)
        # The controller rebuilds the instance: the healthy worker goes, the entry's deletion is refused
        # (whether the failed Pod goes too is the implementation's choice: the fix is not to delete it yet).
        wait_for(f"{other} deleted", lambda: world.pods(name), until=lambda now: other not in now, timeout=WAIT)
        controllers.kill()  # the crash, with the entry Pod not yet deleted
        refusal.lift()
    controllers.start()
    try:
        pods = wait_for("the instance Running and Ready again", lambda: world.pods(name),
                        until=lambda now: fresh({failing, other}, before)(now) and entry in now and running_ready(now[entry]),
                        timeout=WAIT)  # fmt: skip
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n--- controller log ---\n{controllers.tail()}") from None
    assert pods[entry].metadata.uid != before[entry], f"{entry} survived the rebuild of its instance"


# -- c. a deletion while no controller runs ----------------------------------------------------------


@pytest.mark.parametrize("k", [0, WORKERS], ids=["entry", "worker"])
def test_a_pod_deleted_while_the_controller_is_down_is_recreated(
    cluster: ClusterInfo, controllers: Controllers, world: World, k: int
) -> None:
    """Under RoleRecreate a re-listed cache cannot tell an external deletion from one it never saw
    happen, so it is enough that the missing Pod comes back (once) and the group is Available."""
    name = "down"
    replicas = 2
    ms = world.create(modelserving(name, replicas=replicas, recoveryPolicy="RoleRecreate"))
    uid = ms["metadata"]["uid"]
    world.converged(name, replicas, controllers)
    pods = world.assert_exact(name, uid, replicas)
    before = {n: p.metadata.uid for n, p in pods.items()}
    history = history_for(cluster, world, name)
    try:
        history.catch_up(pods)
        mark = history.mark()
        victim = f"{name}-1-r-0-{k}"
        controllers.kill()
        world.core.delete_namespaced_pod(victim, world.ns)
        wait_for(f"{victim} gone", lambda: world.pods(name), until=lambda now: victim not in now, timeout=WAIT)
        world.scrub_status(name)  # from here on, only the new controller can report the group available
        controllers.start()
        try:
            wait_for(f"{victim} recreated", lambda: world.pods(name), until=fresh({victim}, before), timeout=WAIT)
        except AssertionError as exc:
            raise AssertionError(f"{exc}\n--- controller log ---\n{controllers.tail()}") from None
        world.converged(name, replicas, controllers)
        pods = world.assert_exact(name, uid, replicas)
        history.catch_up(pods)
        events = history.since(mark)
    finally:
        history.stop()
    assert events.created(victim) == [pods[victim].metadata.uid], "recreated once"
    for other in sorted(set(pods) - pod_names(name, [1])):
        assert not events.touched(other), f"{other}: the other ServingGroup is left alone"
    rebuilt = sorted(n for n in pods if pods[n].metadata.uid != before[n])
    print(f"deleted {victim} while no controller ran; the new one rebuilt {rebuilt}")
