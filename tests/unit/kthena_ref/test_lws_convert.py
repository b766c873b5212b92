"""LeaderWorkerSet -> ModelServing (kthena_ref.convert.lws): the Role's shape, the plugin rules of
the spec, every honoured, ignored and refused field (readings LW1-LW20, docs/lws-readings.md), and
a golden conversion of the LWS README's basic example. Every child made here must pass the
ModelServing admission rules."""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from kthena_ref.admission.rules import validate
from kthena_ref.api.types import ModelServing
from kthena_ref.convert import HEADLESS_SERVICE, Conversion
from kthena_ref.convert.lws import DEFAULT_SCHEDULER, ROLE, convert

GOLDEN = Path(__file__).parent / "golden"
UID = "0d9c0a43-5a4e-4f55-9b35-2a0f3b7d1e01"
Mutation = Callable[[dict[str, Any]], object]


def pod(image: str = "vllm/vllm-openai:v0.9.0", **spec: Any) -> dict[str, Any]:
    return {"spec": {"containers": [{"name": "main", "image": image}], **spec}}


def lws(*changes: Mutation, **spec: Any) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "apiVersion": "leaderworkerset.x-k8s.io/v1",
        "kind": "LeaderWorkerSet",
        "metadata": {"name": "llama", "namespace": "serving", "uid": UID},
        "spec": {"leaderWorkerTemplate": {"workerTemplate": pod()}, **spec},
    }
    for change in changes:
        change(obj)
    return obj


def lwt(**fields: Any) -> Mutation:
    return lambda o: o["spec"]["leaderWorkerTemplate"].update(fields)


def meta(**fields: Any) -> Mutation:
    return lambda o: o["metadata"].update(fields)


def child_of(existing_plugins: list[dict[str, Any]] | None, uid: str = UID) -> dict[str, Any]:
    """An existing child (as the API server returns it) with this plugin chain (None: unset)."""
    child = convert(lws(), None).child
    assert child is not None
    child = copy.deepcopy(child)
    child["metadata"]["ownerReferences"][0]["uid"] = uid
    child["spec"].pop("plugins")
    if existing_plugins is not None:
        child["spec"]["plugins"] = existing_plugins
    return child


def converted(source: dict[str, Any], existing: dict[str, Any] | None = None) -> dict[str, Any]:
    """The child, checked to be admissible and free of problems."""
    before = copy.deepcopy(source)
    result = convert(source, existing)
    assert source == before, "convert must not change its input"
    assert result.problems == ()
    assert result.child is not None
    ModelServing.model_validate(result.child)
    assert validate(result.child) == []
    return result.child


def the_role(child: dict[str, Any]) -> dict[str, Any]:
    roles = child["spec"]["template"]["roles"]
    assert [r["name"] for r in roles] == [ROLE]
    role: dict[str, Any] = roles[0]
    return role


# -- golden ----------------------------------------------------------------------------------------


def test_golden_readme_example() -> None:
    source = yaml.safe_load((GOLDEN / "lws-sample.input.yaml").read_text())
    expected = yaml.safe_load((GOLDEN / "lws-sample.child.yaml").read_text())
    result = convert(source, None)
    assert result == Conversion(expected)
    assert validate(expected) == []


# -- the Role --------------------------------------------------------------------------------------

LEADER = pod("vllm/vllm-openai:leader")
LEADER["metadata"] = {"labels": {"role": "leader"}}


