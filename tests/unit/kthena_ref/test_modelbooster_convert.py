"""kthena_ref.convert.modelbooster: the child ModelServing of a ModelBooster (readings MB6-MB13,
docs/modelbooster-readings.md), table-driven, and the golden conversions compared exactly."""

from __future__ import annotations

import copy
import hashlib
from pathlib import Path
from typing import Any

import pytest
import yaml

from kthena_ref.convert import HEADLESS_SERVICE, Conversion
from kthena_ref.convert.modelbooster import (
    DOWNLOADER,
    DOWNLOADER_IMAGE,
    EMPTY_CACHE_MOUNT,
    ENGINE,
    LABEL_BOOSTER,
    convert,
    engine_flags,
)

GOLDEN = Path(__file__).with_name("golden")


def worker(kind: str = "server", **extra: Any) -> dict[str, Any]:
    return {"type": kind, "image": "vllm/vllm-openai:v0.10.0", "replicas": 1, **extra}


def booster(backend_type: str = "vLLM", workers: list[dict[str, Any]] | None = None, **backend: Any) -> dict[str, Any]:
    return {
        "apiVersion": "workload.serving.volcano.sh/v1alpha1",
        "kind": "ModelBooster",
        "metadata": {"name": "qwen", "namespace": "ns", "uid": "uid-1"},
        "spec": {
            "backend": {
                "name": "backend1",
                "type": backend_type,
                "modelURI": "hf://Qwen/Qwen2.5-0.5B",
                "workers": workers if workers is not None else [worker()],
                **backend,
            }
        },
    }


def child(obj: dict[str, Any], existing: dict[str, Any] | None = None) -> dict[str, Any]:
    conversion = convert(obj, existing)
    assert conversion.child is not None, conversion.problems
    return conversion.child


def pods(ms: dict[str, Any]) -> list[dict[str, Any]]:
    """Every pod template of the child (entry and worker)."""
    out = []
    for role in ms["spec"]["template"]["roles"]:
        out.append(role["entryTemplate"])
        if "workerTemplate" in role:
            out.append(role["workerTemplate"])
    return out


def test_the_child_is_named_labelled_and_owned() -> None:
    ms = child(booster())
    assert ms["apiVersion"] == "workload.serving.volcano.sh/v1alpha1"
    assert ms["kind"] == "ModelServing"
    meta = ms["metadata"]
    assert (meta["name"], meta["namespace"], meta["labels"]) == ("qwen-backend1", "ns", {LABEL_BOOSTER: "qwen"})
    (owner,) = meta["ownerReferences"]
    assert owner == {
        "apiVersion": "workload.serving.volcano.sh/v1alpha1",
        "kind": "ModelBooster",
        "name": "qwen",
        "uid": "uid-1",
        "controller": True,
        "blockOwnerDeletion": True,
    }


def test_renaming_the_backend_names_another_child() -> None:
    renamed = booster()
    renamed["spec"]["backend"]["name"] = "backend2"
    assert child(renamed)["metadata"]["name"] == "qwen-backend2" != child(booster())["metadata"]["name"]


@pytest.mark.parametrize(
    ("backend_type", "workers", "roles"),
    [
        pytest.param("vLLM", [worker("server", replicas=3)], [("leader", 3)], id="vllm-server-is-leader"),
        pytest.param(
            "vLLMDisaggregated",
            [worker("decode", replicas=2), worker("prefill", replicas=1)],
            [("prefill", 1), ("decode", 2)],
            id="disaggregated-prefill-then-decode",
        ),
    ],
)
def test_roles_per_backend_type(backend_type: str, workers: list[dict[str, Any]], roles: list[tuple[str, int]]) -> None:
    ms = child(booster(backend_type, workers))
    assert [(r["name"], r["replicas"]) for r in ms["spec"]["template"]["roles"]] == roles


@pytest.mark.parametrize(
    ("pods_field", "worker_replicas", "has_worker_template"),
    [
        pytest.param({}, 0, False, id="pods-omitted"),
        pytest.param({"pods": 0}, 0, False, id="pods-0"),
        pytest.param({"pods": 1}, 0, False, id="pods-1"),
        pytest.param({"pods": 2}, 1, True, id="pods-2"),
        pytest.param({"pods": 4}, 3, True, id="pods-4"),
    ],
)
@pytest.mark.parametrize("backend_type", ["vLLM", "vLLMDisaggregated"])
def test_worker_layout(
    backend_type: str, pods_field: dict[str, Any], worker_replicas: int, has_worker_template: bool
) -> None:
    kinds = ["server"] if backend_type == "vLLM" else ["prefill", "decode"]
    ms = child(booster(backend_type, [worker(k, **pods_field) for k in kinds]))
    for role in ms["spec"]["template"]["roles"]:
        assert role["workerReplicas"] == worker_replicas
        assert ("workerTemplate" in role) is has_worker_template


