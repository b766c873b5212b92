"""progressDeadlineSeconds: per Role instance, per RecoveryPolicy, only in place, and its default.

Why this module exists: :mod:`.test_unpullable` shows the deadline once (ServingGroupRollingUpdate,
RoleRecreate, every Pod of the group unready). The spec says more: the deadline bounds "a
ServingGroup or Role instance updated in place"; "After it passes, unfinished Pods are handled
according to RecoveryPolicy" (so ServingGroupRecreate, RoleRecreate and None each do their own
thing); "It only applies to in-place updates"; and it "defaults to 1800 seconds".

Every one of these waits for the 60 s deadline, so they share one window: a module fixture creates
one ModelServing per scenario in a namespace of its own (manifest ``inplace-deadline``: Role ``a``
with an entry and a worker, Role ``b`` with one Pod), changes a's entry image to one that cannot be
pulled in all of them at once, and each test then judges its own scenario from that scenario's Pod
timeline. Only a's entry Pod is unready on the target image, so the RecoveryPolicy's scope shows:
the Pod alone, its Role instance (with the Ready worker) or the ServingGroup (with b's Pod).

"Must not" scenarios (updateMethod Recreate, the deadline omitted) are judged against a control
started at the same moment: the RoleRecreate scenario with an explicit 60 s deadline. Once the
implementation has acted on the control, and ``steady-state`` longer, the others must still be
untouched; so the observation lasts as long as the implementation itself takes to act on a 60 s
deadline. The default's 1800 s cannot be waited for in a conformance run: that an omitted deadline
is not the 60 s one is all this module asserts of it (the spec map lists it as partial).
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from conformance.cluster.faults import unpullable
from conformance.framework import evidence, namespaces
from conformance.framework.catalog import behaviour
from conformance.framework.features import Feature
from conformance.framework.kubelet import expect_pull_failed
from conformance.framework.modelserving import Manifest, ModelServings, expected_pod_count
from conformance.framework.outcomes import Inconclusive
from conformance.framework.plugin import CALL_REPORT, SuiteState
from conformance.framework.rollout_watch import Layout, PodState, RolloutWatch, Snapshot
from conformance.framework.waits import WaitTimeout, holds_for, wait_for
from conformance.suites.rollout import role, roles_of, uids_of

from . import STRATEGY

EVENT = "ProgressDeadlineExceeded"
DEADLINE = 60  # the manifest's progressDeadlineSeconds
SLACK = 2  # API timestamps and the watch: a deletion is "before the deadline" only below DEADLINE - SLACK
BAD = unpullable("registry.example/deadline-a:v2")  # same path and tag policy as v1: eligible in place
MANIFEST = Path(__file__).resolve().parent.parent / "manifests" / "inplace-deadline.yaml"

Edit = Callable[[dict[str, Any]], None]


def _set(path: tuple[str, ...], value: Any) -> Edit:
    def edit(body: dict[str, Any]) -> None:
        target = body
        for key in path[:-1]:
            target = target[key]
        if value is None:
            target.pop(path[-1], None)
        else:
            target[path[-1]] = value

    return edit


CONTROL = "role-recreate"
SCENARIOS: dict[str, tuple[str, Edit]] = {  # key -> (what, edit of the manifest)
    CONTROL: ("recoveryPolicy RoleRecreate", _set(("spec", "recoveryPolicy"), "RoleRecreate")),
    "group-recreate": ("recoveryPolicy ServingGroupRecreate", _set(("spec", "recoveryPolicy"), "ServingGroupRecreate")),
    "none": ("recoveryPolicy None", _set(("spec", "recoveryPolicy"), "None")),
    "role-rolling": ("RoleRollingUpdate", _set(("spec", "rolloutStrategy", "type"), "RoleRollingUpdate")),
    "recreate": ("updateMethod Recreate", _set(("spec", "rolloutStrategy", "updateMethod"), "Recreate")),
    "default": ("progressDeadlineSeconds omitted", _set(("spec", "rolloutStrategy", "progressDeadlineSeconds"), None)),
}
NEEDS: dict[str, tuple[str, ...]] = {  # test function -> the scenarios it judges (and its control)
    "test_role_recreate_rebuilds_the_role_instance": (CONTROL,),
    "test_servinggroup_recreate_rebuilds_the_group": ("group-recreate",),
    "test_none_touches_no_other_pod": ("none",),
    "test_a_role_instance_has_the_deadline": ("role-rolling",),
    "test_recreate_has_no_deadline": ("recreate", CONTROL),
    "test_omitted_deadline_is_not_the_minimum": ("default", CONTROL),
}


# -- the shared window ------------------------------------------------------------------------------


@dataclass
class Run:
    """One scenario: its ModelServing, the Pod timeline, and the moment its update was sent."""

    key: str
    what: str
    name: str
    layout: Layout
    watch: RolloutWatch
    pods: tuple[PodState, ...] = ()  # the Pods when the update was sent
    mark: int = 0  # the timeline position of the update
    patched: float = 0.0  # when the update was sent (the watch's clock)

    def originals(self, role_name: str | None = None, member: str | None = None) -> dict[str, str]:
        """name -> UID of the Pods there were at the update (of a Role, of a member kind)."""
        return {
            p.name: p.uid
            for p in self.pods
            if not p.terminating and role_name in (None, p.role) and member in (None, p.member)
        }

    def seen(self, wait: str, what: str, predicate: Callable[[Snapshot], bool]) -> Snapshot:
        """The first snapshot since the update where ``predicate`` held, waiting up to ``wait`` for
        one. The timeline, not the latest snapshot: the scenarios run on while earlier tests of
        the module are judged, so what a test looks for may be over by the time it looks."""
        found = wait_for(
            f"{self.describe()}: {what}",
            lambda: self.watch.snapshot_timeline().first(predicate, since=self.mark),
            until=lambda snap: snap is not None,
            timeout=self.watch.ms.timeouts.seconds(wait),
            interval=0.2,
        )
        assert found is not None
        return found

    def describe(self) -> str:
        return f"{self.what}, progressDeadlineSeconds {DEADLINE} unless omitted, Role a's entry image -> {BAD}"


@dataclass
class Window:
    """Every scenario the module's selected tests need, updated at once."""

    ms: ModelServings
    runs: dict[str, Run]
    broken: dict[str, Exception]  # scenarios that could not be started: their tests get the error
    _lag: float | None = None
    _lag_known: bool = False

    def run(self, key: str) -> Run:
        if key in self.broken:
            raise self.broken[key]
        if key not in self.runs:
            raise Inconclusive(f"scenario {key!r} was not started (its test was not selected when the window opened)")
        return self.runs[key]

    def control_lag(self) -> float | None:
        """Seconds from the control's update to the implementation's first deletion of one of its
        Pods (its 60 s deadline acted on); None when that did not happen within ``progress-deadline``."""
        if not self._lag_known:
            if CONTROL in self.broken:
                raise Inconclusive(f"the control scenario ({CONTROL}) could not be started: {self.broken[CONTROL]}")
            control = self.run(CONTROL)
            gone = set(control.originals().values())
            try:
                first = control.seen(
                    "progress-deadline",
                    "a Pod deleted (the deadline acted on)",
                    lambda s: bool(gone - set(s.uids().values())),
                )
            except WaitTimeout:
                self._lag = None
            else:
                self._lag = first.at - control.patched
            self._lag_known = True
        return self._lag