@pytest.mark.parametrize(
    ("source", "worker_replicas", "entry"),
    [
        pytest.param(lws(), 0, pod(), id="size-default-1"),
        pytest.param(lws(lwt(size=1)), 0, pod(), id="size-1-keeps-worker-template"),
        pytest.param(lws(lwt(size=3)), 2, pod(), id="size-3"),
        pytest.param(lws(lwt(size=None)), 0, pod(), id="size-null-is-default"),
        pytest.param(lws(lwt(size=4, leaderTemplate=LEADER)), 3, LEADER, id="leader-template"),
        pytest.param(lws(lwt(size=1, leaderTemplate=LEADER)), 0, LEADER, id="leader-template-size-1"),
        pytest.param(lws(lwt(size=2, leaderTemplate=None)), 1, pod(), id="leader-template-null"),
    ],
)
def test_role_shape(source: dict[str, Any], worker_replicas: int, entry: dict[str, Any]) -> None:
    role = the_role(converted(source))
    assert role["replicas"] == 1
    assert role["workerReplicas"] == worker_replicas
    assert role["entryTemplate"] == entry
    assert role["workerTemplate"] == pod()  # always, also at size 1 (LW6)


@pytest.mark.parametrize(
    ("source", "replicas"),
    [
        pytest.param(lws(), 1, id="default-1"),
        pytest.param(lws(replicas=None), 1, id="null-is-default"),
        pytest.param(lws(replicas=0), 0, id="zero"),
        pytest.param(lws(replicas=5), 5, id="five"),
    ],
)
def test_replicas(source: dict[str, Any], replicas: int) -> None:
    assert converted(source)["spec"]["replicas"] == replicas


def test_identity_labels_and_owner() -> None:
    child = converted(lws(meta(labels={"app": "llama", "team/x": "a"}, annotations={"note": "kept off"})))
    assert child["apiVersion"] == "workload.serving.volcano.sh/v1alpha1"
    assert child["kind"] == "ModelServing"
    assert child["metadata"] == {
        "name": "llama",
        "namespace": "serving",
        "labels": {"app": "llama", "team/x": "a"},
        "ownerReferences": [
            {
                "apiVersion": "leaderworkerset.x-k8s.io/v1",
                "kind": "LeaderWorkerSet",
                "name": "llama",
                "uid": UID,
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ],
    }


def test_no_labels_when_the_lws_has_none() -> None:
    assert "labels" not in converted(lws())["metadata"]
    assert "labels" not in converted(lws(meta(labels={})))["metadata"]


def test_owner_reference_without_kind_in_the_source() -> None:
    """List items from the API server carry no apiVersion/kind; the ownerReference still does."""
    source = lws()
    del source["apiVersion"], source["kind"]
    ref = converted(source)["metadata"]["ownerReferences"][0]
    assert (ref["apiVersion"], ref["kind"]) == ("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet")


def test_template_metadata_labels_and_annotations_are_carried() -> None:
    worker = pod()
    worker["metadata"] = {"labels": {"w": "1"}, "annotations": {"prometheus.io/scrape": "true"}}
    leader = pod()
    leader["metadata"] = {"annotations": {"a": "b"}}
    role = the_role(converted(lws(lwt(size=2, workerTemplate=worker, leaderTemplate=leader))))
    assert role["workerTemplate"]["metadata"] == {"labels": {"w": "1"}, "annotations": {"prometheus.io/scrape": "true"}}
    assert role["entryTemplate"]["metadata"] == {"annotations": {"a": "b"}}


# -- honoured fields ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("policy", "recovery"),
    [
        pytest.param(None, "ServingGroupRecreate", id="default"),
        pytest.param("RecreateGroupOnPodRestart", "ServingGroupRecreate", id="recreate-group"),
        pytest.param("None", "None", id="none"),
        pytest.param("Default", "None", id="deprecated-default"),
    ],
)
def test_restart_policy_is_recovery_policy(policy: str | None, recovery: str) -> None:
    assert converted(lws(lwt(restartPolicy=policy)))["spec"]["recoveryPolicy"] == recovery


