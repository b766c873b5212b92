"""Plugins on the embedded cluster: headless-service DNS layout, demo-pod-tweaks, chain immutability."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from conformance.framework.waits import wait_for

from .modelservings import World

pytestmark = pytest.mark.cluster

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "modelserving" / "headless-dns.yaml"


@pytest.fixture
def world(api_client: Any, namespace: str, reference_controller: dict[str, Any]) -> World:
    return World(api_client, namespace)


def dns_modelserving() -> dict[str, Any]:
    body = yaml.safe_load(FIXTURE.read_text())
    del body["metadata"]["namespace"]
    return dict(body)


def test_headless_service_gives_each_instance_entry_and_discovery_services(api_client: Any, world: World) -> None:
    world.create(dns_modelserving())
    pods = wait_for(
        "4 pods Running",
        lambda: world.pods("dns"),
        until=lambda p: len(p) == 4 and all(x.status.phase == "Running" for x in p.values()),
    )
    worker = pods["dns-0-prefill-0-2"]
    subdomain = worker.spec.subdomain
    assert subdomain and worker.spec.hostname == "dns-0-prefill-0-2"
    env = {e.name: e.value for e in worker.spec.containers[0].env}
    entry_service = env["ENTRY_ADDRESS"].split(".")[0]
    assert env["ENTRY_ADDRESS"] == f"{entry_service}.{world.ns}"
    services = {s.metadata.name: s for s in world.core.list_namespaced_service(world.ns).items}
    assert {entry_service, subdomain} <= set(services)
    for name in (entry_service, subdomain):
        assert services[name].spec.cluster_ip == "None" and services[name].spec.publish_not_ready_addresses is True
    discovery = client.DiscoveryV1Api(api_client)

    def endpoints(service: str) -> dict[str, str]:
        slices = discovery.list_namespaced_endpoint_slice(
            world.ns, label_selector=f"kubernetes.io/service-name={service}"
        ).items
        return {ep.target_ref.name: ep.hostname for s in slices for ep in s.endpoints or []}

    members = wait_for("discovery endpoints", lambda: endpoints(subdomain), until=lambda e: len(e) == 3)
    assert members == {n: n for n in ("dns-0-prefill-0-0", "dns-0-prefill-0-1", "dns-0-prefill-0-2")}
    assert set(wait_for("entry endpoints", lambda: endpoints(entry_service), until=lambda e: len(e) == 1)) == {
        "dns-0-prefill-0-0"
    }
    decode = pods["dns-0-decode-0-0"]
    assert not decode.spec.subdomain and "ENTRY_ADDRESS" not in {e.name for e in decode.spec.containers[0].env}, (
        "no workerTemplate: no DNS"
    )
    assert decode.metadata.annotations["example.com/custom"] == "value", "demo-pod-tweaks runs after headless-service"
    assert {e.name: e.value for e in decode.spec.containers[0].env}["CUSTOM_VAR"] == "custom-value"


def test_deleted_services_are_recreated_and_never_decide_existence(world: World) -> None:
    world.create(dns_modelserving())
    pods = wait_for("4 pods", lambda: world.pods("dns"), until=lambda p: len(p) == 4)
    uids = {n: p.metadata.uid for n, p in pods.items()}
    subdomain = pods["dns-0-prefill-0-1"].spec.subdomain
    before = wait_for(
        "the Discovery Service", lambda: world.core.read_namespaced_service(subdomain, world.ns).metadata.uid
    )
    world.core.delete_namespaced_service(subdomain, world.ns)
    again = wait_for(
        "the Service back",
        lambda: world.core.read_namespaced_service(subdomain, world.ns).metadata.uid,
        until=lambda uid: uid != before,
    )
    assert again != before
    assert {n: p.metadata.uid for n, p in world.pods("dns").items()} == uids, "losing a Service rebuilds nothing"


def test_plugin_chain_is_immutable_and_bad_plugins_are_rejected(
    world: World, reference_controller: dict[str, Any]
) -> None:
    if not reference_controller.get("webhook"):
        pytest.skip("the webhook is registered by the harness on the local provider only")
    created = world.create(dns_modelserving())

    def rejection(body: dict[str, Any]) -> str:
        # A merge patch carries no resourceVersion: the controller's status writes cannot turn the
        # webhook's answer into a 409 conflict.
        with pytest.raises(ApiException) as err:
            world.patch("dns", {"spec": {"plugins": body["spec"]["plugins"]}})
        return str(json.loads(err.value.body)["message"])

    for change in (
        lambda s: s["plugins"].pop(),  # remove one
        lambda s: s["plugins"].reverse(),  # reorder
        lambda s: s["plugins"][1]["config"].update(runtimeClassName="nvidia"),  # change config
        lambda s: s["plugins"][0].update(scope={"roles": ["prefill"]}),  # change scope
    ):
        body = copy.deepcopy(created)
        change(body["spec"])
        assert "plugin chain is immutable" in rejection(body)
    same = copy.deepcopy(created["spec"]["plugins"])
    same[1]["type"] = "BuiltIn"  # an omitted type and BuiltIn mean the same plugin
    world.patch("dns", {"spec": {"plugins": same, "replicas": 0}})  # and scaling is not a chain change
    assert world.get("dns")["spec"]["replicas"] == 0
    bad = dns_modelserving()
    bad["metadata"]["name"] = "bad"
    bad["spec"]["plugins"][0]["scope"] = {"target": "Entry"}
    with pytest.raises(ApiException) as err:
        world.create(bad)
    assert "spec.plugins[0].scope.target" in json.loads(err.value.body)["message"]
