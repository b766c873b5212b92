"""The ModelServing CustomResourceDefinition, generated from the pydantic types.

pydantic's own ``model_json_schema()`` is not a structural schema (``$ref``/``$defs``, ``anyOf``
with null for optionals, titles, ``additionalProperties: true``), so this module walks the models'
fields itself and emits exactly what a CRD needs: inlined objects, ``required`` lists, defaults,
enums, bounds, int-or-string, list types, the embedded upstream PodSpec, and CEL rules for the
fields the spec makes immutable. The output is checked against the real kube-apiserver by the
integration tests (the API server rejects a non-structural schema outright).
"""

from __future__ import annotations

import enum
import types
import typing
from typing import Any

import annotated_types
from pydantic import BaseModel
from pydantic.fields import FieldInfo

from .. import faults
from .podspec import load_snapshot
from .types import (
    GROUP,
    IN_PLACE_UPDATE_SPELLING,
    KIND,
    PLURAL,
    VERSION,
    ModelServingSpec,
    ModelServingStatus,
    UpdateMethod,
)

# CEL rules at a path in the schema ("spec.template" is the ServingGroup object, and so on).
# Transition rules (with oldSelf) run on update only, when the old object had the field.
CEL_RULES: dict[str, list[dict[str, str]]] = {
    "spec.template": [
        {
            "rule": "!has(oldSelf.gangPolicy) || has(self.gangPolicy)",
            "message": "gangPolicy cannot be removed once set",
            "fieldPath": ".gangPolicy",
        },
    ],
    "spec.template.gangPolicy": [
        {
            "rule": "has(self.minRoleReplicas) == has(oldSelf.minRoleReplicas) && "
            "(!has(self.minRoleReplicas) || self.minRoleReplicas == oldSelf.minRoleReplicas)",
            "message": "minRoleReplicas is immutable",
            "fieldPath": ".minRoleReplicas",
        },
    ],
    "spec": [
        {
            "rule": "(has(self.rolloutStrategy) && has(self.rolloutStrategy.roleCoordination)) == "
            "(has(oldSelf.rolloutStrategy) && has(oldSelf.rolloutStrategy.roleCoordination)) && "
            "(!has(self.rolloutStrategy) || !has(self.rolloutStrategy.roleCoordination) || "
            "self.rolloutStrategy.roleCoordination == oldSelf.rolloutStrategy.roleCoordination)",
            "message": "rolloutStrategy.roleCoordination (its presence and policy) is immutable after creation",
            "fieldPath": ".rolloutStrategy.roleCoordination",
        },
    ],
}

# Under the coordination-dependencies-mutable fault: roleCoordination's maxSkew and roles are
# compared, its dependencies are not.
_COORDINATION_WITHOUT_DEPENDENCIES = {
    "rule": "(has(self.rolloutStrategy) && has(self.rolloutStrategy.roleCoordination)) == "
    "(has(oldSelf.rolloutStrategy) && has(oldSelf.rolloutStrategy.roleCoordination)) && "
    "(!has(self.rolloutStrategy) || !has(self.rolloutStrategy.roleCoordination) || "
    "((has(self.rolloutStrategy.roleCoordination.maxSkew) == has(oldSelf.rolloutStrategy.roleCoordination.maxSkew)) && "
    "(!has(self.rolloutStrategy.roleCoordination.maxSkew) || "
    "self.rolloutStrategy.roleCoordination.maxSkew == oldSelf.rolloutStrategy.roleCoordination.maxSkew) && "
    "(has(self.rolloutStrategy.roleCoordination.roles) == has(oldSelf.rolloutStrategy.roleCoordination.roles)) && "
    "(!has(self.rolloutStrategy.roleCoordination.roles) || "
    "self.rolloutStrategy.roleCoordination.roles == oldSelf.rolloutStrategy.roleCoordination.roles)))",
    "message": "rolloutStrategy.roleCoordination (its presence and policy) is immutable after creation",
    "fieldPath": ".rolloutStrategy.roleCoordination",
}

