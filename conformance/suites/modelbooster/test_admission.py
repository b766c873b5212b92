"""ModelBoosterAdmission: the ModelBooster API's documented validation, and its deprecation.

The API reference gives each field's validation (Enum, Pattern, MaxLength, Minimum/Maximum,
MinItems/MaxItems). Whether the schema, CEL or a webhook refuses is the implementation's business:
only the refusal (HTTP 400/403/422) is asserted; that the message names the field is a SHOULD.
Every create is a dry run (``dryRun=All``: every admission step, nothing stored), so no booster
reaches a converter. The ModelBackendType table lists SGLang, MindIE and MindIEDisaggregated beside
the Enum [vLLM vLLMDisaggregated]: those three are neither required nor refused (reading C14); an
undocumented type is.

Deprecation: "ModelBooster is deprecated as of Kthena v1.1". Kubernetes' way to say so to a
client is a ``Warning`` response header (a CRD version marked ``deprecated``, or a webhook's
warning): a SHOULD, since the spec names no mechanism (reading C15).
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from conformance.framework.catalog import behaviour
from conformance.framework.features import Feature
from conformance.framework.modelserving import ModelServings, Rejection, expect_refused, names_field

from . import BACKEND, BOOSTER, DEPRECATED, WORKER, booster, worker
from .children import Sources

Mutation = Callable[[dict[str, Any]], None]


def _set(path: str, value: Any) -> Mutation:
    """Set ``spec.<path>`` (dotted; ``workers.0`` indexes the list)."""

    def apply(body: dict[str, Any]) -> None:
        node: Any = body["spec"]
        *parents, last = path.split(".")
        for key in parents:
            node = node[int(key)] if key.isdigit() else node[key]
        node[last] = value

    return apply


# (what, the field a message should name, the change): every one must be refused.
INVALID: list[tuple[str, str, Mutation]] = [
    ("backend.type TGI (not in the Enum)", "backend.type", _set("backend.type", "TGI")),
    ("workers[0].type gateway (not in the Enum)", "workers[0].type", _set("backend.workers.0.type", "gateway")),
    ("backend.name Bad_Name (Pattern)", "backend.name", _set("backend.name", "Bad_Name")),
    ("spec.name Bad_Name (Pattern)", "spec.name", _set("name", "Bad_Name")),
    ("spec.name of 65 characters (MaxLength 64)", "spec.name", _set("name", "a" * 65)),
    ("backend.replicas -1 (Minimum 0)", "backend.replicas", _set("backend.replicas", -1)),
    ("backend.replicas 1000001 (Maximum 1e+06)", "backend.replicas", _set("backend.replicas", 1000001)),
    ("workers[0].replicas -1 (Minimum 0)", "workers[0].replicas", _set("backend.workers.0.replicas", -1)),
    ("workers[0].replicas 1000001 (Maximum 1e+06)", "workers[0].replicas", _set("backend.workers.0.replicas", 1000001)),
    ("workers[0].pods -1 (Minimum 0)", "workers[0].pods", _set("backend.workers.0.pods", -1)),
    ("workers[0].pods 1000001 (Maximum 1e+06)", "workers[0].pods", _set("backend.workers.0.pods", 1000001)),
    ("backend.workers empty (MinItems 1)", "backend.workers", _set("backend.workers", [])),
    ("backend.workers of 1001 (MaxItems 1000)", "backend.workers", _set("backend.workers", [worker()] * 1001)),
    ("backend.modelURI http:// (Pattern)", "backend.modelURI", _set("backend.modelURI", "http://example.invalid/m")),
    ("backend.cacheURI nfs:// (Pattern)", "backend.cacheURI", _set("backend.cacheURI", "nfs://server/models")),
]


def _both(first: Mutation, second: Mutation) -> Mutation:
    def apply(body: dict[str, Any]) -> None:
        first(body)
        second(body)

    return apply


# Values at the documented bounds, each in an otherwise valid booster: every one must be accepted.
VALID: list[tuple[str, Mutation]] = [
    ("spec.name of 64 characters", _set("name", "a" * 64)),
    ("backend.replicas 0", _set("backend.replicas", 0)),
    ("backend.replicas 1000000", _set("backend.replicas", 1000000)),
    ("workers[0].replicas 1000000", _set("backend.workers.0.replicas", 1000000)),
    ("workers[0].pods 1000000", _set("backend.workers.0.pods", 1000000)),
    ("backend.type vLLMDisaggregated with prefill and decode workers",
     _set("backend", {**booster("x")["spec"]["backend"], "type": "vLLMDisaggregated",
                      "workers": [worker(pods=1, type_="prefill"), worker(pods=1, type_="decode")]})),
    ("backend.modelURI s3://", _set("backend.modelURI", "s3://bucket/models/tiny")),
    ("backend.modelURI ms://", _set("backend.modelURI", "ms://conformance/tiny-model")),
    ("backend.modelURI obs://", _set("backend.modelURI", "obs://bucket/models/tiny")),
    ("backend.cacheURI hostpath://", _set("backend.cacheURI", "hostpath://models")),
    ("modelURI pvc:/// inside cacheURI pvc://", _both(_set("backend.cacheURI", "pvc://model-storage"),
                                                     _set("backend.modelURI", "pvc:///model-storage/tiny"))),
]  # fmt: skip


def _case(name: str, mutate: Mutation) -> dict[str, Any]:
    body = copy.deepcopy(booster(name))
    mutate(body)
    return body


def _refusals(ms: ModelServings) -> list[tuple[str, str, Rejection]]:
    boosters = Sources(ms, BOOSTER)
    out = []
    for i, (what, field, mutate) in enumerate(INVALID):
        rejection = expect_refused(boosters.dry_create(_case(f"mb-invalid-{i}", mutate)), f"a ModelBooster with {what}")
        out.append((what, field, rejection))
    return out


@behaviour(
    "modelbooster/admission/documented-bounds",
    "A ModelBooster with a value outside its documented Enum, Pattern, MaxLength, Minimum/Maximum or MinItems/MaxItems "
    "MUST be refused at admission, and one with values at those bounds MUST be accepted.",
    BACKEND,
    Feature.MODEL_BOOSTER_ADMISSION,
)
def test_documented_bounds_are_enforced(ms: ModelServings) -> None:
    boosters = Sources(ms, BOOSTER)
    boosters.dry_create(booster("mb-probe"))  # Inconclusive here when the CRD is not served
    _refusals(ms)
    refused = {}
    for i, (what, mutate) in enumerate(VALID):
        rejection = boosters.dry_create(_case(f"mb-valid-{i}", mutate))
        if rejection is not None:
            refused[what] = f"HTTP {rejection.status}: {rejection.message}"
    assert not refused, f"valid ModelBoosters (values at the documented bounds) were refused: {refused}"


@behaviour(
    "modelbooster/admission/names-field",
    "The refusal of an invalid ModelBooster SHOULD name the field that is invalid.",
    BACKEND,
    Feature.MODEL_BOOSTER_ADMISSION,
)
def test_refusals_name_the_field(ms: ModelServings) -> None:
    unnamed = {what: r.message for what, field, r in _refusals(ms) if not names_field(r, field)}
    assert not unnamed, f"refusals that do not name the invalid field: {unnamed}"


@behaviour(
    "modelbooster/admission/deprecation-warning",
    "Creating a ModelBooster SHOULD be answered with a Warning response header saying the API is deprecated.",
    DEPRECATED,
    Feature.MODEL_BOOSTER_ADMISSION,
)
def test_a_create_warns_of_the_deprecation(ms: ModelServings) -> None:
    status, headers = Sources(ms, BOOSTER).create_with_headers(booster("mb-deprecated"))
    warnings = [v for k, v in headers.items() if k.lower() == "warning"]
    assert any("deprecat" in w.lower() for w in warnings), (
        f"the (dry-run) creation of a ModelBooster was answered HTTP {status} without a Warning header saying "
        f"ModelBooster is deprecated (Warning headers: {warnings or 'none'}); the spec: ModelBooster is deprecated as "
        "of Kthena v1.1"
    )


@behaviour(
    "modelbooster/admission/worker-type-default",
    "A ModelBooster worker without a type MUST be stored with type server (its documented default).",
    WORKER,
    Feature.MODEL_BOOSTER_ADMISSION,
)
def test_a_worker_type_defaults_to_server(ms: ModelServings) -> None:
    body = booster("mb-default-type")
    del body["spec"]["backend"]["workers"][0]["type"]
    stored = Sources(ms, BOOSTER).dry_stored(body)
    seen = [w.get("type") for w in stored["spec"]["backend"]["workers"]]
    assert seen == ["server"], f"a worker without type was stored with type {seen} (documented default: server)"
