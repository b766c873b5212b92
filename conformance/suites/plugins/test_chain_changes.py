"""Plugins: more ways of changing an existing plugin chain, each refused.

"The substantive plugin chain is immutable after creation. Adding the first plugin, removing a
plugin, changing its configuration or scope, or changing execution order requires a new
ModelServing ... Scaling to zero or completing a rollout does not permit these changes."
test_immutability.py has the changes themselves; this module has the ones that need another
state first (a plugin appended to a chain, a completed rollout, zero replicas) and a change of
scope.roles (the Roles a plugin applies to). Every change is a JSON merge patch of spec.plugins.
"""

from __future__ import annotations

from typing import Any

from conformance.framework.catalog import behaviour
from conformance.framework.features import Feature
from conformance.framework.modelserving import ModelServings, expect_refused, expected_pod_count
from conformance.framework.plugin import SuiteState
from conformance.suites.plugins.builtin import builtin_plugin, with_chain
from conformance.suites.rollout import patch_roles, with_image

PLUGINS = "plugin-framework-and-headless-service.txt"
SECTION = f"{PLUGINS}#API Configuration"
NAME = "chain"


def _refused(ms: ModelServings, name: str, plugins: Any, what: str) -> None:
    before = ms.get(name)["spec"].get("plugins")
    rejection = ms.try_patch(name, {"spec": {"plugins": plugins}})
    expect_refused(rejection, f"{what} on update (the plugin chain is immutable)")
    after = ms.get(name)["spec"].get("plugins")
    assert after == before, f"{what} was refused but the stored spec.plugins changed: before {before}, after {after}"


@behaviour(
    "plugins/immutability/append-to-chain",
    "Adding a plugin to a ModelServing whose spec.plugins already lists one MUST be rejected on update.",
    SECTION,
    Feature.PLUGIN_CHAIN_IMMUTABILITY,
    requires=(Feature.DEMO_POD_TWEAKS, Feature.HEADLESS_SERVICE),
)
def test_appending_a_plugin_is_rejected(ms: ModelServings, manifest: Any) -> None:
    body = manifest("plugins-chain")
    ms.create(body)
    plugins = [*body["spec"]["plugins"], {"name": "headless-service", "type": "BuiltIn"}]
    _refused(ms, NAME, plugins, "appending headless-service after demo-pod-tweaks")


@behaviour(
    "plugins/immutability/after-rollout",
    "Completing a rollout MUST NOT permit a change of the plugin chain: after every ServingGroup runs the updated "
    "template, removing the plugin MUST still be rejected.",
    SECTION,
    Feature.PLUGIN_CHAIN_IMMUTABILITY,
    requires=(Feature.ROLLING_UPDATE,),
)
def test_a_completed_rollout_does_not_unlock_the_chain(ms: ModelServings, manifest: Any, suite: SuiteState) -> None:
    body = with_chain(manifest("plugins-chain"), [builtin_plugin(suite.support)])
    count = expected_pod_count(body)
    ms.create(body)
    ms.wait_pods(NAME, count)
    ms.wait_settled(NAME)
    image = "registry.example/engine:v2"
    patch_roles(ms, body, with_image(body, image))

    def rolled(pods: list[Any]) -> bool:
        live = [p for p in pods if not p.metadata.deletion_timestamp]
        return len(pods) == len(live) == count and all(c.image == image for p in live for c in p.spec.containers)

    ms.wait("rollout", f"{count} Pods of {ms.ns}/{NAME} on {image}", lambda: ms.pods(NAME), rolled)
    ms.wait_updated(NAME, wait="rollout")
    ms.wait_settled(NAME, wait="rollout")
    _refused(ms, NAME, [], f"removing {body['spec']['plugins'][0]['name']} after a completed rollout")


@behaviour(
    "plugins/immutability/change-scope-roles",
    "Changing the Roles a plugin's scope.roles lists MUST be rejected on update.",
    SECTION,
    Feature.PLUGIN_CHAIN_IMMUTABILITY,
)
def test_changing_scope_roles_is_rejected(ms: ModelServings, manifest: Any, suite: SuiteState) -> None:
    body = manifest("plugins-two-roles")  # Roles alpha and beta
    name = body["metadata"]["name"]
    plugin = {**builtin_plugin(suite.support), "scope": {"roles": ["alpha"]}}
    body["spec"]["plugins"] = [plugin]
    ms.create(body)
    moved = [{**plugin, "scope": {"roles": ["beta"]}}]
    _refused(ms, name, moved, f"moving {plugin['name']}' scope.roles from alpha to beta")


@behaviour(
    "plugins/immutability/add-first-at-zero",
    "Adding the first plugin to a ModelServing scaled to zero replicas MUST be rejected on update.",
    SECTION,
    Feature.PLUGIN_CHAIN_IMMUTABILITY,
)
def test_adding_the_first_plugin_at_zero_replicas_is_rejected(
    ms: ModelServings, manifest: Any, suite: SuiteState
) -> None:
    body = with_chain(manifest("plugins-chain"), None)
    plugins = [builtin_plugin(suite.support)]
    ms.create(body)
    ms.wait_pods(NAME, expected_pod_count(body))
    rejection = ms.try_patch(NAME, {"spec": {"replicas": 0}})
    assert rejection is None, f"expected scaling to zero (spec.replicas 0) to be accepted; rejected: {rejection}"
    ms.wait_pods(NAME, 0, wait="scale")
    ms.wait_settled(NAME, wait="scale")
    _refused(ms, NAME, plugins, f"adding {plugins[0]['name']} to a ModelServing without plugins at zero replicas")