def _selected(request: pytest.FixtureRequest) -> list[pytest.Item]:
    return [
        i
        for i in request.session.items
        if getattr(i, "module", None) is request.module and i.get_closest_marker("skip") is None
    ]


def _load() -> dict[str, Any]:
    return Manifest(yaml.safe_load(MANIFEST.read_text()), source=f"conformance/suites/manifests/{MANIFEST.name}")


def _start(ms: ModelServings, stack: contextlib.ExitStack, keys: list[str]) -> Window:
    """Create the scenarios, wait until each is settled, then send every update back to back. A
    scenario that fails to start is kept as its tests' error, not the others'."""
    window = Window(ms, {}, {})
    bodies: dict[str, dict[str, Any]] = {}
    for key in keys:
        body = _load()
        body["metadata"]["name"] = f"deadline-{key}"
        SCENARIOS[key][1](body)
        try:
            ms.create(body)
        except Exception as exc:
            window.broken[key] = exc
        else:
            bodies[key] = body
    for key, body in list(bodies.items()):
        name = body["metadata"]["name"]
        try:
            ms.wait_pods(name, expected_pod_count(body))
            ms.wait_settled(name)
        except Exception as exc:
            window.broken[key] = exc
            del bodies[key]
            continue
        watch = stack.enter_context(RolloutWatch(ms, name, Layout.of(body)))
        window.runs[key] = Run(key, SCENARIOS[key][0], name, Layout.of(body), watch)
    for key, body in bodies.items():  # the updates go out back to back: one window for all
        run = window.runs[key]
        run.pods = run.watch.latest().pods
        run.mark, run.patched = run.watch.seq, run.watch.elapsed()
        role(body, "a")["entryTemplate"]["spec"]["containers"][0]["image"] = BAD
        try:
            ms.patch(run.name, {"spec": {"template": {"roles": copy.deepcopy(roles_of(body))}}})
        except Exception as exc:
            window.broken[key] = exc
    return window