@pytest.mark.parametrize(
    ("strategy", "expected"),
    [
        pytest.param(None, None, id="absent"),
        pytest.param({"type": "RollingUpdate"}, {"type": "ServingGroupRollingUpdate"}, id="type-only"),
        pytest.param(
            {"type": "RollingUpdate", "rollingUpdateConfiguration": {"maxUnavailable": 2, "maxSurge": 2}},
            {"type": "ServingGroupRollingUpdate", "rollingUpdateConfiguration": {"maxUnavailable": 2, "maxSurge": 2}},
            id="readme-rollout-example",
        ),
        pytest.param(
            {
                "type": "RollingUpdate",
                "rollingUpdateConfiguration": {"partition": 1, "maxUnavailable": "50%", "maxSurge": 0},
            },
            {
                "type": "ServingGroupRollingUpdate",
                "rollingUpdateConfiguration": {"maxUnavailable": "50%", "maxSurge": 0, "partition": 1},
            },
            id="crd-defaulted-with-partition",
        ),
        pytest.param(
            {"rollingUpdateConfiguration": {"maxSurge": "25%"}},
            {"type": "ServingGroupRollingUpdate", "rollingUpdateConfiguration": {"maxSurge": "25%"}},
            id="type-omitted",
        ),
    ],
)
def test_rollout_strategy(strategy: dict[str, Any] | None, expected: dict[str, Any] | None) -> None:
    spec = converted(lws(replicas=4, rolloutStrategy=strategy))["spec"]
    assert spec.get("rolloutStrategy") == expected


@pytest.mark.parametrize(
    ("source", "scheduler"),
    [
        pytest.param(lws(), DEFAULT_SCHEDULER, id="none-named"),
        pytest.param(lws(lwt(workerTemplate=pod(schedulerName="volcano"))), "volcano", id="worker-names-volcano"),
        pytest.param(
            lws(lwt(workerTemplate=pod(schedulerName="volcano"), leaderTemplate=pod(schedulerName="volcano"))),
            "volcano",
            id="both-name-volcano",
        ),
    ],
)
def test_scheduler_name(source: dict[str, Any], scheduler: str) -> None:
    assert converted(source)["spec"]["schedulerName"] == scheduler


def test_leader_created_startup_is_honoured_silently() -> None:
    result = convert(lws(startupPolicy="LeaderCreated"), None)
    assert result.child is not None
    assert result.ignored == ()


# -- plugins (the spec's rules) ----------------------------------------------------------------------

DEMO = {"name": "demo-pod-tweaks", "type": "BuiltIn", "config": {"runtimeClassName": "nvidia"}}


@pytest.mark.parametrize(
    ("existing", "plugins"),
    [
        pytest.param(None, [{"name": HEADLESS_SERVICE}], id="new-child-declares-headless"),
        pytest.param(
            child_of([{"name": HEADLESS_SERVICE}]), [{"name": HEADLESS_SERVICE}], id="existing-with-headless-kept"
        ),
        pytest.param(child_of(None), None, id="existing-without-plugins-not-migrated"),
        pytest.param(child_of([]), [], id="existing-empty-chain-kept"),
        pytest.param(child_of([DEMO]), [DEMO], id="existing-other-chain-kept-exactly"),
        pytest.param(
            child_of([{"name": HEADLESS_SERVICE, "type": "BuiltIn"}, DEMO]),
            [{"name": HEADLESS_SERVICE, "type": "BuiltIn"}, DEMO],
            id="existing-chain-kept-as-written",
        ),
    ],
)
def test_plugins(existing: dict[str, Any] | None, plugins: list[dict[str, Any]] | None) -> None:
    spec = converted(lws(lwt(size=2)), existing)["spec"]
    assert spec.get("plugins") == plugins
    assert ("plugins" in spec) == (plugins is not None)


@pytest.mark.parametrize("existing_plugins", [None, [{"name": HEADLESS_SERVICE}]])
def test_a_size_change_keeps_the_plugins(existing_plugins: list[dict[str, Any]] | None) -> None:
    existing = child_of(existing_plugins)
    for size in (1, 2, 5, 1):
        spec = converted(lws(lwt(size=size)), existing)["spec"]
        assert spec.get("plugins") == existing_plugins
        assert the_role({"spec": spec})["workerReplicas"] == size - 1
        assert the_role({"spec": spec})["workerTemplate"] == pod()
        existing = {**existing, "spec": spec}


