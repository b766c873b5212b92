"""ModelBooster admission rules the CRD schema and its CEL rules cannot say (pure).

The CRD (:mod:`kthena_ref.api.modelbooster_crd`) already refuses wrong types, the enums, the name
and URI patterns, the bounds and sizes, and (CEL) workers of a type the backend type does not run
and a pvc:// modelURI without a pvc:// cacheURI. :func:`validate` checks everything a conversion
needs (the CRD's rules again, so that the function is total and the converter can rely on it for
objects that reached the controller while the webhook was down) and the rest. Every refusal names
the field (``spec.backend.workers[1].type``) and the reason.

Each rule and where it comes from (spec: ``shared/spec/api-reference-workload-v1alpha1.txt``;
upstream: Kthena's ModelBooster webhook and converter; readings: docs/modelbooster-readings.md):

===  ==========================================================  =================================================
#    Rule (field)                                                Source
===  ==========================================================  =================================================
B1   the object matches the types (:mod:`kthena_ref.api.         spec (field tables); the CRD refuses these first
     modelbooster`); the rules below are skipped when not
B2   a vLLM backend's workers are of type server                 upstream (webhook: "the worker type must be
     (``spec.backend.workers[i].type``)                          'server'"); converter: a server worker is the Role
B3   a vLLMDisaggregated backend's workers are prefill or        upstream (webhook; converter: "prefill worker not
     decode, and it has one of each (``spec.backend.workers``)   found", "decode worker not found")
B4   no two workers of one type (``workers[i].type``)            reading MB14: each type is one Role; upstream keeps
                                                                 the last one silently
B5   a pvc:// modelURI: cacheURI is pvc://, of the same claim,   spec, ModelBackend.modelURI/cacheURI: "Both CacheURI
     and the modelURI path starts with its mount point           and modelURI must reference the same PVC, and the
     (``spec.backend.cacheURI``, ``spec.backend.modelURI``)      modelURI path must start with the CacheURI mount
                                                                 point"
B6   cacheURI: pvc://CLAIM names a claim (a DNS-1123 subdomain,  spec, cacheURI: "pvc://CLAIM_NAME ... mounted at
     no '/' inside); hostpath://PATH names a path (not only      /CLAIM_NAME", "hostpath://PATH ... mounted at
     slashes, no '..' step) (``spec.backend.cacheURI``)          /PATH"; a volume the API server refuses otherwise
B7   every worker has an image (``workers[i].image``)            reading MB15: the engine container's image; a Pod
                                                                 without one is refused
B8   a worker's config is absent or a JSON object with           upstream (converter: "failed to unmarshal
     non-empty keys (``workers[i].config``)                      config"); its keys are the engine's flags
B9   the child's generated names are valid DNS-1035 labels of    the ModelServing webhook refuses the child otherwise
     at most 63 characters (``spec.backend.name``)               (upstream checks the same shape)
===  ==========================================================  =================================================
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import ValidationError

from ..api.modelbooster import HOSTPATH, PVC, ModelBackend, ModelBackendType, ModelBooster, ModelWorkerType
from ..planner.names import generated_name_problem
from .rules import FieldError, _loc

BACKEND = "spec.backend"
DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
DNS1123_SUBDOMAIN_MAX = 253

# The Role each worker type becomes (the converter's, kept here so B9 checks the names it makes).
VLLM_ROLE = "leader"
ROLES: dict[ModelBackendType, dict[ModelWorkerType, str]] = {
    ModelBackendType.VLLM: {ModelWorkerType.SERVER: VLLM_ROLE},
    ModelBackendType.VLLM_DISAGGREGATED: {ModelWorkerType.PREFILL: "prefill", ModelWorkerType.DECODE: "decode"},
}


def validate(obj: dict[str, Any]) -> list[str]:
    """Every refusal of ``obj`` (a ModelBooster as the API server sent it), each ``field: reason``;
    empty when valid."""
    return [str(e) for e in field_errors(obj)]


def field_errors(obj: dict[str, Any]) -> list[FieldError]:
    """:func:`validate`'s refusals as :class:`FieldError` (field and reason apart)."""
    try:
        booster = ModelBooster.model_validate(obj)
    except ValidationError as exc:  # B1
        return [FieldError(_loc(tuple(e["loc"])), e["msg"]) for e in exc.errors()]
    backend = booster.spec.backend
    errors = [*_worker_types(backend), *_uris(backend), *_workers(backend)]
    if not errors:
        name = booster.metadata.get("name")
        errors += _child_names(name, backend) if isinstance(name, str) and name else []
    return errors


def cache_mount(cache_uri: str | None) -> str | None:
    """Where a cacheURI is mounted (``/CLAIM``, ``/PATH``); None for an absent one (EmptyDir)."""
    if not cache_uri:
        return None
    for scheme in (PVC, HOSTPATH):
        if cache_uri.startswith(scheme):
            return "/" + cache_uri[len(scheme) :].strip("/")
    return None


