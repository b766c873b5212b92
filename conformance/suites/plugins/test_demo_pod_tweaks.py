"""Plugins: the built-in demo-pod-tweaks plugin, and the chain's order and scope seen through it.

The manifest has two Roles (alpha, beta), each an entry Pod and a worker, every template with two
containers that carry their own env and a template annotation; which Pod is which is read from
the suite's own template labels.
"""

from __future__ import annotations

import secrets
from typing import Any

from conformance.framework.catalog import behaviour
from conformance.framework.features import Feature
from conformance.framework.modelserving import ModelServings, container_of, expected_pod_count, member, role_of

API = "api-reference-workload-v1alpha1.txt"
PLUGINS = "plugin-framework-and-headless-service.txt"
NAME = "tweaks"
DEMO = "demo-pod-tweaks"
MARK = "conformance.kthena.io/tweaked"
TEMPLATE_ANNOTATION = "conformance.kthena.io/from-template"


def _create(ms: ModelServings, manifest: Any, *plugins: dict[str, Any], ready: bool = True) -> list[Any]:
    body = manifest("plugins-two-roles")
    body["spec"]["plugins"] = list(plugins)
    ms.create(body)
    return ms.wait_pods(NAME, expected_pod_count(body), ready=ready, wait="pods-running" if ready else "pods-created")


def _env(container: Any) -> list[tuple[str, str]]:
    return [(e.name, e.value) for e in container.env or []]


def _where(pod: Any) -> str:
    return f"{role_of(pod)}/{member(pod)} Pod {pod.metadata.name}"


def _tweaked(pod: Any) -> bool:
    return MARK in (pod.metadata.annotations or {})


@behaviour(
    "plugins/demo-pod-tweaks/runtime-class-name",
    "demo-pod-tweaks with config.runtimeClassName MUST set spec.runtimeClassName of every Pod it applies to.",
    f"{PLUGINS}#Using Plugins",
    Feature.DEMO_POD_TWEAKS,
)
def test_runtime_class_name_is_set(ms: ModelServings, manifest: Any, kube: Any) -> None:
    from kubernetes import client

    from conformance.framework.namespaces import cluster_scoped_labels

    # Pods naming a RuntimeClass that does not exist are refused by the RuntimeClass admission
    # plugin, so the test makes one (cluster-scoped, unique to this test) and removes it after.
    node = client.NodeV1Api(kube.api)
    runtime_class = f"kc-{secrets.token_hex(4)}"
    meta = client.V1ObjectMeta(name=runtime_class, labels=cluster_scoped_labels(ms.run_id))  # swept if interrupted
    node.create_runtime_class(client.V1RuntimeClass(metadata=meta, handler="runc"))
    try:
        # Only the Pod spec matters: a node without that handler may never run the Pods.
        pods = _create(ms, manifest, {"name": DEMO, "type": "BuiltIn", "config": {"runtimeClassName": runtime_class}},
                       ready=False)  # fmt: skip
        wrong = {p.metadata.name: p.spec.runtime_class_name for p in pods if p.spec.runtime_class_name != runtime_class}
        assert not wrong, f"expected spec.runtimeClassName {runtime_class!r} on every Pod; seen {wrong}"
    finally:
        node.delete_runtime_class(runtime_class)


@behaviour(
    "plugins/demo-pod-tweaks/annotations-merged",
    "demo-pod-tweaks with config.annotations MUST add every configured annotation to every Pod it applies to, "
    "keeping the annotations the Pod template gave it.",
    f"{PLUGINS}#Using Plugins",
    Feature.DEMO_POD_TWEAKS,
)
def test_annotations_are_merged(ms: ModelServings, manifest: Any) -> None:
    added = {MARK: "yes", "example.com/custom": "value"}
    pods = _create(ms, manifest, {"name": DEMO, "type": "BuiltIn", "config": {"annotations": added}})
    for pod in pods:
        annotations = pod.metadata.annotations or {}
        missing = {k: v for k, v in added.items() if annotations.get(k) != v}
        assert not missing, f"expected the plugin's annotations {missing} on {_where(pod)}; seen {annotations}"
        expected = f"{role_of(pod)}-{member(pod)}"
        assert annotations.get(TEMPLATE_ANNOTATION) == expected, (
            f"expected the template's annotation {TEMPLATE_ANNOTATION}={expected!r} kept on {_where(pod)} "
            f"(annotations are merged); seen {annotations}"
        )


