"""workerReplicas "Required": what both readings of the API reference's Role table share.

Why a module of its own: the API reference says of a Role's workerReplicas "Required: Need to set
the number of worker-pod replicas", but gives it no Validation marker, and upstream's CRD does not
require it (spec reading 20). An implementation may enforce it (refuse a Role without it) or leave
it to Go's zero value (a Role without it has no workers). Either way the omission never means
workers: an implementation that accepts the omission and then runs worker Pods has invented a
default the spec does not give. That shared part is asserted here, on a running ServingGroup (the
admission and defaults modules ask for none).
"""

from __future__ import annotations

from typing import Any

from conformance.framework.catalog import behaviour
from conformance.framework.features import Feature
from conformance.framework.modelserving import ModelServings, expect_refused

API = "api-reference-workload-v1alpha1.txt"
MEMBER = "conformance.kthena.io/member"  # the suite's own template label (core-small.yaml)


@behaviour(
    "core/role/worker-replicas-omitted",
    "A Role that omits workerReplicas MUST either be refused at admission and not stored, or run with no worker "
    "Pods (as workerReplicas 0), even when it carries a workerTemplate.",
    f"{API}#Role",
    Feature.CORE,
)
def test_omitted_worker_replicas_is_refused_or_means_no_workers(ms: ModelServings, manifest: Any) -> None:
    body = manifest("core-small")
    name = body["metadata"]["name"]
    del body["spec"]["template"]["roles"][0]["workerReplicas"]  # the workerTemplate stays
    what = "a Role without workerReplicas (it has a workerTemplate)"
    rejection = ms.try_create(body)
    if rejection is not None:
        expect_refused(rejection, what)
        assert not ms.exists(name), f"{what} was refused but ModelServing {ms.ns}/{name} exists"
        return
    ms.wait_settled(name)
    pods = [p for p in ms.pods(name) if not p.metadata.deletion_timestamp]
    members = sorted(f"{p.metadata.name} ({(p.metadata.labels or {}).get(MEMBER, '?')})" for p in pods)
    workers = [p for p in pods if (p.metadata.labels or {}).get(MEMBER) == "worker"]
    assert not workers and len(pods) == 1, (
        f"{what} was accepted, so it must run as workerReplicas 0: exactly one Pod (the entry) in its one "
        f"ServingGroup; seen {len(pods)} Pods: {members} (the spec documents no default for workerReplicas)"
    )
