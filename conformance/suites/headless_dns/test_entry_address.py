"""HeadlessServiceDNS: ENTRY_ADDRESS on the entry Pod, when it is there, names the Entry Service.

The spec gives ``ENTRY_ADDRESS=<entry-service>.<namespace>`` with the Entry Service and says the
workers resolve it; whether the entry Pod carries it too is open (shared notes, reading 7:
required on workers, optional on the entry Pod). Every reading shares what is asserted here: an
entry Pod that carries ENTRY_ADDRESS carries the same value as its workers, the Entry Service's
address, in every container, never another address (its own member record, say).
"""

from __future__ import annotations

from typing import Any

from conformance.framework.catalog import behaviour
from conformance.framework.features import Feature
from conformance.framework.modelserving import ModelServings, env_of, expected_pod_count

from . import ENTRY_ADDRESS, USING_PLUGINS, entries, entry_service_of, workers


@behaviour(
    "dns/entry-service/entry-pod-address",
    "When the entry Pod of a Role instance carries ENTRY_ADDRESS, its value MUST be the workers' "
    "<entry-service>.<namespace> in every container.",
    USING_PLUGINS,
    Feature.HEADLESS_SERVICE,
)
def test_entry_pod_address_names_the_entry_service(ms: ModelServings, manifest: Any) -> None:
    body = manifest("dns-basic")
    pods = ms.wait_pods(ms.create(body)["metadata"]["name"], expected_pod_count(body))
    (entry,), members = entries(pods), workers(pods)
    assert members, f"expected worker Pods beside the entry Pod; got {[p.metadata.name for p in pods]}"
    expected = {f"{entry_service_of(w, ms.ns)}.{ms.ns}" for w in members}
    assert len(expected) == 1, f"the workers of one Role instance carry different {ENTRY_ADDRESS} values: {expected}"
    address = next(iter(expected))
    seen = {
        c.name: env_of(entry, i).get(ENTRY_ADDRESS)
        for i, c in enumerate(entry.spec.containers)
        if ENTRY_ADDRESS in env_of(entry, i)
    }
    wrong = {name: value for name, value in seen.items() if value != address}
    assert not wrong, (
        f"entry Pod {entry.metadata.name} carries {ENTRY_ADDRESS} {wrong}; when present it must be the Entry "
        f"Service's address {address!r} that its workers carry (spec reading 7: optional on the entry Pod)"
    )
