"""Plugins: the plugin framework's admission of spec.plugins (names, types, uniqueness)."""

from __future__ import annotations

from typing import Any

from conformance.framework.catalog import behaviour
from conformance.framework.features import Feature
from conformance.framework.modelserving import ModelServings

API = "api-reference-workload-v1alpha1.txt"
PLUGINS = "plugin-framework-and-headless-service.txt"
UNKNOWN = "conformance-unregistered-plugin"


@behaviour(
    "plugins/framework/unknown-plugin-not-ignored",
    "A plugin name that matches no registered plugin MUST be rejected at admission or reported by a Warning "
    "Event on the ModelServing naming the plugin, and MUST NOT be silently ignored.",
    f"{PLUGINS}#API Configuration",
    Feature.PLUGIN_FRAMEWORK,
)
def test_unknown_plugin_is_rejected_or_reported(ms: ModelServings, manifest: Any) -> None:
    body = manifest("core-small")
    body["spec"]["plugins"] = [{"name": UNKNOWN, "type": "BuiltIn"}]
    rejection = ms.try_create(body)
    if rejection is not None:  # the message's wording is not judged (core/admission/message-names-field)
        ms.refused_create(body, f"the unregistered plugin {UNKNOWN!r}")
        return
    events = ms.wait(
        "events",
        f"a Warning Event on {ms.ns}/small naming the unregistered plugin {UNKNOWN!r} (it was accepted at admission)",
        lambda: [e for e in ms.events("small") if e.type == "Warning" and UNKNOWN in (e.message or "")],
        bool,
    )
    assert events, "unreachable: the wait returns only a non-empty list"


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
