"""The informer against the real kube-apiserver: a watch resumed after a gap loses no deletion.

Resuming from a resourceVersion from before the gap (etcd compacted in between), the API server
either replays the events from its watch cache or answers 410 Gone, and the informer must then
re-list and diff. Either way the object deleted during the gap reaches the handlers as DELETED.
The 410 path itself is driven deterministically by the unit tests (tests/unit/kthena_ref/
test_informer.py): kube-apiserver v1.36.3 here serves old resourceVersions from its watch cache,
so a real 410 cannot be provoked on demand.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from kubernetes_asyncio import client, config

from conformance.cluster.local.provider import LocalProvider
from conformance.cluster.provider import ClusterInfo
from kthena_ref.runtime.informer import Gone, Informer, InformerConfig

pytestmark = pytest.mark.cluster


def compact_etcd(cluster: ClusterInfo) -> None:
    """Compact etcd to its current revision (through its gRPC gateway), so older
    resourceVersions expire as they would on a long-running cluster."""
    import base64
    import urllib.request

    state = LocalProvider().status(cluster.name) or {}
    url = f"http://127.0.0.1:{state['ports']['etcd_client']}/v3/kv"

    def post(path: str, body: dict[str, Any]) -> dict[str, Any]:
        request = urllib.request.Request(f"{url}/{path}", data=json.dumps(body).encode(), method="POST")
        with urllib.request.urlopen(request, timeout=10) as resp:
            return dict(json.load(resp))

    revision = post("range", {"key": base64.b64encode(b"/registry").decode()})["header"]["revision"]
    post("compaction", {"revision": revision, "physical": True})


def test_expired_watch_relists_and_delivers_the_deletions_it_missed(
    cluster: ClusterInfo, namespace: str, api_client: Any
) -> None:
    from kubernetes import client as sync_client

    if cluster.provider != "local":
        pytest.skip("expiring resourceVersions needs etcd access: a capability of the local provider")

    core = sync_client.CoreV1Api(api_client)
    for name in ("kept", "doomed"):
        core.create_namespaced_config_map(namespace, {"metadata": {"name": name}})

    async def scenario() -> list[tuple[str, str]]:
        api = await config.new_client_from_config(config_file=str(cluster.kubeconfig))
        try:
            informer = Informer(
                "configmaps",
                client.CoreV1Api(api).list_namespaced_config_map,
                InformerConfig(watch_timeout=10, inactivity_timeout=10),
                namespace=namespace,
            )
            seen: list[tuple[str, str]] = []
            informer.add_handler(lambda kind, obj, old: seen.append((kind, obj["metadata"]["name"])))
            await informer._list()
            assert {k.split("/")[1] for k in informer.cache} >= {"kept", "doomed"}
            # While "no watch is open", one object goes away and the resourceVersion expires.
            stale = informer.resource_version
            core.delete_namespaced_config_map("doomed", namespace)
            compact_etcd(cluster)
            informer.resource_version = stale
            seen.clear()
            # Resume the watch from before the gap. The API server either replays what happened
            # (its watch cache still holds it) or answers 410 Gone; on 410 the informer re-lists
            # and diffs, as run() does. Either way the deletion must reach the handlers.
            try:
                await asyncio.wait_for(informer._watch(), timeout=5)
            except TimeoutError:
                pass  # the watch was streaming: whatever it replayed has been handled
            except Gone:
                await informer._list()
            except Exception as exc:  # an HTTP 410 raised by the client
                if getattr(exc, "status", None) != 410:
                    raise
                await informer._list()
            return seen
        finally:
            await api.close()

    seen = asyncio.run(scenario())
    assert ("DELETED", "doomed") in seen, seen
    assert ("DELETED", "kept") not in seen
    assert json.dumps(seen)  # plain data for the report
