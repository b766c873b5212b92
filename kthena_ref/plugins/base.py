"""The plugin framework: one Plugin interface, one HookRequest, a registry of factories (pure).

As the plugin-framework spec describes: every hook receives the same :class:`HookRequest`
(ModelServing, ServingGroup, Role, Role instance, Entry/Worker target, the Pod or None for Role
hooks, and the runtime handles); plugins run in list order, each seeing the previous ones'
mutations; a plugin's scope (``roles``, ``target``) decides whether it runs at all.

To keep the controller's functional core, hooks are pure here: ``on_pod_create`` mutates the Pod
it is handed, ``on_role_sync`` returns the auxiliary objects the Role instance should have (the
planner diffs them with what exists and the executor applies the difference, so it is idempotent
by construction), and ``on_role_delete`` names the auxiliary objects to remove. ``runtime`` is
there for plugins that need the API (none of the built-ins do).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from .. import faults
from ..api.types import ModelServing, PluginSpec, PluginTarget, Role


class PluginError(Exception):
    """A plugin refused a hook; the Pod is not created and the reconcile is retried."""


class PluginConfigError(ValueError):
    """A plugin's config (or scope) is invalid: reported at admission with the field path."""

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(f"{field}: {reason}")
        self.field = field
        self.reason = reason


@dataclass
class HookRequest:
    ms: ModelServing
    group: str  # ServingGroup name, <ms>-<ordinal>
    ordinal: int
    role: Role
    role_index: int
    target: PluginTarget  # ENTRY or WORKER for Pod hooks; ALL for Role hooks
    pod: dict[str, Any] | None = None
    runtime: Any = None  # client and listers, for plugins that need them
    # The Pods of this Role instance as observed (cache-backed lister, read-only).
    instance_pods: list[dict[str, Any]] = field(default_factory=list)
    # The Services labelled with this ModelServing as observed, by name (read-only).
    services: dict[str, dict[str, Any]] = field(default_factory=dict)
    # What the plugin reports: (reason, message) pairs become Events and a status condition.
    reports: list[tuple[str, str]] = field(default_factory=list)

    @property
    def role_id(self) -> str:
        return f"{self.role.name}-{self.role_index}"


class Plugin(Protocol):
    name: str
    #: Whether the plugin's Pod mutations survive an in-place image patch (spec reading 29).
    supports_in_place: bool

    def on_pod_create(self, req: HookRequest) -> None: ...

    def on_pod_ready(self, req: HookRequest) -> None: ...

    def on_role_sync(self, req: HookRequest) -> list[dict[str, Any]]: ...

    def on_role_delete(self, req: HookRequest) -> list[tuple[str, str]]: ...


class NoOpHooks:
    """Base for plugins: every hook does nothing unless overridden."""

    name = ""
    supports_in_place = True

    def on_pod_create(self, req: HookRequest) -> None:
        return None

    def on_pod_ready(self, req: HookRequest) -> None:
        return None

    def on_role_sync(self, req: HookRequest) -> list[dict[str, Any]]:
        return []

    def on_role_delete(self, req: HookRequest) -> list[tuple[str, str]]:
        return []


Factory = Callable[[PluginSpec, str], Plugin]  # (spec, field path of the spec) -> plugin


@dataclass
class Registry:
    factories: dict[str, Factory] = field(default_factory=dict)

    def register(self, name: str, factory: Factory) -> None:
        if name in self.factories:
            raise ValueError(f"plugin {name!r} is registered twice")
        self.factories[name] = factory

    def names(self) -> frozenset[str]:
        return frozenset(self.factories)

    def build(self, spec: PluginSpec, field: str) -> Plugin:
        factory = self.factories.get(spec.name)
        if factory is None:
            known = ", ".join(sorted(self.factories)) or "none"
            raise PluginConfigError(f"{field}.name", f"{spec.name!r} is not a registered plugin (registered: {known})")
        return factory(spec, field)


@dataclass(frozen=True)
class BoundPlugin:
    """A plugin with its place in the chain and its scope."""

    plugin: Plugin
    spec: PluginSpec

    def in_scope(self, role: str, target: PluginTarget) -> bool:
        return in_scope(self.spec, role, target)


def in_scope(spec: PluginSpec, role: str, target: PluginTarget) -> bool:
    """Does ``spec`` apply to Pods of ``role`` at ``target``? (empty roles = all; target All = all)."""
    scope = spec.scope
    if scope is None:
        return True
    if faults.active("scope-empty-roles-match-none") and scope.roles is not None and not scope.roles:
        return False
    roles_checked = not (faults.active("scope-roles-ignored-with-target") and scope.target is not PluginTarget.ALL)
    on_pod = target is not PluginTarget.ALL  # a Pod's hook (a Role-level hook asks for ALL)
    roles_checked = roles_checked and not (
        faults.active("scope-roles-ignored") and scope.target is PluginTarget.ALL and on_pod
    )
    if scope.roles and role not in scope.roles and roles_checked:
        return False
    if faults.active("scope-target-worker-ignored") and scope.target is PluginTarget.WORKER:
        return True
    if faults.active("scope-target-entry-ignored") and scope.target is PluginTarget.ENTRY:
        return True
    if faults.active("scope-target-all-entry-only") and scope.target is PluginTarget.ALL:
        return target is not PluginTarget.WORKER
    return scope.target is PluginTarget.ALL or target is PluginTarget.ALL or scope.target is target


def decode(config: Any, field: str, allowed: dict[str, type | tuple[type, ...]]) -> dict[str, Any]:
    """A plugin config as a dict with only ``allowed`` keys of the allowed types, or a clear error."""
    if config is None:
        return {}
    if not isinstance(config, dict):
        raise PluginConfigError(f"{field}.config", f"must be an object, not {type(config).__name__}")
    for key, value in config.items():
        if key not in allowed:
            raise PluginConfigError(
                f"{field}.config.{key}", f"unknown field (known: {', '.join(sorted(allowed)) or 'none'})"
            )
        if not isinstance(value, allowed[key]):
            raise PluginConfigError(f"{field}.config.{key}", f"has the wrong type ({type(value).__name__})")
    return dict(config)


def normalized_chain(plugins: list[PluginSpec] | None) -> str:
    """The plugin chain with equivalent representations made equal (spec reading 6): omitted
    type = BuiltIn, omitted scope = all roles and target All, empty roles = all, omitted config
    = {}; order kept. Two chains are the same chain when these strings are equal."""
    out = []
    for plugin in plugins or []:
        scope = plugin.scope
        if faults.active("scope-roles-change-allowed") and scope is not None:
            scope = scope.model_copy(update={"roles": None})
        out.append(
            {
                "name": plugin.name,
                "type": plugin.type.value,
                "config": plugin.config if plugin.config is not None else {},
                "roles": sorted(scope.roles) if scope and scope.roles else None,
                "target": scope.target.value if scope else PluginTarget.ALL.value,
            }
        )
    return json.dumps(out, sort_keys=True)