# -- ignored fields ------------------------------------------------------------------------------------

EXCLUSIVE = "leaderworkerset.sigs.k8s.io/exclusive-topology"
SUBGROUP_EXCLUSIVE = "leaderworkerset.sigs.k8s.io/subgroup-exclusive-topology"


def named_template(**fields: Any) -> dict[str, Any]:
    template = pod()
    template["metadata"] = {"labels": {"a": "b"}, **fields}
    return template


@pytest.mark.parametrize(
    ("source", "fields"),
    [
        pytest.param(lws(startupPolicy="LeaderReady"), ["spec.startupPolicy"], id="startup-leader-ready"),
        pytest.param(
            lws(networkConfig={"subdomainPolicy": "Shared"}),
            ["spec.networkConfig.subdomainPolicy"],
            id="subdomain-shared",
        ),
        pytest.param(
            lws(networkConfig={"subdomainPolicy": "UniquePerReplica"}),
            ["spec.networkConfig.subdomainPolicy"],
            id="subdomain-unique",
        ),
        pytest.param(
            lws(meta(annotations={EXCLUSIVE: "topology.kubernetes.io/zone"})),
            [f'metadata.annotations["{EXCLUSIVE}"]'],
            id="exclusive-topology",
        ),
        pytest.param(
            lws(meta(annotations={SUBGROUP_EXCLUSIVE: "x"})),
            [f'metadata.annotations["{SUBGROUP_EXCLUSIVE}"]'],
            id="subgroup-exclusive-topology",
        ),
        pytest.param(
            lws(lwt(workerTemplate=named_template(name="w", namespace="serving"))),
            [
                "spec.leaderWorkerTemplate.workerTemplate.metadata.name",
                "spec.leaderWorkerTemplate.workerTemplate.metadata.namespace",
            ],
            id="worker-template-name-namespace",
        ),
        pytest.param(
            lws(lwt(leaderTemplate=named_template(name="l"))),
            ["spec.leaderWorkerTemplate.leaderTemplate.metadata.name"],
            id="leader-template-name",
        ),
        pytest.param(
            lws(
                meta(annotations={EXCLUSIVE: "zone"}),
                startupPolicy="LeaderReady",
                networkConfig={"subdomainPolicy": "Shared"},
            ),
            [f'metadata.annotations["{EXCLUSIVE}"]', "spec.startupPolicy", "spec.networkConfig.subdomainPolicy"],
            id="all-at-once",
        ),
    ],
)
def test_ignored_fields_are_reported_and_the_child_made(source: dict[str, Any], fields: list[str]) -> None:
    child = converted(source)
    result = convert(source, None)
    assert [p.field for p in result.ignored] == fields
    assert all(p.reason for p in result.ignored)
    assert child == result.child


def test_ignored_template_metadata_is_not_carried() -> None:
    role = the_role(
        converted(lws(lwt(workerTemplate=named_template(name="w", namespace="serving", creationTimestamp=None))))
    )
    assert role["workerTemplate"]["metadata"] == {"labels": {"a": "b"}}


# -- refused fields (no child) ---------------------------------------------------------------------------

LONG = "a" * 60


