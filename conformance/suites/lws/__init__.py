"""LWSConversion: a LeaderWorkerSet (``leaderworkerset.x-k8s.io/v1``) converted into a ModelServing.

The spec says only what the converter does with the headless-service plugin
(plugin-framework-and-headless-service.txt, "Upgrade and migration"): it declares headless-service
on new children, keeps the declaration stable as worker counts change, and "keeps its worker
template at size 1, so its single-Pod Role still receives the two Services and generated DNS
settings". Everything else about the child is the implementation's and is read, never assumed:
the child is the ModelServing in the namespace whose ``metadata.ownerReferences`` hold a controller
reference to the LeaderWorkerSet's uid (:mod:`conformance.suites.modelbooster.children`); which
Pod is the leader (the Role's entry) is told by its image, the leaderTemplate's
(:data:`LEADER_IMAGE`), not by a label or a name (reading C16). The Services and DNS fields are
checked with the HeadlessServiceDNS suite's helpers.

Only the LeaderWorkerSet CRD is needed, never the LWS controller. Without the CRD
(``leaderworkersets.leaderworkerset.x-k8s.io``) every test is inconclusive with that reason; the
preflight says so too, and no other profile is affected.
"""

from __future__ import annotations

from typing import Any

from conformance.suites.modelbooster.children import Kind

CONVERTERS = "plugin-framework-and-headless-service.txt#Upgrade and migration"

LWS = Kind(
    group="leaderworkerset.x-k8s.io",
    version="v1",
    plural="leaderworkersets",
    kind="LeaderWorkerSet",
    crd="leaderworkersets.leaderworkerset.x-k8s.io",
    profile="LWSConversion",
)

LEADER_IMAGE = "registry.example/conformance/lws-leader:v1"
WORKER_IMAGE = "registry.example/conformance/lws-worker:v1"
SCHEDULER = "default-scheduler"


def _template(image: str) -> dict[str, Any]:
    return {"spec": {"schedulerName": SCHEDULER, "containers": [{"name": "engine", "image": image}]}}


def leader_worker_set(name: str, size: int, *, replicas: int = 1) -> dict[str, Any]:
    """A LeaderWorkerSet ``name`` of ``replicas`` groups of ``size`` Pods: the leader runs
    :data:`LEADER_IMAGE`, the workers :data:`WORKER_IMAGE`, every Pod on ``default-scheduler``."""
    return {
        "apiVersion": LWS.api_version,
        "kind": LWS.kind,
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "leaderWorkerTemplate": {
                "size": size,
                "leaderTemplate": _template(LEADER_IMAGE),
                "workerTemplate": _template(WORKER_IMAGE),
            },
        },
    }


def images(pod: Any) -> set[str]:
    return {str(c.image) for c in pod.spec.containers}


def leaders(pods: list[Any]) -> list[Any]:
    return [p for p in pods if LEADER_IMAGE in images(p)]


def followers(pods: list[Any]) -> list[Any]:
    return [p for p in pods if WORKER_IMAGE in images(p) and LEADER_IMAGE not in images(p)]
