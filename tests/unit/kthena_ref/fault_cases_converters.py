"""Probes of the converter faults (issue 16): the ModelBooster and LeaderWorkerSet conversions, their
reconcile, the ModelBooster CRD and webhook, and the shell's status write.

Why this module exists: ``test_faults.py`` holds one probe per fault; these are kept apart so the table
there stays readable. Each row is ``(fault, probe, off, on, overlaps)`` as in :mod:`.fault_cases_plugins`.
Each probe converts one small source (a booster with a two-Pod server worker and a hostpath cache, or an
LWS of size 1 or 3) and reads one observable of the child.
"""

from __future__ import annotations

import asyncio
import copy
from typing import Any

from kthena_ref.admission.server import review_response
from kthena_ref.api.modelbooster_crd import crd
from kthena_ref.convert import Conversion, lws, modelbooster
from kthena_ref.convert.plan import plan

IMAGE = "engine:v1"
URI = "hf://Qwen/Qwen2.5-0.5B"


def booster(*, pods: int = 2, backend: str = "b1", **extra: Any) -> dict[str, Any]:
    workers = extra.pop("workers", [{"type": "server", "image": IMAGE, "replicas": 1, "pods": pods}])
    return {
        "apiVersion": "workload.serving.volcano.sh/v1alpha1",
        "kind": "ModelBooster",
        "metadata": {"name": "mb", "namespace": "ns", "uid": "u-mb", "generation": 3},
        "spec": {"backend": {"name": backend, "type": "vLLM", "modelURI": URI, "cacheURI": "hostpath:///cache",
                             "schedulerName": "sched", "runtimeClassName": "rc",
                             "env": [{"name": "HF_ENDPOINT", "value": "x"}], "workers": workers, **extra}},
    }  # fmt: skip


def leader_worker_set(size: int) -> dict[str, Any]:
    pod = {"spec": {"containers": [{"name": "engine", "image": IMAGE}]}}
    return {
        "apiVersion": "leaderworkerset.x-k8s.io/v1",
        "kind": "LeaderWorkerSet",
        "metadata": {"name": "lws", "namespace": "ns", "uid": "u-lws"},
        "spec": {"replicas": 1, "leaderWorkerTemplate": {"size": size, "workerTemplate": pod}},
    }


def child(conversion: Conversion) -> dict[str, Any]:
    assert conversion.child is not None, conversion.problems
    return conversion.child


def role(conversion: Conversion) -> dict[str, Any]:
    return dict(child(conversion)["spec"]["template"]["roles"][0])


def pod_specs(conversion: Conversion) -> list[dict[str, Any]]:
    r = role(conversion)
    return [r["entryTemplate"]["spec"], *([r["workerTemplate"]["spec"]] if "workerTemplate" in r else [])]


def stored(ms: dict[str, Any]) -> dict[str, Any]:
    return {**copy.deepcopy(ms), "metadata": {**ms["metadata"], "resourceVersion": "1"}}


# -- ModelBooster -----------------------------------------------------------------------------------


def probe_engine_images() -> list[str]:
    return [s["containers"][0]["image"] for s in pod_specs(modelbooster.convert(booster(), None))]


def probe_engine_env() -> list[bool]:
    return [bool(s["containers"][0].get("env")) for s in pod_specs(modelbooster.convert(booster(), None))]


def probe_worker_scheduling() -> list[tuple[bool, bool, bool]]:
    extra = {"resources": {"requests": {"cpu": "1"}}, "affinity": {"nodeAffinity": {}},
             "tolerations": [{"operator": "Exists"}]}  # fmt: skip
    converted = modelbooster.convert(booster(workers=[{"type": "server", "image": IMAGE, "pods": 2, **extra}]), None)
    return [("resources" in s["containers"][0], "affinity" in s, "tolerations" in s) for s in pod_specs(converted)]


def probe_engine_env_from() -> list[bool]:
    converted = modelbooster.convert(booster(envFrom=[{"configMapRef": {"name": "c"}}]), None)
    return [bool(s["containers"][0].get("envFrom")) for s in pod_specs(converted)]


def probe_downloader_has_uri() -> bool:
    spec = pod_specs(modelbooster.convert(booster(), None))[0]
    return any(URI in c.get("args", []) for c in spec.get("initContainers", []))


