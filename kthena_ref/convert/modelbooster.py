"""ModelBooster -> ModelServing (pure): :func:`convert` makes the one child a ModelBooster asks for.

The spec documents the ModelBooster types (API reference) and, for converters, only this:
"ModelBooster and LWS converters declare headless-service when creating new ModelServings and keep
the declaration stable as worker counts change. ModelBooster omits workerTemplate when there are no
workers" (plugin-framework-and-headless-service.txt). Everything else follows upstream Kthena's
converter where the spec is silent; each choice is a reading (docs/modelbooster-readings.md):

- MB6 The child is the ModelServing ``<metadata.name>-<backend.name>`` in the booster's namespace,
  labelled ``workload.serving.volcano.sh/model-booster: <metadata.name>`` (on the pod templates too)
  and carrying a controller ownerReference to the booster. Renaming the backend names another
  child (the spec: "update name will cause the old ModelServing deletion and a new ModelServing
  creation"; deleting the old one is the shell's, by owner).
- MB7 ``spec.replicas`` is ``backend.replicas``; ``schedulerName`` goes onto the ModelServing's
  ``spec.schedulerName``, ``runtimeClassName`` onto every pod spec. An omitted count or name is
  left out of the child, so the ModelServing's own default applies (replicas 1, scheduler volcano).
- MB8 Roles: a vLLM backend's server worker is the Role ``leader`` (upstream's name); a
  vLLMDisaggregated backend's prefill and decode workers are the Roles ``prefill`` and ``decode``,
  in that order. A Role's ``replicas`` is the worker's (left out when omitted: default 1),
  ``workerReplicas`` is ``pods - 1``, with ``pods`` omitted or 0 read as 1 (the entry Pod only),
  and ``workerTemplate`` is present only when ``pods > 1`` (the spec's sentence).
- MB9 Every Pod (entry and worker) has the cache volume ``<backend.name>-weights``, a memory
  EmptyDir ``dshm`` at /dev/shm for the engine (upstream's, for NCCL), and the downloader init
  container ``model-downloader`` (image :data:`DOWNLOADER_IMAGE`, args ``--source <modelURI>
  --output-dir <mount>/<md5 of modelURI>``, the backend's env and envFrom, the cache mounted). The
  cache: ``pvc://CLAIM`` a PVC volume at ``/CLAIM``, ``hostpath://PATH`` a hostPath volume
  (DirectoryOrCreate, upstream's) at ``/PATH``, absent an EmptyDir at :data:`EMPTY_CACHE_MOUNT`
  (upstream mounts it at "", which no Pod accepts).
- MB10 One container ``engine``: the worker's image, resources, the backend's env and envFrom, the
  cache and dshm mounts. The entry runs ``python3 -m vllm.entrypoints.openai.api_server --model
  <model dir> <flags>``; with ``pods > 1`` it first starts upstream's Ray head
  (``multi-node-serving.sh leader --ray_cluster_size=<pods> --num-gpus=<devices>``) and adds
  ``--distributed_executor_backend ray``, and the worker Pods join it
  (``multi-node-serving.sh worker --ray_address=$(ENTRY_ADDRESS)``, the address the headless-service
  plugin injects). The flags are worker.config's keys sorted, ``_`` spelled ``-``, each ``--key
  value`` (a string as is, ``""`` or null the flag alone, a boolean ``true``/``false``, a number as
  JSON writes it, an object or list as compact JSON); the shell line is quoted with shlex.
- MB11 ``affinity`` and ``tolerations`` of the worker go onto its Role's pod specs.
- MB12 ``spec.plugins`` is :func:`plugins_for` of the existing child: headless-service on a new
  child, an existing child's plugins exactly (never migrated, stable as worker counts change).
- MB13 Not converted, reported as ``ignored``: ``modelMatch`` (it routes requests; this converter
  makes no ModelRoute). ``spec.name`` and ``owner`` are descriptive and not reported. Upstream's
  runtime sidecar, gang policy, restart grace period and engine env additions are not made.
- An invalid booster (:func:`kthena_ref.admission.modelbooster_rules.field_errors`) gives problems
  and no child.
"""

from __future__ import annotations

import hashlib
import json
import shlex
from typing import Any

from .. import faults
from ..admission.modelbooster_rules import ROLES, cache_mount, claim_name, field_errors
from ..api.modelbooster import HOSTPATH, PVC, ModelBackend, ModelBooster, ModelWorker
from ..api.types import API_VERSION
from ..api.types import KIND as MODEL_SERVING
from ..planner.quantity import QuantityError, parse
from . import Conversion, Problem, owner_reference, plugins_for

