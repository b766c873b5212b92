"""The reference's converters on the embedded cluster: ModelBoosters and LeaderWorkerSets become
running ModelServings (kthena_ref/runtime/converters.py), with least privilege.

A ModelBooster becomes a ModelServing whose Pods carry what the booster said; a backend rename
replaces it; an LWS of size 1 and of size 3 become ModelServings with the plugin's DNS layout; a
size change keeps the plugin chain; an LWS the converter cannot express gets an Event and no
ModelServing. The LWS CRD is the real one, from the sigs.k8s.io/lws module.
"""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes.client.exceptions import ApiException

from conformance.framework.waits import wait_for

from . import modelservings

pytestmark = pytest.mark.cluster

GROUP, VERSION = modelservings.GROUP, modelservings.VERSION
LWS_GROUP, LWS_VERSION, LWS_PLURAL = "leaderworkerset.x-k8s.io", "v1", "leaderworkersets"
HEADLESS = ["headless-service"]


def plugins(ms: dict[str, Any]) -> list[str] | None:
    """The names of a ModelServing's plugins (None: no spec.plugins)."""
    declared = ms["spec"].get("plugins")
    return None if declared is None else [p["name"] for p in declared]


def booster(name: str, backend: str = "qwen", *, pods: int = 2) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "ModelBooster",
        "metadata": {"name": name},
        "spec": {
            "name": name,
            "backend": {
                "name": backend,
                "type": "vLLM",
                "modelURI": "hf://Qwen/Qwen2.5-0.5B",
                "replicas": 1,
                "schedulerName": "default-scheduler",
                "env": [{"name": "HF_ENDPOINT", "value": "https://hf.example"}],
                "workers": [{"type": "server", "image": "engine:v1", "replicas": 1, "pods": pods}],
            },
        },
    }


def lws(name: str, size: int, **spec: Any) -> dict[str, Any]:
    pod = {"spec": {"schedulerName": "default-scheduler", "containers": [{"name": "engine", "image": "engine:v1"}]}}
    return {
        "apiVersion": f"{LWS_GROUP}/{LWS_VERSION}",
        "kind": "LeaderWorkerSet",
        "metadata": {"name": name},
        "spec": {"replicas": 1, "leaderWorkerTemplate": {"size": size, "workerTemplate": pod}, **spec},
    }


class World(modelservings.World):
    def children(self, uid: str) -> list[dict[str, Any]]:
        items = self.custom.list_namespaced_custom_object(GROUP, VERSION, self.ns, modelservings.PLURAL)["items"]
        return [
            ms
            for ms in items
            if any(r.get("uid") == uid and r.get("controller") for r in ms["metadata"].get("ownerReferences") or [])
            and not ms["metadata"].get("deletionTimestamp")
        ]

    def child(self, uid: str, what: str, until: Any = lambda c: True, timeout: float = 60) -> dict[str, Any]:
        found = wait_for(what, lambda: self.children(uid), until=lambda cs: len(cs) == 1 and until(cs[0]),
                         timeout=timeout)  # fmt: skip
        return dict(found[0])

    def create_source(self, group: str, version: str, plural: str, body: dict[str, Any]) -> dict[str, Any]:
        return dict(self.custom.create_namespaced_custom_object(group, version, self.ns, plural, body))

    def patch_source(self, group: str, version: str, plural: str, name: str, body: dict[str, Any]) -> None:
        self.custom.patch_namespaced_custom_object(group, version, self.ns, plural, name, body,
                                                   _content_type="application/merge-patch+json")  # fmt: skip


@pytest.fixture
def world(api_client: Any, namespace: str, reference_controller: dict[str, Any]) -> World:
    return World(api_client, namespace)


@pytest.fixture(scope="session")
def lws_crd(api_client: Any) -> None:
    from conformance.cluster.lws import install_lws_crd

    install_lws_crd(api_client)


