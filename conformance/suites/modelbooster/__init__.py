"""ModelBooster: the deprecated ModelBooster API (``workload.serving.volcano.sh/v1alpha1``) and the
ModelServing it is converted into.

**Finding the child.** The spec leaves the child ModelServing's name, labels and Role names open,
so they are never assumed: a booster's child is the ModelServing in the namespace whose
``metadata.ownerReferences`` hold a controller reference to the booster's uid
(:mod:`.children`), its Pods are those the child controls. Which Pod is an entry and which a
worker the tests do not need: every assertion holds for every Pod of the child.

**What is asserted** (docs/converter-readings.md): the worker's ``image`` runs in a container of
every Pod and that container carries the backend's ``env`` (C3); the cache volume of ``cacheURI``
is mounted at the documented path in that container and in the downloader init container of
every Pod (C4, C5); the downloader is an init container that is given the ``modelURI`` (its image
and arguments are the implementation's: only that the string appears in its command, args or env,
or in a ConfigMap or Secret it reads through env, envFrom or a mounted volume, C6);
``schedulerName`` becomes the child's (C7), ``runtimeClassName`` the Pods' (C8); the
converter paragraph of the plugin document (headless-service on a new child, stable as worker
counts change; no workerTemplate for a worker without workers, C9-C11); renaming the backend
replaces the child (C12); ``status.observedGeneration`` (C13). A PVC cache is asserted on the
Pods as created: the suite makes no claim, so they stay Pending, but they exist (C5).

**Without the CRD** (``modelboosters.workload.serving.volcano.sh``) every test is inconclusive
with that reason; the preflight says so too, and no other profile is affected.
"""

from __future__ import annotations

import copy
from typing import Any

from .children import Kind

API = "api-reference-workload-v1alpha1.txt"
BACKEND = f"{API}#ModelBackend"
WORKER = f"{API}#ModelWorker"
BOOSTER_SPEC = f"{API}#ModelBoosterSpec"
MODEL_STATUS = f"{API}#ModelStatus"
DEPRECATED = f"{API}#ModelBooster"
CONVERTERS = "plugin-framework-and-headless-service.txt#Upgrade and migration"

BOOSTER = Kind(
    group="workload.serving.volcano.sh",
    version="v1alpha1",
    plural="modelboosters",
    kind="ModelBooster",
    crd="modelboosters.workload.serving.volcano.sh",
    profile="ModelBooster",
)

IMAGE = "registry.example/conformance/engine:v1"
MODEL_URI = "hf://conformance/tiny-model"
SCHEDULER = "default-scheduler"  # not the ModelServing default (volcano): a converter dropping it shows
# Supported names of the backend's env (ModelBackend.env), values the test can recognise.
ENV = {"HF_ENDPOINT": "https://huggingface.example.invalid/", "KTHENA_SKIP_ENGINE_DEPENDENCY_INSTALL": "true"}


def worker(*, pods: int = 2, image: str = IMAGE, type_: str = "server", replicas: int = 1) -> dict[str, Any]:
    return {"type": type_, "image": image, "replicas": replicas, "pods": pods}


def booster(
    name: str,
    *,
    pods: int = 2,
    cache_uri: str | None = None,
    backend_name: str = "main",
    backend_type: str = "vLLM",
    workers: list[dict[str, Any]] | None = None,
    runtime_class: str | None = None,
) -> dict[str, Any]:
    """A valid ModelBooster ``name``: one backend of one replica, ``workers`` (by default one server
    worker of one replica with ``pods`` Pods running :data:`IMAGE`), the backend's env :data:`ENV`,
    the scheduler :data:`SCHEDULER`, the model :data:`MODEL_URI` and ``cache_uri`` when given."""
    backend: dict[str, Any] = {
        "name": backend_name,
        "type": backend_type,
        "modelURI": MODEL_URI,
        "env": [{"name": k, "value": v} for k, v in ENV.items()],
        "replicas": 1,
        "schedulerName": SCHEDULER,
        "workers": copy.deepcopy(workers) if workers is not None else [worker(pods=pods)],
    }
    if cache_uri is not None:
        backend["cacheURI"] = cache_uri
    if runtime_class is not None:
        backend["runtimeClassName"] = runtime_class
    return {
        "apiVersion": BOOSTER.api_version,
        "kind": BOOSTER.kind,
        "metadata": {"name": name},
        "spec": {"name": name, "owner": "conformance", "backend": backend},
    }