LABEL_BOOSTER = "workload.serving.volcano.sh/model-booster"
DOWNLOADER = "model-downloader"
DOWNLOADER_IMAGE = "ghcr.io/volcano-sh/downloader:latest"  # reading MB9: upstream's configurable default
ENGINE = "engine"
EMPTY_CACHE_MOUNT = "/model-cache"
SHM = "dshm"
SHM_MOUNT = "/dev/shm"
VLLM_SERVER = ("python3", "-m", "vllm.entrypoints.openai.api_server")
MULTI_NODE_SCRIPT = "examples/online_serving/multi-node-serving.sh"
DEVICES = ("nvidia.com/gpu", "huawei.com/ascend-1980")  # upstream's accelerator resources (--num-gpus)


def convert(booster: dict[str, Any], existing: dict[str, Any] | None) -> Conversion:
    """The ModelServing ``booster`` asks for, given the child that already exists (or None)."""
    errors = field_errors(booster)
    if errors:
        return Conversion(child=None, problems=tuple(Problem(e.field, e.reason) for e in errors))
    model = ModelBooster.model_validate(booster)
    backend = model.spec.backend
    name = booster["metadata"]["name"]
    labels = {LABEL_BOOSTER: name}
    spec: dict[str, Any] = {}
    if backend.replicas is not None:
        spec["replicas"] = backend.replicas
    if backend.scheduler_name and not faults.active("booster-scheduler-name-dropped"):
        spec["schedulerName"] = backend.scheduler_name
    plugins = plugins_for(existing)
    if faults.active("booster-child-without-headless") and existing is None:
        plugins = None
    if faults.active("booster-plugins-rederived") and existing is not None:
        plugins = []
    if plugins is not None:
        spec["plugins"] = plugins
    roles = ROLES[backend.type]
    by_type = {w.type: w for w in backend.workers}
    spec["template"] = {
        "roles": [_role(role, by_type[kind], backend, labels) for kind, role in roles.items() if kind in by_type]
    }
    if faults.active("booster-disaggregated-one-role"):
        spec["template"]["roles"] = spec["template"]["roles"][:1]
    child = {
        "apiVersion": API_VERSION,
        "kind": MODEL_SERVING,
        "metadata": {
            "name": child_name(booster),
            "namespace": booster["metadata"].get("namespace", "default"),
            "labels": dict(labels),
            "ownerReferences": [owner_reference(booster)],
        },
        "spec": spec,
    }
    ignored: tuple[Problem, ...] = ()
    if model.spec.model_match is not None:
        ignored = (Problem("spec.modelMatch", "routes requests; this converter makes no ModelRoute"),)
    return Conversion(child=child, ignored=ignored)


def child_name(booster: dict[str, Any]) -> str:
    """``<metadata.name>-<backend.name>`` (reading MB6)."""
    return f"{booster['metadata']['name']}-{booster['spec']['backend']['name']}"


def model_dir(backend: ModelBackend) -> str:
    """Where the downloader writes the model and the engine reads it: the cache mount, then the
    md5 of the modelURI (upstream's)."""
    digest = hashlib.md5(backend.model_uri.encode(), usedforsecurity=False).hexdigest()
    return f"{_mount(backend)}/{digest}"


def engine_flags(config: Any) -> list[str]:
    """worker.config as engine flags (reading MB10)."""
    flags: list[str] = []
    for key in sorted(config or {}):
        value = config[key]
        flags.append("--" + key.replace("_", "-"))
        if value is None or value == "":
            continue
        if isinstance(value, bool):
            flags.append("true" if value else "false")
        elif isinstance(value, str):
            flags.append(value)
        elif isinstance(value, (dict, list)):
            flags.append(json.dumps(value, separators=(",", ":"), sort_keys=True))
        else:
            flags.append(json.dumps(value))
    return flags


def devices(worker: ModelWorker) -> int:
    """The accelerators a worker's Pod asks for (its limits of :data:`DEVICES`), upstream's --num-gpus."""
    limits = (worker.resources or {}).get("limits") or {}
    total = 0
    for resource in DEVICES:
        if resource in limits:
            try:
                total += int(parse(limits[resource]))
            except QuantityError:
                continue
    return total


def _mount(backend: ModelBackend) -> str:
    return cache_mount(backend.cache_uri) or EMPTY_CACHE_MOUNT


