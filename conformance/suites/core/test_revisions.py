"""ControllerRevisions: what status.updateRevision and status.currentRevision name, when they
change, and which revisions revisionHistoryLimit prunes.

Why it exists: the revisions are how an implementation keeps the old template of ServingGroups not
yet updated (status.currentRevision "indicates the ControllerRevision version preserved by
ServingGroups that have not been updated"). How a status value names its ControllerRevision is not
spelled out: a value identifies the ControllerRevision owned by the ModelServing that is named by
it, named ``<prefix>-<value>`` (upstream Kthena) or labelled with it (docs/spec-readings.md,
"revisions"). A ControllerRevision is a snapshot of its template, so its data contains the
template's image. A scaling change is not a new revision (spec reading 26).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from conformance.framework.catalog import behaviour
from conformance.framework.features import Feature
from conformance.framework.modelserving import ModelServings

from .single_pod_groups import (
    V1,
    V2,
    V3,
    V4,
    describe,
    named_by,
    owned_revisions,
    partitioned,
    records,
    roll_to,
    start,
)

API = "api-reference-workload-v1alpha1.txt"
STATUS = f"{API}#ModelServingStatus"
NAME = "revisions"


def _revision_of(ms: ModelServings, kube: Any, field: str, value: str, image: str) -> Any:
    """The one ControllerRevision owned by the ModelServing that status ``field`` = ``value`` names;
    it must record ``image``."""
    owned = owned_revisions(ms, kube, NAME)
    named = named_by(owned, value)
    assert len(named) == 1, (
        f"expected status.{field}={value!r} to name exactly one ControllerRevision owned by the ModelServing (named "
        f"by it, '<prefix>-{value}' or labelled with it); it names {len(named)} of the owned {describe(owned)}"
    )
    assert records(named[0], image), (
        f"expected the ControllerRevision {named[0].metadata.name} named by status.{field} to record the template "
        f"of that revision (image {image}); its data: {describe(named)}"
    )
    return named[0]


def _revisions_settle(ms: ModelServings) -> dict[str, Any]:
    """status at the current generation with every ServingGroup updated and both revisions set and equal."""

    def done(seen: dict[str, Any]) -> bool:
        return bool(
            seen.get("observedGeneration") == seen["metadata.generation"]
            and seen.get("updatedReplicas") == seen["spec.replicas"]
            and seen.get("updateRevision")
            and seen.get("currentRevision") == seen.get("updateRevision")
        )

    return ms.wait(
        "status-updated",
        f"status of {NAME}: every ServingGroup updated, status.updateRevision set and status.currentRevision equal "
        "to it",
        lambda: ms.status_summary(NAME),
        done,
    )


@behaviour(
    "core/revisions/update-revision",
    "status.updateRevision MUST name a ControllerRevision owned by the ModelServing that records the current "
    "template, and a change of the Pod template MUST make it name a new one that records the new template.",
    STATUS,
    Feature.CONTROLLER_REVISIONS,
)
def test_update_revision_names_the_current_template(ms: ModelServings, manifest: Any, kube: Any) -> None:
    body = manifest("core-revisions")
    body["spec"]["replicas"] = 1
    start(ms, body)
    first = _revisions_settle(ms)["updateRevision"]
    old = _revision_of(ms, kube, "updateRevision", first, V1)
    roll_to(ms, body, V2, updated=1, old={})
    second = _revisions_settle(ms)["updateRevision"]
    assert second != first, f"expected a template change (image {V1} -> {V2}) to change status.updateRevision; " \
        f"it stayed {first!r}"  # fmt: skip
    new = _revision_of(ms, kube, "updateRevision", second, V2)
    assert new.metadata.uid != old.metadata.uid, (
        f"expected the new updateRevision {second!r} to name another ControllerRevision than {first!r}; both name "
        f"{new.metadata.name}"
    )


@behaviour(
    "core/revisions/current-revision",
    "While a partition holds ServingGroups on the old template, status.currentRevision MUST keep naming the "
    "ControllerRevision of the old template, unlike status.updateRevision, and it MUST equal status.updateRevision "
    "once every ServingGroup is updated.",
    STATUS,
    Feature.CONTROLLER_REVISIONS,
    requires=(Feature.ROLLING_UPDATE,),
)
def test_current_revision_names_the_not_updated_template(ms: ModelServings, manifest: Any, kube: Any) -> None:
    body = partitioned(manifest("core-revisions"), 1)
    start(ms, body)
    first = _revisions_settle(ms)["updateRevision"]
    status = roll_to(ms, body, V2, updated=2, old={V1: 1})
    current, update = status.get("currentRevision") or "", status.get("updateRevision") or ""
    assert current == first and update and update != first, (
        f"with 1 of 3 ServingGroups held on {V1} by the partition, expected status.currentRevision to stay "
        f"{first!r} (the revision before the change) and status.updateRevision to be a new one; seen "
        f"currentRevision={current!r}, updateRevision={update!r}"
    )
    _revision_of(ms, kube, "currentRevision", current, V1)
    _revision_of(ms, kube, "updateRevision", update, V2)
    ms.patch(NAME, {"spec": {"rolloutStrategy": {"rollingUpdateConfiguration": {"partition": 0}}}})
    settled = _revisions_settle(ms)
    assert settled["updateRevision"] == update, (
        f"expected removing the partition not to change status.updateRevision {update!r}; seen "
        f"{settled['updateRevision']!r}"
    )


def _scaling_keeps_revision(
    ms: ModelServings, manifest: Any, kube: Any, change: Callable[[dict[str, Any]], tuple[str, dict[str, Any], int]]
) -> None:
    """One ServingGroup of one Pod, scaled by ``change(body)`` -> (what, merge patch, Pods after): status.updateRevision
    and the ControllerRevisions must stay as they were."""
    body = manifest("core-revisions")
    body["spec"]["replicas"] = 1
    start(ms, body)
    first = _revisions_settle(ms)["updateRevision"]
    before = sorted(r.metadata.name for r in owned_revisions(ms, kube, NAME))
    what, patch, pods = change(body)
    ms.patch(NAME, patch)
    ms.wait_pods(NAME, pods, wait="scale")
    ms.wait_observed(NAME, wait="scale")

    def seen() -> dict[str, Any]:
        return {
            "updateRevision": ms.status_summary(NAME).get("updateRevision"),
            "ControllerRevisions": sorted(r.metadata.name for r in owned_revisions(ms, kube, NAME)),
        }

    ms.holds(
        f"after {what} (scaling, not a template change), status.updateRevision stays {first!r} and the "
        f"ControllerRevisions stay {before}",
        seen,
        lambda now: now == {"updateRevision": first, "ControllerRevisions": before},
    )


@behaviour(
    "core/revisions/scaling-keeps-revision",
    "Changing spec.replicas (outside the ServingGroup template) MUST NOT change status.updateRevision nor add a "
    "ControllerRevision.",
    STATUS,
    Feature.CONTROLLER_REVISIONS,
)
def test_scaling_makes_no_new_revision(ms: ModelServings, manifest: Any, kube: Any) -> None:
    _scaling_keeps_revision(ms, manifest, kube, lambda body: ("spec.replicas 1 -> 2", {"spec": {"replicas": 2}}, 2))


@behaviour(
    "core/revisions/role-scaling-keeps-revision",
    "Changing a Role's replicas SHOULD NOT change status.updateRevision nor add a ControllerRevision (a Role's "
    "replicas are inside the ServingGroup template; upstream Kthena leaves them out of the revision).",
    STATUS,
    Feature.CONTROLLER_REVISIONS,
)
def test_role_scaling_makes_no_new_revision(ms: ModelServings, manifest: Any, kube: Any) -> None:
    def change(body: dict[str, Any]) -> tuple[str, dict[str, Any], int]:
        role = body["spec"]["template"]["roles"][0]
        return "the Role's replicas 1 -> 2", {"spec": {"template": {"roles": [{**role, "replicas": 2}]}}}, 2

    _scaling_keeps_revision(ms, manifest, kube, change)


@behaviour(
    "core/revisions/history-limit-prunes",
    "With revisionHistoryLimit 1, at most 1 ControllerRevision of the ModelServing MUST remain besides the live one "
    "once three template changes have finished.",
    f"{API}#ModelServingSpec",
    Feature.REVISION_HISTORY_LIMIT,
)
def test_history_limit_prunes_non_live_revisions(ms: ModelServings, manifest: Any, kube: Any) -> None:
    body = manifest("core-revisions")
    body["spec"]["replicas"] = 1
    body["spec"]["revisionHistoryLimit"] = 1
    start(ms, body)
    for image in (V2, V3, V4):
        roll_to(ms, body, image, updated=1, old={})
    live = _revisions_settle(ms)["updateRevision"]

    def non_live() -> list[Any]:
        owned = owned_revisions(ms, kube, NAME)
        keep = {r.metadata.uid for r in named_by(owned, live)}
        return [r for r in owned if r.metadata.uid not in keep and not r.metadata.deletion_timestamp]

    ms.wait(
        "status-updated",
        f"at most 1 ControllerRevision (revisionHistoryLimit 1) besides the live one ({live!r}, every ServingGroup "
        f"runs it) after the template went {V1} -> {V2} -> {V3} -> {V4}",
        lambda: describe(non_live()),
        lambda seen: len(seen) <= 1,
    )


@behaviour(
    "core/revisions/live-revisions-kept",
    "With revisionHistoryLimit 0, the ControllerRevisions named by status.currentRevision and status.updateRevision "
    "MUST be kept while a partition holds ServingGroups on the old template, also across a further template change.",
    f"{API}#ModelServingSpec",
    Feature.REVISION_HISTORY_LIMIT,
    requires=(Feature.ROLLING_UPDATE,),
)
def test_live_revisions_survive_a_zero_history_limit(ms: ModelServings, manifest: Any, kube: Any) -> None:
    body = partitioned(manifest("core-revisions"), 1)
    body["spec"]["revisionHistoryLimit"] = 0
    start(ms, body)
    for image in (V2, V3):
        status = roll_to(ms, body, image, updated=2, old={V1: 1})
        current, update = status.get("currentRevision") or "", status.get("updateRevision") or ""

        def live(current: str = current, update: str = update, image: str = image) -> list[str]:
            """What is wrong with the two live revisions now (empty when both are kept)."""
            owned = owned_revisions(ms, kube, NAME)
            wrong = []
            for field, value, want in (("currentRevision", current, V1), ("updateRevision", update, image)):
                named = [r for r in named_by(owned, value) if not r.metadata.deletion_timestamp]
                if len(named) != 1 or not records(named[0], want):
                    wrong.append(f"status.{field}={value!r} names {describe(named)} (want one recording {want})")
            return wrong

        what = f"revisionHistoryLimit 0, partition holding 1 of 3 ServingGroups on {V1}, the others on {image}"
        problems = live()
        assert not problems, f"{what}: the live ControllerRevisions must be kept: {problems}"
        ms.holds(f"{what}: both live ControllerRevisions kept", live, lambda wrong: not wrong)
