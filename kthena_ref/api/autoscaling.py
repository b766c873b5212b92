"""AutoscalingPolicy (``workload.serving.volcano.sh/v1alpha1``) and the types it embeds, as pydantic models.

As :mod:`.types` is for ModelServing, these are the single source of the API's shape: the CRD's
schema is generated from them (:mod:`.autoscaling_crd`) and the autoscaler reads them. Field
names, defaults, enums and bounds are those of the API reference
(``shared/spec/api-reference-workload-v1alpha1.txt``, AutoscalingPolicy* and the types below).

Readings (docs/autoscaling-readings.md):
- ``PodMetricSource.labelSelector`` is not in the spec's field table but in its example (and
  upstream's type); it is accepted, a standard LabelSelector.
- ``PrometheusAuth`` lists no fields and "the runtime does not honor any of these fields yet": it is
  kept as an opaque object and ignored.
- ``minReplicas``/``maxReplicas`` have no default in the spec: they are required.
"""

from __future__ import annotations

import enum
from decimal import Decimal
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, field_validator

from ..planner.quantity import QuantityError, parse
from .types import API_VERSION

KIND = "AutoscalingPolicy"
PLURAL = "autoscalingpolicies"
# Target.targetRef: "Default target GVK is ModelServing. Currently supported kinds: ModelServing."
TARGET_KIND = "ModelServing"


def supported_target_kind(kind: object) -> bool:
    """Whether a targetRef's ``kind`` names what an AutoscalingPolicy can scale (empty: the default)."""
    return kind in (None, "", TARGET_KIND)


# resource.Quantity's wire form: an integer or a string (the API server checks the pattern).
QUANTITY_PATTERN = (
    r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$"
)
Quantity = Annotated[
    int | str, Field(json_schema_extra={"x-kubernetes-int-or-string": True, "pattern": QUANTITY_PATTERN})
]
Replicas = Annotated[int, Field(ge=0, le=1_000_000)]
MaxReplicas = Annotated[int, Field(ge=1, le=1_000_000)]


def quantity(value: int | str) -> Decimal:
    """A Quantity's exact value (raises ValueError naming the value when it is not one)."""
    try:
        return parse(value)
    except QuantityError as exc:
        raise ValueError(f"{value!r} is not a quantity: {exc}") from None


class _Model(BaseModel):
    model_config = ConfigDict(populate_by_name=True, extra="forbid", validate_default=True)


class SelectPolicy(enum.StrEnum):
    OR = "Or"
    AND = "And"


class Metric(_Model):
    name: Annotated[str, StringConstraints(min_length=1)]
    target_value: Quantity = Field(alias="targetValue")

    @field_validator("target_value")
    @classmethod
    def _is_quantity(cls, value: int | str) -> int | str:
        quantity(value)
        return value


class PanicPolicy(_Model):
    percent: Annotated[int, Field(ge=0, le=1000)] = 1000
    panic_threshold_percent: Annotated[int, Field(ge=110, le=1000)] = Field(default=200, alias="panicThresholdPercent")


class StablePolicy(_Model):
    instances: Annotated[int, Field(ge=0)] = 1
    percent: Annotated[int, Field(ge=0, le=1000)] = 100
    select_policy: SelectPolicy = Field(default=SelectPolicy.OR, alias="selectPolicy")


class ScaleUpPolicy(_Model):
    stable_policy: StablePolicy | None = Field(default=None, alias="stablePolicy")
    panic_policy: PanicPolicy | None = Field(default=None, alias="panicPolicy")


class Behavior(_Model):
    scale_up: ScaleUpPolicy | None = Field(default=None, alias="scaleUp")
    scale_down: StablePolicy | None = Field(default=None, alias="scaleDown")


class ObjectReference(_Model):
    """core/v1 ObjectReference (every field optional, as there)."""

    api_version: str | None = Field(default=None, alias="apiVersion")
    kind: str | None = None
    name: str | None = None
    namespace: str | None = None
    uid: str | None = None
    resource_version: str | None = Field(default=None, alias="resourceVersion")
    field_path: str | None = Field(default=None, alias="fieldPath")


class LabelSelectorRequirement(_Model):
    key: str
    operator: str
    values: list[str] | None = None


class LabelSelector(_Model):
    match_labels: dict[str, str] | None = Field(default=None, alias="matchLabels")
    match_expressions: list[LabelSelectorRequirement] | None = Field(default=None, alias="matchExpressions")


class PodMetricSource(_Model):
    name: str | None = None
    uri: Annotated[str, StringConstraints(pattern=r"^/")] = "/metrics"
    port: Annotated[int, Field(ge=1, le=65535)] = 8100
    label_selector: LabelSelector | None = Field(default=None, alias="labelSelector")


