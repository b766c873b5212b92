"""Admission rules CEL cannot express, as one pure function over the ModelServing (pure).

The CRD schema already rejects wrong types, unknown enum values, bounds, duplicate Role names and
the immutable fields (CEL). What needs the whole object, upstream's webhook rules, or arithmetic
is checked here, and every problem is reported with its field path and the reason. The
validating webhook and the controller (for objects that reached it while the webhook was down)
both call :func:`validate`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from .. import faults
from ..api.crd import UNCHECKED_BOUNDS
from ..api.types import ModelServing, RolloutStrategyType
from ..planner import intstr
from ..planner.names import generated_name_problem
from ..plugins.base import PluginConfigError, normalized_chain
from ..plugins.builtin import HEADLESS, REGISTRY


@dataclass(frozen=True)
class FieldError:
    field: str
    reason: str

    def __str__(self) -> str:
        return f"{self.field}: {self.reason}"


def message(errors: list[FieldError]) -> str:
    """Upstream's format: ``validation failed:`` then one ``  - field: reason`` line per problem."""
    return "validation failed:\n" + "\n".join(f"  - {e}" for e in errors)


def _loc(parts: tuple[Any, ...]) -> str:
    out = ""
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _schema_path(parts: tuple[Any, ...]) -> str:
    """A pydantic error's location as a path in the CRD schema (``spec.template.roles[].name``)."""
    out = ""
    for part in parts:
        out += "[]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def validate(obj: dict[str, Any], old: dict[str, Any] | None = None) -> list[FieldError]:
    """Every problem with ``obj`` (a ModelServing as the API server sent it); empty when valid."""
    try:
        ms = ModelServing.model_validate(obj)
    except ValidationError as exc:
        found = exc.errors()
        if faults.active("enums-not-validated"):
            found = [e for e in found if e["type"] != "enum"]
        if faults.active("entry-template-optional"):
            found = [e for e in found if e["loc"][-1:] != ("entryTemplate",)]
        for fault, (at, _, kinds) in UNCHECKED_BOUNDS.items():  # the bounds the CRD then drops too
            if faults.active(fault):
                found = [e for e in found if not (e["type"] in kinds and _schema_path(tuple(e["loc"])) == at)]
        return [FieldError(_loc(tuple(e["loc"])), e["msg"]) for e in found]
    errors: list[FieldError] = []
    spec = ms.spec
    roles = spec.template.roles
    names = {r.name for r in roles}
    strategy = spec.rollout_strategy
    strategy_type = strategy.type if strategy else RolloutStrategyType.SERVING_GROUP_ROLLING_UPDATE
    role_rolling = strategy_type is RolloutStrategyType.ROLE_ROLLING_UPDATE

    for i, role in enumerate(roles):
        at = f"spec.template.roles[{i}]"
        problem = generated_name_problem(
            ms.metadata.name, spec.replicas, role.name, role.replicas, role.worker_replicas
        )
        if problem:
            errors.append(FieldError(f"{at}.name", problem))
        missing_worker_template = role.worker_replicas > 0 and role.worker_template is None
        if missing_worker_template and not faults.active("admission-allows-missing-worker-template"):
            errors.append(FieldError(f"{at}.workerTemplate", "required when workerReplicas is greater than 0"))
        for kind, template in (("entryTemplate", role.entry_template), ("workerTemplate", role.worker_template)):
            if template is None:
                continue
            containers = template.spec.get("containers")
            if not isinstance(containers, list) or not all(isinstance(c, dict) for c in containers):
                # The CRD schema rejects this first; the check keeps the webhook total on any input.
                errors.append(FieldError(f"{at}.{kind}.spec.containers", "must be a list of containers"))
                continue
            if not containers:
                errors.append(FieldError(f"{at}.{kind}.spec.containers", "at least one container is required"))
            for j, container in enumerate(containers):
                image = str(container.get("image") or "")
                if not image.strip() or image != image.strip() or " " in image:
                    errors.append(
                        FieldError(f"{at}.{kind}.spec.containers[{j}].image", f"{image!r} is not a valid image")
                    )
        # A Role's partition under ServingGroupRollingUpdate is accepted and ignored, like its maxUnavailable
        # and maxSurge ("rolling update settings on individual Roles do not take effect"; upstream refuses it).
        if role_rolling:
            field = f"{at}"
            try:
                unavailable, _ = intstr.update_budget(role.max_unavailable, role.max_surge, role.replicas, field)
                if unavailable > role.replicas and role.replicas > 0:
                    errors.append(
                        FieldError(
                            f"{at}.maxUnavailable",
                            f"resolves to {unavailable}, more than the Role's {role.replicas} replicas",
                        )
                    )
                intstr.partition(role.partition, role.replicas, f"{at}.partition")
            except intstr.IntOrStringError as exc:
                errors.append(_intstr_error(exc))
        else:
            for name, value in (
                ("maxUnavailable", role.max_unavailable),
                ("maxSurge", role.max_surge),
                ("partition", role.partition),
            ):
                errors.extend(_check_intstr(value, f"{at}.{name}"))

    gang = spec.template.gang_policy
    for key in sorted((gang.min_role_replicas or {}) if gang else {}):
        if key not in names and not faults.active("min-role-replicas-keys-unchecked"):
            errors.append(
                FieldError(
                    f"spec.template.gangPolicy.minRoleReplicas[{key}]", f"{key!r} is not a Role of this ModelServing"
                )
            )

    # Unknown plugins, bad configs and bad scopes are rejected here (spec readings 3 and 4).
    for k, plugin in enumerate(spec.plugins or []):
        unknown_accepted = faults.active("unknown-plugin-accepted") or faults.active("unknown-plugin-logged-only")
        if unknown_accepted and plugin.name not in REGISTRY.names():
            continue
        try:
            REGISTRY.build(plugin, f"spec.plugins[{k}]")
        except PluginConfigError as exc:
            config_accepted = faults.active("plugin-config-error-skips-plugin") or faults.active(
                "plugin-config-error-logged-only"
            )  # the second: the controller's build of the chain then fails, seen in its log only
            if not (config_accepted and ".config" in exc.field):
                errors.append(FieldError(exc.field, exc.reason))
    if old is not None:
        try:
            before: ModelServing | None = ModelServing.model_validate(old)
        except ValidationError:
            before = None
        if faults.active("chain-immutability-not-enforced"):
            before = None
        old_plugins, settled = (
            (before.spec.plugins or []) if before else [],
            (old.get("status") or {}).get("observedGeneration"),
        )
        if faults.active("chain-append-allowed") and old_plugins:  # a chain that only grew is let through
            grown = normalized_chain((spec.plugins or [])[: len(old_plugins)]) == normalized_chain(old_plugins)
            before = None if grown else before
        if faults.active("chain-unlocked-after-rollout") and 1 < old["metadata"].get("generation", 1) == settled:
            before = None  # the last spec change (a rollout, say) was carried out
        if faults.active("chain-unlocked-at-zero") and before and before.spec.replicas == 0 and not old_plugins:
            before = None
        if faults.active("headless-addable") and not old_plugins and [p.name for p in spec.plugins or []] == [HEADLESS]:
            before = None  # as if adding headless-service only restored what controllers did before the opt-in model
        # (the fault: a plugin's type compared as written, an omitted type unlike BuiltIn)
        as_written = faults.active("plugin-type-compared-as-written") and _plugin_types(obj) != _plugin_types(old)
        if before is not None and (
            as_written or normalized_chain(before.spec.plugins) != normalized_chain(spec.plugins)
        ):
            errors.append(
                FieldError(
                    "spec.plugins",
                    "the plugin chain is immutable after creation: adding, removing, reordering or changing a "
                    "plugin's config or scope needs a new ModelServing and a traffic migration",
                )
            )

    if strategy is not None:
        rolling = strategy.rolling_update_configuration
        if role_rolling and rolling is not None and not faults.active("role-rolling-group-config-accepted"):
            errors.append(
                FieldError(
                    "spec.rolloutStrategy.rollingUpdateConfiguration",
                    "must not be set when type is RoleRollingUpdate; configure each Role instead",
                )
            )
        if rolling is not None and not role_rolling:
            try:
                intstr.update_budget(
                    rolling.max_unavailable,
                    rolling.max_surge,
                    spec.replicas,
                    "spec.rolloutStrategy.rollingUpdateConfiguration",
                )
                intstr.partition(
                    rolling.partition, spec.replicas, "spec.rolloutStrategy.rollingUpdateConfiguration.partition"
                )
            except intstr.IntOrStringError as exc:
                errors.append(_intstr_error(exc))
        # recoveryPolicy ServingGroupRecreate with RoleRollingUpdate is valid: the spec says what it does
        # (RolloutStrategyType: deleting an outdated Role recreates its entire ServingGroup).
        coordination = strategy.role_coordination
        if coordination is not None:
            at = "spec.rolloutStrategy.roleCoordination"
            if not role_rolling and not faults.active("coordination-applied-under-servinggroup-rolling"):
                errors.append(FieldError(at, "applies only when rolloutStrategy.type is RoleRollingUpdate"))
            for n, role_name in enumerate(coordination.roles or []):
                if role_name not in names:
                    errors.append(FieldError(f"{at}.roles[{n}]", f"{role_name!r} is not a Role of this ModelServing"))
            percent = isinstance(coordination.max_skew, str) and intstr.PERCENT.match(coordination.max_skew)
            if coordination.max_skew is not None and not percent and not faults.active("max-skew-any-form"):
                errors.append(
                    FieldError(f"{at}.maxSkew", f"{coordination.max_skew!r} must be a percentage such as '10%'")
                )
            for d, dep in enumerate(coordination.dependencies or []):
                for n, role_name in enumerate([dep.role, *(dep.depends_on or [])]):
                    if role_name not in names:
                        where = f"{at}.dependencies[{d}]." + ("role" if n == 0 else f"dependsOn[{n - 1}]")
                        errors.append(FieldError(where, f"{role_name!r} is not a Role of this ModelServing"))
            cycle = _dependency_cycle(coordination.dependencies or [])
            if cycle:
                errors.append(
                    FieldError(
                        f"{at}.dependencies", f"dependencies form a cycle ({' -> '.join(cycle)}): no Role could start"
                    )
                )
        eviction = strategy.eviction_strategy
        if eviction is not None:
            at = "spec.rolloutStrategy.evictionStrategy"
            errors.extend(_check_intstr(eviction.min_available, f"{at}.minAvailable"))
            for key, value in sorted((eviction.role_min_available or {}).items()):
                if key not in names and not faults.active("role-min-available-keys-unchecked"):
                    errors.append(
                        FieldError(f"{at}.roleMinAvailable[{key}]", f"{key!r} is not a Role of this ModelServing")
                    )
                errors.extend(_check_intstr(value, f"{at}.roleMinAvailable[{key}]"))
    return errors


