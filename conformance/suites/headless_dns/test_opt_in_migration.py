"""HeadlessServiceDNS: moving to the opt-in plugin (adding it is refused; an entry-only Service stays).

The spec's "Upgrade and migration": "Adding the plugin to that existing object is an
immutable-field change" and "An existing managed entry-only Service can retain its name and UID"
(shared notes, reading 9: required). An older controller's objects cannot be rebuilt from outside
without assuming its names and labels, so the entry-only state is made from the implementation's
own objects: a running instance loses its Discovery Service (read from the Pods' subdomain), which
leaves exactly a managed entry-only Service under the Entry Service name (read from a worker's
ENTRY_ADDRESS) and no Discovery Service, the state an upgraded controller meets
(docs/spec-readings.md).
"""

from __future__ import annotations

from typing import Any

from conformance.framework.catalog import behaviour
from conformance.framework.features import Feature
from conformance.framework.modelserving import ModelServings, expected_pod_count

from . import MIGRATION, entries, wait_endpoints, wait_hostnames, wait_service
from .instances import instances, uids


@behaviour(
    "dns/migration/add-plugin-refused",
    "Adding headless-service to an existing ModelServing created without plugins MUST be rejected on update.",
    MIGRATION,
    Feature.HEADLESS_SERVICE,
    requires=(Feature.PLUGIN_CHAIN_IMMUTABILITY,),
)
def test_adding_headless_service_later_is_refused(ms: ModelServings, manifest: Any) -> None:
    body = manifest("dns-pair")
    plugins = body["spec"].pop("plugins")
    name = body["metadata"]["name"]
    ms.create(body)
    ms.wait_pods(name, expected_pod_count(body))
    ms.refused_patch(
        name,
        {"spec": {"plugins": plugins}},
        "adding headless-service to a running ModelServing created without plugins (an immutable-field change: "
        "a new ModelServing and a traffic migration are required)",
    )


@behaviour(
    "dns/migration/entry-only-service-kept",
    "When a Role instance has its entry-only Entry Service and no Discovery Service, the controller MUST keep that "
    "Service (same name and UID) and MUST add a Discovery Service listing every member.",
    MIGRATION,
    Feature.HEADLESS_SERVICE,
)
def test_an_entry_only_service_keeps_its_uid(ms: ModelServings, manifest: Any) -> None:
    body = manifest("dns-pair")
    name = body["metadata"]["name"]
    ms.create(body)
    pods = ms.wait_pods(name, expected_pod_count(body))
    ms.wait_settled(name)
    (instance,) = instances(ms, pods)
    entry_service, discovery = instance.entry_service, instance.discovery
    assert entry_service, f"the worker of the Role instance {discovery} has no ENTRY_ADDRESS"
    entry_uid = wait_service(ms, entry_service).metadata.uid
    wait_endpoints(ms, entry_service, entries(pods))  # entry-only
    discovery_uid = wait_service(ms, discovery).metadata.uid
    ms.kube.core.delete_namespaced_service(discovery, ms.ns, body={"preconditions": {"uid": discovery_uid}})
    wait_service(ms, discovery, other_than=discovery_uid)
    wait_hostnames(ms, discovery, pods)
    ms.holds(
        f"the entry-only Service {entry_service} keeping its UID {entry_uid} (not deleted nor replaced) after the "
        f"Discovery Service {discovery} was added again",
        lambda: uids(ms, [entry_service]),
        lambda seen: seen == {entry_service: entry_uid},
    )
    wait_endpoints(ms, entry_service, entries(pods))