# Bounds a fault drops (self-validation): fault -> (schema path, the CRD keywords, the pydantic error types). The
# webhook (admission.rules.validate) ignores those pydantic errors at that path under the same fault, or it would
# still refuse the value the CRD now lets through.
UNCHECKED_BOUNDS: dict[str, tuple[str, tuple[str, ...], tuple[str, ...]]] = {
    "negative-history-limit-accepted": ("spec.revisionHistoryLimit", ("minimum",), ("greater_than_equal",)),
    "role-name-length-unchecked": ("spec.template.roles[].name", ("maxLength",), ("string_too_long",)),
    "role-name-pattern-unchecked": ("spec.template.roles[].name", ("pattern",), ("string_pattern_mismatch",)),
    "roles-count-unchecked": ("spec.template.roles", ("minItems", "maxItems"), ("too_short", "too_long")),
    "progress-deadline-minimum-unchecked": (
        "spec.rolloutStrategy.progressDeadlineSeconds",
        ("minimum",),
        ("greater_than_equal",),
    ),
}

# Under the coordination-addable-and-removable fault: roleCoordination is compared only when the old and the new
# spec both have one (its presence is not).
_COORDINATION_WHEN_BOTH_HAVE_ONE = {
    "rule": "!has(self.rolloutStrategy) || !has(self.rolloutStrategy.roleCoordination) || "
    "!has(oldSelf.rolloutStrategy) || !has(oldSelf.rolloutStrategy.roleCoordination) || "
    "self.rolloutStrategy.roleCoordination == oldSelf.rolloutStrategy.roleCoordination",
    "message": "rolloutStrategy.roleCoordination's policy is immutable after creation",
    "fieldPath": ".rolloutStrategy.roleCoordination",
}

# Lists whose items are identified by a key: the API server then rejects duplicate keys.
LIST_MAP_KEYS: dict[str, list[str]] = {
    "spec.template.roles": ["name"],
    "spec.plugins": ["name"],
    "status.conditions": ["type"],
}

SCALE_SELECTOR = {"labelSelectorPath": ".status.labelSelector"}  # the scale subresource's selector

