"""The ModelBooster CustomResourceDefinition, generated from :mod:`.modelbooster` as
:func:`.crd.crd` is for ModelServing (same generator, same rules for bounds, enums and defaults).

The version is served with ``deprecated: true`` and a ``deprecationWarning`` quoting the spec's
deprecation sentence, so the API server returns it as a warning on every request for the kind.
The core/v1 fields (``env``, ``envFrom``, ``resources``, ``affinity``, ``tolerations``) get the
sub-schemas of the embedded PodSpec snapshot (:mod:`.podspec`), so a wrongly typed one is refused
at admission exactly as in a pod template.

The rules OpenAPI keywords cannot say and CEL can, cheaply, are ``x-kubernetes-validations`` on the
backend, each with a message naming the field (the webhook, :mod:`kthena_ref.admission.
modelbooster_rules`, checks the same and the rest; see there for the readings):

- a vLLM backend's workers are all of type server; a vLLMDisaggregated backend's are all prefill or
  decode (the type is defaulted to server before CEL runs);
- a pvc:// modelURI needs a pvc:// cacheURI (ModelBackend.modelURI: "Both CacheURI and modelURI
  must reference the same PVC"); that the claims are the same and the path starts with the mount
  point needs string slicing on unbounded strings and is left to the webhook.

Duplicate worker types are the webhook's too: a pairwise CEL comparison of up to 1000 workers
would exceed the API server's cost budget. Generator paths are prefixed with the plural so that no
rule or fault keyed on a ModelServing path can apply here.
"""

from __future__ import annotations

from typing import Any

from .. import faults
from .crd import definition, model_schema
from .modelbooster import DEPRECATION, KIND, PLURAL, ModelBoosterSpec, ModelStatus
from .podspec import load_snapshot

VLLM_WORKERS = {
    "rule": "self.type != 'vLLM' || self.workers.all(w, w.type == 'server')",
    "message": "workers: every worker of a vLLM backend must be of type server",
    "fieldPath": ".workers",
}
DISAGGREGATED_WORKERS = {
    "rule": "self.type != 'vLLMDisaggregated' || self.workers.all(w, w.type == 'prefill' || w.type == 'decode')",
    "message": "workers: every worker of a vLLMDisaggregated backend must be of type prefill or decode",
    "fieldPath": ".workers",
}
PVC_MODEL_NEEDS_PVC_CACHE = {
    "rule": "!self.modelURI.startsWith('pvc://') || (has(self.cacheURI) && self.cacheURI.startsWith('pvc://'))",
    "message": "cacheURI: a pvc:// modelURI needs a pvc:// cacheURI of the same claim",
    "fieldPath": ".cacheURI",
}
BACKEND_RULES = [VLLM_WORKERS, DISAGGREGATED_WORKERS, PVC_MODEL_NEEDS_PVC_CACHE]


# Self-validation: the keywords booster-crd-no-bounds drops from the schema.
CHECK_KEYWORDS = ("minimum", "maximum", "enum", "pattern", "minLength", "maxLength", "minItems", "maxItems")


def _drop(schema: Any, keywords: tuple[str, ...]) -> None:
    """Remove ``keywords`` from every schema under ``schema`` (never a property that has such a name)."""
    if isinstance(schema, list):
        for item in schema:
            _drop(item, keywords)
        return
    if not isinstance(schema, dict):
        return
    for keyword in keywords:
        schema.pop(keyword, None)
    for key, value in schema.items():
        if key == "properties" and isinstance(value, dict):
            for sub in value.values():
                _drop(sub, keywords)
        else:
            _drop(value, keywords)


def core_schemas() -> dict[str, dict[str, Any]]:
    """The PodSpec snapshot's schemas of the core/v1 fields a ModelBooster embeds, by field name."""
    pod = load_snapshot()["properties"]
    container = pod["containers"]["items"]["properties"]
    return {
        "env": container["env"],
        "envFrom": container["envFrom"],
        "resources": container["resources"],
        "affinity": pod["affinity"],
        "tolerations": pod["tolerations"],
    }


def crd() -> dict[str, Any]:
    """The ModelBooster CustomResourceDefinition (``apiextensions.k8s.io/v1``)."""
    spec = model_schema(ModelBoosterSpec, f"{PLURAL}:spec")
    backend = spec["properties"]["backend"]
    worker = backend["properties"]["workers"]["items"]
    core = core_schemas()
    for name in ("env", "envFrom"):
        backend["properties"][name] = core[name]
    for name in ("resources", "affinity", "tolerations"):
        worker["properties"][name] = core[name]
    backend["x-kubernetes-validations"] = BACKEND_RULES
    if faults.active("booster-crd-no-bounds") or faults.active("booster-admission-message-without-field"):
        del backend["x-kubernetes-validations"]
        _drop(spec, CHECK_KEYWORDS)
    if faults.active("booster-crd-no-defaults"):
        _drop(spec, ("default",))
    status = model_schema(ModelStatus, f"{PLURAL}:status")
    description = f"ModelBooster makes a ModelServing for one model backend. Deprecated: {DEPRECATION}"
    version: dict[str, Any] = {"deprecated": True, "deprecationWarning": DEPRECATION, "subresources": {"status": {}}}
    if faults.active("booster-crd-not-deprecated"):
        version = {"subresources": {"status": {}}}
    return definition(KIND, PLURAL, spec, status, description, version=version)
