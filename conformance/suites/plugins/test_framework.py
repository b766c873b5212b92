"""Plugins: the plugin framework's admission of spec.plugins (names, types, uniqueness)."""

from __future__ import annotations

from typing import Any

from conformance.framework.catalog import behaviour
from conformance.framework.features import Feature
from conformance.framework.modelserving import ModelServings

API = "api-reference-workload-v1alpha1.txt"
PLUGINS = "plugin-framework-and-headless-service.txt"


@behaviour(
    "plugins/framework/duplicate-name-rejected",
    "A plugin name that appears twice in spec.plugins MUST be refused at admission and not stored.",
    f"{PLUGINS}#Plugin Execution Order",
    Feature.PLUGIN_FRAMEWORK,
)
def test_duplicate_plugin_name_is_rejected(ms: ModelServings, manifest: Any) -> None:
    body = manifest("core-small")
    body["spec"]["plugins"] = [
        {"name": "demo-pod-tweaks", "type": "BuiltIn", "config": {"annotations": {"conformance.kthena.io/n": "1"}}},
        {"name": "demo-pod-tweaks", "type": "BuiltIn", "config": {"annotations": {"conformance.kthena.io/n": "2"}}},
    ]
    ms.refused_create(body, "a chain naming demo-pod-tweaks twice")


@behaviour(
    "plugins/framework/type-enum",
    "A plugin type other than BuiltIn MUST be refused at admission and not stored.",
    f"{API}#PluginSpec",
    Feature.PLUGIN_FRAMEWORK,
)
def test_plugin_type_other_than_builtin_is_rejected(ms: ModelServings, manifest: Any) -> None:
    for i, bad in enumerate(["Webhook", "builtin"]):
        body = manifest("core-small")
        body["metadata"]["name"] = f"type-{i}"
        body["spec"]["plugins"] = [{"name": "demo-pod-tweaks", "type": bad}]
        ms.refused_create(body, f"plugin type {bad!r}")
