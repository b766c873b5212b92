"""InPlaceUpdate: the eligibility rules of the design review (PR 1882), each in both directions.

Why this module exists: :mod:`.test_inplace` and :mod:`.test_fallback` cover an image-only change,
a command change and an init container's image. The review lists more: "Only regular-container
images may change. Changes to ... Role names, workerReplicas, container names or order ... are
reported"; "restartPolicy must resolve to Always, and no regular container may set
restartPolicy"; "A tag change that would change the effective pull policy is reported", while an
explicit imagePullPolicy keeps a tag change eligible; and under RoleRollingUpdate eligibility is
judged per Role ("CheckRoleEligibility(old, new, role) checks one Role"). A change of the
ModelServing's schedulerName made together with an image change is tested with the suite's own
scheduler (it binds the new Pods itself, see :mod:`conformance.suites.eviction`).

Each behaviour is a small table: one ModelServing per row, created together, then changed one at a
time under a Pod watch. A change that must fall back ends with every Pod replaced (no UID left)
and an ``InPlaceUpdateFallback`` Event with a message; one that must stay in place ends with the
same Pods (UIDs) running the new images, and no Pod ever deleted.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from conformance.framework.catalog import behaviour
from conformance.framework.features import Feature
from conformance.framework.modelserving import ModelServings, expected_pod_count
from conformance.framework.rollout_watch import Layout, RolloutWatch, Snapshot
from conformance.suites.eviction import MANUAL_SCHEDULER, Binder
from conformance.suites.rollout import never_gone, role, roles_of, uids_of

from . import ELIGIBILITY, STRATEGY

FALLBACK = "InPlaceUpdateFallback"
ENGINE_V2, SIDECAR_V2 = "registry.example/engine:v2", "registry.example/sidecar:v2"

Edit = Callable[[dict[str, Any]], None]  # changes a ModelServing body in place


@dataclass(frozen=True)
class Case:
    what: str
    change: Edit  # the update under test
    setup: Edit | None = None  # applied before the ModelServing is created


def _templates(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The Pod specs of every template (entry and worker) of every Role."""
    return [r[k]["spec"] for r in roles_of(body) for k in ("entryTemplate", "workerTemplate") if r.get(k)]