def pod_count(body: dict[str, Any]) -> int:
    """Pods a booster asks for: backend replicas x the sum over workers of replicas x pods (pods
    omitted or 0 is one Pod, reading C2). Pure."""
    backend = body["spec"]["backend"]
    per_replica = sum(int(w.get("replicas", 1)) * max(int(w.get("pods") or 1), 1) for w in backend["workers"])
    return int(backend.get("replicas", 1)) * per_replica


def text_of(container: dict[str, Any]) -> str:
    """A container's command, args and env values, joined (where a downloader is given its source). Pure."""
    env = [str(e.get("value") or "") for e in container.get("env") or []]
    return " ".join([*(container.get("command") or []), *(container.get("args") or []), *env])


def downloaders(spec: dict[str, Any], model_uri: str = MODEL_URI) -> list[dict[str, Any]]:
    """The init containers of a Pod spec (JSON) that are given ``model_uri``. Pure."""
    return [c for c in spec.get("initContainers") or [] if model_uri in text_of(c)]


def engines(spec: dict[str, Any], image: str = IMAGE) -> list[dict[str, Any]]:
    """The regular containers of a Pod spec (JSON) running ``image``. Pure."""
    return [c for c in spec.get("containers") or [] if c.get("image") == image]


def cache_problems(
    spec: dict[str, Any], volume_kind: str, mount_path: str | None, *, image: str = IMAGE, check: Any = None
) -> list[str]:
    """What is wrong with the cache volume of one Pod spec (JSON): a volume of ``volume_kind``
    (``hostPath``, ``emptyDir``, ``persistentVolumeClaim``; ``check`` may judge it further) mounted at
    ``mount_path`` (any path when None) both in a container running ``image`` and in a downloader
    init container, at the same path ("The inference engine reads from the same path"). Pure."""
    volumes = {
        v["name"]: v
        for v in spec.get("volumes") or []
        if v.get(volume_kind) is not None and (check is None or check(v))
    }
    if not volumes:
        shown = [{k: v for k, v in vol.items()} for vol in spec.get("volumes") or []]
        return [f"no {volume_kind} volume{' as asked' if check else ''} (volumes: {shown})"]

    def paths(container: dict[str, Any]) -> set[str]:
        return {
            str(m.get("mountPath")) for m in container.get("volumeMounts") or []
            if m.get("name") in volumes and (mount_path is None or m.get("mountPath") == mount_path)
        }  # fmt: skip

    at = f" at {mount_path}" if mount_path else ""
    engine_paths = set().union(*(paths(c) for c in engines(spec, image))) if engines(spec, image) else set()
    loader_paths = set().union(*(paths(c) for c in downloaders(spec))) if downloaders(spec) else set()
    problems = []
    if not engine_paths:
        problems.append(f"no container running {image} mounts the {volume_kind} volume {sorted(volumes)}{at}")
    if not downloaders(spec):
        problems.append(f"no init container is given the modelURI {MODEL_URI} (the downloader)")
    elif not loader_paths:
        problems.append(f"the downloader init container does not mount the {volume_kind} volume {sorted(volumes)}{at}")
    if engine_paths and loader_paths and not engine_paths & loader_paths:
        problems.append(
            f"the engine mounts the cache at {sorted(engine_paths)} and the downloader at {sorted(loader_paths)}: "
            "not the same path"
        )
    return problems