def probe_scheduler_name() -> str | None:
    return child(modelbooster.convert(booster(), None))["spec"].get("schedulerName")


def probe_runtime_class() -> list[str | None]:
    return [s.get("runtimeClassName") for s in pod_specs(modelbooster.convert(booster(), None))]


def probe_booster_plugins_new() -> list[str] | None:
    plugins = child(modelbooster.convert(booster(), None))["spec"].get("plugins")
    return None if plugins is None else [p["name"] for p in plugins]


def probe_booster_plugins_kept() -> list[str] | None:
    existing = stored(child(modelbooster.convert(booster(), None)))
    plugins = child(modelbooster.convert(booster(pods=3), existing))["spec"].get("plugins")
    return None if plugins is None else [p["name"] for p in plugins]


def probe_single_pod_worker_template() -> bool:
    return "workerTemplate" in role(modelbooster.convert(booster(pods=1), None))


def probe_multi_pod_worker_template() -> tuple[bool, int]:
    r = role(modelbooster.convert(booster(pods=2), None))
    return "workerTemplate" in r, r["workerReplicas"]


def probe_disaggregated_roles() -> int:
    workers = [{"type": t, "image": IMAGE, "pods": 1} for t in ("prefill", "decode")]
    converted = modelbooster.convert(booster(type="vLLMDisaggregated", workers=workers), None)
    return len(child(converted)["spec"]["template"]["roles"])


def probe_cache_in_every_pod() -> list[bool]:
    return [any("hostPath" in v for v in s["volumes"]) for s in pod_specs(modelbooster.convert(booster(), None))]


def probe_rename_deletes_old() -> tuple[str, ...]:
    old = stored(child(modelbooster.convert(booster(), None)))
    return plan(booster(backend="b2"), [old], modelbooster.convert).delete


def probe_observed_generation() -> list[Any]:
    """The status the shell writes for a converted booster (its API calls recorded, not sent)."""
    from kthena_ref.runtime import converters

    calls: list[Any] = []

    class Recorder:
        def __getattr__(self, name: str) -> Any:
            async def call(*args: Any, **kwargs: Any) -> None:
                calls.append((name, args))

            return call

    class Cache:
        def __init__(self, objects: dict[str, Any]) -> None:
            self.cache = objects

    shell = converters.Converters.__new__(converters.Converters)
    shell.custom, shell.core, shell.reported, shell.reconciles = Recorder(), Recorder(), {}, 0
    shell.sources = {s.kind: s for s in converters.sources()}
    shell.informers = {"ModelBooster": Cache({"ns/mb": booster()})}  # type: ignore[dict-item]
    shell.children = Cache({})  # type: ignore[assignment]
    asyncio.run(shell.reconcile("ModelBooster|ns/mb"))
    return [args[-1] for name, args in calls if name == "patch_namespaced_custom_object_status"]


def probe_crd_deprecated() -> tuple[Any, bool]:
    version = crd()["spec"]["versions"][0]
    return version.get("deprecated"), bool(version.get("deprecationWarning"))


def probe_webhook_message() -> bool | None:
    bad = booster(workers=[{"type": "prefill", "image": IMAGE}])
    review = {"request": {"uid": "1", "operation": "CREATE", "object": bad,
                          "kind": {"group": "workload.serving.volcano.sh", "version": "v1alpha1", "kind": "ModelBooster"}}}  # fmt: skip
    response = review_response(review)["response"]
    return None if response["allowed"] else "spec.backend.workers[0].type" in response["status"]["message"]


def probe_crd_bounds() -> tuple[bool, bool]:
    """Whether the CRD carries the backend's CEL rules and the worker type's enum."""
    backend = crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["backend"]
    worker_type = backend["properties"]["workers"]["items"]["properties"]["type"]
    return "x-kubernetes-validations" in backend, "enum" in worker_type


def probe_bounds() -> tuple[tuple[bool, bool], bool]:
    """The CRD's checks (:func:`probe_crd_bounds`), and whether the webhook refuses a booster whose backend
    replicas exceed the documented maximum."""
    bad = booster(replicas=2_000_000)
    review = {"request": {"uid": "1", "operation": "CREATE", "object": bad,
                          "kind": {"group": "workload.serving.volcano.sh", "version": "v1alpha1", "kind": "ModelBooster"}}}  # fmt: skip
    return probe_crd_bounds(), review_response(review)["response"]["allowed"] is False


