"""Availability during a rollout: a timeline of a ModelServing's Pods, and what it shows.

A rollout test starts a :class:`RolloutWatch` before it changes the spec and asks the timeline
afterwards: the most ServingGroups that existed at once (surge), the fewest that were available
(maxUnavailable), when a Pod at the target image first became Ready, which Pods kept their UID::

    with RolloutWatch(ms, "rollout", Layout.of(body)) as watch:
        ms.patch("rollout", {...new image...})
        watch.wait_for("rollout", "every Pod Ready at v2", lambda s: s.all_on(layout, "img:v2"))
    assert watch.min_ready_groups() >= 2

**How it observes.** A Pod watch on the test namespace in a background thread; every watch event
yields a :class:`Snapshot` of all the ModelServing's Pods as they are at that resourceVersion. A
watch delivers every change in order, so the timeline holds every intermediate state, not samples
(a Pod deleted while a replacement waits to start is seen). The watch reconnects from the last
resourceVersion it saw (no gap); it is re-listed when it fails or expires and every few seconds
for safety (a re-list is a snapshot too). Pods are the ModelServing's as everywhere in the suite
(:func:`~.modelserving.belongs`: the suite's template label, or the controller ownerReference).

**What a ServingGroup is, observably.** The spec speaks of ServingGroups with ordinals and Role
instances with indices but names no Pod label or name for them; the suite reads the label keys the
implementation declares (the support file's ``podLabels``, :class:`~.support.PodLabels`), by
default upstream Kthena's documented ones (``modelserving.volcano.sh/group-name: <ms>-<ordinal>``
and ``modelserving.volcano.sh/role-id: <role>-<index>``, ``../shared/notes/upstream-kthena-facts.md``).
A Pod without them cannot be placed: the analysis raises :class:`~.outcomes.Inconclusive` (error,
never a pass) naming the key and how to declare another. Role and entry/worker come from the
suite's own template labels.

**Fair readings** (the pure part below, unit tested):

* a Pod with a ``deletionTimestamp`` is on its way out: it never counts toward surge (a group or
  Role instance *exists* when it has a Pod that is not terminating), and it makes its group or
  instance unavailable;
* a Pod is *available* when it is Running, Ready, not terminating and its containers run the
  images its spec asks for (an in-place image patch the kubelet has not yet applied makes it
  unavailable: the container is about to restart);
* a ServingGroup is *ready* when it has exactly the Pods the manifest asks for per group (sum over
  Roles of replicas x (1 + workerReplicas)), all available; a Role instance likewise with
  1 + workerReplicas Pods.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .modelserving import ENGINE, MEMBER_LABEL, ROLE_LABEL, ModelServings, belongs
from .outcomes import Inconclusive
from .support import PodLabels
from .waits import wait_for

GROUP_LABEL = PodLabels().serving_group  # the defaults (upstream Kthena's); a support file may declare others
ROLE_ID_LABEL = PodLabels().role_instance
RESYNC_SECONDS = 5.0
_ORDINAL = re.compile(r"(?:^|-)(0|[1-9][0-9]*)$")
_DECLARE = "declare the implementation's keys in the support file's podLabels (docs/testing-your-implementation.md)"


def same_image(spec: str, running: str) -> bool:
    """Whether a container status's ``image`` reports the spec's ``image`` (runtimes may spell a
    Docker Hub reference fully: ``docker.io/library/x:1`` for ``x:1``)."""
    if spec == running:
        return True
    return any(running == prefix + spec for prefix in ("docker.io/library/", "docker.io/"))


@dataclass(frozen=True)
class PodState:
    """What the timeline keeps of one Pod (from its JSON, see :meth:`from_json`)."""

    name: str
    uid: str
    group: str | None = None  # upstream's group-name label
    role: str = ""  # the suite's role label
    role_id: str | None = None  # upstream's role-id label
    member: str = ""  # "entry" | "worker" (the suite's label)
    images: tuple[str, ...] = ()  # spec.containers[].image
    names: tuple[str, ...] = ()  # spec.containers[].name, in the same order
    running: tuple[str, ...] = ()  # status.containerStatuses[].image, in spec container order ("" if none)
    phase: str = ""
    ready: bool = False  # the Ready condition is True
    terminating: bool = False  # metadata.deletionTimestamp is set
    restarts: int = 0
    owner: str = ""  # the controller ownerReference's UID
    labels: PodLabels = field(default_factory=PodLabels, compare=False, repr=False)  # keys group/role_id came from

    @classmethod
    def from_json(cls, pod: dict[str, Any], keys: PodLabels | None = None) -> PodState:
        keys = keys or PodLabels()
        meta = pod.get("metadata") or {}
        labels = meta.get("labels") or {}
        spec, status = pod.get("spec") or {}, pod.get("status") or {}
        containers = [c.get("name", "") for c in spec.get("containers") or []]
        statuses = {s.get("name", ""): s for s in status.get("containerStatuses") or []}
        owner = next((r.get("uid", "") for r in meta.get("ownerReferences") or [] if r.get("controller")), "")
        return cls(
            name=str(meta.get("name", "")),
            uid=str(meta.get("uid", "")),
            group=labels.get(keys.serving_group),
            role=str(labels.get(ROLE_LABEL, "")),
            role_id=labels.get(keys.role_instance),
            member=str(labels.get(MEMBER_LABEL, "")),
            images=tuple(str(c.get("image", "")) for c in spec.get("containers") or []),
            names=tuple(str(n) for n in containers),
            running=tuple(str((statuses.get(n) or {}).get("image", "")) for n in containers),
            phase=str(status.get("phase", "")),
            ready=any(c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or []),
            terminating=bool(meta.get("deletionTimestamp")),
            restarts=sum(int(s.get("restartCount") or 0) for s in statuses.values()),
            owner=str(owner),
            labels=keys,
        )

    @property
    def image(self) -> str:
        """The spec image of the template's container (named ``engine`` in the suite's manifests; an
        implementation may add containers before or after it), else of the only container."""
        if ENGINE in self.names:
            return self.images[self.names.index(ENGINE)]
        return self.images[0] if len(self.images) == 1 else ""

    @property
    def images_applied(self) -> bool:
        """Every container runs the image its spec asks for (no image patch pending)."""
        return len(self.running) == len(self.images) and all(map(same_image, self.images, self.running))

    @property
    def available(self) -> bool:
        return self.phase == "Running" and self.ready and not self.terminating and self.images_applied

    def on(self, image: str) -> bool:
        """Available on ``image`` (spec and running)."""
        return self.available and self.image == image


@dataclass(frozen=True)
class Layout:
    """What the manifest asks for: Pods per Role instance for every Role, instances per group."""

    replicas: int
    roles: dict[str, tuple[int, int]]  # role -> (replicas, Pods per instance)

    @classmethod
    def of(cls, body: dict[str, Any]) -> Layout:
        spec = body["spec"]
        roles = {
            str(r["name"]): (int(r.get("replicas", 1)), 1 + int(r.get("workerReplicas", 0)))
            for r in spec["template"]["roles"]
        }
        return cls(int(spec.get("replicas", 1)), roles)

    @property
    def pods_per_group(self) -> int:
        return sum(n * size for n, size in self.roles.values())

    def instance_size(self, role: str) -> int:
        return self.roles[role][1]

    def role_replicas(self, role: str) -> int:
        return self.roles[role][0]


def ordinal(name: str) -> int:
    """The ordinal (or index) ending a ServingGroup label value ``<ms>-<n>`` or a Role instance's
    ``<role>-<n>``, or the value when it is the number itself."""
    match = _ORDINAL.search(name)
    if match is None:
        raise Inconclusive(f"cannot read an ordinal from {name!r} (expected a value ending in -<n>, or <n>)")
    return int(match[1])


@dataclass(frozen=True, repr=False)
class Snapshot:
    """All of a ModelServing's Pods at one moment (``seq`` orders the timeline; ``at`` is seconds
    since the watch started; ``source`` the watch event type or ``LIST``)."""

    seq: int
    at: float
    pods: tuple[PodState, ...]
    source: str = "LIST"

    # -- ServingGroups ----------------------------------------------------------------------------

    def groups(self) -> dict[str, list[PodState]]:
        """Pods by ServingGroup (every Pod, terminating or not)."""
        out: dict[str, list[PodState]] = {}
        for pod in self.pods:
            if not pod.group:
                raise Inconclusive(
                    f"Pod {pod.name} has no {pod.labels.serving_group} label: the suite cannot tell which "
                    f"ServingGroup it belongs to; {_DECLARE}"
                )
            out.setdefault(pod.group, []).append(pod)
        return out

    def existing_groups(self) -> set[str]:
        """ServingGroups with at least one Pod that is not terminating."""
        return {g for g, pods in self.groups().items() if any(not p.terminating for p in pods)}

    def ready_groups(self, layout: Layout, image: str | None = None) -> set[str]:
        """ServingGroups with exactly ``layout.pods_per_group`` Pods, all available (on ``image`` if given)."""
        return {g for g, pods in self.groups().items() if _complete(pods, layout.pods_per_group, image)}

    def group_images(self) -> dict[str, set[str]]:
        """Spec images of the non-terminating Pods of each ServingGroup."""
        out: dict[str, set[str]] = {}
        for g, pods in self.groups().items():
            out[g] = {p.image for p in pods if not p.terminating}
        return out

    # -- Role instances ---------------------------------------------------------------------------

    def instances(self, role: str) -> dict[tuple[str, str], list[PodState]]:
        """Pods of ``role`` by (ServingGroup, role id)."""
        out: dict[tuple[str, str], list[PodState]] = {}
        for pod in self.pods:
            if pod.role != role:
                continue
            if not pod.group or not pod.role_id:
                raise Inconclusive(
                    f"Pod {pod.name} lacks the {pod.labels.serving_group} or {pod.labels.role_instance} label: the "
                    f"suite cannot tell which Role instance it belongs to; {_DECLARE}"
                )
            out.setdefault((pod.group, pod.role_id), []).append(pod)
        return out

    def existing_instances(self, role: str, group: str | None = None) -> set[tuple[str, str]]:
        return {
            k for k, pods in self.instances(role).items()
            if (group is None or k[0] == group) and any(not p.terminating for p in pods)
        }  # fmt: skip

    def ready_instances(
        self, layout: Layout, role: str, image: str | None = None, group: str | None = None
    ) -> set[tuple[str, str]]:
        """Instances of ``role`` with all their Pods available (on ``image`` if given)."""
        size = layout.instance_size(role)
        return {
            k for k, pods in self.instances(role).items()
            if (group is None or k[0] == group) and _complete(pods, size, image)
        }  # fmt: skip

    # -- the whole ModelServing -------------------------------------------------------------------

    def live(self) -> list[PodState]:
        return [p for p in self.pods if not p.terminating]

    def settled_on(self, layout: Layout, images: dict[str, str]) -> bool:
        """Exactly the Pods the layout asks for, none terminating, all available on their Role's
        image in ``images`` (role -> image; a Role not named may run any image)."""
        total = layout.replicas * layout.pods_per_group
        if len(self.pods) != total or any(not p.available for p in self.pods):
            return False
        return all(p.image == images[p.role] for p in self.pods if p.role in images)

    def uids(self) -> dict[str, str]:
        return {p.name: p.uid for p in self.pods if not p.terminating}

    def describe(self) -> str:
        """One line per Pod: what a failure message shows."""
        rows = [
            f"{p.name} uid={p.uid[:8]} image={p.image} phase={p.phase or '-'} ready={p.ready}"
            f"{'' if p.images_applied else ' image-pending'}{' terminating' if p.terminating else ''}"
            for p in sorted(self.pods, key=lambda p: p.name)
        ]
        return f"#{self.seq} +{self.at:.2f}s ({self.source}): " + ("; ".join(rows) or "no Pods")

    __repr__ = describe  # what a wait that timed out shows as "last seen"


def _complete(pods: list[PodState], size: int, image: str | None) -> bool:
    return (
        len(pods) == size and all(p.available for p in pods) and (image is None or all(p.image == image for p in pods))
    )


# -- the timeline ---------------------------------------------------------------------------------


@dataclass
class Timeline:
    """Snapshots in order, and the questions rollout tests ask of them (pure)."""

    snapshots: list[Snapshot] = field(default_factory=list)

    def since(self, seq: int = 0) -> list[Snapshot]:
        return [s for s in self.snapshots if s.seq >= seq]

    def _need(self, since: int) -> list[Snapshot]:
        found = self.since(since)
        if not found:
            raise Inconclusive("the rollout watch recorded no snapshot")
        return found

    def extreme(
        self, measure: Callable[[Snapshot], int], *, since: int = 0, worst: str = "min"
    ) -> tuple[int, Snapshot]:
        """The lowest (``worst="min"``) or highest value of ``measure`` and the first snapshot with it."""
        pick = min if worst == "min" else max
        best: tuple[int, Snapshot] | None = None
        for snap in self._need(since):
            value = measure(snap)
            if best is None or pick(value, best[0]) != best[0]:
                best = (value, snap)
        assert best is not None
        return best

    def max_groups(self, *, since: int = 0) -> tuple[int, Snapshot]:
        """The most ServingGroups that existed at once (terminating Pods do not count)."""
        return self.extreme(lambda s: len(s.existing_groups()), since=since, worst="max")

    def min_ready_groups(self, layout: Layout, *, since: int = 0) -> tuple[int, Snapshot]:
        """The fewest ready ServingGroups at any moment."""
        return self.extreme(lambda s: len(s.ready_groups(layout)), since=since)

    def max_instances(self, role: str, *, group: str | None = None, since: int = 0) -> tuple[int, Snapshot]:
        return self.extreme(lambda s: len(s.existing_instances(role, group)), since=since, worst="max")

    def min_ready_instances(
        self, layout: Layout, role: str, *, group: str | None = None, since: int = 0
    ) -> tuple[int, Snapshot]:
        return self.extreme(lambda s: len(s.ready_instances(layout, role, group=group)), since=since)

    def first(self, predicate: Callable[[Snapshot], bool], *, since: int = 0) -> Snapshot | None:
        """The first snapshot where ``predicate`` holds (None if none)."""
        return next((s for s in self.since(since) if predicate(s)), None)

    def first_pod(self, predicate: Callable[[PodState], bool], *, since: int = 0) -> Snapshot | None:
        """The first snapshot with a Pod satisfying ``predicate``."""
        return self.first(lambda s: any(predicate(p) for p in s.pods), since=since)

    def uid_history(self) -> dict[str, list[tuple[str, str]]]:
        """Pod name -> the (uid, spec image) pairs it went through, in order."""
        out: dict[str, list[tuple[str, str]]] = {}
        for snap in self.snapshots:
            for pod in snap.pods:
                seen = out.setdefault(pod.name, [])
                if not seen or seen[-1] != (pod.uid, pod.image):
                    seen.append((pod.uid, pod.image))
        return out

    def uids_seen(self) -> set[str]:
        return {p.uid for s in self.snapshots for p in s.pods}

    def gone_at(self, uid: str, *, since: int = 0) -> Snapshot | None:
        """The first snapshot where the Pod ``uid`` is terminating or no longer there."""
        return self.first(lambda s: not any(p.uid == uid and not p.terminating for p in s.pods), since=since)


# -- the watch ------------------------------------------------------------------------------------


class RolloutWatch:
    """Records a :class:`Timeline` of one ModelServing's Pods while the ``with`` block runs.

    Entering lists the Pods (the baseline snapshot, taken before anything the block does) and
    starts the watch thread; leaving stops it. Errors of the thread are kept and raised (as
    :class:`~.outcomes.Inconclusive`) by the analysis, never swallowed.
    """

    def __init__(self, ms: ModelServings, name: str, layout: Layout, *, resync: float = RESYNC_SECONDS) -> None:
        self.ms = ms
        self.name = name
        self.layout = layout
        self.resync = resync
        self.timeline = Timeline()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._owner = ""
        self._pods: dict[str, PodState] = {}
        self._version = ""
        self._started = 0.0
        self._errors: list[str] = []
        self._thread: threading.Thread | None = None

    # -- lifecycle ------------------------------------------------------------------------------

    def __enter__(self) -> RolloutWatch:
        self._owner = self.ms.get(self.name)["metadata"]["uid"]
        self._started = time.monotonic()
        self._relist()
        self._thread = threading.Thread(target=self._run, name=f"rollout-watch-{self.ms.ns}", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)

    # -- reading --------------------------------------------------------------------------------

    @property
    def seq(self) -> int:
        """The sequence number the next snapshot will get (mark a point in the timeline)."""
        with self._lock:
            return len(self.timeline.snapshots)

    def elapsed(self) -> float:
        """Seconds since the watch started (the clock of :attr:`Snapshot.at`)."""
        return time.monotonic() - self._started

    def latest(self) -> Snapshot:
        with self._lock:
            if not self.timeline.snapshots:
                raise Inconclusive("the rollout watch recorded no snapshot")
            return self.timeline.snapshots[-1]

    def snapshot_timeline(self) -> Timeline:
        """A copy of the timeline so far (the thread keeps appending to the live one)."""
        self.check()
        with self._lock:
            return Timeline(list(self.timeline.snapshots))

    def check(self) -> None:
        """Raise if the watch could not observe (an observation gap is not a pass)."""
        with self._lock:
            errors = list(self._errors)
        if len(errors) > 3:
            raise Inconclusive(f"the rollout watch failed {len(errors)} times; last: {errors[-1]}")

    def wait_for(self, wait: str, what: str, until: Callable[[Snapshot], bool]) -> Snapshot:
        """Poll the latest snapshot until ``until`` holds, within the documented ``wait``."""
        return wait_for(what, self._latest_checked, until=until, timeout=self.ms.timeouts.seconds(wait), interval=0.1)

    def _latest_checked(self) -> Snapshot:
        self.check()
        return self.latest()

    def wait_settled(self, images: dict[str, str], what: str, *, wait: str = "rollout") -> Snapshot:
        """Every Pod the layout asks for available on its Role's image (role -> image)."""
        return self.wait_for(
            wait, f"{what}: {self.layout.replicas * self.layout.pods_per_group} Pods of {self.ms.ns}/{self.name} "
            f"Running, Ready and on {images}", lambda s: s.settled_on(self.layout, images),
        )  # fmt: skip

    # -- the thread -----------------------------------------------------------------------------

    def _record(self, source: str) -> None:
        snap = Snapshot(
            len(self.timeline.snapshots),
            round(time.monotonic() - self._started, 3),
            tuple(sorted(self._pods.values(), key=lambda p: p.name)),
            source,
        )
        self.timeline.snapshots.append(snap)

    def _relist(self) -> None:
        response = self.ms.kube.core.list_namespaced_pod(self.ms.ns, _preload_content=False, _request_timeout=15)
        data = json.loads(response.data)
        pods = {}
        for item in data.get("items") or []:
            if belongs(item.get("metadata") or {}, self.name, self._owner):
                pod = PodState.from_json(item, self.ms.pod_labels)
                pods[pod.uid] = pod
        with self._lock:
            self._pods = pods
            self._version = str((data.get("metadata") or {}).get("resourceVersion", ""))
            self._record("LIST")

    def _apply(self, event: dict[str, Any]) -> None:
        kind, obj = str(event.get("type", "")), event.get("object") or {}
        version = str((obj.get("metadata") or {}).get("resourceVersion", ""))
        pod = PodState.from_json(obj, self.ms.pod_labels)
        with self._lock:
            if version:
                self._version = version
            if not belongs(obj.get("metadata") or {}, self.name, self._owner):
                return
            if kind == "DELETED":
                self._pods.pop(pod.uid, None)
            else:
                self._pods[pod.uid] = pod
            self._record(kind)

    def _run(self) -> None:
        from kubernetes import watch

        last_list = time.monotonic()
        while not self._stop.is_set():
            if time.monotonic() - last_list >= self.resync and self._safe(self._relist):
                last_list = time.monotonic()
            w = watch.Watch()  # type: ignore[no-untyped-call]
            try:
                with self._lock:
                    version = self._version
                for event in w.stream(  # type: ignore[no-untyped-call]
                    self.ms.kube.core.list_namespaced_pod, self.ms.ns, timeout_seconds=1,
                    resource_version=version or None, deserialize=False, _request_timeout=15,
                ):  # fmt: skip
                    if event.get("type") == "ERROR":
                        raise RuntimeError(f"watch error: {event.get('object')}")
                    self._apply(event)
                    if self._stop.is_set():
                        break
            except Exception as exc:  # expired (410) or broken: re-list, so nothing is missed for long
                if self._stop.is_set():
                    break
                with self._lock:
                    self._errors.append(f"{type(exc).__name__}: {exc}")
                if self._safe(self._relist):
                    last_list = time.monotonic()
                self._stop.wait(0.2)
            finally:
                w.stop()  # type: ignore[no-untyped-call]

    def _safe(self, action: Callable[[], None]) -> bool:
        try:
            action()
        except Exception as exc:
            with self._lock:
                self._errors.append(f"re-list: {type(exc).__name__}: {exc}")
            return False
        return True
