"""ModelBooster: one child ModelServing, and what its Pods carry of the booster.

A booster of one vLLM backend with one server worker of ``pods: 2`` (replicas 1): its child must
run 2 Pods, each with the worker's image, the backend's env, the downloader given the modelURI,
the backend's scheduler and, where asked, its runtime class (docs/converter-readings.md C1-C8).
"""

from __future__ import annotations

import secrets
from typing import Any

from conformance.framework.catalog import behaviour
from conformance.framework.features import Feature
from conformance.framework.modelserving import ModelServings

from . import BACKEND, BOOSTER, ENV, IMAGE, MODEL_URI, SCHEDULER, WORKER, booster, downloaders, engines, pod_count
from .children import Sources, children, plain, wait_child


def start(ms: ModelServings, body: dict[str, Any], *, ready: bool = True) -> tuple[dict[str, Any], list[Any]]:
    """Create the booster; its one child and the child's Pods (Running and Ready unless ``ready`` is
    False)."""
    boosters = Sources(ms, BOOSTER)
    boosters.create(body)
    child = wait_child(ms, boosters, body["metadata"]["name"])
    pods = ms.wait_pods(child["metadata"]["name"], pod_count(body), ready=ready)
    return child, pods


def pod_specs(ms: ModelServings, pods: list[Any]) -> dict[str, dict[str, Any]]:
    """Each Pod's spec (JSON), every init container's env extended with the values it is given through
    a ConfigMap or Secret of the namespace (``valueFrom``, ``envFrom`` or a mounted volume): how a
    downloader is given the modelURI is the implementation's (issue 31)."""
    cache: dict[tuple[str, str], list[str]] = {}
    return {p.metadata.name: with_referenced_values(ms, plain(ms, p)["spec"], cache) for p in pods}


def _values(ms: ModelServings, kind: str, name: str, cache: dict[tuple[str, str], list[str]]) -> list[str]:
    """The data values of ConfigMap or Secret ``name`` in the test namespace ([] when it cannot be read)."""
    import base64

    from kubernetes.client.exceptions import ApiException

    if (kind, name) not in cache:
        try:
            if kind == "configMap":
                obj = ms.kube.core.read_namespaced_config_map(name, ms.ns)
                cache[(kind, name)] = [str(v) for v in (obj.data or {}).values()]
            else:
                obj = ms.kube.core.read_namespaced_secret(name, ms.ns)
                decoded = [base64.b64decode(v).decode(errors="replace") for v in (obj.data or {}).values()]
                cache[(kind, name)] = decoded
        except ApiException:
            cache[(kind, name)] = []
    return cache[(kind, name)]


def with_referenced_values(
    ms: ModelServings, spec: dict[str, Any], cache: dict[tuple[str, str], list[str]]
) -> dict[str, Any]:
    """``spec`` with, for every init container, the values of the ConfigMaps and Secrets it references
    (env ``valueFrom``, ``envFrom``, mounted ``configMap``/``secret`` volumes) added as env entries."""
    volumes = {v.get("name"): v for v in spec.get("volumes") or []}
    for container in spec.get("initContainers") or []:
        refs: list[tuple[str, str]] = []
        for entry in container.get("env") or []:
            source = entry.get("valueFrom") or {}
            for key, kind in (("configMapKeyRef", "configMap"), ("secretKeyRef", "secret")):
                if (source.get(key) or {}).get("name"):
                    refs.append((kind, source[key]["name"]))
        for entry in container.get("envFrom") or []:
            for key, kind in (("configMapRef", "configMap"), ("secretRef", "secret")):
                if (entry.get(key) or {}).get("name"):
                    refs.append((kind, entry[key]["name"]))
        for mount in container.get("volumeMounts") or []:
            volume = volumes.get(mount.get("name")) or {}
            if (volume.get("configMap") or {}).get("name"):
                refs.append(("configMap", volume["configMap"]["name"]))
            if (volume.get("secret") or {}).get("secretName"):
                refs.append(("secret", volume["secret"]["secretName"]))
        extra = [{"name": f"referenced-{i}", "value": value} for i, value in
                 enumerate(v for kind, name in refs for v in _values(ms, kind, name, cache))]  # fmt: skip
        if extra:
            container["env"] = [*(container.get("env") or []), *extra]
    return spec


