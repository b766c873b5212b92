"""AutoscalingPolicy admission rules the CRD schema and its CEL rules cannot say (pure).

The CRD (:mod:`kthena_ref.api.autoscaling_crd`) already refuses wrong types, bounds, enums, the
Quantity pattern, a metric source with other than one backend, more than one target, and a ratio
constraint that does not name two distinct keys of ``roles``. :func:`validate_policy` checks the
rest: what needs several fields at once, arithmetic on Quantities, or the spec's explicit hand-off
to "the autoscalingpolicy validating webhook". Every problem is a :class:`FieldError` naming the
field (``spec.disaggregatedTarget.roles[prefill].metricSources[foo]``) and a reason.

Each rule, and where it comes from (spec: ``shared/spec/api-reference-workload-v1alpha1.txt``;
upstream: the researched webhook, ``docs/autoscaling-upstream.md`` section 6):

==  ==========================================================  ====================================================
#   Rule (field)                                                Source
==  ==========================================================  ====================================================
R1  exactly one of homogeneousTarget, heterogeneousTarget,       spec, AutoscalingPolicySpec: "exactly one target must
    disaggregatedTarget (``spec``); the target rules below are   be set; this is enforced by the autoscalingpolicy
    skipped when this fails                                      validating webhook"; upstream (same, and the skip)
R2  ``targetRef.kind`` empty or ModelServing                     spec, Target.targetRef: "Default target GVK is
                                                                 ModelServing. Currently supported kinds:
                                                                 ModelServing."; upstream
R3  ``targetRef.name`` set                                       upstream ("targetRef.name must be set"); the spec's
                                                                 every example names the ModelServing
R4  ``targetRef.apiVersion``, when set, in the group             spec, Target.targetRef: "Default target GVK is
    workload.serving.volcano.sh                                  ModelServing" (its group); reading, see below
R5  metric names unique (``spec.metrics``, a Role's metrics)     upstream ("duplicate metric name"); spec: metricSources
                                                                 are keyed by ``metrics[].name``
R6  ``targetValue`` > 0 (spec and Role metrics)                  upstream ("must be greater than 0"); replicas are the
                                                                 value divided by it (spec: target_replicas
                                                                 "calculated from monitoring metrics")
R7  minReplicas <= maxReplicas (homogeneous, each heterogeneous  upstream (validator test @21e55387 for homogeneous
    param, each Role)                                            and heterogeneous; Roles); spec: a minimum and a
                                                                 maximum of the same count
R8  Target.metricSources keys are ``spec.metrics[].name``        spec, Target.metricSources: "Keys must match
                                                                 AutoscalingPolicy.spec.metrics[].name"
R9  a Role's metricSources keys are the Role's metric names      spec, RoleScalingParam.metricSources: "Keys must
    when it has metrics, else ``spec.metrics[].name``            match role-level metrics when present, otherwise
                                                                 top-level spec.metrics[].name"; upstream
R10 homogeneous and heterogeneous targets need ``spec.metrics``  upstream ("at least one metric must be set"); spec:
                                                                 "metric-based scaling"; Target.metricSources keyed
                                                                 by spec.metrics
R11 a non-fixed Role (min != max) has metrics, its own or        spec, RoleScalingParam.metrics: "A fixed role
    ``spec.metrics``; a fixed Role may have none                 (minReplicas == maxReplicas) may omit metrics";
                                                                 upstream
R12 a Role key is not empty                                      spec, DisaggregatedTarget.roles: "The map key is
                                                                 roleName from ModelServing.spec.template.roles[].name"
                                                                 (Role names are never empty); upstream
R13 ratioConstraint: minRatio >= 0, maxRatio > 0,                spec, DisaggregatedTarget.ratioConstraint: "stays
    minRatio <= maxRatio                                         within [minRatio, maxRatio]"; upstream (all three)
R14 heterogeneous params name distinct ModelServings             spec, HeterogeneousTarget: "distributes replicas
                                                                 across several ModelServing groups ... Each group is
                                                                 described by one entry in Params" (reading)
R15 a Role key names a Role of the target ModelServing, checked  spec, DisaggregatedTarget.roles: "The map key is
    only when the caller knows the target's Roles                roleName from ModelServing.spec.template.roles[].name"
                                                                 (reading; upstream checks at runtime only)
==  ==========================================================  ====================================================

Readings (docs/autoscaling-readings.md):

- R15: the webhook reads the target ModelServing (same namespace as the policy) when it can. A
  target that does not exist yet is accepted (policies and ModelServings may be applied in any
  order, as ``kubectl apply -f dir/`` does), and so is any policy when the lookup fails or times
  out: the lookup must never make admission depend on a read. A Role renamed or removed later is
  the autoscaler's to report at runtime, as upstream does for every case.
- R4: only the group is checked; the version part is not (one version, v1alpha1, exists).
- R14: params are compared by (namespace as written, name).
- Not enforced, though upstream does: "metricSources must be set on every non-fixed role" (the
  spec: "Missing keys are treated as missing metrics for that reconcile loop", so an absent map
  is allowed); ratio roles "scalable-to-zero together" (the spec constrains the ratio only "when
  denominator replica is non-zero", so a zero denominator is allowed); a ratio "not achievable
  within role replica bounds" (the autoscaler reports an unreachable ratio, reading A12); the
  behavior periods (fields our spec does not have).
- The ratio constraint's roles (distinct, keys of ``roles``) are the CRD's CEL rule, run before
  any webhook; they are not repeated here.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from typing import Any

from pydantic import ValidationError

from .. import faults
from ..api.autoscaling import (
    TARGET_KIND,
    AutoscalingPolicy,
    AutoscalingPolicySpec,
    Metric,
    MetricSource,
    ObjectReference,
    Target,
    quantity,
    supported_target_kind,
)
from ..api.autoscaling_crd import UNCHECKED_ERRORS, UNCHECKED_FIELDS, UNSIZED_ERRORS, UNSIZED_FIELDS
from ..api.types import GROUP
from .rules import FieldError, _loc

TARGETS = ("homogeneousTarget", "heterogeneousTarget", "disaggregatedTarget")


def validate_policy(obj: dict[str, Any], target_roles: Collection[str] | None = None) -> list[FieldError]:
    """Every problem with ``obj`` (an AutoscalingPolicy as the API server sent it); empty when valid.

    ``target_roles``: the Role names of the disaggregated target's ModelServing, when the caller
    has read it; None (unknown, or no such ModelServing yet) skips R15."""
    try:
        spec = AutoscalingPolicy.model_validate(obj).spec
    except ValidationError as exc:  # the CRD schema refuses these first; kept total on any input
        invalid = exc.errors()
        if faults.active("autoscaling-crd-no-bounds"):  # the bounds the CRD then drops too
            invalid = [e for e in invalid if not (e["type"] in UNCHECKED_ERRORS and e["loc"][-1] in UNCHECKED_FIELDS)]
        if faults.active("autoscaling-crd-no-sizes"):  # the sizes the CRD then drops too
            invalid = [e for e in invalid if not (e["type"] in UNSIZED_ERRORS and e["loc"][-1] in UNSIZED_FIELDS)]
        return [FieldError(_loc(tuple(e["loc"])), e["msg"]) for e in invalid]
    errors = _metrics(spec.metrics, "spec.metrics")  # R5, R6
    chosen = [name for name, target in zip(TARGETS, _targets(spec), strict=True) if target is not None]
    if not chosen and faults.active("autoscaling-webhook-allows-no-target"):
        return errors
    if len(chosen) != 1:  # R1
        found = f"{', '.join(chosen)} are" if chosen else "none is"
        reason = f"exactly one of homogeneousTarget, heterogeneousTarget and disaggregatedTarget must be set ({found})"
        return [*errors, FieldError("spec", reason)]
    spec_metrics = {m.name for m in spec.metrics or []}

    if spec.homogeneous_target is not None:
        at = "spec.homogeneousTarget"
        h = spec.homogeneous_target
        errors += _needs_metrics(spec, "a homogeneousTarget")
        errors += _target(h.target, f"{at}.target", spec_metrics)
        errors += _bounds(h.min_replicas, h.max_replicas, at)

    if spec.heterogeneous_target is not None:
        at = "spec.heterogeneousTarget.params"
        errors += _needs_metrics(spec, "a heterogeneousTarget")
        seen: dict[tuple[str, str], int] = {}
        for i, param in enumerate(spec.heterogeneous_target.params):
            errors += _target(param.target, f"{at}[{i}].target", spec_metrics)
            errors += _bounds(param.min_replicas, param.max_replicas, f"{at}[{i}]")
            ref = param.target.target_ref
            if ref.name:  # R14
                key = (ref.namespace or "", ref.name)
                if key in seen:
                    errors.append(
                        FieldError(
                            f"{at}[{i}].target.targetRef.name",
                            f"ModelServing {ref.name!r} is already the target of params[{seen[key]}]: each "
                            "ModelServing group is one entry of params",
                        )
                    )
                seen.setdefault(key, i)

    if spec.disaggregated_target is not None:
        errors += _disaggregated(spec, target_roles)
    return errors


def lookup_target(obj: dict[str, Any]) -> tuple[str | None, str] | None:
    """(namespace as written, name) of the ModelServing whose Roles R15 checks, from the raw
    object: the disaggregated target's ModelServing, or None when there is none to look up. Pure."""
    spec = obj.get("spec") if isinstance(obj, dict) else None
    target = spec.get("disaggregatedTarget") if isinstance(spec, dict) else None
    ref = target.get("targetRef") if isinstance(target, dict) else None
    if not isinstance(ref, dict) or not supported_target_kind(ref.get("kind")):
        return None
    name, namespace = ref.get("name"), ref.get("namespace")
    if not isinstance(name, str) or not name:
        return None
    return (namespace if isinstance(namespace, str) and namespace else None), name