def test_a_model_booster_becomes_a_running_modelserving_carrying_what_it_said(world: World) -> None:
    made = world.create_source(GROUP, VERSION, "modelboosters", booster("qwen"))
    uid = made["metadata"]["uid"]
    child = world.child(uid, "the booster's child ModelServing")
    name = child["metadata"]["name"]
    assert plugins(child) == HEADLESS, "a new child declares headless-service"
    (role,) = child["spec"]["template"]["roles"]
    assert role["workerReplicas"] == 1 and "workerTemplate" in role
    pods = wait_for(f"{name}: 2 Pods Running", lambda: world.pods(name),
                    until=lambda ps: len(ps) == 2 and all(p.status.phase == "Running" for p in ps.values()))  # fmt: skip
    for pod in pods.values():
        engine = pod.spec.containers[0]
        assert engine.image == "engine:v1"
        assert {"name": "HF_ENDPOINT", "value": "https://hf.example"} in [
            {"name": e.name, "value": e.value} for e in engine.env or []
        ]
        assert any("hf://Qwen/Qwen2.5-0.5B" in " ".join(c.args or []) for c in pod.spec.init_containers or [])
        assert any(v.empty_dir is not None for v in pod.spec.volumes), "no cacheURI: an emptyDir in every Pod"
    wait_for("status.observedGeneration", lambda: world.custom.get_namespaced_custom_object(
        GROUP, VERSION, world.ns, "modelboosters", "qwen").get("status", {}),
        until=lambda s: s.get("observedGeneration") == made["metadata"]["generation"])  # fmt: skip

    world.patch_source(GROUP, VERSION, "modelboosters", "qwen", {"spec": {"backend": {"workers": [
        {"type": "server", "image": "engine:v1", "replicas": 1, "pods": 3}]}}})  # fmt: skip
    grown = world.child(uid, "the child with 2 workers", until=lambda c: c["spec"]["template"]["roles"][0].get(
        "workerReplicas") == 2)  # fmt: skip
    assert grown["metadata"]["uid"] == child["metadata"]["uid"] and plugins(grown) == HEADLESS

    world.patch_source(GROUP, VERSION, "modelboosters", "qwen", {"spec": {"backend": {"name": "qwen2"}}})
    renamed = world.child(uid, "a new child for the renamed backend", until=lambda c: c["metadata"]["name"] != name)
    assert plugins(renamed) == HEADLESS
    wait_for(f"the old child {name} gone", lambda: world.children(uid), until=lambda cs: [
        c["metadata"]["name"] for c in cs] == [renamed["metadata"]["name"]])  # fmt: skip


def test_a_single_pod_worker_gets_no_worker_template(world: World) -> None:
    made = world.create_source(GROUP, VERSION, "modelboosters", booster("solo", pods=1))
    (role,) = world.child(made["metadata"]["uid"], "the booster's child")["spec"]["template"]["roles"]
    assert "workerTemplate" not in role and role.get("workerReplicas", 0) == 0


def test_an_invalid_model_booster_is_refused_naming_the_field(world: World) -> None:
    bad = booster("bad")
    bad["spec"]["backend"]["workers"][0]["type"] = "prefill"  # a vLLM backend takes server workers
    with pytest.raises(ApiException) as refused:
        world.create_source(GROUP, VERSION, "modelboosters", bad)
    assert refused.value.status in (400, 422) and "workers" in str(refused.value.body)


@pytest.mark.parametrize("size", [1, 3])
def test_an_lws_becomes_a_modelserving_with_the_plugin_dns_layout(world: World, lws_crd: None, size: int) -> None:
    made = world.create_source(LWS_GROUP, LWS_VERSION, LWS_PLURAL, lws(f"lws{size}", size))
    child = world.child(made["metadata"]["uid"], f"the LWS's child (size {size})")
    name = child["metadata"]["name"]
    assert plugins(child) == HEADLESS
    (role,) = child["spec"]["template"]["roles"]
    assert role["workerReplicas"] == size - 1 and "workerTemplate" in role, "size 1 keeps its worker template"
    pods = wait_for(f"{name}: {size} Pods", lambda: world.pods(name), until=lambda ps: len(ps) == size)
    services = wait_for("the entry and discovery Services", lambda: world.core.list_namespaced_service(
        world.ns, label_selector=f"{modelservings.NAME_LABEL}={name}").items, until=lambda s: len(s) == 2)  # fmt: skip
    headless = {s.metadata.name for s in services if s.spec.cluster_ip == "None"}
    assert len(headless) == 2, f"two headless Services, saw {[s.metadata.name for s in services]}"
    subdomains = {p.spec.subdomain for p in pods.values()}
    assert len(subdomains) == 1 and subdomains <= headless, f"every Pod in the discovery Service: {subdomains}"
    assert all(p.spec.hostname == p.metadata.name for p in pods.values())

    if size == 3:
        world.patch_source(LWS_GROUP, LWS_VERSION, LWS_PLURAL, name, {"spec": {"leaderWorkerTemplate": {"size": 2}}})
        smaller = world.child(made["metadata"]["uid"], "the child at size 2",
                              until=lambda c: c["spec"]["template"]["roles"][0]["workerReplicas"] == 1)  # fmt: skip
        assert plugins(smaller) == HEADLESS, "a size change keeps the plugin chain"


def test_an_lws_the_converter_cannot_express_gets_an_event_and_no_modelserving(world: World, lws_crd: None) -> None:
    body = lws("grouped", 4)
    body["spec"]["leaderWorkerTemplate"]["subGroupPolicy"] = {"subGroupSize": 2}
    made = world.create_source(LWS_GROUP, LWS_VERSION, LWS_PLURAL, body)
    events = wait_for("a ConversionFailed Event naming subGroupPolicy", lambda: [
        e.message for e in world.core.list_namespaced_event(world.ns, field_selector="involvedObject.name=grouped").items
        if e.reason == "ConversionFailed"], until=bool)  # fmt: skip
    assert "subGroupPolicy" in events[0]
    assert world.children(made["metadata"]["uid"]) == []
