"""Plugins: the framework (:mod:`.base`) and the built-ins (:mod:`.builtin`)."""

from __future__ import annotations

from .. import faults
from ..api.types import ModelServing, PluginSpec
from .base import BoundPlugin, PluginConfigError, Registry
from .builtin import HEADLESS, REGISTRY


def build_chain(ms: ModelServing, registry: Registry = REGISTRY) -> list[BoundPlugin]:
    """The ModelServing's plugin chain, in list order (raises PluginConfigError naming the field)."""
    chain = []
    seen: set[str] = set()
    for i, spec in enumerate(ms.spec.plugins or []):
        field = f"spec.plugins[{i}]"
        if spec.name in seen:
            raise PluginConfigError(f"{field}.name", f"plugin {spec.name!r} appears more than once")
        seen.add(spec.name)
        if faults.active("unknown-plugin-accepted") and spec.name not in registry.names():
            continue  # admitted by the same fault: the controller ignores the plugin
        try:
            chain.append(BoundPlugin(registry.build(spec, field), spec))
        except PluginConfigError as exc:
            if faults.active("plugin-config-error-skips-plugin") and ".config" in exc.field:
                continue  # admitted by the same fault: the controller ignores the plugin
            raise
    if (faults.active("omitted-plugins-implicit-headless") and ms.spec.plugins is None) or (
        faults.active("empty-plugins-implicit-headless") and ms.spec.plugins == []
    ):  # what older controllers did without an explicit plugin
        chain.append(BoundPlugin(registry.build(PluginSpec(name=HEADLESS), "spec.plugins"), PluginSpec(name=HEADLESS)))
    if faults.active("plugin-order-reversed"):
        chain.reverse()
    return chain