@pytest.fixture(scope="module")
def window(_kube_session: Any, suite: SuiteState, request: pytest.FixtureRequest) -> Iterator[Window]:
    """The scenarios of the selected tests, in a namespace of their own, updated at once."""
    items = _selected(request)
    keys = sorted({k for i in items for k in NEEDS.get(getattr(i, "originalname", i.name), ())})
    kube = _kube_session
    space = namespaces.create(
        kube, suite.run_id, "inplace/progress-deadline", timeout=suite.timeouts.seconds("admission")
    )
    history = evidence.PodHistory(kube, space.name).start()
    ms = ModelServings(kube, space.name, suite.timeouts, suite.run_id, suite.support.pod_labels)
    ms.created = []
    try:
        with contextlib.ExitStack() as stack:
            yield _start(ms, stack, keys)
    finally:
        failed = [str(id_) for i in items if _failed(i) for k, id_ in i.user_properties if k == "behaviour"]
        history.stop(wait=bool(failed))
        for bid in failed:  # every failed behaviour gets the shared namespace's evidence
            evidence.collect(
                kube, space.name, suite.artifacts / evidence.directory_name(bid), history=history,
                controller_log=suite.controller_log,
            )  # fmt: skip
        if suite.keep != "always" and not (suite.keep == "on-failure" and failed):
            namespaces.cleanup(kube, space, ms.created, timeout=suite.timeouts.seconds("namespace-cleanup"))


def _failed(item: pytest.Item) -> bool:
    report: pytest.TestReport | None = item.stash.get(CALL_REPORT, None)
    return report is not None and report.failed


# -- observations -----------------------------------------------------------------------------------


def _entry_a(s: Snapshot) -> list[PodState]:
    return [p for p in s.live() if p.role == "a" and p.member == "entry"]


def _patched_in_place(w: Window, run: Run) -> PodState:
    """a's entry Pod patched in place (same UID) to the unpullable image, its pull failed."""
    uid = run.originals("a", "entry")
    snap = run.seen(
        "rollout",
        f"a's entry Pod {sorted(uid)} patched in place (same UID) to {BAD}",
        lambda s: any(p.uid in uid.values() and p.image == BAD for p in _entry_a(s)),
    )
    pod = next(p for p in _entry_a(snap) if p.uid in uid.values())
    # By name: a Pod that replaced it (after the deadline) has the name and the image too.
    expect_pull_failed(w.ms.kube, w.ms.ns, [pod.name], timeout=w.ms.timeouts.seconds("pods-running"))
    return pod


def _replaced(w: Window, run: Run, uids: dict[str, str], why: str) -> None:
    """The Pods ``uids`` deleted and the layout's Pods back (after the Event, within ``recovery``)."""
    w.ms.wait_event(run.name, EVENT, wait="progress-deadline")
    total = run.layout.replicas * run.layout.pods_per_group
    run.seen(
        "recovery",
        f"{why}: Pods {sorted(uids)} replaced (none of their UIDs left, {total} Pods again)",
        lambda s: len(s.live()) == total and not set(uids.values()) & set(s.uids().values()),
    )