@behaviour(
    "plugins/demo-pod-tweaks/env-appended",
    "demo-pod-tweaks with config.env MUST append the configured variables to every regular container of every Pod "
    "it applies to, after the variables the container already had.",
    f"{PLUGINS}#Using Plugins",
    Feature.DEMO_POD_TWEAKS,
)
def test_env_is_appended_to_every_container(ms: ModelServings, manifest: Any) -> None:
    added = [("CUSTOM_VAR", "custom-value"), ("SECOND_VAR", "second")]
    config = {"env": [{"name": n, "value": v} for n, v in added]}
    pods = _create(ms, manifest, {"name": DEMO, "type": "BuiltIn", "config": config})
    for pod in pods:
        for container in pod.spec.containers:
            env = _env(container)
            where = f"container {container.name} of {_where(pod)}"
            suffix = "" if container.name == "engine" else f"-{container.name}"
            template = ("FROM_TEMPLATE", f"{role_of(pod)}-{member(pod)}{suffix}")
            assert template in env, f"expected the template's env {template} kept in {where}; seen {env}"
            missing = [e for e in added if e not in env]
            assert not missing, f"expected the plugin's env {missing} in {where}; seen {env}"
            positions = [env.index(template), *(env.index(e) for e in added)]
            assert positions == sorted(positions), (
                f"expected the plugin's env appended in its order after the template's {template[0]} in {where}; "
                f"seen {env}"
            )


@behaviour(
    "plugins/demo-pod-tweaks/scope-roles",
    "A plugin whose scope.roles lists Roles MUST apply to the Pods of those Roles only.",
    f"{API}#PluginScope",
    Feature.DEMO_POD_TWEAKS,
)
def test_scope_roles_limits_the_plugin_to_the_listed_roles(ms: ModelServings, manifest: Any) -> None:
    plugin = {"name": DEMO, "type": "BuiltIn", "scope": {"roles": ["alpha"]}, "config": {"annotations": {MARK: "yes"}}}
    pods = _create(ms, manifest, plugin)
    seen = {_where(p): _tweaked(p) for p in pods}
    expected = {_where(p): role_of(p) == "alpha" for p in pods}
    assert seen == expected, f"expected the plugin's annotation {MARK} on the alpha Pods only; seen {seen}"


@behaviour(
    "plugins/demo-pod-tweaks/scope-target-entry",
    "A plugin whose scope.target is Entry MUST apply to entry Pods only and not to worker Pods.",
    f"{API}#PluginScope",
    Feature.DEMO_POD_TWEAKS,
)
def test_scope_target_entry_limits_the_plugin_to_entry_pods(ms: ModelServings, manifest: Any) -> None:
    plugin = {"name": DEMO, "type": "BuiltIn", "scope": {"target": "Entry"}, "config": {"annotations": {MARK: "yes"}}}
    pods = _create(ms, manifest, plugin)
    seen = {_where(p): _tweaked(p) for p in pods}
    expected = {_where(p): member(p) == "entry" for p in pods}
    assert seen == expected, f"expected the plugin's annotation {MARK} on the entry Pods only; seen {seen}"


@behaviour(
    "plugins/chain/list-order",
    "Plugins MUST run in the order of spec.plugins, each seeing the Pod as the previous plugins left it, so "
    "env appended by demo-pod-tweaks listed after headless-service comes after headless-service's ENTRY_ADDRESS.",
    f"{PLUGINS}#Plugin Execution Order",
    Feature.DEMO_POD_TWEAKS,
    requires=(Feature.HEADLESS_SERVICE,),
)
def test_plugins_run_in_list_order(ms: ModelServings, manifest: Any) -> None:
    # Two instances of demo-pod-tweaks cannot show the order: a plugin name may appear only once
    # and names a registered plugin. headless-service (listed first) sets ENTRY_ADDRESS on worker
    # Pods; demo-pod-tweaks (second) appends, so its variable must come after ENTRY_ADDRESS.
    pods = _create(
        ms,
        manifest,
        {"name": "headless-service", "type": "BuiltIn"},
        {"name": DEMO, "type": "BuiltIn", "config": {"env": [{"name": "ORDER_MARK", "value": "second"}]}},
    )
    workers = [p for p in pods if member(p) == "worker"]
    assert workers, f"expected worker Pods; seen {[_where(p) for p in pods]}"
    for pod in workers:
        names = [n for n, _ in _env(container_of(pod))]
        where = f"container {container_of(pod).name} of {_where(pod)}"
        assert "ENTRY_ADDRESS" in names and "ORDER_MARK" in names, (
            f"expected ENTRY_ADDRESS (headless-service) and ORDER_MARK (demo-pod-tweaks) in {where}; seen {names}"
        )
        assert names.index("ENTRY_ADDRESS") < names.index("ORDER_MARK"), (
            f"expected ORDER_MARK after ENTRY_ADDRESS in {where} (demo-pod-tweaks runs second and appends); "
            f"seen {names}"
        )
