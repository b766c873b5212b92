"""Preflight: what the cluster must provide before any ModelServing test can mean anything.

Nodes Ready, the ModelServing CRD served at v1alpha1 with its status subresource, a validating
webhook answering (informational), the scale subresource (informational: the spec never names it,
its tests are the optional ScaleSubresource feature), ``default-scheduler`` placing a Pod, and the
garbage collector collecting a deleted ModelServing's dependents. Each check names what is
missing, so a failed preflight stops the run with a reason instead of a hundred confusing test
failures.
"""

from __future__ import annotations

import datetime as dt
import secrets
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from ..cluster.provider import ClusterInfo

MODELSERVING_CRD = "modelservings.workload.serving.volcano.sh"
# The CRDs of the objects a converter turns into ModelServings: (profile, CRD, the version the suite uses).
CONVERTER_CRDS = (
    ("ModelBooster", "modelboosters.workload.serving.volcano.sh", "v1alpha1"),
    ("LWSConversion", "leaderworkersets.leaderworkerset.x-k8s.io", "v1"),
)


@dataclass
class Check:
    name: str
    ok: bool
    message: str
    required: bool = True  # informational checks report "skipped" instead of blocking the run
    detail: tuple[str, ...] = ()  # what the check found, for the run (crd-documented-fields: the missing paths)

    def as_dict(self) -> dict[str, Any]:
        result = "ok" if self.ok else "missing" if self.required else "skipped"
        return {"name": self.name, "result": result, "message": self.message}


def webhook_check(api: Any) -> Check:
    """Does a validating admission webhook answer for ModelServings? (see :mod:`..framework.probes`)

    Informational: the spec does not require a webhook (validation may live in the CRD schema),
    so an implementation without one is judged by the Admission tests, not stopped here. The probe
    uses upstream's workerTemplate rule, which the spec does not state."""
    from ..framework.modelserving import REFUSED
    from ..framework.probes import webhook_answer

    status, _ = webhook_answer(api)
    if status in REFUSED:
        return Check("admission-webhook", True, "a spec without a workerTemplate for its workers was rejected")
    if status is not None:
        return Check("admission-webhook", False, f"the probe failed with HTTP {status}", required=False)
    return Check(
        "admission-webhook",
        False,
        "a spec without a workerTemplate for its workers was accepted: no upstream-style webhook answers "
        "(informational; admission is judged by the Admission tests)",
        required=False,
    )


def preflight_line(check: Check) -> str:
    """``preflight nodes-ready  ok  3/3 nodes Ready``: one check as the run prints it. Pure."""
    return f"  preflight {check.name:28} {check.as_dict()['result']:8} {check.message}"


class _Told(list[Check]):
    """The checks so far, each told to ``tell`` as it is added (so the terminal shows it then)."""

    def __init__(self, tell: Callable[[Check], None] | None) -> None:
        super().__init__()
        self._tell = tell

    def append(self, check: Check) -> None:
        super().append(check)
        if self._tell is not None:
            self._tell(check)

    def __iadd__(self, checks: Iterable[Check]) -> _Told:  # type: ignore[override,misc]
        for check in checks:
            self.append(check)
        return self


def preflight(info: ClusterInfo, *, webhook: bool = True, tell: Callable[[Check], None] | None = None) -> list[Check]:
    """What the cluster must provide before any ModelServing test can mean anything; ``tell``
    hears each check as soon as it is known."""
    from kubernetes import client

    from ..cluster.kube import api_client

    api = api_client(info.kubeconfig, info.context)
    checks = _Told(tell)
    nodes: list[Any] = client.CoreV1Api(api).list_node().items
    ready = [
        n.metadata.name
        for n in nodes
        if any(c.type == "Ready" and c.status == "True" for c in (n.status.conditions or []))
    ]
    checks.append(Check("nodes-ready", bool(ready), f"{len(ready)}/{len(nodes)} nodes Ready"))
    items: list[Any] = client.ApiextensionsV1Api(api).list_custom_resource_definition().items
    crds = {c.metadata.name: c for c in items}
    crd = crds.get(MODELSERVING_CRD)
    served = [v.name for v in crd.spec.versions if v.served] if crd else []
    checks.append(
        Check(
            "crd-modelserving-v1alpha1",
            "v1alpha1" in served,
            f"CRD {MODELSERVING_CRD} serves {served}" if crd else f"CRD {MODELSERVING_CRD} is not installed",
        )
    )
    if crd is not None:
        subresources = next((v.subresources for v in crd.spec.versions if v.name == "v1alpha1"), None)
        has = [n for n in ("status", "scale") if subresources is not None and getattr(subresources, n) is not None]
        checks += subresource_checks(has)
        schema = next((v.schema for v in crd.spec.versions if v.name == "v1alpha1"), None)
        checks.append(documented_fields_check(api.sanitize_for_serialization(schema) if schema else None))
    if webhook and "v1alpha1" in served:
        checks.append(webhook_check(api))
    checks += converter_crd_checks({name: [v.name for v in c.spec.versions if v.served] for name, c in crds.items()})
    checks.append(_scheduler_check(api))
    if crd is not None and "v1alpha1" in served:
        age = crd_age(crd.metadata.creation_timestamp)
        if not gc_probe_needed(age):
            checks.append(
                Check(
                    "garbage-collection",
                    True,
                    f"not probed: CRD {MODELSERVING_CRD} was created {age or 0:.0f} s ago, past the garbage "
                    f"collector's {GC_DISCOVERY_SETTLED:.0f} s discovery resync",
                )
            )
        else:
            checks.append(_garbage_collection_check(api))
    return checks