def _not_before_deadline(run: Run, uids: dict[str, str]) -> None:
    timeline = run.watch.snapshot_timeline()
    for name, uid in sorted(uids.items()):
        gone = timeline.gone_at(uid, since=run.mark)
        if gone is None:
            continue
        waited = gone.at - run.patched
        assert waited >= DEADLINE - SLACK, (
            f"{run.describe()}: Pod {name} was deleted {waited:.1f}s after the update, before progressDeadlineSeconds "
            f"({DEADLINE}s) passed (restartGracePeriodSeconds is 3600): {gone.describe()}"
        )


def _never_gone(run: Run, uids: dict[str, str], why: str, *, since: int | None = None) -> None:
    """None of ``uids`` deleted since the update (or the timeline position ``since``)."""
    timeline = run.watch.snapshot_timeline()
    for name, uid in sorted(uids.items()):
        gone = timeline.gone_at(uid, since=run.mark if since is None else since)
        assert gone is None, f"{run.describe()}: Pod {name} must be kept ({why}), but was deleted at {gone.describe()}"


def _untouched_as_long_as_the_control(
    w: Window, run: Run, uids: dict[str, str], since: Snapshot | None, why: str
) -> None:
    """``uids`` kept and no Event on ``run`` from ``since`` (the update when None) until the
    control's lag after it, and ``steady-state`` longer."""
    start = run.patched if since is None else since.at
    lag = w.control_lag()
    if lag is None:  # the window would collapse to nothing: "not acted on" would pass having watched nothing
        raise Inconclusive(
            f"the control (an explicit {DEADLINE}s deadline, updated at the same moment) was never acted on within "
            "the progress-deadline wait, so how long to watch for this scenario's Pods being kept is unknown"
        )
    until = start + lag + w.ms.timeouts.seconds("steady-state")
    holds_for(
        f"{run.describe()}: Pods {sorted(uids)} kept ({why})",
        run.watch.latest,
        lambda s: set(uids.values()) <= set(s.uids().values()),
        seconds=max(0.0, until - run.watch.elapsed()),
    )
    _never_gone(run, uids, why, since=None if since is None else since.seq)
    events = [e for e in w.ms.events(run.name) if e.reason == EVENT]
    control = f"{lag:.0f}s after its update"
    assert not events, (
        f"{run.describe()}: no {EVENT} Event may be reported ({why}); seen: {events[0].message!r} (the control "
        f"with an explicit {DEADLINE}s deadline, updated at the same moment, was acted on {control})"
    )


# -- behaviours -------------------------------------------------------------------------------------


@behaviour(
    "inplace/progress-deadline/role-recreate",
    "With updateMethod InPlace and recoveryPolicy RoleRecreate, when one Pod of a Role instance updated in place is "
    "not ready on the target image when progressDeadlineSeconds pass, the controller MUST recreate every Pod of "
    "that Role instance (its Ready worker too) and MUST NOT delete the other Role's Pod, not before the deadline.",
    STRATEGY,
    Feature.PROGRESS_DEADLINE,
    slow=True,
)
def test_role_recreate_rebuilds_the_role_instance(window: Window) -> None:
    run = window.run(CONTROL)
    _patched_in_place(window, run)
    role_a = run.originals("a")
    _replaced(window, run, role_a, "RoleRecreate rebuilds Role a's instance")
    _not_before_deadline(run, role_a)
    _never_gone(run, run.originals("b"), "RoleRecreate rebuilds only the Role instance of the unready Pod")


@behaviour(
    "inplace/progress-deadline/servinggroup-recreate",
    "With updateMethod InPlace and recoveryPolicy ServingGroupRecreate, when one Pod of a ServingGroup updated in "
    "place is not ready on the target image when progressDeadlineSeconds pass, the controller MUST recreate every "
    "Pod of the ServingGroup (the Ready ones of its Role and of the other Role too), not before the deadline.",
    STRATEGY,
    Feature.PROGRESS_DEADLINE,
    slow=True,
)
def test_servinggroup_recreate_rebuilds_the_group(window: Window) -> None:
    run = window.run("group-recreate")
    _patched_in_place(window, run)
    everything = run.originals()
    _replaced(window, run, everything, "ServingGroupRecreate rebuilds the whole ServingGroup")
    _not_before_deadline(run, everything)