def _engines(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The ``engine`` container of every template."""
    return [c for spec in _templates(body) for c in spec["containers"] if c["name"] == "engine"]


def _engine_image(image: str) -> Edit:
    def change(body: dict[str, Any]) -> None:
        for c in _engines(body):
            c["image"] = image

    return change


def _wanted(body: dict[str, Any]) -> dict[tuple[str, str], tuple[str, ...]]:
    """(role label, member) -> the images of the template's containers, in template order."""
    out: dict[tuple[str, str], tuple[str, ...]] = {}
    for r in roles_of(body):
        for kind in ("entryTemplate", "workerTemplate"):
            template = r.get(kind)
            if template:
                labels = template["metadata"]["labels"]
                key = (labels["conformance.kthena.io/role"], labels["conformance.kthena.io/member"])
                out[key] = tuple(c["image"] for c in template["spec"]["containers"])
    return out


def _on_template(s: Snapshot, body: dict[str, Any]) -> bool:
    """Exactly the Pods ``body`` asks for, all available, each running its template's images in order."""
    want = _wanted(body)
    return len(s.pods) == expected_pod_count(body) and all(
        p.available and p.images == want.get((p.role, p.member)) for p in s.pods
    )


def _run(ms: ModelServings, bodies: list[dict[str, Any]], cases: list[Case], *, in_place: bool) -> None:
    for body in bodies:
        ms.create(body)
    for body, case in zip(bodies, cases, strict=True):
        _check(ms, body, case, in_place=in_place)


def _check(ms: ModelServings, body: dict[str, Any], case: Case, *, in_place: bool) -> None:
    name = body["metadata"]["name"]
    ms.wait_pods(name, expected_pod_count(body))
    ms.wait_settled(name)
    what = f"updateMethod InPlace, {case.what}"
    with RolloutWatch(ms, name, Layout.of(body)) as watch:
        before = uids_of(list(watch.latest().pods))
        case.change(body)
        ms.patch(
            name, {"spec": {"schedulerName": body["spec"]["schedulerName"], "template": {"roles": roles_of(body)}}}
        )
        if in_place:
            watch.wait_for(
                "rollout",
                f"{what}: the same Pods ({sorted(before)}, same UIDs) Running and Ready on the new images",
                lambda s: _on_template(s, body) and s.uids() == before,
            )
        else:
            watch.wait_for(
                "rollout",
                f"{what}: every Pod replaced (none of the UIDs {sorted(before.values())} left), Running and Ready "
                "on the new template",
                lambda s: _on_template(s, body) and not set(before.values()) & set(s.uids().values()),
            )
        timeline = watch.snapshot_timeline()
    if in_place:
        never_gone(timeline, before, f"{what} (must be applied in place)")
        return
    event = ms.wait_event(name, FALLBACK)
    assert (event.message or "").strip(), f"{what}: the {FALLBACK} Event must report why; its message is empty"


def _table(ms: ModelServings, manifest: Any, cases: list[Case], *, in_place: bool, source: str = "") -> None:
    bodies = []
    for i, case in enumerate(cases):
        body: dict[str, Any] = manifest(source or "inplace-eligibility")
        body["metadata"]["name"] = f"{body['metadata']['name']}-{i}"
        if case.setup is not None:
            case.setup(body)
        bodies.append(body)
    _run(ms, bodies, cases, in_place=in_place)


# -- Role layout ------------------------------------------------------------------------------------


def _rename_role(body: dict[str, Any]) -> None:
    role(body, "server")["name"] = "engine"


def _more_workers(body: dict[str, Any]) -> None:
    role(body, "server")["workerReplicas"] = 2


@behaviour(
    "inplace/eligibility/role-layout",
    "With updateMethod InPlace, renaming a Role or changing its workerReplicas MUST NOT be applied in place: every "
    "Pod of the ServingGroup MUST be recreated and an InPlaceUpdateFallback Event with a message MUST be reported.",
    ELIGIBILITY,
    Feature.IN_PLACE_FALLBACK,
)
def test_role_name_and_worker_count_fall_back(ms: ModelServings, manifest: Any) -> None:
    cases = [Case("Role server renamed to engine", _rename_role), Case("workerReplicas 1 -> 2", _more_workers)]
    _table(ms, manifest, cases, in_place=False)


# -- containers -------------------------------------------------------------------------------------


def _rename_sidecar(body: dict[str, Any]) -> None:
    role(body, "server")["entryTemplate"]["spec"]["containers"][1]["name"] = "helper"


def _swap_containers(body: dict[str, Any]) -> None:
    containers = role(body, "server")["entryTemplate"]["spec"]["containers"]
    containers.reverse()


@behaviour(
    "inplace/eligibility/containers",
    "With updateMethod InPlace, renaming a regular container or changing the order of the containers MUST NOT be "
    "applied in place: every Pod of the ServingGroup MUST be recreated and an InPlaceUpdateFallback Event with a "
    "message MUST be reported.",
    ELIGIBILITY,
    Feature.IN_PLACE_FALLBACK,
)
def test_container_names_and_order_fall_back(ms: ModelServings, manifest: Any) -> None:
    cases = [
        Case("the entry's container sidecar renamed to helper", _rename_sidecar),
        Case("the entry's containers reordered (sidecar before engine)", _swap_containers),
    ]
    _table(ms, manifest, cases, in_place=False)


# -- restart policies -------------------------------------------------------------------------------


def _pod_restart_on_failure(body: dict[str, Any]) -> None:
    for spec in _templates(body):
        spec["restartPolicy"] = "OnFailure"


def _container_restart_always(body: dict[str, Any]) -> None:
    for c in _engines(body):
        c["restartPolicy"] = "Always"


def _container_restart_rules(body: dict[str, Any]) -> None:
    for c in _engines(body):
        c["restartPolicy"] = "Never"
        c["restartPolicyRules"] = [{"action": "Restart", "exitCodes": {"operator": "In", "values": [42]}}]


@behaviour(
    "inplace/eligibility/restart-policy",
    "With updateMethod InPlace, an image change MUST NOT be applied in place when the Pod template's restartPolicy "
    "is not Always or a regular container sets restartPolicy or restartPolicyRules: every Pod of the ServingGroup "
    "MUST be recreated and an InPlaceUpdateFallback Event with a message MUST be reported.",
    ELIGIBILITY,
    Feature.IN_PLACE_FALLBACK,
)
def test_restart_policies_other_than_always_fall_back(ms: ModelServings, manifest: Any) -> None:
    cases = [
        Case("restartPolicy OnFailure, engine image v1 -> v2", _engine_image(ENGINE_V2), _pod_restart_on_failure),
        Case(
            "the engine containers set restartPolicy Always, engine image v1 -> v2",
            _engine_image(ENGINE_V2),
            _container_restart_always,
        ),
        Case(
            "the engine containers set restartPolicy Never with restartPolicyRules, engine image v1 -> v2",
            _engine_image(ENGINE_V2),
            _container_restart_rules,
        ),
    ]
    _table(ms, manifest, cases, in_place=False)


# -- image pull policy and the images themselves ----------------------------------------------------


@behaviour(
    "inplace/eligibility/pull-policy-change",
    "With updateMethod InPlace and imagePullPolicy omitted, an image change that changes the effective pull policy "
    "(a v1 tag to latest, or to no tag: IfNotPresent to Always) MUST NOT be applied in place: every Pod of the "
    "ServingGroup MUST be recreated and an InPlaceUpdateFallback Event with a message MUST be reported.",
    ELIGIBILITY,
    Feature.IN_PLACE_FALLBACK,
)
def test_a_tag_change_that_changes_the_pull_policy_falls_back(ms: ModelServings, manifest: Any) -> None:
    cases = [
        Case("engine image tag v1 -> latest, imagePullPolicy omitted", _engine_image("registry.example/engine:latest")),
        Case("engine image tag v1 -> none, imagePullPolicy omitted", _engine_image("registry.example/engine")),
    ]
    _table(ms, manifest, cases, in_place=False)


def _pull_if_not_present(body: dict[str, Any]) -> None:
    for c in _engines(body):
        c["imagePullPolicy"] = "IfNotPresent"


def _sidecar_image(body: dict[str, Any]) -> None:
    role(body, "server")["entryTemplate"]["spec"]["containers"][1]["image"] = SIDECAR_V2


def _worker_image(body: dict[str, Any]) -> None:
    role(body, "server")["workerTemplate"]["spec"]["containers"][0]["image"] = ENGINE_V2


@behaviour(
    "inplace/eligibility/images-stay-in-place",
    "With updateMethod InPlace, a change of only regular-container images MUST be applied in place (every Pod "
    "keeps its UID and runs the new images), also when only a second container's or only the worker's image "
    "changes, and when imagePullPolicy is set explicitly and the tag changes to latest.",
    ELIGIBILITY,
    Feature.IN_PLACE_UPDATE,
)
def test_image_only_changes_stay_in_place(ms: ModelServings, manifest: Any) -> None:
    cases = [
        Case(
            "imagePullPolicy IfNotPresent set explicitly, engine image tag v1 -> latest",
            _engine_image("registry.example/engine:latest"),
            _pull_if_not_present,
        ),
        Case("only the entry's second container (sidecar) image v1 -> v2", _sidecar_image),
        Case("only the worker's image v1 -> v2", _worker_image),
    ]
    _table(ms, manifest, cases, in_place=True)


# -- the ModelServing's schedulerName ---------------------------------------------------------------


@behaviour(
    "inplace/eligibility/scheduler-name",
    "With updateMethod InPlace, an image change made together with a change of spec.schedulerName MUST NOT be "
    "applied in place: every Pod of the ServingGroup MUST be recreated under the new scheduler and an "
    "InPlaceUpdateFallback Event with a message MUST be reported.",
    ELIGIBILITY,
    Feature.IN_PLACE_FALLBACK,
)
def test_a_scheduler_change_falls_back(ms: ModelServings, manifest: Any) -> None:
    body: dict[str, Any] = manifest("inplace-eligibility")
    name = body["metadata"]["name"]

    def change(b: dict[str, Any]) -> None:
        b["spec"]["schedulerName"] = MANUAL_SCHEDULER
        _engine_image(ENGINE_V2)(b)

    ms.create(body)
    with Binder(ms).running():  # the suite plays the new scheduler
        _check(ms, body, Case(f"schedulerName default-scheduler -> {MANUAL_SCHEDULER}, engine v1 -> v2", change),
               in_place=False)  # fmt: skip
    schedulers = {p.metadata.name: p.spec.scheduler_name for p in ms.pods(name)}
    assert set(schedulers.values()) == {MANUAL_SCHEDULER}, (
        f"the Pods recreated after schedulerName changed to {MANUAL_SCHEDULER} must use it; seen {schedulers}"
    )


# -- per Role under RoleRollingUpdate ---------------------------------------------------------------


@behaviour(
    "inplace/eligibility/per-role",
    "Under RoleRollingUpdate with updateMethod InPlace, eligibility MUST be judged per Role: in one update, Role "
    "a's image-only change MUST be applied in place (its Pod keeps its UID) while Role b's command change MUST "
    "recreate only Role b's instance, reported by an InPlaceUpdateFallback Event with a message.",
    STRATEGY,
    Feature.IN_PLACE_FALLBACK,
    requires=(Feature.ROLE_ROLLING_UPDATE,),
)
def test_eligibility_is_judged_per_role(ms: ModelServings, manifest: Any) -> None:
    body: dict[str, Any] = manifest("inplace-role-eligibility")
    name = body["metadata"]["name"]
    what = "RoleRollingUpdate, InPlace: Role a's image v1 -> v2 and Role b's command changed together"
    ms.create(body)
    ms.wait_pods(name, expected_pod_count(body))
    ms.wait_settled(name)
    layout = Layout.of(body)
    with RolloutWatch(ms, name, layout) as watch:
        before = watch.latest()
        a_uids = uids_of([p for p in before.pods if p.role == "a"])
        b_uids = set(uids_of([p for p in before.pods if p.role == "b"]).values())
        role(body, "a")["entryTemplate"]["spec"]["containers"][0]["image"] = "registry.example/role-a:v2"
        role(body, "b")["entryTemplate"]["spec"]["containers"][0]["command"] = ["serve", "--changed"]
        ms.patch(name, {"spec": {"template": {"roles": roles_of(body)}}})
        watch.wait_for(
            "rollout",
            f"{what}: Role a's Pod {sorted(a_uids)} kept and Ready on its new image, Role b's Pod replaced",
            lambda s: (
                _on_template(s, body)
                and uids_of([p for p in s.pods if p.role == "a"]) == a_uids
                and not b_uids & set(uids_of([p for p in s.pods if p.role == "b"]).values())
            ),
        )
        timeline = watch.snapshot_timeline()
    never_gone(timeline, a_uids, f"{what}: Role a's image-only change is applied in place")
    event = ms.wait_event(name, FALLBACK)
    assert (event.message or "").strip(), f"{what}: the {FALLBACK} Event must report why; its message is empty"