def _targets(spec: AutoscalingPolicySpec) -> tuple[object | None, ...]:
    return spec.homogeneous_target, spec.heterogeneous_target, spec.disaggregated_target


def _disaggregated(spec: AutoscalingPolicySpec, target_roles: Collection[str] | None) -> list[FieldError]:
    d = spec.disaggregated_target
    assert d is not None
    at = "spec.disaggregatedTarget"
    errors = _target_ref(d.target_ref, f"{at}.targetRef")
    for key, role in d.roles.items():
        here = f"{at}.roles[{key}]"
        if not key:  # R12
            errors.append(
                FieldError(
                    f'{at}.roles[""]',
                    "a role key must not be empty: it is the name of a Role of the target ModelServing "
                    "(spec.template.roles[].name)",
                )
            )
        elif target_roles is not None and key not in target_roles:  # R15
            known = ", ".join(sorted(target_roles)) or "none"
            errors.append(
                FieldError(
                    here,
                    f"{key!r} is not a Role of ModelServing {d.target_ref.name!r} (its Roles: {known}); the key is "
                    "a name from its spec.template.roles[].name",
                )
            )
        errors += _bounds(role.min_replicas, role.max_replicas, here)  # R7
        if role.metrics is not None:
            errors += _metrics(role.metrics, f"{here}.metrics")  # R5, R6
        effective = role.metrics if role.metrics is not None else spec.metrics or []
        if role.min_replicas != role.max_replicas and not effective:  # R11
            errors.append(
                FieldError(
                    f"{here}.metrics",
                    f"required: the Role scales between {role.min_replicas} and {role.max_replicas} replicas on "
                    "metrics, and spec.metrics is empty (only a fixed Role, minReplicas == maxReplicas, may have none)",
                )
            )
        owner = "the Role's metrics" if role.metrics is not None else "spec.metrics"
        errors += _sources(role.metric_sources, here, {m.name for m in effective}, owner)  # R9
    ratio = d.ratio_constraint
    if ratio is not None:  # R13
        here = f"{at}.ratioConstraint"
        low, high = quantity(ratio.min_ratio), quantity(ratio.max_ratio)
        if low < 0:
            errors.append(
                FieldError(
                    f"{here}.minRatio", f"{ratio.min_ratio} must be at least 0: a ratio of replicas is never negative"
                )
            )
        if high <= 0:
            errors.append(
                FieldError(
                    f"{here}.maxRatio",
                    f"{ratio.max_ratio} must be greater than 0: the numerator Role could never have replicas "
                    "while the denominator Role has any",
                )
            )
        if low > high:
            errors.append(
                FieldError(
                    f"{here}.minRatio",
                    f"{ratio.min_ratio} must not exceed maxRatio ({ratio.max_ratio}): no replica counts would "
                    "satisfy the constraint",
                )
            )
    return errors


