"""ModelServing (``workload.serving.volcano.sh/v1alpha1``) and everything it embeds, as pydantic models.

These types are the single source of the API shape: the CRD's OpenAPI schema is generated from
them (:mod:`kthena_ref.api.crd`), the planner reads them, and the webhook validates with them.
Field names are the API's camelCase names; defaults, enums and bounds are those of the API
reference (``shared/spec/api-reference-workload-v1alpha1.txt``), carried as pydantic constraints
so the CRD generator can turn them into OpenAPI keywords.

Pod templates keep their ``spec`` as the API server sent it (a dict): the CRD embeds the full
upstream PodSpec schema, so a wrongly typed field is rejected by the API server at admission,
and the controller never rewrites fields it does not own.
"""

from __future__ import annotations

import enum
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, field_validator

from .. import faults

GROUP = "workload.serving.volcano.sh"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"
KIND = "ModelServing"
PLURAL = "modelservings"

# IntOrString: an integer, or a percentage written "N%".
IntOrString = Annotated[int | str, Field(json_schema_extra={"x-kubernetes-int-or-string": True})]
PERCENT_PATTERN = r"^(0|[1-9][0-9]*)%$"


class _Model(BaseModel):
    """API objects: camelCase on the wire, unknown fields kept out, defaults validated."""

    model_config = ConfigDict(populate_by_name=True, extra="forbid", validate_default=True)


class RecoveryPolicy(enum.StrEnum):
    SERVING_GROUP_RECREATE = "ServingGroupRecreate"
    ROLE_RECREATE = "RoleRecreate"
    NONE = "None"


class RolloutStrategyType(enum.StrEnum):
    SERVING_GROUP_ROLLING_UPDATE = "ServingGroupRollingUpdate"
    ROLE_ROLLING_UPDATE = "RoleRollingUpdate"


class UpdateMethod(enum.StrEnum):
    RECREATE = "Recreate"
    IN_PLACE = "InPlace"


# The plugin document's spelling of InPlace (spec reading 1: a typo, refused as not an enum value).
IN_PLACE_UPDATE_SPELLING = "InPlaceUpdate"


class PluginType(enum.StrEnum):
    BUILT_IN = "BuiltIn"


class PluginTarget(enum.StrEnum):
    ALL = "All"
    ENTRY = "Entry"
    WORKER = "Worker"


class ProtectionLevel(enum.StrEnum):
    SERVING_GROUP = "ServingGroup"
    ROLE = "Role"


class NetworkTopologyMode(enum.StrEnum):
    HARD = "hard"
    SOFT = "soft"


class Metadata(_Model):
    """The subset of ObjectMeta a pod template may carry."""

    labels: dict[str, str] | None = None
    annotations: dict[str, str] | None = None


class PodTemplateSpec(_Model):
    """A pod template; ``spec`` is validated by the API server against the upstream PodSpec schema."""

    metadata: Metadata | None = None
    spec: dict[str, Any] = Field(json_schema_extra={"x-kthena-embed": "io.k8s.api.core.v1.PodSpec"})


class Role(_Model):
    name: Annotated[str, StringConstraints(max_length=12, pattern=r"^[a-zA-Z0-9]([-a-zA-Z0-9]*[a-zA-Z0-9])?$")]
    replicas: Annotated[int, Field(ge=0)] = 1
    entry_template: PodTemplateSpec = Field(alias="entryTemplate")
    worker_replicas: Annotated[int, Field(ge=0)] = Field(alias="workerReplicas")
    worker_template: PodTemplateSpec | None = Field(default=None, alias="workerTemplate")
    max_unavailable: IntOrString = Field(default=1, alias="maxUnavailable")
    max_surge: IntOrString | None = Field(default=None, alias="maxSurge")
    partition: IntOrString | None = None


class GangPolicy(_Model):
    min_role_replicas: dict[str, Annotated[int, Field(ge=0)]] | None = Field(default=None, alias="minRoleReplicas")


class NetworkTopologySpec(_Model):
    """Volcano's network-topology requirement (mode and the highest tier a group may span)."""

    mode: NetworkTopologyMode | None = None
    highest_tier_allowed: Annotated[int, Field(ge=0)] | None = Field(default=None, alias="highestTierAllowed")


class NetworkTopology(_Model):
    group_policy: NetworkTopologySpec | None = Field(default=None, alias="groupPolicy")
    role_policy: NetworkTopologySpec | None = Field(default=None, alias="rolePolicy")


class ServingGroup(_Model):
    restart_grace_period_seconds: Annotated[int, Field(ge=0)] = Field(default=0, alias="restartGracePeriodSeconds")
    gang_policy: GangPolicy | None = Field(default=None, alias="gangPolicy")
    network_topology: NetworkTopology | None = Field(default=None, alias="networkTopology")
    roles: Annotated[list[Role], Field(min_length=1, max_length=4)]