def converter_crd_checks(served: dict[str, list[str]]) -> list[Check]:
    """Is each converter profile's source CRD served (``served``: CRD name -> its served versions)?
    Informational: without it only that profile's tests are inconclusive, so no run is stopped. Pure."""
    checks = []
    for profile, crd, version in CONVERTER_CRDS:
        versions = served.get(crd)
        name = f"crd-{crd.split('.', 1)[0]}"
        if versions is not None and version in versions:
            checks.append(Check(name, True, f"CRD {crd} serves {version} (the {profile} profile)"))
            continue
        found = f"serves {versions}, not {version}" if versions is not None else "is not installed"
        checks.append(
            Check(
                name,
                False,
                f"CRD {crd} {found}: the {profile} profile's tests will be inconclusive (informational: no other "
                f"profile needs it; `kthena-conformance install prerequisites --profile {profile} --list` says what "
                "it needs)",
                required=False,
            )
        )
    return checks


def documented_fields_check(schema: dict[str, Any] | None) -> Check:
    """Does the served v1alpha1 schema keep every field the spec documents? Informational: a
    missing field fails the behaviours that need it, each pointed at this finding. Pure."""
    from ..framework.documented_fields import finding, missing_fields

    open_api = (schema or {}).get("openAPIV3Schema")
    if not isinstance(open_api, dict):
        return Check("crd-documented-fields", False, "the CRD serves v1alpha1 without a schema", required=False)
    missing = missing_fields(open_api)
    return Check("crd-documented-fields", not missing, finding(missing), required=False, detail=tuple(missing))


def subresource_checks(served: list[str]) -> list[Check]:
    """The status subresource is required (status, observedGeneration); the scale subresource is
    informational: the spec never names it, so its absence only makes the optional
    ScaleSubresource feature's behaviours fail if the implementation declares that feature. Pure."""
    checks = [Check("crd-subresources", "status" in served, f"subresources served: {served or 'none'}")]
    if "scale" in served:
        checks.append(Check("crd-scale-subresource", True, "the scale subresource is served"))
    else:
        checks.append(
            Check(
                "crd-scale-subresource",
                False,
                "no scale subresource (informational: the spec does not require one; declare the ScaleSubresource "
                "feature unsupported)",
                required=False,
            )
        )
    return checks


# kube-controller-manager's garbage collector re-reads discovery every 30 s: a CRD older than
# this (with margin) is tracked by a running garbage collector, so the probe would only cost time.
GC_DISCOVERY_SETTLED = 60.0


def crd_age(created: dt.datetime | None, now: dt.datetime | None = None) -> float | None:
    """Seconds since a CRD's creationTimestamp (None when the server gave none). Pure."""
    if created is None:
        return None
    return ((now or dt.datetime.now(dt.UTC)) - created).total_seconds()


def gc_probe_needed(age: float | None) -> bool:
    """Probe unless the CRD is known to be older than the garbage collector's resync. Pure."""
    return age is None or age <= GC_DISCOVERY_SETTLED