@behaviour(
    "modelbooster/convert/one-child",
    "A valid ModelBooster MUST get exactly one ModelServing with a controller ownerReference to it, whose Pods are as "
    "many as its backend asks for (replicas x worker replicas x pods) and reach Running and Ready.",
    BACKEND,
    Feature.MODEL_BOOSTER,
)
def test_a_booster_gets_exactly_one_child(ms: ModelServings) -> None:
    body = booster("mb-one")
    child, _ = start(ms, body)
    uid = str(Sources(ms, BOOSTER).get("mb-one")["metadata"]["uid"])
    name, child_uid = child["metadata"]["name"], child["metadata"]["uid"]
    ms.holds(
        f"exactly one ModelServing ({name}, uid {child_uid}) controlled by ModelBooster {ms.ns}/mb-one",
        lambda: children(ms, uid),
        lambda found: [o["metadata"]["uid"] for o in found] == [child_uid],
    )


@behaviour(
    "modelbooster/convert/worker-image",
    "Every Pod of a ModelBooster's child, entry and worker, MUST run a container with the worker's image.",
    WORKER,
    Feature.MODEL_BOOSTER,
)
def test_every_pod_runs_the_worker_image(ms: ModelServings) -> None:
    _, pods = start(ms, booster("mb-image"))
    missing = {n: [c.get("image") for c in s["containers"]] for n, s in pod_specs(ms, pods).items() if not engines(s)}
    assert not missing, (
        f"Pods of the child run no container with the worker's image {IMAGE} (the images they run: {missing}); "
        "ModelWorker.image is the container image for the worker"
    )


@behaviour(
    "modelbooster/convert/backend-env",
    "In every Pod of a ModelBooster's child, the container running the worker's image MUST carry every variable of "
    "the backend's env with its value.",
    BACKEND,
    Feature.MODEL_BOOSTER,
)
def test_the_engine_carries_the_backend_env(ms: ModelServings) -> None:
    _, pods = start(ms, booster("mb-env"))
    wrong = {}
    for name, spec in pod_specs(ms, pods).items():
        for c in engines(spec):
            env = {e["name"]: e.get("value") for e in c.get("env") or []}
            if any(env.get(k) != v for k, v in ENV.items()):
                wrong[f"{name}/{c['name']}"] = {k: env.get(k) for k in ENV}
    assert not wrong, f"the backend's env {ENV} is not set in the container running {IMAGE}: seen {wrong}"


@behaviour(
    "modelbooster/convert/downloader-model-uri",
    "Every Pod of a ModelBooster's child MUST have an init container (the downloader) that is given the backend's "
    "modelURI.",
    BACKEND,
    Feature.MODEL_BOOSTER,
)
def test_every_pod_has_a_downloader_given_the_model_uri(ms: ModelServings) -> None:
    _, pods = start(ms, booster("mb-model"))
    missing = {
        n: [c.get("name") for c in s.get("initContainers") or []]
        for n, s in pod_specs(ms, pods).items() if not downloaders(s)
    }  # fmt: skip
    assert not missing, (
        f"Pods with no init container given the modelURI {MODEL_URI} in its command, args or env, or through a "
        f"ConfigMap or Secret it reads (their init "
        f"containers: {missing}); the spec: the model is fetched by the downloader init container"
    )


@behaviour(
    "modelbooster/convert/scheduler-name",
    "The backend's schedulerName MUST be the child ModelServing's spec.schedulerName and the scheduler of its Pods.",
    BACKEND,
    Feature.MODEL_BOOSTER,
)
def test_the_scheduler_name_reaches_the_child_and_its_pods(ms: ModelServings) -> None:
    child, pods = start(ms, booster("mb-scheduler"), ready=False)
    seen = child["spec"].get("schedulerName")
    assert seen == SCHEDULER, (
        f"the child {child['metadata']['name']} has spec.schedulerName {seen!r}, not the backend's {SCHEDULER!r} "
        "(ModelBackend.schedulerName: the scheduler used by ModelServing for this backend)"
    )
    wrong = {p.metadata.name: p.spec.scheduler_name for p in pods if p.spec.scheduler_name != SCHEDULER}
    assert not wrong, f"Pods of the child name another scheduler than {SCHEDULER}: {wrong}"


