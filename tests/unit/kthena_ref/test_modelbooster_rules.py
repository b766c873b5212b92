"""kthena_ref.admission.modelbooster_rules: each rule (B1-B9) has refused cases, and every refusal
names its field; valid boosters of every backend type and cache scheme are accepted."""

from __future__ import annotations

from typing import Any

import pytest

from kthena_ref.admission.modelbooster_rules import field_errors, validate


def booster(**backend: Any) -> dict[str, Any]:
    base = {
        "name": "backend1",
        "type": "vLLM",
        "modelURI": "hf://Qwen/Qwen2.5-0.5B",
        "workers": [{"type": "server", "image": "vllm/vllm-openai:v0.10.0", "replicas": 1, "pods": 1}],
    }
    return {
        "apiVersion": "workload.serving.volcano.sh/v1alpha1",
        "kind": "ModelBooster",
        "metadata": {"name": "qwen", "namespace": "ns", "uid": "uid-1"},
        "spec": {"backend": base | backend},
    }


def w(kind: str, **extra: Any) -> dict[str, Any]:
    return {"type": kind, "image": "img:v1", **extra}


PD = [w("prefill"), w("decode")]


@pytest.mark.parametrize(
    "backend",
    [
        pytest.param({}, id="vllm"),
        pytest.param({"workers": [{"image": "img"}]}, id="worker-type-defaults-to-server"),
        pytest.param({"type": "vLLMDisaggregated", "workers": PD}, id="disaggregated"),
        pytest.param({"cacheURI": "pvc://model-storage"}, id="pvc-cache"),
        pytest.param({"cacheURI": "hostpath:///mnt/models"}, id="hostpath-cache"),
        pytest.param({"cacheURI": "pvc://model-storage", "modelURI": "pvc:///model-storage/models/Qwen"},
                     id="pvc-model-under-the-mount"),
        pytest.param({"cacheURI": "pvc://model-storage", "modelURI": "pvc:///model-storage"}, id="pvc-model-the-mount"),
        pytest.param({"modelURI": "obs://bucket/models/qwen"}, id="obs"),
        pytest.param({"workers": [w("server", config={"max-model-len": 8192, "kv": {"a": 1}})]}, id="config-object"),
    ],
)  # fmt: skip
def test_accepted(backend: dict[str, Any]) -> None:
    assert validate(booster(**backend)) == []


