"""The AutoscalingPolicy CustomResourceDefinition, generated from :mod:`.autoscaling` as
:func:`.crd.crd` is for ModelServing (same generator, same rules for bounds, enums and defaults).

The rules OpenAPI keywords cannot say and CEL can are added here as ``x-kubernetes-validations``,
each with the message naming the field: a metric source sets exactly one backend (spec:
"Exactly one backend config must be provided"), at most one target is set ("At most one of
HomogeneousTarget, HeterogeneousTarget, or DisaggregatedTarget may be set"; "exactly one" for a
standalone policy is the webhook's, as the spec says), and a ratio constraint names two distinct
Roles of the target's ``roles``. Generator paths are prefixed with the plural so that no rule or
fault keyed on a ModelServing path can apply here.
"""

from __future__ import annotations

from typing import Any

from .. import faults
from .autoscaling import KIND, PLURAL, AutoscalingPolicySpec, AutoscalingPolicyStatus
from .crd import definition, model_schema

ONE_BACKEND = {
    "rule": "has(self.pod) != has(self.prometheus)",
    "message": "exactly one of pod and prometheus must be set",
}
AT_MOST_ONE_TARGET = {
    "rule": "(has(self.homogeneousTarget) ? 1 : 0) + (has(self.heterogeneousTarget) ? 1 : 0)"
    " + (has(self.disaggregatedTarget) ? 1 : 0) <= 1",
    "message": "at most one of homogeneousTarget, heterogeneousTarget and disaggregatedTarget may be set",
}
RATIO_ROLES = {
    "rule": "!has(self.ratioConstraint) || (self.ratioConstraint.numeratorRole != self.ratioConstraint.denominatorRole"
    " && self.ratioConstraint.numeratorRole in self.roles && self.ratioConstraint.denominatorRole in self.roles)",
    "message": "ratioConstraint must name two distinct roles of roles",
    "fieldPath": ".ratioConstraint",
}

# Self-validation: the fields whose documented bounds and enum autoscaling-crd-no-bounds drops from the CRD (by
# property name, wherever they occur: both percents are the panic and the stable policies'), those keywords, and
# the pydantic errors the webhook (admission.autoscaling_rules) then ignores for them, or it would still refuse the
# values the CRD now lets through.
UNCHECKED_FIELDS = frozenset(
    {
        "tolerancePercent",
        "panicThresholdPercent",
        "percent",
        "selectPolicy",
        "minReplicas",
        "maxReplicas",
        "port",
        "cost",
        "costExpansionRatePercent",
    }
)
UNCHECKED_KEYWORDS = ("minimum", "maximum", "enum")
UNCHECKED_ERRORS = frozenset({"greater_than_equal", "less_than_equal", "enum"})
# The same for autoscaling-crd-no-sizes: the documented MinLength, MinItems, MinProperties and MaxProperties.
UNSIZED_FIELDS = frozenset({"name", "serverURL", "query", "metrics", "params", "roles"})
UNSIZED_KEYWORDS = ("minLength", "minItems", "minProperties", "maxProperties")
UNSIZED_ERRORS = frozenset({"string_too_short", "too_short", "too_long"})


def _drop(schema: dict[str, Any], keywords: tuple[str, ...], names: frozenset[str] | None = None) -> None:
    """Remove ``keywords`` from every property's schema below ``schema`` (only properties named in ``names``, when
    given), at any depth: objects' properties, list items, map values."""
    for name, prop in schema.get("properties", {}).items():
        if names is None or name in names:
            for keyword in keywords:
                prop.pop(keyword, None)
        _drop(prop, keywords, names)
    for key in ("items", "additionalProperties"):
        if isinstance(schema.get(key), dict):
            _drop(schema[key], keywords, names)


def _node(schema: dict[str, Any], *path: str) -> dict[str, Any]:
    """The sub-schema at ``path`` (property names; ``{}`` for a map's values, ``[]`` for list items)."""
    for step in path:
        schema = (
            schema["additionalProperties"]
            if step == "{}"
            else schema["items"]
            if step == "[]"
            else schema["properties"][step]
        )
    return schema


def crd() -> dict[str, Any]:
    """The AutoscalingPolicy CustomResourceDefinition (``apiextensions.k8s.io/v1``)."""
    spec = model_schema(AutoscalingPolicySpec, f"{PLURAL}:spec")
    spec["x-kubernetes-validations"] = [AT_MOST_ONE_TARGET]
    for sources in (
        ("homogeneousTarget", "target", "metricSources", "{}"),
        ("heterogeneousTarget", "params", "[]", "target", "metricSources", "{}"),
        ("disaggregatedTarget", "roles", "{}", "metricSources", "{}"),
    ):
        if not faults.active("autoscaling-crd-any-backends"):
            _node(spec, *sources)["x-kubernetes-validations"] = [ONE_BACKEND]
    _node(spec, "disaggregatedTarget")["x-kubernetes-validations"] = [RATIO_ROLES]
    if faults.active("autoscaling-crd-no-bounds"):
        _drop(spec, UNCHECKED_KEYWORDS, UNCHECKED_FIELDS)
    if faults.active("autoscaling-crd-no-sizes"):
        _drop(spec, UNSIZED_KEYWORDS, UNSIZED_FIELDS)
    if faults.active("autoscaling-crd-no-defaults"):
        _drop(spec, ("default",))
    status = model_schema(AutoscalingPolicyStatus, f"{PLURAL}:status")
    description = "AutoscalingPolicy scales ModelServings (or their Roles) on metrics."
    return definition(KIND, PLURAL, spec, status, description, version={"subresources": {"status": {}}})