def _garbage_collection_check(api: Any, timeout: float = 90.0) -> Check:
    """Dependents of a deleted ModelServing are garbage-collected (cleanup relies on it).

    kube-controller-manager's garbage collector starts tracking a new CRD's objects only at its
    next discovery sync (every 30 s): until then, deleting a ModelServing leaves its Pods behind.
    This probe waits for that once, so no test pays for it: a ConfigMap owned by a ModelServing
    with zero replicas must disappear after the ModelServing is deleted. The embedded cluster
    creates the CRDs it is given before kube-controller-manager starts, so there the probe passes
    in about a second; a CRD older than :data:`GC_DISCOVERY_SETTLED` is not probed at all.
    """
    import time as _time

    from kubernetes import client

    from ..framework.namespaces import SUITE_LABEL, delete_namespace
    from ..framework.waits import WaitTimeout, wait_for

    core, custom = client.CoreV1Api(api), client.CustomObjectsApi(api)
    group, version, plural = "workload.serving.volcano.sh", "v1alpha1", "modelservings"
    ns = f"kc-preflight-{secrets.token_hex(3)}"
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=ns, labels={SUITE_LABEL: "true"})))
    started = _time.monotonic()
    try:
        body = {
            "apiVersion": f"{group}/{version}",
            "kind": "ModelServing",
            "metadata": {"name": "gc-probe"},
            "spec": {
                "replicas": 0,
                "schedulerName": "default-scheduler",
                "template": {
                    "roles": [
                        {"name": "probe", "replicas": 1, "workerReplicas": 0,
                         "entryTemplate": {"spec": {"containers": [{"name": "c", "image": "registry.example/p:v1"}]}}}
                    ]
                },
            },
        }  # fmt: skip
        owner: Any = custom.create_namespaced_custom_object(group, version, ns, plural, body)
        ref = client.V1OwnerReference(
            api_version=f"{group}/{version}", kind="ModelServing", name="gc-probe", uid=owner["metadata"]["uid"]
        )
        core.create_namespaced_config_map(
            ns, client.V1ConfigMap(metadata=client.V1ObjectMeta(name="gc-probe", owner_references=[ref]))
        )
        custom.delete_namespaced_custom_object(group, version, ns, plural, "gc-probe", propagation_policy="Background")
        wait_for(
            "the garbage collector to delete a ModelServing's dependent",
            lambda: [c for c in _config_map_names(core, ns) if c == "gc-probe"],
            until=lambda left: not left,
            timeout=timeout,
            interval=0.5,
        )
        took = _time.monotonic() - started
        return Check("garbage-collection", True, f"dependents of a deleted ModelServing are collected ({took:.0f} s)")
    except WaitTimeout as exc:
        return Check("garbage-collection", False, f"a deleted ModelServing's dependent was not collected: {exc}")
    except Exception as exc:
        return Check("garbage-collection", False, f"the probe failed: {type(exc).__name__}: {str(exc)[:300]}")
    finally:
        delete_namespace(_Kube(core), ns)


def _scheduler_check(api: Any, timeout: float = 30.0) -> Check:
    """The suite's manifests name ``default-scheduler``: a probe Pod must get a node.

    The probe runs in a throwaway namespace labelled as the suite's (so a sweep finds it if this
    process dies), tolerates every taint, and is deleted with its namespace right away.
    """
    from kubernetes import client

    from ..framework.namespaces import SUITE_LABEL, delete_namespace
    from ..framework.waits import WaitTimeout, wait_for

    core = client.CoreV1Api(api)
    ns = f"kc-preflight-{secrets.token_hex(3)}"
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=ns, labels={SUITE_LABEL: "true"})))
    try:
        wait_for(
            "the preflight namespace's ServiceAccount",
            lambda: core.read_namespaced_service_account("default", ns),
            timeout=timeout,
        )
        pod = client.V1Pod(
            metadata=client.V1ObjectMeta(name="scheduler-probe"),
            spec=client.V1PodSpec(
                scheduler_name="default-scheduler",
                tolerations=[client.V1Toleration(operator="Exists")],
                containers=[client.V1Container(name="probe", image="registry.example/probe:v1")],
            ),
        )
        core.create_namespaced_pod(ns, pod)
        placed = wait_for(
            "the scheduler probe Pod to get a node",
            lambda: (core.read_namespaced_pod("scheduler-probe", ns).spec or client.V1PodSpec(containers=[])).node_name,
            timeout=timeout,
        )
        return Check("scheduler", True, f"default-scheduler placed a probe Pod on {placed}")
    except WaitTimeout as exc:
        return Check("scheduler", False, f"default-scheduler did not place a probe Pod: {exc}")
    finally:
        delete_namespace(_Kube(core), ns)


def _config_map_names(core: Any, ns: str) -> list[str]:
    items: list[Any] = core.list_namespaced_config_map(ns).items
    return [str(c.metadata.name) for c in items]


@dataclass
class _Kube:
    core: Any