@pytest.mark.parametrize(
    ("source", "existing", "field", "reason"),
    [
        pytest.param(
            lws(lwt(subGroupPolicy={"subGroupSize": 2})),
            None,
            "spec.leaderWorkerTemplate.subGroupPolicy",
            "no subgroups",
            id="sub-group-policy",
        ),
        pytest.param(
            lws(lwt(subGroupPolicy={"subGroupPolicyType": "LeaderWorker"})),
            None,
            "spec.leaderWorkerTemplate.subGroupPolicy",
            "no subgroups",
            id="sub-group-policy-type-only",
        ),
        pytest.param(lws(lwt(size=0)), None, "spec.leaderWorkerTemplate.size", "below 1", id="size-0"),
        pytest.param(lws(lwt(size=-2)), None, "spec.leaderWorkerTemplate.size", "below 1", id="size-negative"),
        pytest.param(
            lws(lwt(size="3")), None, "spec.leaderWorkerTemplate.size", "must be an integer", id="size-string"
        ),
        pytest.param(lws(replicas=True), None, "spec.replicas", "must be an integer", id="replicas-bool"),
        pytest.param(lws(replicas=-1), None, "spec.replicas", "would be refused", id="replicas-negative"),
        pytest.param(
            lws(lwt(workerTemplate=named_template(finalizers=["example.com/keep"]))),
            None,
            "spec.leaderWorkerTemplate.workerTemplate.metadata.finalizers",
            "finalizer",
            id="template-finalizers",
        ),
        pytest.param(
            lws(lwt(workerTemplate=named_template(generateName="x-"))),
            None,
            "spec.leaderWorkerTemplate.workerTemplate.metadata.generateName",
            "not a field",
            id="template-metadata-unknown",
        ),
        pytest.param(
            lws(lwt(workerTemplate={**pod(), "status": {}})),
            None,
            "spec.leaderWorkerTemplate.workerTemplate.status",
            "not a field",
            id="template-unknown",
        ),
        pytest.param(
            lws(lwt(workerTemplate="nginx")),
            None,
            "spec.leaderWorkerTemplate.workerTemplate",
            "must be an object",
            id="template-not-an-object",
        ),
        pytest.param(
            lws(lwt(workerTemplate=None)),
            None,
            "spec.leaderWorkerTemplate.workerTemplate",
            "required",
            id="worker-template-null",
        ),
        pytest.param(lws(gangPolicy={"enabled": True}), None, "spec.gangPolicy", "not a field", id="spec-unknown"),
        pytest.param(
            lws(lwt(resizePolicy="x")), None, "spec.leaderWorkerTemplate.resizePolicy", "not a field", id="lwt-unknown"
        ),
        pytest.param(
            lws(networkConfig={"subdomainPolicy": "Shared", "dns": 1}),
            None,
            "spec.networkConfig.dns",
            "not a field",
            id="network-unknown",
        ),
        pytest.param(
            lws(rolloutStrategy={"type": "RollingUpdate", "canary": {}}),
            None,
            "spec.rolloutStrategy.canary",
            "not a field",
            id="rollout-unknown",
        ),
        pytest.param(
            lws(rolloutStrategy={"type": "RollingUpdate", "rollingUpdateConfiguration": {"step": 1}}),
            None,
            "spec.rolloutStrategy.rollingUpdateConfiguration.step",
            "not a field",
            id="rolling-unknown",
        ),
        pytest.param(
            lws(rolloutStrategy={"type": "Recreate"}),
            None,
            "spec.rolloutStrategy.type",
            "not RollingUpdate",
            id="rollout-type",
        ),
        pytest.param(
            lws(
                rolloutStrategy={
                    "type": "RollingUpdate",
                    "rollingUpdateConfiguration": {"maxUnavailable": 0, "maxSurge": 0},
                }
            ),
            None,
            "spec.rolloutStrategy.rollingUpdateConfiguration.maxUnavailable",
            "maxSurge",
            id="rolling-budget-zero",
        ),
        pytest.param(
            lws(rolloutStrategy={"rollingUpdateConfiguration": {"maxSurge": "lots"}}),
            None,
            "spec.rolloutStrategy.rollingUpdateConfiguration.maxSurge",
            "would be refused",
            id="rolling-max-surge-malformed",
        ),
        pytest.param(
            lws(lwt(restartPolicy="Always")),
            None,
            "spec.leaderWorkerTemplate.restartPolicy",
            "not one of",
            id="restart-policy-unknown",
        ),
        pytest.param(
            lws(startupPolicy="WorkersFirst"), None, "spec.startupPolicy", "not one of", id="startup-policy-unknown"
        ),
        pytest.param(
            lws(lwt(size=2, workerTemplate=pod(schedulerName="volcano"), leaderTemplate=pod())),
            None,
            "spec.leaderWorkerTemplate.leaderTemplate.spec.schedulerName",
            "one",
            id="schedulers-differ",
        ),
        pytest.param(
            lws(meta(name=LONG)), None, "metadata.name", "would exceed 63 characters", id="name-too-long-for-pod-names"
        ),
        pytest.param(lws(meta(name="Llama")), None, "metadata.name", "DNS-1035", id="name-not-dns-1035"),
        pytest.param(lws(meta(uid=None)), None, "metadata.uid", "ownerReference", id="no-uid"),
        pytest.param(lws(meta(name=None)), None, "metadata.name", "required", id="no-name"),
        pytest.param(
            lws(lwt(size=2, leaderTemplate=pod(image=" "))),
            None,
            "spec.leaderWorkerTemplate.leaderTemplate.spec.containers[0].image",
            "not a valid image",
            id="leader-image-invalid",
        ),
        pytest.param(
            lws(lwt(workerTemplate=pod(image=""))),
            None,
            "spec.leaderWorkerTemplate.workerTemplate.spec.containers[0].image",
            "not a valid image",
            id="worker-image-invalid",
        ),
        pytest.param(
            lws(lwt(workerTemplate={"spec": {"containers": []}})),
            None,
            "spec.leaderWorkerTemplate.workerTemplate.spec.containers",
            "at least one",
            id="worker-no-containers",
        ),
        pytest.param(
            lws(),
            child_of([{"name": HEADLESS_SERVICE}], uid="someone-else"),
            "metadata.name",
            "does not control",
            id="existing-not-ours",
        ),
        pytest.param(
            lws(),
            {"metadata": {"name": "llama"}, "spec": {}},
            "metadata.name",
            "does not control",
            id="existing-without-owner",
        ),
    ],
)
def test_refused_fields_give_problems_and_no_child(
    source: dict[str, Any], existing: dict[str, Any] | None, field: str, reason: str
) -> None:
    result = convert(source, existing)
    assert result.child is None
    assert field in [p.field for p in result.problems], result.problems
    assert any(reason in p.reason for p in result.problems if p.field == field), result.problems


