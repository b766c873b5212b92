"""HeadlessServiceDNS, migration: a ModelServing without headless-service keeps getting nothing of it.

"Older controller versions created Entry Services and injected ENTRY_ADDRESS without an explicit
plugin. With the opt-in model, an existing ModelServing without headless-service does not receive
these settings when Pods are later recreated." The test recreates Pods of a running ModelServing
without plugins (deleting a worker; Role server has two instances, so whatever the recovery
policy rebuilds, Pods are recreated into a ServingGroup that still runs) and looks at the new
Pods and at every Service reaching the ModelServing's Pods.
"""

from __future__ import annotations

from typing import Any

from conformance.framework.catalog import behaviour
from conformance.framework.features import Feature
from conformance.framework.modelserving import ModelServings, env_of, expected_pod_count

from . import ENTRY_ADDRESS, MIGRATION, workers
from .instances import reaching


@behaviour(
    "dns/migration/no-plugin-no-dns-on-recreated-pods",
    "A ModelServing without headless-service MUST NOT get hostname, subdomain or ENTRY_ADDRESS on Pods recreated "
    "later, nor a Service reaching its Pods.",
    MIGRATION,
    Feature.HEADLESS_SERVICE,
    requires=(Feature.RECOVERY,),
)
def test_recreated_pods_without_the_plugin_get_no_dns(ms: ModelServings, manifest: Any) -> None:
    body = manifest("dns-pair")
    del body["spec"]["plugins"]
    body["spec"]["template"]["roles"][0]["replicas"] = 2
    name = body["metadata"]["name"]
    count = expected_pod_count(body)
    ms.create(body)
    before = {p.metadata.uid for p in ms.wait_pods(name, count)}
    (victim, *_) = workers(ms.pods(name))
    ms.kube.core.delete_namespaced_pod(victim.metadata.name, ms.ns)

    def recreated(pods: list[Any]) -> bool:
        live = [p for p in pods if not p.metadata.deletion_timestamp]
        return len(live) == len(pods) == count and any(p.metadata.uid not in before for p in live)

    pods = ms.wait("recovery", f"{count} Pods of {ms.ns}/{name}, at least one new, after deleting "
                   f"{victim.metadata.name}", lambda: ms.pods(name), recreated)  # fmt: skip
    settings = {}
    for pod in (p for p in pods if p.metadata.uid not in before):
        found = [f"hostname={pod.spec.hostname!r}"] if pod.spec.hostname else []
        found += [f"subdomain={pod.spec.subdomain!r}"] if pod.spec.subdomain else []
        found += [f"{ENTRY_ADDRESS} in container {c}" for c in range(len(pod.spec.containers))
                  if ENTRY_ADDRESS in env_of(pod, c)]  # fmt: skip
        if found:
            settings[pod.metadata.name] = found
    assert not settings, f"recreated Pods of a ModelServing without headless-service got its DNS settings: {settings}"
    ms.holds(
        f"no Service selecting or listing the Pods of {ms.ns}/{name} (no headless-service)",
        lambda: reaching(ms, ms.pods(name)),
        lambda seen: not seen,
    )
