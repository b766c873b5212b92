"""Pods against their templates: what a Pod carries over from entryTemplate / workerTemplate.

Why it exists: the API reference says a PodTemplateSpec "describes the data a pod should have when
created from a template", and names spec.schedulerName "the name of the scheduler used by
ModelServing". The tests compare created Pods with their templates field by field; they never need
the Pods to run (only their specs are read). What an implementation may add (its own labels,
annotations, environment variables such as upstream's GROUP_SIZE, containers a plugin or an
admission controller injects) is allowed: the template's entries must be there, unchanged and in the
template's order. Which Pod is the entry and which a worker is read from the suite's own labels.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from conformance.framework.catalog import behaviour
from conformance.framework.features import Feature
from conformance.framework.modelserving import MEMBER_LABEL, ModelServings, expected_pod_count

API = "api-reference-workload-v1alpha1.txt"


def _quantity(value: object) -> Decimal:
    from kubernetes.utils.quantity import parse_quantity

    return Decimal(parse_quantity(value))  # type: ignore[no-untyped-call]


def _in_order(wanted: list[str], seen: list[str]) -> bool:
    """``wanted`` appears in ``seen`` as a subsequence (same relative order, others may be between)."""
    it = iter(seen)
    return all(any(w == s for s in it) for w in wanted)


def _container_problems(kind: str, template: list[dict[str, Any]], pod: list[dict[str, Any]]) -> list[str]:
    names = [c["name"] for c in template]
    seen_names = [c.get("name") for c in pod]
    if not _in_order(names, [str(n) for n in seen_names]):
        return [f"{kind}: expected the template's {names} in this order; the Pod has {seen_names}"]
    problems: list[str] = []
    by_name = {c.get("name"): c for c in pod}
    for want in template:
        have = by_name[want["name"]]
        where = f"{kind}[{want['name']}]"
        for field in ("image", "command", "args", "ports"):
            if field in want and have.get(field) != want[field]:
                problems.append(f"{where}.{field}: expected {want[field]!r}, seen {have.get(field)!r}")
        wanted_mounts = want.get("volumeMounts") or []
        mounted = {m["name"] for m in wanted_mounts}
        mounts = [m for m in have.get("volumeMounts") or [] if m.get("name") in mounted]
        if [_volume_mount(m) for m in mounts] != [_volume_mount(m) for m in wanted_mounts]:
            problems.append(
                f"{where}.volumeMounts: expected the template's {want.get('volumeMounts')} in this order (others may "
                f"be added); the Pod's mounts of those volumes are {mounts}"
            )
        env = [(e["name"], e.get("value")) for e in want.get("env") or []]
        names_wanted = {n for n, _ in env}
        carried = [(e.get("name"), e.get("value")) for e in have.get("env") or [] if e.get("name") in names_wanted]
        if carried != env:
            problems.append(
                f"{where}.env: expected the template's entries {env} in this order (others may be added); the "
                f"Pod's entries of those names are {carried}"
            )
        for part in ("requests", "limits"):
            wanted = (want.get("resources") or {}).get(part) or {}
            got = (have.get("resources") or {}).get(part) or {}
            for resource, quantity in wanted.items():
                if resource not in got or _quantity(got[resource]) != _quantity(quantity):
                    problems.append(
                        f"{where}.resources.{part}[{resource}]: expected {quantity!r}, seen {got.get(resource)!r}"
                    )
    return problems


def _volume_mount(mount: dict[str, Any]) -> tuple[Any, ...]:
    return (mount.get("name"), mount.get("mountPath"), bool(mount.get("readOnly")), mount.get("subPath") or "")


def _pod_problems(template: dict[str, Any], pod: dict[str, Any]) -> list[str]:
    problems: list[str] = []
    meta, want_meta = pod.get("metadata") or {}, template.get("metadata") or {}
    for field in ("labels", "annotations"):
        have = meta.get(field) or {}
        missing = {k: v for k, v in (want_meta.get(field) or {}).items() if have.get(k) != v}
        if missing:
            problems.append(f"metadata.{field}: the template's {missing} are missing or changed (seen {have})")
    for kind in ("initContainers", "containers"):
        problems += _container_problems(kind, template["spec"].get(kind) or [], pod["spec"].get(kind) or [])
    volumes = {v.get("name"): v for v in pod["spec"].get("volumes") or []}
    for volume in template["spec"].get("volumes") or []:
        have = volumes.get(volume["name"])
        if have is None or _volume_source(have) != _volume_source(volume):
            problems.append(f"volumes[{volume['name']}]: expected {volume}, seen {have}")
    return problems


def _volume_source(volume: dict[str, Any]) -> dict[str, Any]:
    """A volume's source with quantities compared by value (``sizeLimit``)."""
    return {
        key: {k: (_quantity(v) if k == "sizeLimit" else v) for k, v in value.items()}
        if isinstance(value, dict)
        else value
        for key, value in volume.items()
    }


