"""Probes of the faults added so that every behaviour is proven able to fail (issue 13, third wave):
admission rules (CRD schema and webhook): bounds, patterns, list-map keys, immutability.

Why this module exists: ``test_faults.py`` holds one probe per fault; these are kept apart so the
table there stays readable. Each row is ``(fault, probe, off, on, overlaps)`` as in
:mod:`.fault_cases_plugins`.

A CRD fault is probed on the generated CRD (the API server's half) and, where the webhook checks the
same bound, on :func:`validate` too: a variant lets the value through only when both halves do.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kthena_ref.admission.rules import validate
from kthena_ref.api.crd import crd

from .builders import MS

NAME = "spec.template.roles[0].name"


def _schema(*path: str) -> dict[str, Any]:
    """The CRD's schema at ``path`` below spec (``"[]"`` steps into a list's items)."""
    schema: dict[str, Any] = crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    for step in path:
        schema = schema["items"] if step == "[]" else schema["properties"][step]
    return schema


def _api(change: Callable[[dict[str, Any]], None] = lambda spec: None) -> dict[str, Any]:
    """A valid ModelServing (one Role ``r``) as the API server would send it, with ``change`` applied to spec."""
    data = MS().build().to_api()
    change(data["spec"])
    return data


def _fields(change: Callable[[dict[str, Any]], None], old: dict[str, Any] | None = None) -> list[str]:
    """The fields admission names for the ModelServing ``_api(change)`` (an update of ``old`` when given)."""
    return [e.field for e in validate(_api(change), old)]


def _role(**role: Any) -> Callable[[dict[str, Any]], None]:
    return lambda spec: spec["template"]["roles"][0].update(role)


def _strategy(**strategy: Any) -> Callable[[dict[str, Any]], None]:
    return lambda spec: spec.update(rolloutStrategy=strategy)


def probe_zero_unavailable() -> list[str]:
    """ServingGroupRollingUpdate with a literal maxUnavailable 0 and no maxSurge."""
    return _fields(_strategy(rollingUpdateConfiguration={"maxUnavailable": 0}))


def probe_history_limit() -> tuple[Any, list[str]]:
    """The CRD's minimum of revisionHistoryLimit, and what the webhook refuses in -1."""
    return _schema("revisionHistoryLimit").get("minimum"), _fields(lambda spec: spec.update(revisionHistoryLimit=-1))


def probe_name_length() -> tuple[Any, list[str]]:
    """The CRD's maxLength of a Role name, and what the webhook refuses in the 13-character 'role-thirteen'."""
    return _schema("template", "roles", "[]", "name").get("maxLength"), _fields(_role(name="role-thirteen"))


def probe_name_pattern() -> tuple[bool, list[str]]:
    """Whether the CRD has a Role name pattern, and what the webhook refuses in '-server'."""
    return "pattern" in _schema("template", "roles", "[]", "name"), _fields(_role(name="-server"))


def probe_roles_list_type() -> tuple[Any, Any]:
    roles = _schema("template", "roles")
    return roles["x-kubernetes-list-type"], roles.get("x-kubernetes-list-map-keys")


def probe_roles_count() -> tuple[Any, Any, list[str], list[str]]:
    """The CRD's bounds of the Role count, and what the webhook refuses in 0 and in 5 Roles."""
    roles = _schema("template", "roles")

    def five(spec: dict[str, Any]) -> None:
        spec["template"]["roles"] = [{**spec["template"]["roles"][0], "name": f"r{i}"} for i in range(5)]

    none = _fields(lambda spec: spec["template"].update(roles=[]))
    return roles.get("minItems"), roles.get("maxItems"), none, _fields(five)


def probe_plugins_list_type() -> tuple[Any, Any]:
    plugins = _schema("plugins")
    return plugins["x-kubernetes-list-type"], plugins.get("x-kubernetes-list-map-keys")


def probe_plugin_type_as_written() -> tuple[Any, list[str]]:
    """The CRD's default of a plugin's type, and admission's answer to writing an omitted type as BuiltIn."""
    old = _api(lambda spec: spec.update(plugins=[{"name": "demo-pod-tweaks"}]))
    written = _fields(lambda spec: spec.update(plugins=[{"name": "demo-pod-tweaks", "type": "BuiltIn"}]), old)
    return _schema("plugins", "[]", "type").get("default"), written