def probe_crd_worker_type_default() -> Any:
    backend = crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["backend"]
    return backend["properties"]["workers"]["items"]["properties"]["type"].get("default")


def probe_children_made() -> list[str | None]:
    """What a booster whose child exists asks to create (None: nothing)."""
    existing = stored(child(modelbooster.convert(booster(), None)))
    made = plan(booster(), [existing], modelbooster.convert).create
    return [None if made is None else made["metadata"]["name"]]


# -- LeaderWorkerSet --------------------------------------------------------------------------------


def probe_lws_plugins_new() -> list[str] | None:
    plugins = child(lws.convert(leader_worker_set(3), None))["spec"].get("plugins")
    return None if plugins is None else [p["name"] for p in plugins]


def probe_lws_plugins_kept() -> list[str] | None:
    existing = stored(child(lws.convert(leader_worker_set(3), None)))
    plugins = child(lws.convert(leader_worker_set(2), existing))["spec"].get("plugins")
    return None if plugins is None else [p["name"] for p in plugins]


def probe_lws_size_one() -> tuple[bool, int]:
    r = role(lws.convert(leader_worker_set(1), None))
    return "workerTemplate" in r, r["workerReplicas"]


def probe_lws_size_three() -> int:
    return int(role(lws.convert(leader_worker_set(3), None))["workerReplicas"])


HEADLESS = ["headless-service"]
ONE_POD = ("booster-no-worker-template",)  # the probes reading every Pod template see one template fewer
CASES = [
    ("booster-worker-image-ignored", probe_engine_images, [IMAGE, IMAGE], ["registry.example/engine:wrong"] * 2,
     ONE_POD),
    ("booster-env-dropped", probe_engine_env, [True, True], [False, False], ONE_POD),
    ("booster-downloader-without-uri", probe_downloader_has_uri, True, False, ()),
    ("booster-worker-scheduling-dropped", probe_worker_scheduling, [(True, True, True)] * 2,
     [(False, False, False)] * 2, ONE_POD),
    ("booster-env-from-dropped", probe_engine_env_from, [True, True], [False, False], (*ONE_POD, "booster-env-dropped")),
    ("booster-scheduler-name-dropped", probe_scheduler_name, "sched", None, ()),
    ("booster-runtime-class-dropped", probe_runtime_class, ["rc", "rc"], [None, None], ONE_POD),
    ("booster-child-without-headless", probe_booster_plugins_new, HEADLESS, None, ()),
    ("booster-plugins-rederived", probe_booster_plugins_kept, HEADLESS, [], ("booster-child-without-headless",)),
    ("booster-worker-template-always", probe_single_pod_worker_template, False, True, ()),
    ("booster-no-worker-template", probe_multi_pod_worker_template, (True, 1), (False, 0), ()),
    ("booster-disaggregated-one-role", probe_disaggregated_roles, 2, 1, ()),
    ("booster-cache-entry-only", probe_cache_in_every_pod, [True, True], [True, False], ONE_POD),
    ("booster-rename-keeps-old-child", probe_rename_deletes_old, ("mb-b1",), (), ()),
    ("booster-no-observed-generation", probe_observed_generation, [{"status": {"observedGeneration": 3}}], [], ()),
    ("booster-crd-not-deprecated", probe_crd_deprecated, (True, True), (None, False), ()),
    ("booster-admission-message-without-field", probe_webhook_message, True, False,
     ("admission-message-without-field", "booster-crd-no-bounds")),
    ("booster-crd-no-bounds", probe_bounds, ((True, True), True), ((False, False), False),
     ("booster-admission-message-without-field", "enums-not-validated")),
    ("booster-crd-no-defaults", probe_crd_worker_type_default, "server", None, ("no-schema-defaults",)),
    ("booster-child-twice", probe_children_made, [None], ["mb-b1-twin"], ()),
    ("lws-child-without-headless", probe_lws_plugins_new, HEADLESS, None, ()),
    ("lws-plugins-rederived", probe_lws_plugins_kept, HEADLESS, [], ("lws-child-without-headless",)),
    ("lws-size-one-without-worker-template", probe_lws_size_one, (True, 0), (False, 0),
     ("lws-worker-replicas-equal-size",)),
    ("lws-worker-replicas-equal-size", probe_lws_size_three, 2, 3, ()),
]  # fmt: skip
