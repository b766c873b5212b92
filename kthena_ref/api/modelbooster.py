"""ModelBooster (``workload.serving.volcano.sh/v1alpha1``, deprecated) and the types it embeds, as pydantic models.

As :mod:`.types` is for ModelServing, these are the single source of the API's shape: the CRD's
schema is generated from them (:mod:`.modelbooster_crd`), the webhook (:mod:`kthena_ref.admission.
modelbooster_rules`) validates with them and the converter (:mod:`kthena_ref.convert.modelbooster`)
reads them. Field names, enums, patterns and bounds are those of the API reference
(``shared/spec/api-reference-workload-v1alpha1.txt``, ModelBackend, ModelBackendType, ModelBooster,
ModelBoosterSpec, ModelStatus, ModelWorker, ModelWorkerType).

Readings (docs/modelbooster-readings.md):
- MB1 ModelBackendType: the spec's validation is ``Enum: [vLLM vLLMDisaggregated]`` while its value
  table also lists SGLang, MindIE and MindIEDisaggregated: the enum is what the API accepts, so only
  vLLM and vLLMDisaggregated are values of :class:`ModelBackendType`.
- MB2 ``env``, ``envFrom``, ``resources``, ``affinity`` and ``tolerations`` are core/v1 types: kept as
  the API server sent them (dicts and lists); the CRD gives them the embedded PodSpec's schemas.
  ``config`` is JSON (any value); ``modelMatch`` is not defined in this spec: an opaque object.
- MB3 No field of ModelBooster has a documented default except ``ModelWorker.type`` (server), and
  the spec marks none required: ``spec.backend`` and the backend's ``name``, ``type``, ``modelURI``
  and ``workers`` are required (nothing can be converted without them; upstream's types have no
  omitempty there); ``backend.replicas``, a worker's ``replicas`` and ``pods`` are optional, and
  the converter leaves an omitted count to the ModelServing's own default (see the converter).
- MB4 ``cacheURI``: absent means an EmptyDir cache (the spec's "(empty)"); a present value must
  match the pattern, so an explicit ``""`` is refused as upstream's CRD does.
- MB5 ModelStatus has only ``observedGeneration`` in the spec (no conditions).
"""

from __future__ import annotations

import enum
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, JsonValue, StringConstraints, field_validator

from .types import API_VERSION

KIND = "ModelBooster"
PLURAL = "modelboosters"
DEPRECATION = (
    "ModelBooster is deprecated as of Kthena v1.1. Use ModelServing, ModelServer, and ModelRoute instead. "
    "ModelBooster will be removed no earlier than Kthena v1.5."
)

NAME_PATTERN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
MODEL_URI_PATTERN = r"^(hf://|s3://|obs://|pvc://|ms://).+"
CACHE_URI_PATTERN = r"^(hostpath://|pvc://).+"
PVC = "pvc://"
HOSTPATH = "hostpath://"

Count = Annotated[int, Field(ge=0, le=1_000_000)]
_OPAQUE: dict[str, JsonValue] = {"x-kubernetes-preserve-unknown-fields": True}


class _Model(BaseModel):
    model_config = ConfigDict(populate_by_name=True, extra="forbid", validate_default=True)


class ModelBackendType(enum.StrEnum):
    VLLM = "vLLM"
    VLLM_DISAGGREGATED = "vLLMDisaggregated"


class ModelWorkerType(enum.StrEnum):
    SERVER = "server"
    PREFILL = "prefill"
    DECODE = "decode"
    CONTROLLER = "controller"
    COORDINATOR = "coordinator"


class ModelWorker(_Model):
    type: ModelWorkerType = ModelWorkerType.SERVER
    image: str | None = None
    replicas: Count | None = None
    pods: Count | None = None
    resources: dict[str, Any] | None = None
    affinity: dict[str, Any] | None = None
    tolerations: list[dict[str, Any]] | None = None
    config: Any = Field(default=None, json_schema_extra=_OPAQUE)


class ModelBackend(_Model):
    name: Annotated[str, StringConstraints(pattern=NAME_PATTERN)]
    type: ModelBackendType
    model_uri: Annotated[str, StringConstraints(pattern=MODEL_URI_PATTERN)] = Field(alias="modelURI")
    cache_uri: Annotated[str, StringConstraints(pattern=CACHE_URI_PATTERN)] | None = Field(
        default=None, alias="cacheURI"
    )
    env_from: list[dict[str, Any]] | None = Field(default=None, alias="envFrom")
    env: list[dict[str, Any]] | None = None
    replicas: Count | None = None
    workers: Annotated[list[ModelWorker], Field(min_length=1, max_length=1000)]
    scheduler_name: str | None = Field(default=None, alias="schedulerName")
    runtime_class_name: str | None = Field(default=None, alias="runtimeClassName")


class ModelBoosterSpec(_Model):
    name: Annotated[str, StringConstraints(max_length=64, pattern=NAME_PATTERN)] | None = None
    owner: str | None = None
    backend: ModelBackend
    model_match: Any = Field(default=None, alias="modelMatch", json_schema_extra={"type": "object", **_OPAQUE})

    @field_validator("model_match")
    @classmethod
    def _is_object(cls, value: Any) -> Any:
        if value is not None and not isinstance(value, dict):
            raise ValueError("modelMatch must be an object")
        return value


class ModelStatus(_Model):
    observed_generation: int | None = Field(default=None, alias="observedGeneration")


class ModelBooster(BaseModel):
    """The whole object as the API server returns it (metadata kept as a dict)."""

    model_config = ConfigDict(populate_by_name=True, extra="ignore")

    api_version: str = Field(default=API_VERSION, alias="apiVersion")
    kind: str = KIND
    metadata: dict[str, Any] = Field(default_factory=dict)
    spec: ModelBoosterSpec
    status: ModelStatus | None = None