def probe_headless_target() -> list[str]:
    return _fields(lambda spec: spec.update(plugins=[{"name": "headless-service", "scope": {"target": "Entry"}}]))


def probe_coordination_presence() -> bool:
    """Whether the CRD's rule on spec compares roleCoordination's presence (so it cannot be added or removed)."""
    presence = (
        "(has(self.rolloutStrategy) && has(self.rolloutStrategy.roleCoordination)) == "
        "(has(oldSelf.rolloutStrategy) && has(oldSelf.rolloutStrategy.roleCoordination))"
    )
    return any(presence in rule["rule"] for rule in _schema()["x-kubernetes-validations"])


def probe_group_config_under_role_rolling() -> list[str]:
    return _fields(_strategy(type="RoleRollingUpdate", rollingUpdateConfiguration={"maxUnavailable": 1}))


def probe_progress_deadline() -> tuple[Any, list[str]]:
    """The CRD's minimum of progressDeadlineSeconds, and what the webhook refuses in 59."""
    deadline = _schema("rolloutStrategy", "progressDeadlineSeconds")
    return deadline.get("minimum"), _fields(_strategy(progressDeadlineSeconds=59))


def probe_cel_messages(*path: str) -> Callable[[], list[str]]:
    """The messages of the CRD's CEL rules at ``path`` below spec."""
    return lambda: [rule["message"] for rule in _schema(*path).get("x-kubernetes-validations", [])]


def probe_min_role_replicas_keys() -> list[str]:
    return _fields(lambda spec: spec["template"].update(gangPolicy={"minRoleReplicas": {"r": 1, "router": 1}}))


CASES: list[tuple[Any, ...]] = [
    (
        "max-unavailable-zero-accepted",
        probe_zero_unavailable,
        ["spec.rolloutStrategy.rollingUpdateConfiguration.maxUnavailable"],
        [],
        (),
    ),
    ("negative-history-limit-accepted", probe_history_limit, (0, ["spec.revisionHistoryLimit"]), (None, []), ()),
    ("role-name-length-unchecked", probe_name_length, (12, [NAME]), (None, []), ()),
    ("role-name-pattern-unchecked", probe_name_pattern, (True, [NAME]), (False, []), ()),
    ("role-names-not-unique", probe_roles_list_type, ("map", ["name"]), ("atomic", None), ()),
    (
        "roles-count-unchecked",
        probe_roles_count,
        (1, 4, ["spec.template.roles"], ["spec.template.roles"]),
        (None, None, [], []),
        (),
    ),
    ("plugin-names-not-unique", probe_plugins_list_type, ("map", ["name"]), ("atomic", None), ()),
    (  # the CRD half is a default, which no-schema-defaults drops too (every default)
        "plugin-type-compared-as-written",
        probe_plugin_type_as_written,
        ("BuiltIn", []),
        (None, ["spec.plugins"]),
        ("no-schema-defaults",),
    ),
    ("headless-scope-target-accepted", probe_headless_target, ["spec.plugins[0].scope.target"], [], ()),
    ("coordination-addable-and-removable", probe_coordination_presence, True, False, ()),
    (
        "role-rolling-group-config-accepted",
        probe_group_config_under_role_rolling,
        ["spec.rolloutStrategy.rollingUpdateConfiguration"],
        [],
        (),
    ),
    (
        "progress-deadline-minimum-unchecked",
        probe_progress_deadline,
        (60, ["spec.rolloutStrategy.progressDeadlineSeconds"]),
        (None, []),
        (),
    ),
    (
        "gang-policy-removable",
        probe_cel_messages("template"),
        ["gangPolicy cannot be removed once set"],
        [],
        (),
    ),
    (
        "min-role-replicas-mutable",
        probe_cel_messages("template", "gangPolicy"),
        ["minRoleReplicas is immutable"],
        [],
        (),
    ),
    (
        "min-role-replicas-keys-unchecked",
        probe_min_role_replicas_keys,
        ["spec.template.gangPolicy.minRoleReplicas[router]"],
        [],
        (),
    ),
]