@behaviour(
    "modelbooster/convert/runtime-class",
    "Every Pod of a ModelBooster's child SHOULD run with the backend's runtimeClassName.",
    BACKEND,
    Feature.MODEL_BOOSTER,
)
def test_the_runtime_class_reaches_every_pod(ms: ModelServings) -> None:
    """The RuntimeClass (handler runc) is created by the test, cluster-scoped under a fresh name, and
    deleted after it: Pods naming a RuntimeClass that does not exist are not admitted."""
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    node = client.NodeV1Api(ms.kube.api)
    runtime_class = f"kc-{secrets.token_hex(4)}"
    node.create_runtime_class(client.V1RuntimeClass(metadata=client.V1ObjectMeta(name=runtime_class), handler="runc"))
    try:
        _, pods = start(ms, booster("mb-runtime", runtime_class=runtime_class), ready=False)
        wrong = {p.metadata.name: p.spec.runtime_class_name for p in pods if p.spec.runtime_class_name != runtime_class}
        assert not wrong, (
            f"Pods of the child do not run with the backend's runtimeClassName {runtime_class}: {wrong} (the spec: "
            "the RuntimeClass should be used to run pods generated for this backend)"
        )
    finally:
        try:
            node.delete_runtime_class(runtime_class)
        except ApiException as exc:
            if exc.status != 404:
                raise


# What a worker asks of its Pods' scheduling (ModelWorker resources, affinity, tolerations): a preferred affinity
# and an Exists toleration, so the Pods schedule on any node.
RESOURCES = {"requests": {"cpu": "100m", "memory": "64Mi"}}
AFFINITY = {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
    {"weight": 1, "preference": {"matchExpressions": [
        {"key": "conformance.kthena.io/preferred", "operator": "In", "values": ["yes"]}]}}]}}  # fmt: skip
TOLERATION = {"key": "conformance.kthena.io/tainted", "operator": "Exists", "effect": "NoSchedule"}
ENV_FROM = {"configMapRef": {"name": "conformance-absent", "optional": True}}


def contains(seen: Any, want: Any) -> bool:
    """``seen`` carries ``want``: every key of a map (recursively), every entry of a list (somewhere in
    ``seen``'s list), equal scalars. The Pods may add scheduling rules of their own to the worker's
    (issue 31): the test's affinity is a preferred term, which an added term does not loosen. Pure."""
    if isinstance(want, dict):
        return isinstance(seen, dict) and all(k in seen and contains(seen[k], v) for k, v in want.items())
    if isinstance(want, list):
        return isinstance(seen, list) and all(any(contains(s, w) for s in seen) for w in want)
    return bool(seen == want)


@behaviour(
    "modelbooster/convert/worker-scheduling",
    "Every Pod of a ModelBooster's child MUST carry its worker's resources (on the container running the worker's "
    "image), affinity and tolerations.",
    WORKER,
    Feature.MODEL_BOOSTER,
)
def test_every_pod_carries_the_worker_resources_affinity_and_tolerations(ms: ModelServings) -> None:
    body = booster("mb-sched")
    body["spec"]["backend"]["workers"][0].update(resources=RESOURCES, affinity=AFFINITY, tolerations=[TOLERATION])
    _, pods = start(ms, body, ready=False)
    wrong: dict[str, list[str]] = {}
    for name, spec in pod_specs(ms, pods).items():
        problems = []
        requests = [(c.get("resources") or {}).get("requests") or {} for c in engines(spec)]
        if not requests or any({k: r.get(k) for k in RESOURCES["requests"]} != RESOURCES["requests"] for r in requests):
            problems.append(f"resources.requests {requests} (want {RESOURCES['requests']})")
        if not contains(spec.get("affinity"), AFFINITY):
            problems.append(f"affinity {spec.get('affinity')}")
        if TOLERATION not in (spec.get("tolerations") or []):
            problems.append(f"tolerations {spec.get('tolerations')}")
        if problems:
            wrong[name] = problems
    assert not wrong, (
        f"Pods of the child do not carry the worker's resources {RESOURCES}, affinity and toleration {TOLERATION} "
        f"(ModelWorker: the resource requirements and the scheduling rules of the worker pods): {wrong}"
    )


@behaviour(
    "modelbooster/convert/backend-env-from",
    "In every Pod of a ModelBooster's child, the container running the worker's image MUST carry the backend's "
    "envFrom sources.",
    BACKEND,
    Feature.MODEL_BOOSTER,
)
def test_the_engine_carries_the_backend_env_from(ms: ModelServings) -> None:
    body = booster("mb-envfrom")
    body["spec"]["backend"]["envFrom"] = [ENV_FROM]
    _, pods = start(ms, body, ready=False)
    wrong = {
        f"{name}/{c['name']}": c.get("envFrom")
        for name, spec in pod_specs(ms, pods).items() for c in engines(spec) if ENV_FROM not in (c.get("envFrom") or [])
    }  # fmt: skip
    assert not wrong, f"the backend's envFrom {ENV_FROM} is not on the container running {IMAGE}: seen {wrong}"