PRINTER_COLUMNS = [
    {"name": "Replicas", "type": "integer", "jsonPath": ".spec.replicas"},
    {"name": "Available", "type": "integer", "jsonPath": ".status.availableReplicas"},
    {"name": "Updated", "type": "integer", "jsonPath": ".status.updatedReplicas"},
    {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
]


def _unwrap(annotation: Any) -> tuple[Any, list[Any], bool]:
    """(inner type, collected metadata, optional?) of an annotation."""
    metadata: list[Any] = []
    optional = False
    while True:
        origin = typing.get_origin(annotation)
        if origin is typing.Annotated:
            first, *rest = typing.get_args(annotation)
            annotation, metadata = first, [*metadata, *rest]
            continue
        if origin in (typing.Union, types.UnionType):
            args = [a for a in typing.get_args(annotation) if a is not type(None)]
            if len(args) < len(typing.get_args(annotation)):
                optional = True
            if len(args) == 1:
                annotation = args[0]
                continue
            annotation = typing.Union[tuple(args)]  # noqa: UP007 - rebuilt from parts
        return annotation, metadata, optional


def _constraints(metadata: list[Any], schema: dict[str, Any]) -> None:
    is_array = schema.get("type") == "array"
    is_map = schema.get("type") == "object" and "additionalProperties" in schema
    for item in metadata:
        if isinstance(item, FieldInfo):
            _constraints(list(item.metadata), schema)
            extra = item.json_schema_extra
            if isinstance(extra, dict):
                schema.update({k: v for k, v in extra.items() if not k.startswith("x-kthena")})
        elif isinstance(item, annotated_types.Ge):
            schema["minimum"] = item.ge
        elif isinstance(item, annotated_types.Le):
            schema["maximum"] = item.le
        elif isinstance(item, annotated_types.MinLen):
            schema["minItems" if is_array else "minProperties" if is_map else "minLength"] = item.min_length
        elif isinstance(item, annotated_types.MaxLen):
            schema["maxItems" if is_array else "maxProperties" if is_map else "maxLength"] = item.max_length
        elif hasattr(item, "pattern") and getattr(item, "pattern", None):
            schema["pattern"] = item.pattern
        if hasattr(item, "min_length") and type(item).__name__ == "StringConstraints":
            if item.min_length is not None:
                schema["minLength"] = item.min_length
            if item.max_length is not None:
                schema["maxLength"] = item.max_length


def _is_int_or_string(annotation: Any) -> bool:
    args = set(typing.get_args(annotation))
    return typing.get_origin(annotation) in (typing.Union, types.UnionType) and args == {int, str}


def schema_of(annotation: Any, path: str, field: FieldInfo | None = None) -> dict[str, Any]:
    """The structural schema of one annotation at ``path`` (dotted, from the object root)."""
    inner, metadata, _ = _unwrap(annotation)
    if field is not None:
        metadata = [*metadata, *field.metadata]
        extra = field.json_schema_extra
        if isinstance(extra, dict) and extra.get("x-kthena-embed"):
            return {"type": "object", **load_snapshot()}
    schema: dict[str, Any]
    if _is_int_or_string(inner):
        schema = {"x-kubernetes-int-or-string": True, "anyOf": [{"type": "integer"}, {"type": "string"}]}
    elif inner is Any:
        schema = {"x-kubernetes-preserve-unknown-fields": True}
    elif isinstance(inner, type) and issubclass(inner, enum.Enum):
        schema = {"type": "string", "enum": [m.value for m in inner]}
        if faults.active("enums-not-validated"):
            del schema["enum"]
        elif inner is UpdateMethod and faults.active("in-place-update-alias-recreates"):
            schema["enum"].append(IN_PLACE_UPDATE_SPELLING)
    elif isinstance(inner, type) and issubclass(inner, BaseModel):
        schema = model_schema(inner, path)
    elif inner is bool:
        schema = {"type": "boolean"}
    elif inner is int:
        schema = {"type": "integer", "format": "int32"}
    elif inner is str:
        schema = {"type": "string"}
    elif typing.get_origin(inner) is list:
        (item,) = typing.get_args(inner)
        schema = {"type": "array", "items": schema_of(item, path + "[]")}
        keys = LIST_MAP_KEYS.get(path)
        unique = {"spec.template.roles": "role-names-not-unique", "spec.plugins": "plugin-names-not-unique"}
        if path in unique and faults.active(unique[path]):
            keys = None  # the fault: an atomic list, so two items of one name are stored
        schema.update(
            {"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": keys}
            if keys
            else {"x-kubernetes-list-type": "atomic"}
        )
    elif typing.get_origin(inner) is dict:
        _, value = typing.get_args(inner)
        schema = {"type": "object", "additionalProperties": schema_of(value, path + "{}")}
    else:
        raise TypeError(f"{path}: no CRD schema for {inner!r}")
    _constraints(metadata, schema)
    if field is not None and field.json_schema_extra and isinstance(field.json_schema_extra, dict):
        schema.update({k: v for k, v in field.json_schema_extra.items() if not k.startswith("x-kthena")})
    for fault, (at, keywords, _) in UNCHECKED_BOUNDS.items():
        if path == at and faults.active(fault):
            for keyword in keywords:
                schema.pop(keyword, None)
    if path in CEL_RULES:
        schema["x-kubernetes-validations"] = CEL_RULES[path]
        immutable = {"spec.template": "gang-policy-removable", "spec.template.gangPolicy": "min-role-replicas-mutable"}
        if path in immutable and faults.active(immutable[path]):
            del schema["x-kubernetes-validations"]  # the fault: no transition rule guards the field
    return schema


def model_schema(model: type[BaseModel], path: str) -> dict[str, Any]:
    properties: dict[str, Any] = {}
    required: list[str] = []
    for name, field in model.model_fields.items():
        wire = field.alias or name
        child = f"{path}.{wire}" if path else wire
        prop = schema_of(field.annotation, child, field)
        if field.is_required():
            if wire == "workerReplicas" and faults.active("worker-replicas-default-one"):
                prop["default"] = 1  # an omitted workerReplicas becomes one worker instead of being refused
            elif not (faults.active("entry-template-optional") and wire == "entryTemplate"):
                required.append(wire)
        elif field.default is not None and not isinstance(field.default, (dict, list)):
            default = field.default
            type_undefaulted = child == "spec.plugins[].type" and faults.active("plugin-type-compared-as-written")
            if not faults.active("no-schema-defaults") and not type_undefaulted:
                prop["default"] = default.value if isinstance(default, enum.Enum) else default
                role_budget = child == "spec.template.roles[].maxUnavailable"
                if role_budget and faults.active("role-max-unavailable-default-all"):
                    prop["default"] = "100%"  # a Role's maxUnavailable defaults to every instance instead of 1
        properties[wire] = prop
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        schema["required"] = required
    if path in CEL_RULES:
        schema["x-kubernetes-validations"] = CEL_RULES[path]
        if path == "spec" and faults.active("coordination-dependencies-mutable"):
            schema["x-kubernetes-validations"] = [_COORDINATION_WITHOUT_DEPENDENCIES]
        if path == "spec" and faults.active("coordination-addable-and-removable"):
            schema["x-kubernetes-validations"] = [_COORDINATION_WHEN_BOTH_HAVE_ONE]
    return schema


def crd() -> dict[str, Any]:
    """The ModelServing CustomResourceDefinition (``apiextensions.k8s.io/v1``)."""
    spec = model_schema(ModelServingSpec, "spec")
    spec["required"] = ["template"]
    status = model_schema(ModelServingStatus, "status")
    status.pop("required", None)
    for prop in status["properties"].values():
        prop.pop("default", None)  # the controller writes status; defaults would hide omissions
    version: dict[str, Any] = {
        "additionalPrinterColumns": PRINTER_COLUMNS,
        "subresources": {
            "status": {},
            "scale": {
                "specReplicasPath": ".spec.replicas",
                "statusReplicasPath": ".status.replicas",
                # the fault scale-selector-unpublished: /scale reports no selector
                **({} if faults.active("scale-selector-unpublished") else SCALE_SELECTOR),
            },
        },
    }
    names = {"shortNames": ["ms"]}
    description = "ModelServing runs LLM inference as ServingGroups of Roles."
    return definition(KIND, PLURAL, spec, status, description, names=names, version=version)


def definition(
    kind: str,
    plural: str,
    spec: dict[str, Any],
    status: dict[str, Any],
    description: str,
    *,
    names: dict[str, Any] | None = None,
    version: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A namespaced CustomResourceDefinition of this API group with one served, stored version:
    ``spec`` and ``status`` schemas, extra ``names`` (shortNames) and ``version`` keys
    (subresources, printer columns)."""
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{GROUP}"},
        "spec": {
            "group": GROUP,
            "names": {
                "kind": kind,
                "listKind": f"{kind}List",
                "plural": plural,
                "singular": kind.lower(),
                **(names or {}),
            },
            "scope": "Namespaced",
            "versions": [
                {
                    "name": VERSION,
                    "served": True,
                    "storage": True,
                    **(version or {}),
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "description": description,
                            "properties": {
                                "apiVersion": {"type": "string"},
                                "kind": {"type": "string"},
                                "metadata": {"type": "object"},
                                "spec": spec,
                                "status": status,
                            },
                            "required": ["spec"],
                        }
                    },
                }
            ],
        },
    }
