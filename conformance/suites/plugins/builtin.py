"""The built-in plugin a chain test runs with: the framework's rules hold for any plugin.

The Plugins profile's required features (PluginFramework, PluginChainImmutability) are rules about
the chain ("the substantive plugin chain is immutable after creation", a recreated Pod mutated
again, a plugin's type defaulted), not about one plugin. The spec documents two built-ins:
headless-service, and demo-pod-tweaks, a demo "to validate the plugin flow before developing your
own". Neither is singled out as required, and a framework without any registered plugin cannot be
observed ("name ... must match a registered plugin name"). Reading (docs/spec-readings.md): an
implementation claiming the plugin framework registers at least one of the two; these tests run
with headless-service when the implementation supports it, else demo-pod-tweaks, and are
inconclusive (never not-supported) with neither, so a Plugins success always means they ran.

The changes the tests make are ones every built-in accepts before the change: a whole plugin
added or removed, and ``scope.roles`` (headless-service "accepts scope.roles"; its ``scope.target``
must be omitted or All, so a target change is not one of them).
"""

from __future__ import annotations

from typing import Any

from conformance.framework.features import Feature
from conformance.framework.outcomes import Inconclusive
from conformance.framework.support import Support

HEADLESS_SERVICE = "headless-service"
DEMO_POD_TWEAKS = "demo-pod-tweaks"


def builtin_plugin(support: Support) -> dict[str, Any]:
    """A chain entry for the built-in the implementation supports (headless-service first), with the
    type written; :class:`Inconclusive` when it supports neither."""
    if support.supports(Feature.HEADLESS_SERVICE):
        return {"name": HEADLESS_SERVICE, "type": "BuiltIn"}
    if support.supports(Feature.DEMO_POD_TWEAKS):
        return {
            "name": DEMO_POD_TWEAKS,
            "type": "BuiltIn",
            "config": {"annotations": {"conformance.kthena.io/chain": "v1"}},
        }
    raise Inconclusive(
        "the plugin chain is observed through one of the spec's built-in plugins, and the support declaration has "
        f"neither {HEADLESS_SERVICE} (feature {Feature.HEADLESS_SERVICE.value}) nor {DEMO_POD_TWEAKS} (feature "
        f"{Feature.DEMO_POD_TWEAKS.value})"
    )


def with_chain(body: dict[str, Any], plugins: list[dict[str, Any]] | None) -> dict[str, Any]:
    """``body`` with ``spec.plugins`` set to ``plugins`` (removed for None)."""
    if plugins is None:
        body["spec"].pop("plugins", None)
    else:
        body["spec"]["plugins"] = plugins
    return body


def missing_mutation(plugin: dict[str, Any], pod: Any) -> str | None:
    """What of ``plugin``'s documented mutation ``pod`` lacks (None: it carries it). headless-service
    sets hostname to the Pod's name and a subdomain (on Roles with a workerTemplate, as every chain
    manifest's are); demo-pod-tweaks as configured by :func:`builtin_plugin` adds its annotation."""
    if plugin["name"] == HEADLESS_SERVICE:
        if pod.spec.hostname != pod.metadata.name or not pod.spec.subdomain:
            return (
                f"headless-service's hostname (the Pod's name) and subdomain: seen hostname {pod.spec.hostname!r}, "
                f"subdomain {pod.spec.subdomain!r}"
            )
        return None
    wanted = (plugin.get("config") or {}).get("annotations") or {}
    annotations = pod.metadata.annotations or {}
    lacking = {k: v for k, v in wanted.items() if annotations.get(k) != v}
    return f"{plugin['name']}'s annotations {lacking}: seen {annotations}" if lacking else None