def _cache_volume(backend: ModelBackend) -> dict[str, Any]:
    volume: dict[str, Any] = {"name": f"{backend.name}-weights"}
    cache = backend.cache_uri
    if cache and cache.startswith(PVC):
        volume["persistentVolumeClaim"] = {"claimName": claim_name(cache)}
    elif cache and cache.startswith(HOSTPATH):
        volume["hostPath"] = {"path": _mount(backend), "type": "DirectoryOrCreate"}
    else:
        volume["emptyDir"] = {}
    return volume


def _env(backend: ModelBackend) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if faults.active("booster-env-dropped"):
        return out
    if backend.env:
        out["env"] = [dict(e) for e in backend.env]
    if backend.env_from and not faults.active("booster-env-from-dropped"):
        out["envFrom"] = [dict(e) for e in backend.env_from]
    return out


def _pod(
    backend: ModelBackend, worker: ModelWorker, command: list[str], labels: dict[str, str], *, cache: bool = True
) -> dict[str, Any]:
    """A Pod template of ``worker``; ``cache`` False (self-validation only) leaves the cache volume out."""
    volume = _cache_volume(backend)
    cache_mount_ = {"name": volume["name"], "mountPath": _mount(backend)}
    downloader = {
        "name": DOWNLOADER,
        "image": DOWNLOADER_IMAGE,
        "args": ["--source", backend.model_uri, "--output-dir", model_dir(backend)]
        if not faults.active("booster-downloader-without-uri")
        else ["--output-dir", model_dir(backend)],
        **_env(backend),
        "volumeMounts": [dict(cache_mount_)],
    }
    image = "registry.example/engine:wrong" if faults.active("booster-worker-image-ignored") else worker.image
    engine: dict[str, Any] = {"name": ENGINE, "image": image, "command": command, **_env(backend)}
    dropped = faults.active("booster-worker-scheduling-dropped")
    if worker.resources and not dropped:
        engine["resources"] = json.loads(json.dumps(worker.resources))
    engine["volumeMounts"] = [dict(cache_mount_), {"name": SHM, "mountPath": SHM_MOUNT}]
    spec: dict[str, Any] = {
        "initContainers": [downloader],
        "containers": [engine],
        "volumes": [volume, {"name": SHM, "emptyDir": {"medium": "Memory"}}],
    }
    if not cache:
        downloader["volumeMounts"] = []
        engine["volumeMounts"] = engine["volumeMounts"][1:]
        spec["volumes"] = spec["volumes"][1:]
    if backend.runtime_class_name and not faults.active("booster-runtime-class-dropped"):
        spec["runtimeClassName"] = backend.runtime_class_name
    if worker.affinity and not dropped:
        spec["affinity"] = json.loads(json.dumps(worker.affinity))
    if worker.tolerations and not dropped:
        spec["tolerations"] = json.loads(json.dumps(worker.tolerations))
    return {"metadata": {"labels": dict(labels)}, "spec": spec}


def _role(name: str, worker: ModelWorker, backend: ModelBackend, labels: dict[str, str]) -> dict[str, Any]:
    pods = max(worker.pods or 1, 1)
    serve = [*VLLM_SERVER, "--model", model_dir(backend), *engine_flags(worker.config)]
    if pods > 1:
        head = f"chmod u+x {MULTI_NODE_SCRIPT} && {MULTI_NODE_SCRIPT} leader --ray_cluster_size={pods} "
        head += f"--num-gpus={devices(worker)}"
        entry = ["bash", "-c", f"{head} && {shlex.join([*serve, '--distributed_executor_backend', 'ray'])}"]
    else:
        entry = serve
    role: dict[str, Any] = {"name": name}
    if worker.replicas is not None:
        role["replicas"] = worker.replicas
    role["entryTemplate"] = _pod(backend, worker, entry, labels)
    role["workerReplicas"] = pods - 1
    if pods > 1 and faults.active("booster-no-worker-template"):
        role["workerReplicas"] = 0
    elif pods > 1 or faults.active("booster-worker-template-always"):
        join = f"chmod u+x {MULTI_NODE_SCRIPT} && {MULTI_NODE_SCRIPT} worker --ray_address=$(ENTRY_ADDRESS)"
        role["workerTemplate"] = _pod(backend, worker, ["bash", "-c", join], labels, cache=not faults.active(
            "booster-cache-entry-only"))  # fmt: skip
    return role