def test_every_problem_is_reported_at_once() -> None:
    source = lws(lwt(size=0, subGroupPolicy={"subGroupSize": 1}), startupPolicy="LeaderReady", extra=1)
    result = convert(source, None)
    assert result.child is None
    assert {p.field for p in result.problems} == {
        "spec.extra",
        "spec.leaderWorkerTemplate.size",
        "spec.leaderWorkerTemplate.subGroupPolicy",
    }
    assert [p.field for p in result.ignored] == ["spec.startupPolicy"]


def test_a_stored_child_with_the_api_servers_defaults_needs_no_update() -> None:
    """The child as stored (every schema default filled in, server metadata added) already holds
    what the converter asks for, so the reconcile (kthena_ref.convert.plan) writes nothing."""
    from kthena_ref.convert.plan import plan

    source = lws(lwt(size=3, restartPolicy="None"), rolloutStrategy={"rollingUpdateConfiguration": {"maxSurge": 1}})
    child = converted(source)
    stored = ModelServing.model_validate(child).to_api()
    stored["metadata"].update(ownerReferences=child["metadata"]["ownerReferences"], resourceVersion="7", generation=1)
    actions = plan(source, [stored], convert)
    assert (actions.create, actions.update, actions.delete, actions.problems) == (None, None, (), ())