def test_multi_pod_entry_starts_the_ray_head_and_workers_join_it() -> None:
    limits = {"limits": {"nvidia.com/gpu": "2"}}
    ms = child(booster(workers=[worker(pods=3, resources=limits, config={"tensor-parallel-size": 2})]))
    (role,) = ms["spec"]["template"]["roles"]
    entry = role["entryTemplate"]["spec"]["containers"][0]["command"]
    assert entry[:2] == ["bash", "-c"]
    assert "leader --ray_cluster_size=3 --num-gpus=2" in entry[2]
    assert entry[2].endswith("--tensor-parallel-size 2 --distributed_executor_backend ray")
    joiner = role["workerTemplate"]["spec"]["containers"][0]["command"]
    assert joiner[2].endswith("worker --ray_address=$(ENTRY_ADDRESS)")


def test_a_missing_count_is_left_to_the_modelserving_default() -> None:
    ms = child(booster(workers=[{"type": "server", "image": "img"}]))
    assert "replicas" not in ms["spec"] and "schedulerName" not in ms["spec"]
    assert "replicas" not in ms["spec"]["template"]["roles"][0]


def test_replicas_and_scheduler_and_runtime_class() -> None:
    ms = child(booster(replicas=3, schedulerName="kube-scheduler", runtimeClassName="nvidia", workers=[worker(pods=2)]))
    assert (ms["spec"]["replicas"], ms["spec"]["schedulerName"]) == (3, "kube-scheduler")
    assert [p["spec"]["runtimeClassName"] for p in pods(ms)] == ["nvidia", "nvidia"]


MODEL_URI = "hf://Qwen/Qwen2.5-0.5B"
DIGEST = hashlib.md5(MODEL_URI.encode(), usedforsecurity=False).hexdigest()


@pytest.mark.parametrize(
    ("cache", "volume", "mount"),
    [
        pytest.param({"cacheURI": "pvc://model-storage"}, {"persistentVolumeClaim": {"claimName": "model-storage"}},
                     "/model-storage", id="pvc"),
        pytest.param({"cacheURI": "hostpath:///mnt/models"}, {"hostPath": {"path": "/mnt/models",
                     "type": "DirectoryOrCreate"}}, "/mnt/models", id="hostpath-absolute"),
        pytest.param({"cacheURI": "hostpath://data"}, {"hostPath": {"path": "/data", "type": "DirectoryOrCreate"}},
                     "/data", id="hostpath-relative"),
        pytest.param({}, {"emptyDir": {}}, EMPTY_CACHE_MOUNT, id="empty"),
    ],
)  # fmt: skip
def test_cache_volume_in_every_pod(cache: dict[str, str], volume: dict[str, Any], mount: str) -> None:
    ms = child(booster(workers=[worker(pods=2)], **cache))
    assert len(pods(ms)) == 2
    for pod in pods(ms):
        spec = pod["spec"]
        assert spec["volumes"][0] == {"name": "backend1-weights", **volume}
        (downloader,) = spec["initContainers"]
        (engine,) = spec["containers"]
        cache_mount = {"name": "backend1-weights", "mountPath": mount}
        assert downloader["name"] == DOWNLOADER and downloader["image"] == DOWNLOADER_IMAGE
        assert downloader["args"] == ["--source", MODEL_URI, "--output-dir", f"{mount}/{DIGEST}"]
        assert cache_mount in downloader["volumeMounts"] and cache_mount in engine["volumeMounts"]
        assert engine["name"] == ENGINE
    entry = pods(ms)[0]["spec"]["containers"][0]["command"][2]
    assert f"--model {mount}/{DIGEST}" in entry


def test_pvc_model_uri_is_read_through_the_cache_mount() -> None:
    obj = booster(cacheURI="pvc://model-storage")
    obj["spec"]["backend"]["modelURI"] = "pvc:///model-storage/models/Qwen"
    (pod,) = pods(child(obj))
    assert pod["spec"]["initContainers"][0]["args"][1] == "pvc:///model-storage/models/Qwen"