def _needs_metrics(spec: AutoscalingPolicySpec, what: str) -> list[FieldError]:
    """R10."""
    if spec.metrics:
        return []
    return [FieldError("spec.metrics", f"at least one metric is required: {what} scales on spec.metrics")]


def _metrics(metrics: Iterable[Metric] | None, at: str) -> list[FieldError]:
    """R5 and R6 for one metric list."""
    errors: list[FieldError] = []
    seen: set[str] = set()
    for i, metric in enumerate(metrics or []):
        if metric.name in seen:
            errors.append(
                FieldError(
                    f"{at}[{i}].name",
                    f"duplicate metric name {metric.name!r}: each metric is named once (metricSources are keyed "
                    "by the name)",
                )
            )
        seen.add(metric.name)
        if quantity(metric.target_value) <= 0:
            errors.append(
                FieldError(
                    f"{at}[{i}].targetValue",
                    f"{metric.target_value} must be greater than 0: replicas are the metric's value divided by it",
                )
            )
    return errors


def _target(target: Target, at: str, metric_names: set[str]) -> list[FieldError]:
    """R2-R4 and R8 for a Target."""
    return [
        *_target_ref(target.target_ref, f"{at}.targetRef"),
        *_sources(target.metric_sources, at, metric_names, "spec.metrics"),
    ]