class PrometheusMetricSource(_Model):
    server_url: Annotated[str, StringConstraints(min_length=1)] = Field(
        alias="serverURL", json_schema_extra={"format": "uri"}
    )
    query: Annotated[str, StringConstraints(min_length=1)]
    auth: Any = Field(default=None, json_schema_extra={"x-kubernetes-preserve-unknown-fields": True})


class MetricSource(_Model):
    pod: PodMetricSource | None = None
    prometheus: PrometheusMetricSource | None = None


class Target(_Model):
    target_ref: ObjectReference = Field(alias="targetRef")
    metric_sources: dict[str, MetricSource] | None = Field(default=None, alias="metricSources")


class HomogeneousTarget(_Model):
    target: Target
    min_replicas: Replicas = Field(alias="minReplicas")
    max_replicas: MaxReplicas = Field(alias="maxReplicas")


class HeterogeneousTargetParam(_Model):
    target: Target
    cost: Annotated[int, Field(ge=0)]
    min_replicas: Replicas = Field(alias="minReplicas")
    max_replicas: MaxReplicas = Field(alias="maxReplicas")


class HeterogeneousTarget(_Model):
    params: Annotated[list[HeterogeneousTargetParam], Field(min_length=1)]
    cost_expansion_rate_percent: Annotated[int, Field(ge=0)] = Field(default=200, alias="costExpansionRatePercent")


class RoleScalingParam(_Model):
    min_replicas: Replicas = Field(alias="minReplicas")
    max_replicas: MaxReplicas = Field(alias="maxReplicas")
    metrics: Annotated[list[Metric], Field(min_length=1)] | None = None
    metric_sources: dict[str, MetricSource] | None = Field(default=None, alias="metricSources")


class RoleRatioConstraint(_Model):
    numerator_role: str = Field(alias="numeratorRole")
    denominator_role: str = Field(alias="denominatorRole")
    min_ratio: Quantity = Field(alias="minRatio")
    max_ratio: Quantity = Field(alias="maxRatio")

    @field_validator("min_ratio", "max_ratio")
    @classmethod
    def _is_quantity(cls, value: int | str) -> int | str:
        quantity(value)
        return value


class DisaggregatedTarget(_Model):
    target_ref: ObjectReference = Field(alias="targetRef")
    roles: Annotated[dict[str, RoleScalingParam], Field(min_length=1, max_length=2)]
    ratio_constraint: RoleRatioConstraint | None = Field(default=None, alias="ratioConstraint")


class AutoscalingPolicySpec(_Model):
    tolerance_percent: Annotated[int, Field(ge=0, le=100)] = Field(default=10, alias="tolerancePercent")
    metrics: list[Metric] | None = None
    behavior: Behavior | None = None
    homogeneous_target: HomogeneousTarget | None = Field(default=None, alias="homogeneousTarget")
    heterogeneous_target: HeterogeneousTarget | None = Field(default=None, alias="heterogeneousTarget")
    disaggregated_target: DisaggregatedTarget | None = Field(default=None, alias="disaggregatedTarget")


class TargetScalingStatus(_Model):
    name: str | None = None
    current_replicas: int | None = Field(default=None, alias="currentReplicas")
    desired_replicas: int | None = Field(default=None, alias="desiredReplicas")
    mode: str | None = None


class RoleRatioStatus(_Model):
    numerator_role: str | None = Field(default=None, alias="numeratorRole")
    denominator_role: str | None = Field(default=None, alias="denominatorRole")
    current_ratio: str | None = Field(default=None, alias="currentRatio")


class DisaggregatedScalingStatus(_Model):
    roles: list[TargetScalingStatus] | None = None
    ratio_status: RoleRatioStatus | None = Field(default=None, alias="ratioStatus")
    ratio_adjusted: bool | None = Field(default=None, alias="ratioAdjusted")


class AutoscalingPolicyStatus(_Model):
    observed_generation: int | None = Field(default=None, alias="observedGeneration")
    homogeneous_status: TargetScalingStatus | None = Field(default=None, alias="homogeneousStatus")
    disaggregated_status: DisaggregatedScalingStatus | None = Field(default=None, alias="disaggregatedStatus")
    heterogeneous_status: list[TargetScalingStatus] | None = Field(default=None, alias="heterogeneousStatus")


class AutoscalingPolicy(BaseModel):
    """The whole object as the API server returns it (metadata kept as a dict)."""

    model_config = ConfigDict(populate_by_name=True, extra="ignore")

    api_version: str = Field(default=API_VERSION, alias="apiVersion")
    kind: str = KIND
    metadata: dict[str, Any] = Field(default_factory=dict)
    spec: AutoscalingPolicySpec
    status: AutoscalingPolicyStatus | None = None
