"""Core: a ModelServing's ServingGroups, Roles and Pods."""

from __future__ import annotations

from typing import Any

from conformance.framework.catalog import behaviour
from conformance.framework.features import Feature
from conformance.framework.modelserving import ModelServings, container_of, expected_pod_count, member
from conformance.framework.outcomes import Inconclusive, precondition

API = "api-reference-workload-v1alpha1.txt"


@behaviour(
    "core/servinggroup/pods-created",
    "A ModelServing MUST run spec.replicas ServingGroups, each with role.replicas instances of every Role, "
    "each instance one entry Pod from entryTemplate plus workerReplicas worker Pods from workerTemplate.",
    f"{API}#Role",
    Feature.CORE,
)
def test_every_pod_of_every_servinggroup_is_created(ms: ModelServings, manifest: Any) -> None:
    body = manifest("basic")
    ms.create(body)
    pods = ms.wait_pods("basic", expected_pod_count(body))
    members = sorted(member(p) for p in pods)
    assert members == ["entry"] * 2 + ["worker"] * 4, f"entry/worker split is wrong: {members}"
    images = {member(p): {container_of(p).image} for p in pods}
    assert images["entry"] == {"registry.example/engine:v1"}
    assert images["worker"] == {"registry.example/engine-worker:v1"}


def _groups(body: dict[str, Any]) -> int:
    return int(body["spec"].get("replicas", 1))


@behaviour(
    "core/status/settled",
    "Once every ServingGroup runs, the controller MUST report status.replicas and status.availableReplicas "
    "equal to spec.replicas, status.updatedReplicas equal to spec.replicas, status.observedGeneration equal "
    "to metadata.generation, and a status.currentRevision that, when set, equals status.updateRevision.",
    f"{API}#ModelServingStatus",
    Feature.CORE,
)
def test_status_reports_the_settled_servinggroups(ms: ModelServings, manifest: Any) -> None:
    body = manifest("basic")
    ms.create(body)
    ms.wait_pods("basic", expected_pod_count(body))
    want = _groups(body)

    def settled(seen: dict[str, Any]) -> bool:
        return (
            seen.get("observedGeneration") == seen["metadata.generation"]
            and seen.get("replicas") == want
            and seen.get("availableReplicas") == want
            and seen.get("updatedReplicas") == want
        )

    status = ms.wait(
        "servinggroups-ready",
        f"status of basic to report replicas, availableReplicas and updatedReplicas {want} "
        "and observedGeneration = metadata.generation",
        lambda: ms.status_summary("basic"),
        settled,
    )
    current, update = status.get("currentRevision") or "", status.get("updateRevision") or ""
    assert not current or current == update, (
        f"expected status.currentRevision to be empty or equal to status.updateRevision once every ServingGroup "
        f"is updated; seen currentRevision={current!r}, updateRevision={update!r}"
    )


@behaviour(
    "core/spec/defaults",
    "The API MUST store the documented defaults for omitted fields: spec.replicas 1, spec.schedulerName volcano, "
    "spec.recoveryPolicy RoleRecreate, template.restartGracePeriodSeconds 0, and for each Role replicas 1.",
    f"{API}#ModelServingSpec",
    Feature.CORE,
)
def test_omitted_fields_get_their_documented_defaults(ms: ModelServings, manifest: Any) -> None:
    # revisionHistoryLimit's default (10) belongs to the optional RevisionHistoryLimit feature and a
    # Role's maxUnavailable default (1) to RoleRollingUpdate (rollout/defaults/role-max-unavailable):
    # an implementation without those fields is not judged on them here.
    ms.create(manifest("core-defaults"))
    spec = ms.get("defaults")["spec"]
    role = spec["template"]["roles"][0]
    seen = {
        "spec.replicas": spec.get("replicas"),
        "spec.schedulerName": spec.get("schedulerName"),
        "spec.recoveryPolicy": spec.get("recoveryPolicy"),
        "spec.template.restartGracePeriodSeconds": spec["template"].get("restartGracePeriodSeconds"),
        "spec.template.roles[0].replicas": role.get("replicas"),
    }
    expected = {
        "spec.replicas": 1,
        "spec.schedulerName": "volcano",
        "spec.recoveryPolicy": "RoleRecreate",
        "spec.template.restartGracePeriodSeconds": 0,
        "spec.template.roles[0].replicas": 1,
    }
    wrong = {k: {"expected": v, "seen": seen[k]} for k, v in expected.items() if seen[k] != v}
    assert not wrong, f"stored object lacks documented defaults: {wrong}"


def _selected(kube: Any, ms: ModelServings, selector: str) -> dict[str, str]:
    """Pod name -> uid of the namespace's live Pods ``selector`` selects."""
    pods = kube.core.list_namespaced_pod(ms.ns, label_selector=selector).items
    return {p.metadata.name: p.metadata.uid for p in pods if not p.metadata.deletion_timestamp}