def _target_ref(ref: ObjectReference, at: str) -> list[FieldError]:
    """R2-R4."""
    errors: list[FieldError] = []
    if not supported_target_kind(ref.kind) and not faults.active("autoscaling-ignores-target-kind"):
        errors.append(
            FieldError(f"{at}.kind", f"{ref.kind!r} is not supported. Currently supported kinds: {TARGET_KIND}")
        )
    if not ref.name:
        errors.append(FieldError(f"{at}.name", f"required: the name of the {TARGET_KIND} to scale"))
    if ref.api_version:
        group = ref.api_version.rpartition("/")[0]
        if group != GROUP:
            errors.append(
                FieldError(
                    f"{at}.apiVersion",
                    f"{ref.api_version!r} is not in {TARGET_KIND}'s API group {GROUP} (e.g. {GROUP}/v1alpha1)",
                )
            )
    return errors


def _sources(sources: dict[str, MetricSource] | None, at: str, names: set[str], owner: str) -> list[FieldError]:
    """R8 and R9: every metricSources key names a metric of ``names`` (listed in ``owner``)."""
    known = ", ".join(sorted(names)) or "none"
    return [
        FieldError(f"{at}.metricSources[{key}]", f"{key!r} is not the name of a metric of {owner} ({known})")
        for key in sorted(sources or {})
        if key not in names
    ]


def _bounds(minimum: int, maximum: int, at: str) -> list[FieldError]:
    """R7."""
    if minimum <= maximum:
        return []
    return [FieldError(f"{at}.minReplicas", f"{minimum} must not exceed maxReplicas ({maximum})")]