@pytest.mark.parametrize(
    ("backend", "field", "words"),
    [
        # B1: the types (what the CRD refuses first)
        pytest.param({"type": "SGLang"}, "spec.backend.type", "vLLM", id="B1-backend-type-enum"),
        pytest.param({"name": "Backend_1"}, "spec.backend.name", "pattern", id="B1-backend-name-pattern"),
        pytest.param({"modelURI": "http://x"}, "spec.backend.modelURI", "pattern", id="B1-model-uri-scheme"),
        pytest.param({"cacheURI": "s3://bucket"}, "spec.backend.cacheURI", "pattern", id="B1-cache-uri-scheme"),
        pytest.param({"cacheURI": ""}, "spec.backend.cacheURI", "pattern", id="B1-cache-uri-explicit-empty"),
        pytest.param({"workers": []}, "spec.backend.workers", "at least 1", id="B1-min-items"),
        pytest.param({"workers": [w("server")] * 1001}, "spec.backend.workers", "at most 1000", id="B1-max-items"),
        pytest.param({"replicas": -1}, "spec.backend.replicas", "greater than or equal", id="B1-replicas-min"),
        pytest.param({"workers": [w("server", pods=1_000_001)]}, "spec.backend.workers[0].pods", "less than",
                     id="B1-pods-max"),
        pytest.param({"workers": [w("leader")]}, "spec.backend.workers[0].type", "server", id="B1-worker-type-enum"),
        pytest.param({"unknown": 1}, "spec.backend.unknown", "Extra", id="B1-unknown-field"),
        # B2
        pytest.param({"workers": [w("prefill")]}, "spec.backend.workers[0].type", "not a worker type", id="B2"),
        pytest.param({"workers": [w("server"), w("controller")]}, "spec.backend.workers[1].type", "vLLM backend",
                     id="B2-second"),
        # B3
        pytest.param({"type": "vLLMDisaggregated", "workers": [w("server")]}, "spec.backend.workers[0].type",
                     "prefill or decode", id="B3-type"),
        pytest.param({"type": "vLLMDisaggregated", "workers": [w("prefill")]}, "spec.backend.workers",
                     "decode missing", id="B3-no-decode"),
        # B4
        pytest.param({"workers": [w("server"), w("server")]}, "spec.backend.workers[1].type", "duplicate", id="B4"),
        pytest.param({"type": "vLLMDisaggregated", "workers": [*PD, w("decode")]}, "spec.backend.workers[2].type",
                     "duplicate", id="B4-disaggregated"),
        # B5
        pytest.param({"modelURI": "pvc:///model-storage/q"}, "spec.backend.cacheURI", "not set", id="B5-no-cache"),
        pytest.param({"modelURI": "pvc:///m/q", "cacheURI": "hostpath:///m"}, "spec.backend.cacheURI", "pvc://",
                     id="B5-hostpath-cache"),
        pytest.param({"modelURI": "pvc:///other/q", "cacheURI": "pvc://model-storage"}, "spec.backend.modelURI",
                     "model-storage", id="B5-other-claim"),
        pytest.param({"modelURI": "pvc:///model-storage2/q", "cacheURI": "pvc://model-storage"},
                     "spec.backend.modelURI", "mount point", id="B5-prefix-is-not-the-mount"),
        pytest.param({"modelURI": "pvc://model-storage/q", "cacheURI": "pvc://model-storage"},
                     "spec.backend.modelURI", "mount point", id="B5-relative-path"),
        # B6
        pytest.param({"cacheURI": "pvc://Model_Storage"}, "spec.backend.cacheURI", "PersistentVolumeClaim",
                     id="B6-claim-name"),
        pytest.param({"cacheURI": "pvc://claim/sub"}, "spec.backend.cacheURI", "PersistentVolumeClaim",
                     id="B6-claim-with-slash"),
        pytest.param({"cacheURI": "pvc:///"}, "spec.backend.cacheURI", "PersistentVolumeClaim", id="B6-no-claim"),
        pytest.param({"cacheURI": "hostpath:///"}, "spec.backend.cacheURI", "host directory", id="B6-root-only"),
        pytest.param({"cacheURI": "hostpath:///a/../etc"}, "spec.backend.cacheURI", "'..'", id="B6-backstep"),
        # B7
        pytest.param({"workers": [{"type": "server"}]}, "spec.backend.workers[0].image", "required", id="B7-no-image"),
        pytest.param({"workers": [w("server", image="a b")]}, "spec.backend.workers[0].image", "spaces",
                     id="B7-spaces"),
        # B8
        pytest.param({"workers": [w("server", config=["--x"])]}, "spec.backend.workers[0].config", "JSON object",
                     id="B8-list"),
        pytest.param({"workers": [w("server", config="--x 1")]}, "spec.backend.workers[0].config", "JSON object",
                     id="B8-string"),
        pytest.param({"workers": [w("server", config={"": 1})]}, "spec.backend.workers[0].config", "empty key",
                     id="B8-empty-key"),
        # B9
        pytest.param({"name": "b" * 60}, "spec.backend.name", "63 characters", id="B9-too-long"),
    ],
)  # fmt: skip
def test_refused_naming_the_field(backend: dict[str, Any], field: str, words: str) -> None:
    obj = booster(**backend)
    errors = field_errors(obj)
    assert field in [e.field for e in errors], errors
    assert any(words in e.reason for e in errors if e.field == field), errors
    assert any(line.startswith(f"{field}: ") for line in validate(obj))


def test_b9_counts_the_child_name() -> None:
    obj = booster()
    obj["metadata"]["name"] = "1qwen"  # the child "1qwen-backend1" is no DNS-1035 label
    (error,) = field_errors(obj)
    assert error.field == "spec.backend.name" and "DNS-1035" in error.reason


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        pytest.param({}, "spec.backend", id="no-backend"),
        pytest.param({"name": "Qwen"}, "spec.name", id="model-name-pattern"),
        pytest.param({"name": "q" * 65}, "spec.name", id="model-name-max-length"),
        pytest.param({"modelMatch": "all"}, "spec.modelMatch", id="model-match-not-object"),
    ],
)
def test_spec_fields(spec: dict[str, Any], field: str) -> None:
    obj = booster()
    obj["spec"] = ({"backend": obj["spec"]["backend"]} if "backend" not in spec and spec else {}) | spec
    assert field in [e.field for e in field_errors(obj)]


# -- the webhook: a ModelBooster review is judged by these rules -----------------------------------


def _booster_review(obj: dict[str, Any], by: str) -> dict[str, Any]:
    request: dict[str, Any] = {"uid": "r-1", "operation": "CREATE", "object": obj, "namespace": "ns"}
    if by == "kind":
        request["kind"] = {"group": "workload.serving.volcano.sh", "version": "v1alpha1", "kind": "ModelBooster"}
    else:
        request["resource"] = {
            "group": "workload.serving.volcano.sh",
            "version": "v1alpha1",
            "resource": "modelboosters",
        }
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}


@pytest.mark.parametrize("by", ["kind", "resource"])
def test_the_webhook_judges_a_model_booster_by_its_rules(by: str) -> None:
    from kthena_ref.admission.server import is_booster, review_response

    valid, invalid = booster(), booster(workers=[w("prefill")])
    assert is_booster(_booster_review(valid, by)["request"])
    assert review_response(_booster_review(valid, by))["response"]["allowed"] is True
    denied = review_response(_booster_review(invalid, by))["response"]
    assert denied["allowed"] is False and denied["status"]["code"] == 422
    assert "spec.backend.workers[0].type" in denied["status"]["message"]
