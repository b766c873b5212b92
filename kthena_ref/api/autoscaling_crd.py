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
        _node(spec, *sources)["x-kubernetes-validations"] = [ONE_BACKEND]
    _node(spec, "disaggregatedTarget")["x-kubernetes-validations"] = [RATIO_ROLES]
    status = model_schema(AutoscalingPolicyStatus, f"{PLURAL}:status")
    description = "AutoscalingPolicy scales ModelServings (or their Roles) on metrics."
    return definition(KIND, PLURAL, spec, status, description, version={"subresources": {"status": {}}})
