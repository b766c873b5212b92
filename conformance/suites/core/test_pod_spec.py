"""Pod templates with a wide PodSpec: accepted, and carried to the Pods as kube-apiserver keeps them.

Why it exists: a Role's entryTemplate and workerTemplate are PodTemplateSpecs whose ``spec`` is a
PodSpec, "specification of the desired behavior of the pod" (API reference, PodTemplateSpec), so
any PodSpec kube-apiserver accepts for a Pod must be accepted in a template and reach the Pods
unchanged. A CRD embedding an outdated or trimmed PodSpec schema breaks this silently: kube-apiserver
prunes the fields the schema lacks from the stored template, and the Pods lose them. The test uses a
PodSpec touching most of the API (affinity and anti-affinity, tolerations, topology spread, volumes of
seven kinds with mounts and a block device, security contexts, DNS, init and sidecar containers,
probes of each kind, lifecycle hooks, env from fields, resources, Secrets and ConfigMaps, pod-level
and ephemeral-storage resources, container restart rules).

Each created Pod is compared with a Pod kube-apiserver builds from the same PodSpec and labels in a
server-side dry run, so its own defaulting (probe thresholds, default tolerations, selectors merged
from ``matchLabelKeys``) is the expectation, not a guess. What an implementation may add is allowed:
top-level fields the template leaves unset (a scheduler's nodeName, a plugin's hostname), and entries
of the named lists below (environment variables such as upstream's GROUP_SIZE, mounts, tolerations,
containers an admission controller injects); the template's entries must be there unchanged, in order.
No plugin is configured, so no plugin mutation is expected. The Pods need not run: a claim they
reference does not exist, so they may stay Pending; only their specs are read.
"""

from __future__ import annotations

import copy
import json
from typing import Any

from kubernetes.client.exceptions import ApiException

from conformance.framework.catalog import behaviour
from conformance.framework.features import Feature
from conformance.framework.modelserving import MEMBER_LABEL, ModelServings, expected_pod_count
from conformance.framework.outcomes import Inconclusive

API = "api-reference-workload-v1alpha1.txt"
NAME = "wide"
# Lists an implementation may add entries to (the template's must stay, unchanged and in order).
POD_LISTS = {"containers", "initContainers", "volumes", "tolerations", "hostAliases", "imagePullSecrets"}
CONTAINER_LISTS = {"env", "envFrom", "ports", "volumeMounts", "volumeDevices"}


def _in_order(wanted: list[Any], seen: list[Any]) -> bool:
    """``wanted`` appears in ``seen`` as a subsequence (same relative order, others may be between)."""
    it = iter(seen)
    return all(any(w == s for s in it) for w in wanted)


def _show(value: Any) -> str:
    return json.dumps(value, sort_keys=True)


def _container_problems(where: str, want: dict[str, Any], have: dict[str, Any]) -> list[str]:
    problems = []
    for key, value in want.items():
        seen = have.get(key)
        if key in CONTAINER_LISTS:
            if not isinstance(seen, list) or not _in_order(value, seen):
                problems.append(f"{where}.{key}: expected the entries {_show(value)} in this order, seen {_show(seen)}")
        elif seen != value:
            problems.append(f"{where}.{key}: expected {_show(value)}, seen {_show(seen)}")
    return problems


def _spec_problems(want: dict[str, Any], have: dict[str, Any]) -> list[str]:
    """How the Pod's spec ``have`` differs from the dry-run Pod's ``want`` (additions allowed)."""
    problems: list[str] = []
    for key, value in want.items():
        seen = have.get(key)
        if key in ("containers", "initContainers"):
            names = [c["name"] for c in value]
            by_name = {c.get("name"): c for c in seen or []}
            if not _in_order(names, [c.get("name") for c in seen or []]):
                problems.append(f"{key}: expected {names} in this order, seen {[c.get('name') for c in seen or []]}")
                continue
            for container in value:
                problems += _container_problems(f"{key}[{container['name']}]", container, by_name[container["name"]])
        elif key in POD_LISTS:
            if not isinstance(seen, list) or not _in_order(value, seen):
                problems.append(f"{key}: expected the entries {_show(value)} in this order, seen {_show(seen)}")
        elif seen != value:
            problems.append(f"{key}: expected {_show(value)}, seen {_show(seen)}")
    return problems


def _raw(response: Any) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(response.data)
    return data


@behaviour(
    "core/pods/wide-pod-spec",
    "A ModelServing whose Pod templates use a wide set of PodSpec fields kube-apiserver accepts for a Pod (affinity, "
    "anti-affinity, tolerations, topology spread, volumes of seven kinds, security contexts, DNS, init and sidecar "
    "containers, probes, lifecycle hooks, env from fields, pod-level and ephemeral-storage resources, container "
    "restart rules) MUST be accepted, and every Pod MUST carry each of those fields as kube-apiserver stores them "
    "for a Pod created directly from the same PodSpec.",
    f"{API}#PodTemplateSpec",
    Feature.CORE,
)
def test_wide_pod_spec_is_carried(ms: ModelServings, manifest: Any, kube: Any) -> None:
    body = manifest("core-wide-pod-spec")
    role = body["spec"]["template"]["roles"][0]
    templates = {
        role[kind]["metadata"]["labels"][MEMBER_LABEL]: role[kind] for kind in ("entryTemplate", "workerTemplate")
    }
    # kube-apiserver's own Pod from each template (defaults, admission), created as a dry run.
    expected: dict[str, dict[str, Any]] = {}
    for member_kind, template in templates.items():
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": f"dry-run-{member_kind}", "labels": copy.deepcopy(template["metadata"]["labels"])},
            "spec": {**copy.deepcopy(template["spec"]), "schedulerName": body["spec"]["schedulerName"]},
        }
        try:
            created = _raw(kube.core.create_namespaced_pod(ms.ns, pod, dry_run="All", _preload_content=False))
        except ApiException as exc:  # e.g. a kube-apiserver older than v1.36 or with a feature gate off
            raise Inconclusive(
                f"this cluster refuses the test's PodSpec for a Pod (dry run: HTTP {exc.status} {exc.body}); the "
                "behaviour needs a kube-apiserver that accepts it (v1.36 with its default feature gates)"
            ) from exc
        expected[member_kind] = created["spec"]
    rejection = ms.try_create(body)
    assert rejection is None, (
        "expected a ModelServing whose Pod templates use a PodSpec kube-apiserver accepts for a Pod (a server-side dry "
        f"run of that Pod was accepted) to be accepted; refused with HTTP {rejection.status}: {rejection.message}"
    )
    pods = ms.wait_pods(NAME, expected_pod_count(body), ready=False, wait="pods-created")
    problems: dict[str, list[str]] = {}
    for pod in pods:
        raw = _raw(kube.core.read_namespaced_pod(pod.metadata.name, ms.ns, _preload_content=False))
        kind = (raw["metadata"].get("labels") or {}).get(MEMBER_LABEL)
        if kind not in expected:
            problems[pod.metadata.name] = [f"carries no {MEMBER_LABEL} label of entryTemplate or workerTemplate"]
            continue
        found = _spec_problems(expected[kind], raw["spec"])
        if found:
            problems[f"{pod.metadata.name} ({kind})"] = found
    assert not problems, (
        "expected every Pod to carry its template's PodSpec as kube-apiserver stores it for a Pod created from that "
        f"PodSpec (entries an implementation adds are allowed); these differ: {problems}"
    )
