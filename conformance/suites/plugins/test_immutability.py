"""Plugins: the substantive plugin chain is immutable after creation.

Each change the spec lists (adding the first plugin, removing one, changing its config or scope,
reordering) is tried as a JSON merge patch of spec.plugins and must be refused; the documented
equivalence (an omitted type and BuiltIn) must be accepted; and scaling to zero must not unlock
the chain. The changes any plugin allows (adding, removing, the type's spelling) are made with the
built-in the implementation supports (:mod:`.builtin`); a config or ``scope.target`` change needs
demo-pod-tweaks (headless-service has no config and allows no target but All), a reorder two
plugins.
"""

from __future__ import annotations

import copy
from typing import Any

from conformance.framework.catalog import behaviour
from conformance.framework.features import Feature
from conformance.framework.modelserving import ModelServings, expected_pod_count
from conformance.framework.plugin import SuiteState
from conformance.suites.plugins.builtin import builtin_plugin, with_chain

PLUGINS = "plugin-framework-and-headless-service.txt"
SECTION = f"{PLUGINS}#API Configuration"
NAME = "chain"


def _chain(manifest: Any) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    body = manifest("plugins-chain")
    return body, copy.deepcopy(body["spec"]["plugins"])


def _builtin_chain(manifest: Any, suite: SuiteState) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The chain manifest with a one-plugin chain of the supported built-in."""
    plugins = [builtin_plugin(suite.support)]
    return with_chain(manifest("plugins-chain"), copy.deepcopy(plugins)), plugins


def _refused(ms: ModelServings, plugins: Any, what: str) -> None:
    ms.refused_patch(NAME, {"spec": {"plugins": plugins}}, f"{what} on update (the plugin chain is immutable)")


@behaviour(
    "plugins/immutability/add-first-plugin",
    "Adding a plugin to a ModelServing created without plugins MUST be rejected on update.",
    SECTION,
    Feature.PLUGIN_CHAIN_IMMUTABILITY,
)
def test_adding_the_first_plugin_is_rejected(ms: ModelServings, manifest: Any, suite: SuiteState) -> None:
    body, plugins = _builtin_chain(manifest, suite)
    ms.create(with_chain(body, None))
    _refused(ms, plugins, f"adding {plugins[0]['name']} to a ModelServing without plugins")


@behaviour(
    "plugins/immutability/remove-plugin",
    "Removing a plugin from spec.plugins, by an empty list or by dropping the field, MUST be rejected on update.",
    SECTION,
    Feature.PLUGIN_CHAIN_IMMUTABILITY,
)
def test_removing_a_plugin_is_rejected(ms: ModelServings, manifest: Any, suite: SuiteState) -> None:
    body, _ = _builtin_chain(manifest, suite)
    ms.create(body)
    _refused(ms, [], "replacing spec.plugins by an empty list")
    _refused(ms, None, "removing spec.plugins")


@behaviour(
    "plugins/immutability/change-config",
    "Changing a plugin's config MUST be rejected on update.",
    SECTION,
    Feature.PLUGIN_CHAIN_IMMUTABILITY,
    requires=(Feature.DEMO_POD_TWEAKS,),
)
def test_changing_a_plugin_config_is_rejected(ms: ModelServings, manifest: Any) -> None:
    body, plugins = _chain(manifest)
    ms.create(body)
    plugins[0]["config"] = {"annotations": {"conformance.kthena.io/chain": "v2"}}
    _refused(ms, plugins, "changing demo-pod-tweaks' config")


@behaviour(
    "plugins/immutability/change-scope",
    "Changing a plugin's scope MUST be rejected on update.",
    SECTION,
    Feature.PLUGIN_CHAIN_IMMUTABILITY,
    requires=(Feature.DEMO_POD_TWEAKS,),
)
def test_changing_a_plugin_scope_is_rejected(ms: ModelServings, manifest: Any) -> None:
    body, plugins = _chain(manifest)
    ms.create(body)
    plugins[0]["scope"] = {"target": "Entry"}
    _refused(ms, plugins, "narrowing demo-pod-tweaks' scope to entry Pods")


@behaviour(
    "plugins/immutability/reorder",
    "Changing the order of the plugins in spec.plugins MUST be rejected on update.",
    SECTION,
    Feature.PLUGIN_CHAIN_IMMUTABILITY,
    requires=(Feature.DEMO_POD_TWEAKS, Feature.HEADLESS_SERVICE),
)
def test_reordering_plugins_is_rejected(ms: ModelServings, manifest: Any) -> None:
    body, plugins = _chain(manifest)
    plugins.append({"name": "headless-service", "type": "BuiltIn"})
    body["spec"]["plugins"] = plugins
    ms.create(body)
    _refused(ms, list(reversed(plugins)), "swapping demo-pod-tweaks and headless-service")


@behaviour(
    "plugins/immutability/equivalent-type-accepted",
    "An update that only writes a plugin's omitted type as BuiltIn, or omits a BuiltIn type, MUST be accepted, while "
    "removing that plugin from the same ModelServing MUST be rejected.",
    SECTION,
    Feature.PLUGIN_CHAIN_IMMUTABILITY,
)
def test_equivalent_type_representation_is_accepted(ms: ModelServings, manifest: Any, suite: SuiteState) -> None:
    body, plugins = _builtin_chain(manifest, suite)
    del body["spec"]["plugins"][0]["type"]
    ms.create(body)
    for plugin, what in (
        ({**plugins[0], "type": "BuiltIn"}, "writing the omitted type as BuiltIn"),
        ({k: v for k, v in plugins[0].items() if k != "type"}, "omitting the type again"),
    ):
        rejection = ms.try_patch(NAME, {"spec": {"plugins": [plugin]}})
        assert rejection is None, f"expected {what} to be accepted (the same plugin chain); rejected: {rejection}"
    # An implementation accepting every chain change would pass the above: the control is a real change.
    _refused(ms, [], f"removing {plugins[0]['name']} (the control: a substantive change of the same chain)")


@behaviour(
    "plugins/immutability/scale-to-zero-keeps-lock",
    "Scaling a ModelServing to zero replicas MUST be accepted and MUST NOT permit a change of its plugin chain.",
    SECTION,
    Feature.PLUGIN_CHAIN_IMMUTABILITY,
)
def test_scaling_to_zero_does_not_unlock_the_chain(ms: ModelServings, manifest: Any, suite: SuiteState) -> None:
    body, plugins = _builtin_chain(manifest, suite)
    ms.create(body)
    ms.wait_pods(NAME, expected_pod_count(body))
    rejection = ms.try_patch(NAME, {"spec": {"replicas": 0}})
    assert rejection is None, f"expected scaling to zero (spec.replicas 0) to be accepted; rejected: {rejection}"
    ms.wait_pods(NAME, 0, wait="scale")
    ms.wait_settled(NAME, wait="scale")
    _refused(ms, [], f"removing {plugins[0]['name']} (spec.plugins: []) after scaling to zero")