@behaviour(
    "core/pods/template-carried",
    "Every entry Pod MUST be created from its Role's entryTemplate and every worker Pod from its workerTemplate, "
    "with the template's labels, annotations and volumes and its containers and init containers in the template's "
    "order, each with the template's image, command, args, ports, volume mounts, resources (extended resources "
    "included) and environment variables (in the template's order).",
    f"{API}#PodTemplateSpec",
    Feature.CORE,
)
def test_pods_carry_their_templates(ms: ModelServings, manifest: Any, kube: Any) -> None:
    body = manifest("core-pod-template")
    ms.create(body)
    pods = ms.wait_pods("template", expected_pod_count(body), ready=False, wait="pods-created")
    role = body["spec"]["template"]["roles"][0]
    templates = {"entry": role["entryTemplate"], "worker": role["workerTemplate"]}
    problems: dict[str, list[str]] = {}
    for pod in pods:
        raw: dict[str, Any] = kube.api.sanitize_for_serialization(pod)
        kind = (raw["metadata"].get("labels") or {}).get(MEMBER_LABEL)
        if kind not in templates:
            problems[pod.metadata.name] = [f"carries no {MEMBER_LABEL} label of entryTemplate or workerTemplate"]
            continue
        found = _pod_problems(templates[kind], raw)
        if found:
            problems[f"{pod.metadata.name} ({kind})"] = found
    assert not problems, f"Pods differ from the templates they were created from: {problems}"


@behaviour(
    "core/pods/scheduler-name",
    "Every Pod MUST get spec.schedulerName from the ModelServing's spec.schedulerName, also when its template names "
    "another scheduler, and volcano when the ModelServing omits spec.schedulerName.",
    f"{API}#ModelServingSpec",
    Feature.CORE,
)
def test_pods_use_the_modelservings_scheduler(ms: ModelServings, manifest: Any) -> None:
    # Spec reading 25: the ModelServing's schedulerName wins over a template's. The schedulers named
    # here need not exist: the Pods are only read, not run.
    named = manifest("core-small")
    named["metadata"]["name"] = "named"
    named["spec"]["schedulerName"] = "conformance-elsewhere"
    role = named["spec"]["template"]["roles"][0]
    role["entryTemplate"]["spec"]["schedulerName"] = "template-scheduler"
    role["workerTemplate"]["spec"]["schedulerName"] = "template-scheduler"
    omitted = manifest("core-small")
    omitted["metadata"]["name"] = "omitted"
    del omitted["spec"]["schedulerName"]
    ms.create(named)
    ms.create(omitted)
    cases = {"named": "conformance-elsewhere", "omitted": "volcano"}
    seen: dict[str, dict[str, str]] = {}
    for name, body in (("named", named), ("omitted", omitted)):
        pods = ms.wait_pods(name, expected_pod_count(body), ready=False, wait="pods-created")
        seen[name] = {p.metadata.name: p.spec.scheduler_name for p in pods}
    wrong = {
        name: {pod: scheduler for pod, scheduler in pods.items() if scheduler != cases[name]}
        for name, pods in seen.items()
    }
    assert not any(wrong.values()), (
        "expected every Pod's spec.schedulerName to be its ModelServing's (conformance-elsewhere for 'named', whose "
        f"templates name template-scheduler) and volcano for 'omitted' (schedulerName not set); wrong: {wrong}"
    )