class PluginScope(_Model):
    roles: list[str] | None = None
    target: PluginTarget = PluginTarget.ALL


class PluginSpec(_Model):
    name: Annotated[str, StringConstraints(min_length=1)]
    type: PluginType = PluginType.BUILT_IN
    config: Any = Field(default=None, json_schema_extra={"x-kubernetes-preserve-unknown-fields": True})
    scope: PluginScope | None = None


class RollingUpdateConfiguration(_Model):
    max_unavailable: IntOrString = Field(default=1, alias="maxUnavailable")
    max_surge: IntOrString | None = Field(default=None, alias="maxSurge")
    partition: IntOrString | None = None


class RoleRolloutDependency(_Model):
    role: str
    depends_on: list[str] | None = Field(default=None, alias="dependsOn")


class RoleCoordination(_Model):
    roles: list[str] | None = None
    max_skew: IntOrString | None = Field(default=None, alias="maxSkew")
    dependencies: list[RoleRolloutDependency] | None = None


class EvictionStrategySpec(_Model):
    protection_level: ProtectionLevel = Field(default=ProtectionLevel.SERVING_GROUP, alias="protectionLevel")
    min_available: IntOrString | None = Field(default=None, alias="minAvailable")
    role_min_available: dict[str, IntOrString] | None = Field(default=None, alias="roleMinAvailable")


class RolloutStrategy(_Model):
    type: RolloutStrategyType = RolloutStrategyType.SERVING_GROUP_ROLLING_UPDATE
    update_method: UpdateMethod = Field(default=UpdateMethod.RECREATE, alias="updateMethod")
    progress_deadline_seconds: Annotated[int, Field(ge=60)] | None = Field(
        default=None, alias="progressDeadlineSeconds"
    )
    rolling_update_configuration: RollingUpdateConfiguration | None = Field(
        default=None, alias="rollingUpdateConfiguration"
    )
    role_coordination: RoleCoordination | None = Field(default=None, alias="roleCoordination")
    eviction_strategy: EvictionStrategySpec | None = Field(default=None, alias="evictionStrategy")

    @field_validator("update_method", mode="before")
    @classmethod
    def _alias_fault(cls, value: Any) -> Any:
        if value == IN_PLACE_UPDATE_SPELLING and faults.active("in-place-update-alias-recreates"):
            return UpdateMethod.RECREATE
        return value


class ModelServingSpec(_Model):
    replicas: Annotated[int, Field(ge=0)] = 1
    scheduler_name: str = Field(default="volcano", alias="schedulerName")
    plugins: list[PluginSpec] | None = None
    template: ServingGroup
    rollout_strategy: RolloutStrategy | None = Field(default=None, alias="rolloutStrategy")
    recovery_policy: RecoveryPolicy = Field(default=RecoveryPolicy.ROLE_RECREATE, alias="recoveryPolicy")
    revision_history_limit: Annotated[int, Field(ge=0)] = Field(default=10, alias="revisionHistoryLimit")


class Condition(_Model):
    type: str
    status: str
    reason: str | None = None
    message: str | None = None
    last_transition_time: str | None = Field(default=None, alias="lastTransitionTime")
    observed_generation: int | None = Field(default=None, alias="observedGeneration")


class ModelServingStatus(_Model):
    observed_generation: int | None = Field(default=None, alias="observedGeneration")
    replicas: int = 0
    current_replicas: int = Field(default=0, alias="currentReplicas")
    updated_replicas: int = Field(default=0, alias="updatedReplicas")
    available_replicas: int = Field(default=0, alias="availableReplicas")
    current_revision: str | None = Field(default=None, alias="currentRevision")
    update_revision: str | None = Field(default=None, alias="updateRevision")
    collision_count: int | None = Field(default=None, alias="collisionCount")
    label_selector: str | None = Field(default=None, alias="labelSelector")
    conditions: list[Condition] | None = Field(default=None, json_schema_extra={"x-kthena-list-map-keys": ["type"]})


class ObjectMeta(BaseModel):
    """The ObjectMeta fields the controller reads (the API server owns the schema)."""

    model_config = ConfigDict(populate_by_name=True, extra="ignore")

    name: str
    namespace: str = "default"
    uid: str | None = None
    generation: int | None = None
    resource_version: str | None = Field(default=None, alias="resourceVersion")
    labels: dict[str, str] | None = None
    annotations: dict[str, str] | None = None
    deletion_timestamp: str | None = Field(default=None, alias="deletionTimestamp")


class ModelServing(BaseModel):
    model_config = ConfigDict(populate_by_name=True, extra="ignore")

    api_version: str = Field(default=API_VERSION, alias="apiVersion")
    kind: str = KIND
    metadata: ObjectMeta
    spec: ModelServingSpec
    status: ModelServingStatus | None = None

    def to_api(self) -> dict[str, Any]:
        """The object as the API expects it (camelCase, unset optionals left out)."""
        return self.model_dump(by_alias=True, exclude_none=True, mode="json")
