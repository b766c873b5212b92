"""Pod templates the Pod API accepts with repeated list keys.

Why it exists: a Role's entryTemplate and workerTemplate are PodTemplateSpecs (API reference, Role),
so a template kube-apiserver accepts for a Pod must be accepted in a ModelServing. Kubernetes marks
some PodSpec lists as list-maps (for server-side apply) without requiring their keys unique for a
Pod: two ``hostAliases`` entries for one IP (``/etc/hosts`` gets both lines), two ``env`` entries of
one name, two ``ports`` of one containerPort and protocol, one ``imagePullSecrets`` name twice are
valid Pods (kube-apiserver v1.36 accepts them, at most with a warning). A CRD schema embedding the
PodSpec with those list-maps enforces their keys and refuses such templates; upstream's end-to-end
tests caught exactly that for hostAliases in the reference, and refusing those is non-conformant.
``env``, ``ports`` and ``imagePullSecrets`` are different (issue 31): ``corev1.PodSpec`` declares
them map- or set-typed lists, so any CRD generated from it refuses repeats, and the spec says
nothing about them. Both readings are fair: refusing the template, or accepting it and carrying
every entry in order (a MAY; only accepting it and then dropping entries is a warning).
"""

from __future__ import annotations

import copy
from typing import Any

from conformance.framework.catalog import behaviour
from conformance.framework.features import Feature
from conformance.framework.modelserving import ModelServings, container_of, expected_pod_count, member

API = "api-reference-workload-v1alpha1.txt"
NAME = "small"
ALIASES = [
    {"ip": "10.0.0.10", "hostnames": ["model-a.example"]},
    {"ip": "10.0.0.10", "hostnames": ["model-b.example"]},
]
ENV = [{"name": "MODEL_OPTS", "value": "--first"}, {"name": "MODEL_OPTS", "value": "--second"}]
PORTS = [{"containerPort": 8000, "name": "http"}, {"containerPort": 8000, "name": "metrics"}]
PULL_SECRETS = [{"name": "registry"}, {"name": "registry"}]


def _create(ms: ModelServings, body: dict[str, Any], what: str) -> list[Any]:
    """Create ``body`` (it must be accepted); its Pods, not necessarily Ready."""
    rejection = ms.try_create(body)
    assert rejection is None, (
        f"expected a ModelServing whose Pod templates have {what} to be accepted (kube-apiserver accepts such a "
        f"Pod); refused with HTTP {rejection.status}: {rejection.message}"
    )
    return ms.wait_pods(NAME, expected_pod_count(body), ready=False)


def _templates(body: dict[str, Any]) -> list[dict[str, Any]]:
    role = body["spec"]["template"]["roles"][0]
    return [role[kind]["spec"] for kind in ("entryTemplate", "workerTemplate")]


@behaviour(
    "core/pods/host-aliases-one-ip",
    "A ModelServing whose Pod templates have two hostAliases entries for one IP MUST be accepted and its Pods MUST "
    "carry both entries.",
    f"{API}#Role",
    Feature.CORE,
)
def test_two_host_aliases_for_one_ip(ms: ModelServings, manifest: Any) -> None:
    body = manifest("core-small")
    for spec in _templates(body):
        spec["hostAliases"] = copy.deepcopy(ALIASES)
    pods = _create(ms, body, "two hostAliases entries for IP 10.0.0.10")
    want = [(a["ip"], a["hostnames"]) for a in ALIASES]
    wrong = {
        f"{p.metadata.name} ({member(p)})": seen
        for p in pods
        if (seen := [(a.ip, a.hostnames) for a in p.spec.host_aliases or []]) != want
    }
    assert not wrong, f"expected every Pod to carry the template's hostAliases {want}; these carry others: {wrong}"


@behaviour(
    "core/pods/repeated-list-keys",
    "A ModelServing whose Pod templates have two env entries of one name, two ports of one containerPort and "
    "protocol, and one imagePullSecrets name twice MAY be refused at admission, and when accepted its Pods carry "
    "every entry in order.",
    f"{API}#Role",
    Feature.CORE,
)
def test_repeated_env_ports_and_pull_secrets(ms: ModelServings, manifest: Any) -> None:
    body = manifest("core-small")
    for spec in _templates(body):
        spec["imagePullSecrets"] = copy.deepcopy(PULL_SECRETS)
        spec["containers"][0].update(env=copy.deepcopy(ENV), ports=copy.deepcopy(PORTS))
    if ms.try_create(body) is not None:
        return  # refused: the reading of a CRD generated from corev1.PodSpec (map- and set-typed lists)
    pods = ms.wait_pods(NAME, expected_pod_count(body), ready=False)
    want = {
        "env": [(e["name"], e["value"]) for e in ENV],
        "ports": [(p["name"], p["containerPort"], "TCP") for p in PORTS],
        "imagePullSecrets": [s["name"] for s in PULL_SECRETS],
    }
    wrong: dict[str, dict[str, Any]] = {}
    for pod in pods:
        container = container_of(pod)
        seen = {  # entries an implementation adds of its own are left out: the template's, in order, must be there
            "env": [(e.name, e.value) for e in container.env or [] if e.name == "MODEL_OPTS"],
            "ports": [
                (p.name, p.container_port, p.protocol) for p in container.ports or [] if p.container_port == 8000
            ],
            "imagePullSecrets": [s.name for s in pod.spec.image_pull_secrets or [] if s.name == "registry"],
        }
        if seen != want:
            wrong[f"{pod.metadata.name} ({member(pod)})"] = seen
    assert not wrong, f"expected every Pod to carry the template's entries {want}; these carry others: {wrong}"