def claim_name(cache_uri: str) -> str:
    """The claim of a ``pvc://CLAIM`` cacheURI (surrounding slashes trimmed, as upstream does)."""
    return cache_uri[len(PVC) :].strip("/")


def _worker_types(backend: ModelBackend) -> list[FieldError]:
    """B2-B4."""
    errors: list[FieldError] = []
    allowed = ROLES[backend.type]
    at = f"{BACKEND}.workers"
    seen: dict[ModelWorkerType, int] = {}
    for i, worker in enumerate(backend.workers):
        if worker.type not in allowed:  # B2, B3
            kinds = " or ".join(t.value for t in allowed)
            errors.append(
                FieldError(
                    f"{at}[{i}].type",
                    f"{worker.type.value!r} is not a worker type of a {backend.type.value} backend (it runs {kinds})",
                )
            )
        elif worker.type in seen:  # B4
            errors.append(
                FieldError(
                    f"{at}[{i}].type",
                    f"duplicate worker type {worker.type.value!r} (also workers[{seen[worker.type]}]): each worker "
                    "type is one Role of the ModelServing",
                )
            )
        seen.setdefault(worker.type, i)
    missing = [t.value for t in allowed if t not in seen]
    if backend.type is ModelBackendType.VLLM_DISAGGREGATED and missing:  # B3
        errors.append(
            FieldError(
                at, f"a vLLMDisaggregated backend needs a prefill and a decode worker ({', '.join(missing)} missing)"
            )
        )
    return errors


def _uris(backend: ModelBackend) -> list[FieldError]:
    """B5, B6."""
    errors: list[FieldError] = []
    cache = backend.cache_uri
    if cache and cache.startswith(PVC):
        claim = claim_name(cache)
        if "/" in claim or len(claim) > DNS1123_SUBDOMAIN_MAX or not DNS1123_SUBDOMAIN.match(claim):
            errors.append(
                FieldError(
                    f"{BACKEND}.cacheURI",
                    f"{cache!r}: {claim!r} is not a PersistentVolumeClaim name (pvc://CLAIM_NAME, "
                    "a DNS-1123 subdomain)",
                )
            )
    elif cache and cache.startswith(HOSTPATH):
        path = cache[len(HOSTPATH) :].strip("/")
        if not path or ".." in path.split("/"):
            errors.append(
                FieldError(
                    f"{BACKEND}.cacheURI",
                    f"{cache!r} names no host directory to mount (hostpath://PATH, PATH not empty and without '..')",
                )
            )
    if backend.model_uri.startswith(PVC):
        if not cache or not cache.startswith(PVC):
            errors.append(
                FieldError(
                    f"{BACKEND}.cacheURI",
                    "a pvc:// modelURI needs a pvc:// cacheURI of the same claim: the downloader mounts only the "
                    f"cacheURI volume (cacheURI is {repr(cache) if cache else 'not set'})",
                )
            )
        elif not errors:
            claim = claim_name(cache)
            mount = f"/{claim}"
            path = backend.model_uri[len(PVC) :]
            if not (path == mount or path.startswith(mount + "/")):
                errors.append(
                    FieldError(
                        f"{BACKEND}.modelURI",
                        f"{backend.model_uri!r} must reference the cacheURI's claim {claim!r}: its path must start "
                        f"with the mount point {mount} (pvc://{mount}/PATH)",
                    )
                )
    return errors


def _workers(backend: ModelBackend) -> list[FieldError]:
    """B7, B8."""
    errors: list[FieldError] = []
    for i, worker in enumerate(backend.workers):
        at = f"{BACKEND}.workers[{i}]"
        if not worker.image or not worker.image.strip():
            errors.append(FieldError(f"{at}.image", "required: the image of the worker's engine container"))
        elif worker.image != worker.image.strip() or " " in worker.image:
            errors.append(FieldError(f"{at}.image", f"{worker.image!r} is not an image reference (it contains spaces)"))
        config = worker.config
        if config is not None and not isinstance(config, dict):
            errors.append(
                FieldError(f"{at}.config", "must be a JSON object: its keys and values become the engine's flags")
            )
        elif isinstance(config, dict) and "" in config:
            errors.append(FieldError(f"{at}.config", "an empty key names no engine flag"))
    return errors


def _child_names(booster: str, backend: ModelBackend) -> list[FieldError]:
    """B9: the longest name the ModelServing controller generates for the child's Pods."""
    child = f"{booster}-{backend.name}"
    replicas = backend.replicas if backend.replicas is not None else 1
    errors: list[FieldError] = []
    for worker in backend.workers:
        role = ROLES[backend.type][worker.type]
        role_replicas = worker.replicas if worker.replicas is not None else 1
        problem = generated_name_problem(child, replicas, role, role_replicas, max(worker.pods or 1, 1) - 1)
        if problem:
            errors.append(
                FieldError(
                    f"{BACKEND}.name",
                    f"the ModelServing {child!r} (<metadata.name>-<backend.name>) cannot be made: {problem}",
                )
            )
            break
    return errors