@behaviour(
    "core/status/label-selector",
    "status.labelSelector MUST select only Pods of this ModelServing and at least one Pod of each of its "
    "ServingGroups.",
    f"{API}#ModelServingStatus",
    Feature.CORE,
)
def test_label_selector_selects_this_modelservings_groups(ms: ModelServings, manifest: Any, kube: Any) -> None:
    # Spec reading 22: "a label query over pods that should match the replica count" is read both as
    # one Pod per ServingGroup and as all the ModelServing's Pods; what both readings share is asserted
    # here, the exact count is core/status/label-selector-count (SHOULD). The spec names no label for a
    # ServingGroup, so the groups are told apart by creation: the Pods a scale-up from 1 to 2 adds are
    # the second ServingGroup. A second ModelServing with the same templates and labels shares the
    # namespace, so a selector that does not single this one out is seen.
    body = manifest("core-small")
    other = manifest("core-small")
    other["metadata"]["name"] = "other"
    ms.create(body)
    ms.create(other)
    first = {p.metadata.uid for p in ms.wait_pods("small", expected_pod_count(body))}
    ms.wait_pods("other", expected_pod_count(other))
    ms.patch("small", {"spec": {"replicas": 2}})
    pods = ms.wait_pods("small", expected_pod_count(body, 2), wait="scale")
    kept = first & {p.metadata.uid for p in pods}
    if kept != first:
        raise Inconclusive(
            "the first ServingGroup's Pods were replaced while scaling up from 1 to 2, so the suite cannot tell the "
            f"two ServingGroups apart (kept {len(kept)} of {len(first)})"
        )
    groups = {"the first ServingGroup": first, "the second ServingGroup": {p.metadata.uid for p in pods} - first}
    others = {p.metadata.uid for p in ms.pods("other")}

    def observe() -> dict[str, Any]:
        status = ms.status_summary("small")
        selector = str(status.get("labelSelector") or "")
        selected = _selected(kube, ms, selector) if selector else {}
        uids = set(selected.values())
        return {
            "labelSelector": selector,
            "status.replicas": status.get("replicas"),
            "selected": sorted(selected),
            "of the other ModelServing": sorted(n for n, u in selected.items() if u in others),
            "of neither": sorted(n for n, u in selected.items() if u not in others and not any(
                u in g for g in groups.values())),
            "groups without a selected Pod": sorted(g for g, members in groups.items() if not members & uids),
        }  # fmt: skip

    def fair(seen: dict[str, Any]) -> bool:
        return bool(
            seen["labelSelector"]
            and seen["status.replicas"] == 2
            and not seen["of the other ModelServing"]
            and not seen["of neither"]
            and not seen["groups without a selected Pod"]
        )

    ms.wait(
        "status-updated",
        "status.labelSelector of small (2 ServingGroups) to select at least one Pod of each ServingGroup and no Pod "
        "of the ModelServing 'other' in the same namespace",
        observe,
        fair,
    )


@behaviour(
    "core/status/label-selector-count",
    "status.labelSelector SHOULD select exactly status.replicas Pods, one per ServingGroup, so that it matches the "
    "replica count.",
    f"{API}#ModelServingStatus",
    Feature.CORE,
)
def test_label_selector_matches_the_replica_count(ms: ModelServings, manifest: Any, kube: Any) -> None:
    # Spec reading 22: the reading with one Pod per ServingGroup (upstream Kthena's); selecting every
    # Pod of the ModelServing is the other fair reading, so this is a SHOULD.
    body = manifest("basic")
    with precondition("the ModelServing's Pods created and its status observed"):
        ms.create(body)
        ms.wait_pods("basic", expected_pod_count(body))
        status = ms.wait_observed("basic", wait="status-updated")
    selector = status.get("labelSelector") or ""
    assert selector, f"expected a non-empty status.labelSelector; status was {status}"
    selected = _selected(kube, ms, selector)
    assert len(selected) == status["replicas"], (
        f"expected status.labelSelector {selector!r} to select status.replicas={status['replicas']} Pods (one per "
        f"ServingGroup); it selects {len(selected)}: {sorted(selected)}"
    )


@behaviour(
    "core/servinggroup/scale-down-whole-groups",
    "Lowering spec.replicas MUST remove whole ServingGroups, leaving the remaining ServingGroups' Pods running "
    "and untouched.",
    f"{API}#ModelServingSpec",
    Feature.CORE,
)
def test_scale_down_removes_whole_servinggroups(ms: ModelServings, manifest: Any) -> None:
    body = manifest("basic")
    ms.create(body)
    before = {p.metadata.uid: member(p) for p in ms.wait_pods("basic", expected_pod_count(body))}
    ms.patch("basic", {"spec": {"replicas": 1}})
    after = ms.wait_pods("basic", expected_pod_count(body, 1), wait="scale")
    members = sorted(member(p) for p in after)
    assert members == ["entry", "worker", "worker"], (
        f"expected the remaining Pods to be one whole ServingGroup (1 entry, 2 workers); seen {members}"
    )
    recreated = sorted(p.metadata.name for p in after if p.metadata.uid not in before)
    assert not recreated, f"expected the remaining ServingGroup's Pods to keep their UIDs; recreated: {recreated}"


@behaviour(
    "core/role/replicas-change",
    "Changing a Role's replicas MUST change the number of that Role's instances in every ServingGroup, each an "
    "entry Pod plus workerReplicas worker Pods.",
    f"{API}#Role",
    Feature.CORE,
)
def test_role_replicas_change_scales_its_instances(ms: ModelServings, manifest: Any) -> None:
    body = manifest("core-small")
    body["spec"]["replicas"] = 2
    ms.create(body)
    ms.wait_pods("small", expected_pod_count(body))
    roles = body["spec"]["template"]["roles"]
    for replicas in (2, 1):
        roles[0]["replicas"] = replicas
        ms.patch("small", {"spec": {"template": {"roles": roles}}})
        pods = ms.wait_pods("small", expected_pod_count(body), wait="scale")
        members = sorted(member(p) for p in pods)
        instances = 2 * replicas
        assert members == ["entry"] * instances + ["worker"] * instances, (
            f"expected Role replicas {replicas} in 2 ServingGroups to run {instances} instances "
            f"({instances} entry and {instances} worker Pods); seen {members}"
        )
