"""Plugin framework and built-ins: scope, order, config decoding, chain equivalence, Services and DNS."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from kthena_ref.api.types import ModelServing, PluginSpec, PluginTarget
from kthena_ref.planner.plan import Observed, plan
from kthena_ref.plugins import build_chain
from kthena_ref.plugins.base import (
    HookRequest,
    NoOpHooks,
    PluginConfigError,
    PluginError,
    Registry,
    in_scope,
    normalized_chain,
)
from kthena_ref.plugins.builtin import REGISTRY

E, W, A = PluginTarget.ENTRY, PluginTarget.WORKER, PluginTarget.ALL


def spec(**fields: Any) -> PluginSpec:
    return PluginSpec.model_validate({"name": "p", **fields})


@pytest.mark.parametrize(
    ("scope", "role", "target", "want"),
    [
        (None, "r", E, True),
        ({}, "r", W, True),
        ({"roles": []}, "r", W, True),
        ({"roles": ["r"]}, "r", E, True),
        ({"roles": ["x"]}, "r", E, False),
        ({"target": "Entry"}, "r", E, True),
        ({"target": "Entry"}, "r", W, False),
        ({"target": "Worker"}, "r", W, True),
        ({"target": "Worker"}, "r", E, False),
        ({"roles": ["r"], "target": "Worker"}, "r", W, True),
        ({"roles": ["x"], "target": "Worker"}, "r", W, False),
        ({"target": "Entry"}, "r", A, True),  # Role hooks are not Pod-targeted
    ],
)
def test_scope(scope: dict[str, Any] | None, role: str, target: PluginTarget, want: bool) -> None:
    assert in_scope(spec(scope=scope) if scope is not None else spec(), role, target) is want


EQUIVALENT = [
    ([{"name": "a"}], [{"name": "a", "type": "BuiltIn"}], True),
    ([{"name": "a"}], [{"name": "a", "config": {}}], True),
    ([{"name": "a"}], [{"name": "a", "scope": {}}], True),
    ([{"name": "a"}], [{"name": "a", "scope": {"roles": [], "target": "All"}}], True),
    ([{"name": "a", "scope": {"roles": ["x", "y"]}}], [{"name": "a", "scope": {"roles": ["y", "x"]}}], True),
    (None, [], True),
    ([], [{"name": "a"}], False),  # adding the first plugin
    ([{"name": "a"}, {"name": "b"}], [{"name": "b"}, {"name": "a"}], False),  # order
    ([{"name": "a", "config": {"k": 1}}], [{"name": "a", "config": {"k": 2}}], False),
    ([{"name": "a"}], [{"name": "a", "scope": {"target": "Entry"}}], False),
    ([{"name": "a"}, {"name": "b"}], [{"name": "a"}], False),  # removing
]


@pytest.mark.parametrize(("old", "new", "same"), EQUIVALENT)
def test_chain_equivalence(old: list[dict[str, Any]] | None, new: list[dict[str, Any]], same: bool) -> None:
    parse = lambda chain: None if chain is None else [PluginSpec.model_validate(p) for p in chain]  # noqa: E731
    assert (normalized_chain(parse(old)) == normalized_chain(parse(new))) is same


@pytest.mark.parametrize(
    ("plugin", "field"),
    [
        ({"name": "nope"}, "spec.plugins[0].name"),
        ({"name": "headless-service", "scope": {"target": "Worker"}}, "spec.plugins[0].scope.target"),
        ({"name": "headless-service", "config": {"x": 1}}, "spec.plugins[0].config.x"),
        ({"name": "demo-pod-tweaks", "config": "runtime"}, "spec.plugins[0].config"),
        ({"name": "demo-pod-tweaks", "config": {"runtimeClassName": 3}}, "spec.plugins[0].config.runtimeClassName"),
        ({"name": "demo-pod-tweaks", "config": {"env": [{"value": "x"}]}}, "spec.plugins[0].config.env[0]"),
        ({"name": "demo-pod-tweaks", "config": {"annotations": {"a": 1}}}, "spec.plugins[0].config.annotations.a"),
        ({"name": "demo-pod-tweaks", "config": {"labels": {}}}, "spec.plugins[0].config.labels"),
    ],
)
def test_bad_plugins_are_rejected_naming_the_field(plugin: dict[str, Any], field: str) -> None:
    with pytest.raises(PluginConfigError) as err:
        REGISTRY.build(PluginSpec.model_validate(plugin), "spec.plugins[0]")
    assert err.value.field == field


def ms(plugins: list[dict[str, Any]], *, worker_template: bool = True, workers: int = 1) -> ModelServing:
    pod = {
        "spec": {
            "containers": [{"name": "c", "image": "i", "env": [{"name": "ENTRY_ADDRESS", "value": "user"}]}],
            "initContainers": [{"name": "init", "image": "i"}],
        }
    }
    role: dict[str, Any] = {"name": "r", "workerReplicas": workers, "entryTemplate": pod}
    if worker_template:
        role["workerTemplate"] = copy.deepcopy(pod)
    return ModelServing.model_validate(
        {
            "metadata": {"name": "ms", "namespace": "ns", "uid": "u"},
            "spec": {"replicas": 1, "plugins": plugins, "template": {"roles": [role]}},
        }
    )


def pods_of(m: ModelServing) -> dict[str, dict[str, Any]]:
    return {p["metadata"]["name"]: p for p in plan(Observed(ms=m, pods=[], services=[])).create_pods}


def test_headless_service_dns_fields_and_entry_address() -> None:
    pods = pods_of(ms([{"name": "headless-service"}]))
    for name, pod in pods.items():
        assert pod["spec"]["hostname"] == name
        assert pod["spec"]["subdomain"] == "ms-0-r-0"
        for container in [*pod["spec"]["containers"], *pod["spec"]["initContainers"]]:
            entry = [e for e in container["env"] if e["name"] == "ENTRY_ADDRESS"]
            assert entry == [{"name": "ENTRY_ADDRESS", "value": "ms-0-r-0-0.ns"}], "replaces the template's value"


@pytest.mark.parametrize(("worker_template", "workers", "services"), [(True, 1, 2), (True, 0, 2), (False, 0, 0)])
def test_services_only_for_instances_with_a_worker_template(worker_template: bool, workers: int, services: int) -> None:
    result = plan(
        Observed(
            ms=ms([{"name": "headless-service"}], worker_template=worker_template, workers=workers),
            pods=[],
            services=[],
        )
    )
    created = {s["metadata"]["name"]: s for s in result.create_services}
    assert len(created) == services
    if services:
        assert created["ms-0-r-0-0"]["spec"]["selector"]["modelserving.volcano.sh/entry"] == "true"
        assert "modelserving.volcano.sh/entry" not in created["ms-0-r-0"]["spec"]["selector"]
        assert all(s["spec"]["clusterIP"] == "None" and s["spec"]["publishNotReadyAddresses"] for s in created.values())
        assert all(s["metadata"]["ownerReferences"][0]["uid"] == "u" for s in created.values())
    pod = next(
        iter(pods_of(ms([{"name": "headless-service"}], worker_template=worker_template, workers=workers)).values())
    )
    assert ("subdomain" in pod["spec"]) is worker_template


def test_services_are_recreated_when_missing_and_removed_when_unwanted() -> None:
    m = ms([{"name": "headless-service"}])
    first = plan(Observed(ms=m, pods=[], services=[]))
    services = [
        dict(s, metadata={**s["metadata"], "uid": f"uid-{s['metadata']['name']}"}) for s in first.create_services
    ]
    stale = copy.deepcopy(services[0])
    stale["metadata"].update(name="ms-7-r-0", uid="uid-stale")
    again = plan(Observed(ms=m, pods=[], services=[services[1], stale]))
    assert [s["metadata"]["name"] for s in again.create_services] == [services[0]["metadata"]["name"]]
    assert again.delete_services == [("ms-7-r-0", "uid-stale")]
    foreign = copy.deepcopy(stale)
    foreign["metadata"]["ownerReferences"][0]["uid"] = "someone-else"
    assert plan(Observed(ms=m, pods=[], services=[*services, foreign])).delete_services == [], (
        "never delete what is not ours"
    )


def test_plugins_run_in_order_and_each_sees_the_previous_mutations() -> None:
    seen: list[str] = []

    class Recorder(NoOpHooks):
        def __init__(self, spec: PluginSpec, field: str) -> None:
            self.name = spec.name

        def on_pod_create(self, req: HookRequest) -> None:
            assert req.pod is not None
            marks = req.pod["metadata"].setdefault("annotations", {})
            seen.append(f"{self.name}:{sorted(marks)}")
            marks[self.name] = "1"

    registry = Registry()
    registry.register("first", Recorder)
    registry.register("second", Recorder)
    m = ms([{"name": "first"}, {"name": "second"}])
    chain = build_chain(m, registry)
    assert [b.spec.name for b in chain] == ["first", "second"]
    from kthena_ref.planner.hooks import run_pod_create

    pod: dict[str, Any] = {"metadata": {"name": "x"}, "spec": {"containers": []}}
    from kthena_ref.planner.names import PodId

    run_pod_create(chain, m, m.spec.template.roles, PodId(0, "r", 0, 0), pod)
    assert seen == ["first:[]", "second:['first']"]


def test_a_plugin_error_skips_that_pod_and_is_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    class Refuses(NoOpHooks):
        def __init__(self, spec: PluginSpec, field: str) -> None:
            self.name = spec.name

        def on_pod_create(self, req: HookRequest) -> None:
            if req.target is PluginTarget.WORKER:
                raise PluginError("no workers today")

    import kthena_ref.planner.plan as plan_module

    registry = Registry()
    registry.register("refuses", Refuses)
    monkeypatch.setattr(plan_module, "build_chain", lambda m: build_chain(m, registry))
    result = plan(Observed(ms=ms([{"name": "refuses"}]), pods=[], services=[]))
    assert [p["metadata"]["name"] for p in result.create_pods] == ["ms-0-r-0-0"]
    assert result.plugin_errors == ["pod ms-0-r-0-1 not created: no workers today"]
    assert [e.reason for e in result.events if e.type == "Warning"] == ["PluginError"]
    condition = next(c for c in result.status["conditions"] if c["type"] == "PluginsSucceeded")
    assert (condition["status"], condition["reason"]) == ("False", "PluginError")
    assert "no workers today" in condition["message"]


def test_a_plugin_name_may_appear_only_once() -> None:
    m = ModelServing.model_construct(
        metadata=ms([]).metadata,
        spec=ms([]).spec.model_copy(
            update={"plugins": [PluginSpec(name="demo-pod-tweaks"), PluginSpec(name="demo-pod-tweaks")]}
        ),
    )
    with pytest.raises(PluginConfigError, match="more than once"):
        build_chain(m)


def legacy_pod(m: ModelServing, k: int) -> dict[str, Any]:
    """A Running Pod an older controller made: its subdomain is the entry-named all-member Service."""
    pod = pods_of(m)[f"ms-0-r-0-{k}"]
    pod["spec"]["subdomain"] = "ms-0-r-0-0"
    pod["metadata"]["uid"] = f"uid-{k}"
    pod["status"] = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
    return pod


def test_legacy_all_member_subdomain_is_preserved_and_reported() -> None:
    m = ms([{"name": "headless-service"}], workers=2)
    survivors = [legacy_pod(m, 0), legacy_pod(m, 1)]  # worker 2 was lost
    result = plan(Observed(ms=m, pods=survivors, services=[]))
    recreated = {p["metadata"]["name"]: p for p in result.create_pods}
    assert recreated["ms-0-r-0-2"]["spec"]["subdomain"] == "ms-0-r-0-0", "no Pod depends on the new layout"
    assert [s["metadata"]["name"] for s in result.create_services] == ["ms-0-r-0-0"], "no Discovery Service"
    assert [e.reason for e in result.events if e.type == "Warning"] == ["MigrationRequired"]
    condition = next(c for c in result.status["conditions"] if c["type"] == "MigrationRequired")
    assert condition["status"] == "True" and "ms-0-r-0-0" in condition["message"]
    m.status = (
        type(m)
        .model_validate({"metadata": {"name": "x"}, "spec": m.spec.model_dump(by_alias=True), "status": result.status})
        .status
    )
    again = plan(Observed(ms=m, pods=survivors, services=[]))
    assert [e for e in again.events if e.reason == "MigrationRequired"] == [], "reported once, not every reconcile"


def test_new_layout_instances_are_not_migrations() -> None:
    m = ms([{"name": "headless-service"}], workers=1)
    pods = list(pods_of(m).values())
    for i, pod in enumerate(pods):
        pod["metadata"]["uid"] = f"uid-{i}"
        pod["status"] = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
    result = plan(Observed(ms=m, pods=pods, services=[]))
    assert not [c for c in result.status["conditions"] if c["type"] == "MigrationRequired"]
    assert sorted(s["metadata"]["name"] for s in result.create_services) == ["ms-0-r-0", "ms-0-r-0-0"]


def legacy_service(m: ModelServing) -> dict[str, Any]:
    """The all-member Service an older controller named after the entry Pod (no entry label in its selector)."""
    return {
        "metadata": {
            "name": "ms-0-r-0-0",
            "namespace": "ns",
            "uid": "uid-legacy-svc",
            "labels": {"modelserving.volcano.sh/name": "ms"},
            "ownerReferences": [{"uid": m.metadata.uid, "controller": True}],
        },
        "spec": {"clusterIP": "None", "selector": {"modelserving.volcano.sh/name": "ms"}},
    }


def test_a_rebuilt_legacy_instance_keeps_the_old_layout() -> None:
    """Every Pod of a legacy instance is gone (RoleRecreate tore it down): the surviving all-member
    Service is what marks the layout, so no rebuilt Pod depends on a Discovery Service."""
    m = ms([{"name": "headless-service"}], workers=2)
    result = plan(Observed(ms=m, pods=[], services=[legacy_service(m)]))
    assert {p["spec"]["subdomain"] for p in result.create_pods} == {"ms-0-r-0-0"}
    assert result.create_services == [] and result.delete_services == []
    assert any(c["type"] == "MigrationRequired" for c in result.status["conditions"])


def test_our_own_entry_service_is_not_a_legacy_layout() -> None:
    m = ms([{"name": "headless-service"}], workers=1)
    ours = [
        s for s in plan(Observed(ms=m, pods=[], services=[])).create_services if s["metadata"]["name"] == "ms-0-r-0-0"
    ]
    result = plan(Observed(ms=m, pods=[], services=ours))
    assert {p["spec"]["subdomain"] for p in result.create_pods} == {"ms-0-r-0"}


def _ready(pod: dict[str, Any], uid: str) -> dict[str, Any]:
    out = copy.deepcopy(pod)
    out["metadata"]["uid"] = uid
    out["status"] = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
    return out


@pytest.mark.parametrize(
    ("previously", "fails", "want_calls", "want_done"),
    [
        pytest.param(frozenset(), False, ["ms-0-r-0-0", "ms-0-r-0-1"], {"u0", "u1"}, id="both-became-ready"),
        pytest.param(frozenset({"u0"}), False, ["ms-0-r-0-1"], {"u0", "u1"}, id="only-the-new-one"),
        pytest.param(None, False, ["ms-0-r-0-0", "ms-0-r-0-1"], {"u0", "u1"}, id="fresh-controller-at-least-once"),
        pytest.param(frozenset(), True, ["ms-0-r-0-0", "ms-0-r-0-1"], {"u0"}, id="a-failure-is-retried"),
    ],
)
def test_on_pod_ready_runs_once_per_pod_that_became_ready(
    monkeypatch: pytest.MonkeyPatch,
    previously: frozenset[str] | None,
    fails: bool,
    want_calls: list[str],
    want_done: set[str],
) -> None:
    calls: list[str] = []

    class Ready(NoOpHooks):
        def __init__(self, spec: PluginSpec, field: str) -> None:
            self.name = spec.name

        def on_pod_ready(self, req: HookRequest) -> None:
            assert req.pod is not None
            calls.append(req.pod["metadata"]["name"])
            if fails and req.target is PluginTarget.WORKER:
                raise PluginError("not now")

    import kthena_ref.planner.plan as plan_module

    registry = Registry()
    registry.register("ready", Ready)
    monkeypatch.setattr(plan_module, "build_chain", lambda m: build_chain(m, registry))
    m = ms([{"name": "ready"}])
    pods = [_ready(p, f"u{i}") for i, p in enumerate(sorted(pods_of(m).values(), key=lambda p: p["metadata"]["name"]))]
    result = plan(Observed(ms=m, pods=pods, services=[], previously_ready=previously))
    assert sorted(calls) == want_calls
    assert result.ready_pods == want_done
    assert bool(result.plugin_errors) is fails
