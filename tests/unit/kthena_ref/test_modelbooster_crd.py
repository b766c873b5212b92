"""kthena_ref.api.modelbooster and its CRD, without a cluster: the deprecation, the status
subresource, the spec's enums, patterns and bounds, the embedded core/v1 schemas, the CEL rules;
and the converter's children are ModelServings (the types, the ModelServing webhook and the
embedded PodSpec schema all accept them)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from kthena_ref.admission.rules import validate as validate_model_serving
from kthena_ref.api.modelbooster import DEPRECATION, ModelWorker
from kthena_ref.api.modelbooster_crd import BACKEND_RULES, core_schemas, crd
from kthena_ref.api.podspec import load_snapshot
from kthena_ref.api.types import ModelServing
from kthena_ref.convert.modelbooster import convert

GOLDEN = Path(__file__).with_name("golden")
# jsonschema comes with the dev extras (check-jsonschema); the x- keywords are ignored by it.
jsonschema = pytest.importorskip("jsonschema")
POD_SPEC = jsonschema.Draft7Validator({"type": "object", **load_snapshot()})


def version() -> dict[str, Any]:
    (v,) = crd()["spec"]["versions"]
    assert isinstance(v, dict)
    return v


def schema() -> dict[str, Any]:
    out: dict[str, Any] = version()["schema"]["openAPIV3Schema"]
    return out


def backend() -> dict[str, Any]:
    out: dict[str, Any] = schema()["properties"]["spec"]["properties"]["backend"]
    return out


def test_names_and_scope() -> None:
    body = crd()
    assert body["metadata"]["name"] == "modelboosters.workload.serving.volcano.sh"
    names = body["spec"]["names"]
    assert (names["kind"], names["plural"], names["listKind"]) == ("ModelBooster", "modelboosters", "ModelBoosterList")
    assert body["spec"]["scope"] == "Namespaced"
    assert (version()["name"], version()["served"], version()["storage"]) == ("v1alpha1", True, True)


def test_deprecated_with_the_spec_sentence() -> None:
    assert version()["deprecated"] is True
    warning = version()["deprecationWarning"]
    assert warning == DEPRECATION
    assert "deprecated as of Kthena v1.1" in warning and "no earlier than Kthena v1.5" in warning
    assert len(warning) <= 256  # the API server's limit


def test_status_subresource_and_status_schema() -> None:
    assert version()["subresources"] == {"status": {}}
    assert schema()["properties"]["status"]["properties"] == {
        "observedGeneration": {"type": "integer", "format": "int32"}
    }


def test_enums_patterns_and_bounds() -> None:
    props = backend()["properties"]
    assert props["type"]["enum"] == ["vLLM", "vLLMDisaggregated"]
    assert props["name"]["pattern"] == r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
    assert props["modelURI"]["pattern"] == r"^(hf://|s3://|obs://|pvc://|ms://).+"
    assert props["cacheURI"]["pattern"] == r"^(hostpath://|pvc://).+"
    assert (props["replicas"]["minimum"], props["replicas"]["maximum"]) == (0, 1_000_000)
    assert (props["workers"]["minItems"], props["workers"]["maxItems"]) == (1, 1000)
    worker = props["workers"]["items"]["properties"]
    assert worker["type"] == {
        "type": "string", "enum": ["server", "prefill", "decode", "controller", "coordinator"], "default": "server"
    }  # fmt: skip
    for count in ("replicas", "pods"):
        assert (worker[count]["minimum"], worker[count]["maximum"]) == (0, 1_000_000)
    assert worker["config"] == {"x-kubernetes-preserve-unknown-fields": True}
    spec = schema()["properties"]["spec"]
    assert (spec["properties"]["name"]["maxLength"], spec["properties"]["name"]["pattern"]) == (
        64,
        r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$",
    )
    assert spec["properties"]["modelMatch"] == {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
    assert spec["required"] == ["backend"]
    assert backend()["required"] == ["name", "type", "modelURI", "workers"]


def test_core_types_use_the_pod_spec_schemas() -> None:
    core = core_schemas()
    props = backend()["properties"]
    worker = props["workers"]["items"]["properties"]
    assert (props["env"], props["envFrom"]) == (core["env"], core["envFrom"])
    assert (worker["resources"], worker["affinity"], worker["tolerations"]) == (
        core["resources"],
        core["affinity"],
        core["tolerations"],
    )
    assert core["tolerations"]["type"] == "array" and core["affinity"]["type"] == "object"


def test_cel_rules_name_their_fields() -> None:
    assert backend()["x-kubernetes-validations"] == BACKEND_RULES
    for rule in BACKEND_RULES:
        field = rule["fieldPath"].lstrip(".")
        assert rule["message"].startswith(f"{field}: ")


def test_the_worker_type_defaults_to_server() -> None:
    assert ModelWorker().type == "server"


def boosters() -> list[dict[str, Any]]:
    goldens = [yaml.safe_load(p.read_text())["input"] for p in sorted(GOLDEN.glob("modelbooster-*.yaml"))]
    base = goldens[0]
    variants = []
    for cache in (None, "pvc://model-storage", "hostpath://data"):
        for pods in (None, 1, 3):
            b = yaml.safe_load(yaml.safe_dump(base))
            b["spec"]["backend"]["modelURI"] = "s3://bucket/qwen"
            b["spec"]["backend"].pop("cacheURI")
            if cache:
                b["spec"]["backend"]["cacheURI"] = cache
            b["spec"]["backend"]["workers"][0]["pods"] = pods
            if pods is None:
                del b["spec"]["backend"]["workers"][0]["pods"]
            variants.append(b)
    return [*goldens, *variants]


@pytest.mark.parametrize("booster", boosters())
def test_the_child_is_a_valid_model_serving(booster: dict[str, Any]) -> None:
    child = convert(booster, None).child
    assert child is not None
    ModelServing.model_validate(child)
    assert validate_model_serving(child) == []
    for role in child["spec"]["template"]["roles"]:
        for template in ("entryTemplate", "workerTemplate"):
            if template in role:
                POD_SPEC.validate(role[template]["spec"])