def test_engine_container_carries_the_worker_and_backend_fields() -> None:
    env = [{"name": "ENDPOINT", "value": "https://obs.example"}]
    env_from = [{"secretRef": {"name": "s3"}}]
    resources = {"limits": {"cpu": "1", "memory": "1Gi"}}
    affinity: dict[str, Any] = {
        "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": []}}
    }
    tolerations = [{"key": "gpu", "operator": "Exists"}]
    extra: dict[str, Any] = {"resources": resources, "affinity": affinity, "tolerations": tolerations, "pods": 2}
    ms = child(booster(env=env, envFrom=env_from, workers=[worker(**extra)]))
    for pod in pods(ms):
        (engine,) = pod["spec"]["containers"]
        assert engine["image"] == "vllm/vllm-openai:v0.10.0"
        assert (engine["env"], engine["envFrom"], engine["resources"]) == (env, env_from, resources)
        assert (pod["spec"]["affinity"], pod["spec"]["tolerations"]) == (affinity, tolerations)
        assert pod["metadata"]["labels"] == {LABEL_BOOSTER: "qwen"}


@pytest.mark.parametrize(
    ("config", "flags"),
    [
        pytest.param(None, [], id="none"),
        pytest.param({"b": 1, "a": "x"}, ["--a", "x", "--b", "1"], id="sorted"),
        pytest.param({"max_model_len": 8192}, ["--max-model-len", "8192"], id="underscores"),
        pytest.param({"trust-remote-code": ""}, ["--trust-remote-code"], id="empty-string-alone"),
        pytest.param({"flag": None}, ["--flag"], id="null-alone"),
        pytest.param({"enforce-eager": True, "x": False}, ["--enforce-eager", "true", "--x", "false"], id="bools"),
        pytest.param({"gpu-memory-utilization": 0.9}, ["--gpu-memory-utilization", "0.9"], id="float"),
        pytest.param({"kv": {"b": 1, "a": [1, 2]}}, ["--kv", '{"a":[1,2],"b":1}'], id="object-as-json"),
    ],
)
def test_engine_flags(config: Any, flags: list[str]) -> None:
    assert engine_flags(config) == flags


def test_plugins_new_child_declares_headless_service() -> None:
    assert child(booster())["spec"]["plugins"] == [{"name": HEADLESS_SERVICE}]


@pytest.mark.parametrize(
    "existing_plugins",
    [
        pytest.param([{"name": HEADLESS_SERVICE}], id="with-plugin"),
        pytest.param(None, id="without-plugins"),
        pytest.param([{"name": "other", "type": "BuiltIn"}], id="other-plugin-not-migrated"),
    ],
)
def test_plugins_existing_child_kept_exactly_across_worker_count_changes(
    existing_plugins: list[dict[str, Any]] | None,
) -> None:
    existing = child(booster(workers=[worker(pods=1)]))
    if existing_plugins is None:
        del existing["spec"]["plugins"]
    else:
        existing["spec"]["plugins"] = existing_plugins
    for pods_count in (1, 2, 5):
        grown = child(booster(workers=[worker(pods=pods_count, replicas=pods_count)]), existing)
        assert grown["spec"].get("plugins") == existing_plugins


def test_the_conversion_does_not_change_its_inputs() -> None:
    obj = booster(env=[{"name": "A", "value": "1"}], workers=[worker(pods=2, config={"a": {"b": 1}})])
    existing = child(booster())
    before = copy.deepcopy((obj, existing))
    convert(obj, existing)
    assert (obj, existing) == before


def test_model_match_is_reported_ignored() -> None:
    obj = booster()
    obj["spec"]["modelMatch"] = {"headers": {"x": {"exact": "y"}}}
    conversion = convert(obj, None)
    assert [p.field for p in conversion.ignored] == ["spec.modelMatch"]
    assert convert(booster(), None).ignored == ()


@pytest.mark.parametrize(
    ("change", "field"),
    [
        pytest.param({"type": "vLLMDisaggregated"}, "spec.backend.workers[0].type", id="wrong-worker-type"),
        pytest.param({"modelURI": "pvc:///other/x", "cacheURI": "pvc://models"}, "spec.backend.modelURI",
                     id="pvc-other-claim"),
        pytest.param({"workers": []}, "spec.backend.workers", id="no-workers"),
    ],
)  # fmt: skip
def test_an_invalid_booster_gives_problems_and_no_child(change: dict[str, Any], field: str) -> None:
    obj = booster()
    obj["spec"]["backend"].update(change)
    conversion = convert(obj, None)
    assert conversion.child is None
    assert field in [p.field for p in conversion.problems]


@pytest.mark.parametrize("path", sorted(GOLDEN.glob("modelbooster-*.yaml")), ids=lambda p: p.stem)
def test_golden(path: Path) -> None:
    case = yaml.safe_load(path.read_text())
    conversion = convert(case["input"], None)
    assert conversion == Conversion(child=case["expected"])


def test_golden_cases_exist() -> None:
    assert {p.stem for p in GOLDEN.glob("modelbooster-*.yaml")} >= {
        "modelbooster-vllm-multinode-pvc",
        "modelbooster-disaggregated-hostpath",
    }
