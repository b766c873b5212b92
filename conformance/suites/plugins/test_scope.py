"""Plugins: every form of PluginScope, seen through a built-in plugin's mutation.

``scope.roles`` is a whitelist ("empty means all roles") and ``scope.target`` picks entry, worker or
all Pods ("empty means all pods"); a plugin runs on a Pod only where both allow it. The manifest
has two Roles (alpha, beta), each an entry Pod and a worker, so every form tells apart the four
Pods; which Pod is which is read from the suite's own template labels. The forms every built-in
accepts (roles, target All) run with the built-in the implementation supports (:mod:`.builtin`);
a target Entry or Worker only demo-pod-tweaks accepts (headless-service's must be omitted or All).
``target: Entry`` is asserted in test_demo_pod_tweaks.py.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from conformance.framework.catalog import behaviour
from conformance.framework.features import Feature
from conformance.framework.modelserving import ModelServings, expected_pod_count, member, role_of
from conformance.framework.plugin import SuiteState
from conformance.suites.plugins.builtin import builtin_plugin, missing_mutation

API = "api-reference-workload-v1alpha1.txt"
SECTION = f"{API}#PluginScope"
NAME = "tweaks"
MARK = "conformance.kthena.io/tweaked"


def _check(
    ms: ModelServings,
    manifest: Any,
    scope: dict[str, Any],
    applies: Callable[[Any], bool],
    what: str,
    plugin: dict[str, Any] | None = None,
) -> None:
    """Create the two-Role ModelServing with ``plugin`` (default demo-pod-tweaks adding an
    annotation) under ``scope``; its mutation must be exactly on the Pods ``applies`` selects."""
    body = manifest("plugins-two-roles")
    chosen = plugin or {"name": "demo-pod-tweaks", "type": "BuiltIn", "config": {"annotations": {MARK: "yes"}}}
    chosen = {**chosen, "scope": scope}
    body["spec"]["plugins"] = [chosen]
    ms.create(body)
    pods = ms.wait_pods(NAME, expected_pod_count(body), ready=False, wait="pods-created")

    def where(pod: Any) -> str:
        return f"{role_of(pod)}/{member(pod)} Pod {pod.metadata.name}"

    seen = {where(p): missing_mutation(chosen, p) is None for p in pods}
    expected = {where(p): applies(p) for p in pods}
    assert seen == expected, (
        f"with scope {scope} expected {chosen['name']}'s mutation on {what} only "
        f"(Pod -> mutated expected {expected}); seen {seen}"
    )


@behaviour(
    "plugins/scope/target-worker",
    "A plugin whose scope.target is Worker MUST apply to worker Pods only and not to entry Pods.",
    SECTION,
    Feature.DEMO_POD_TWEAKS,
)
def test_target_worker_limits_the_plugin_to_worker_pods(ms: ModelServings, manifest: Any) -> None:
    _check(ms, manifest, {"target": "Worker"}, lambda p: member(p) == "worker", "the worker Pods")


@behaviour(
    "plugins/scope/roles-and-target",
    "A plugin whose scope sets both roles and target MUST apply only to Pods that are in a listed Role and of the "
    "given target.",
    SECTION,
    Feature.DEMO_POD_TWEAKS,
)
def test_roles_and_target_combine(ms: ModelServings, manifest: Any) -> None:
    _check(
        ms,
        manifest,
        {"roles": ["alpha"], "target": "Worker"},
        lambda p: role_of(p) == "alpha" and member(p) == "worker",
        "the worker Pod of Role alpha",
    )


@behaviour(
    "plugins/scope/empty-roles-all",
    "A plugin whose scope.roles is an explicit empty list MUST apply to the Pods of every Role.",
    SECTION,
    Feature.PLUGIN_FRAMEWORK,
)
def test_explicit_empty_roles_means_all_roles(ms: ModelServings, manifest: Any, suite: SuiteState) -> None:
    plugin = builtin_plugin(suite.support)
    _check(ms, manifest, {"roles": []}, lambda p: True, "every Pod (empty roles means all Roles)", plugin)


@behaviour(
    "plugins/scope/explicit-target-all",
    "A plugin whose scope.target is explicitly All MUST apply to entry and worker Pods alike.",
    SECTION,
    Feature.PLUGIN_FRAMEWORK,
)
def test_explicit_target_all_means_every_pod(ms: ModelServings, manifest: Any, suite: SuiteState) -> None:
    plugin = builtin_plugin(suite.support)
    _check(ms, manifest, {"target": "All"}, lambda p: True, "every Pod (target All)", plugin)


@behaviour(
    "plugins/scope/roles-listed",
    "A plugin whose scope.roles lists one of two Roles MUST apply to the Pods of that Role only, entry and worker.",
    SECTION,
    Feature.PLUGIN_FRAMEWORK,
)
def test_listed_roles_limit_the_plugin(ms: ModelServings, manifest: Any, suite: SuiteState) -> None:
    plugin = builtin_plugin(suite.support)
    _check(ms, manifest, {"roles": ["alpha"]}, lambda p: role_of(p) == "alpha", "the Pods of Role alpha", plugin)