@behaviour(
    "inplace/progress-deadline/recovery-none",
    "With updateMethod InPlace and recoveryPolicy None, when one Pod of a ServingGroup updated in place is not "
    "ready on the target image when progressDeadlineSeconds pass, the controller MUST report "
    "ProgressDeadlineExceeded and MUST NOT delete any other Pod of the ServingGroup (the unready Pod's Ready "
    "Role-instance peer and the other Role's Pod); the unready Pod itself MAY be left to the kubelet or replaced "
    "alone, not before the deadline.",
    STRATEGY,
    Feature.PROGRESS_DEADLINE,
    slow=True,
)
def test_none_touches_no_other_pod(window: Window) -> None:
    run = window.run("none")
    _patched_in_place(window, run)
    window.ms.wait_event(run.name, EVENT, wait="progress-deadline")
    others = {n: u for n, u in run.originals().items() if n not in run.originals("a", "entry")}
    why = "recoveryPolicy None acts as a Deployment's Pod would: nothing but the unready Pod itself"
    window.ms.holds(
        f"{run.describe()}: Pods {sorted(others)} kept after {EVENT} ({why})",
        run.watch.latest,
        lambda s: set(others.values()) <= set(s.uids().values()),
    )
    _never_gone(run, others, why)
    _not_before_deadline(run, run.originals("a", "entry"))


@behaviour(
    "inplace/progress-deadline/role-instance",
    "Under RoleRollingUpdate with updateMethod InPlace, when a Role instance updated in place is not ready on the "
    "target image when progressDeadlineSeconds pass, the controller MUST report ProgressDeadlineExceeded and MUST "
    "hand its unready Pod to the RecoveryPolicy (RoleRecreate: it is replaced), not before the deadline, while the "
    "Pod of the other Role, which was not updated, is kept.",
    STRATEGY,
    Feature.PROGRESS_DEADLINE,
    requires=(Feature.ROLE_ROLLING_UPDATE,),
    slow=True,
)
def test_a_role_instance_has_the_deadline(window: Window) -> None:
    run = window.run("role-rolling")
    _patched_in_place(window, run)
    # Only the unready Pod is required: the scope RoleRecreate gives it is role-recreate's behaviour.
    unready = run.originals("a", "entry")
    _replaced(window, run, unready, "the Role instance's deadline passed")
    _not_before_deadline(run, unready)
    _never_gone(run, run.originals("b"), "Role b was not updated; its instance has no deadline to pass")


@behaviour(
    "inplace/progress-deadline/in-place-only",
    "With updateMethod Recreate and progressDeadlineSeconds 60, a Pod the update recreated that stays not ready "
    "(its image cannot be pulled) MUST NOT be reported ProgressDeadlineExceeded nor be deleted when the deadline "
    "has passed: progressDeadlineSeconds only applies to in-place updates.",
    STRATEGY,
    Feature.PROGRESS_DEADLINE,
    slow=True,
)
def test_recreate_has_no_deadline(window: Window) -> None:
    run = window.run("recreate")
    old = set(run.originals("a", "entry").values())
    total = run.layout.replicas * run.layout.pods_per_group
    snap = run.seen(
        "rollout",
        f"a's entry Pod recreated (a new UID) on {BAD}, {total} Pods",
        lambda s: len(s.live()) == total and any(p.image == BAD and p.uid not in old for p in _entry_a(s)),
    )
    pod = next(p for p in _entry_a(snap) if p.image == BAD)
    expect_pull_failed(window.ms.kube, window.ms.ns, [pod.name], timeout=window.ms.timeouts.seconds("pods-running"))
    # From when all of them were there: the latest moment a deadline for them could have started.
    _untouched_as_long_as_the_control(window, run, uids_of(snap.live()), snap, "updateMethod Recreate has no deadline")


@behaviour(
    "inplace/progress-deadline/default-not-minimum",
    "With updateMethod InPlace and progressDeadlineSeconds omitted (it defaults to 1800 seconds), a ServingGroup "
    "updated in place that is not ready on the target image MUST NOT be reported ProgressDeadlineExceeded nor have "
    "Pods deleted when an explicit 60-second deadline started at the same moment has been acted on.",
    STRATEGY,
    Feature.PROGRESS_DEADLINE,
    slow=True,
)
def test_omitted_deadline_is_not_the_minimum(window: Window) -> None:
    run = window.run("default")
    _patched_in_place(window, run)
    _untouched_as_long_as_the_control(window, run, run.originals(), None, "the default deadline is 1800s")