def _plugin_types(obj: dict[str, Any]) -> list[Any]:
    """The type of each plugin of ``obj``'s chain, as written (None where omitted)."""
    return [p.get("type") for p in (obj.get("spec") or {}).get("plugins") or [] if isinstance(p, dict)]


def _check_intstr(value: int | str | None, field: str) -> list[FieldError]:
    try:
        intstr.resolve(value, 100, round_up=False, field=field)
    except intstr.IntOrStringError as exc:
        return [_intstr_error(exc)]
    return []


def _intstr_error(exc: intstr.IntOrStringError) -> FieldError:
    field, _, reason = str(exc).partition(": ")
    return FieldError(field, reason)


def _dependency_cycle(dependencies: list[Any]) -> list[str]:
    """A cycle in the Role dependency graph (as a path that ends where it starts), or []."""
    edges: dict[str, list[str]] = {}
    for dep in dependencies:
        edges.setdefault(dep.role, []).extend(dep.depends_on or [])
    state: dict[str, int] = {}  # 1: on the current path, 2: done

    def visit(node: str, path: list[str]) -> list[str]:
        state[node] = 1
        for nxt in edges.get(node, []):
            if state.get(nxt) == 1:
                return [*path[path.index(nxt) :], nxt] if nxt in path else [node, nxt]
            if state.get(nxt) is None:
                found = visit(nxt, [*path, nxt])
                if found:
                    return found
        state[node] = 2
        return []

    for start in sorted(edges):
        if state.get(start) is None:
            found = visit(start, [start])
            if found:
                return found
    return []
