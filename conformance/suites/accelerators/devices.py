"""What the Accelerators tests read and make: devices, claims and device-claiming ModelServings.

Devices are identified as DRA identifies them, ``(driver, pool, device)``; which node a device
is on is read from the ResourceSlice that publishes it (``spec.nodeName``), never from the pool's
name. Allocations are read from every ResourceClaim's ``status.allocation`` in the cluster, so a
device handed out twice is seen even when the other claim is not the test's.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from conformance.framework import evidence
from conformance.framework.capabilities import (
    Capabilities,
    DeviceClassCapabilities,
    Finding,
    class_devices,
    inventory,
    matching_nodes,
)
from conformance.framework.outcomes import Inconclusive, NonConformant
from conformance.framework.plugin import record_notes, record_warnings
from conformance.framework.timeouts import WAITS, Timeouts

DeviceId = tuple[str, str, str]  # (driver, pool, device)

# The spec sections the behaviours point at.
DRIVER_SPEC = "modelplane-serving-stack-requirements.txt#nvidia-dra-driver-gpu"
ROLE_SPEC = "api-reference-workload-v1alpha1.txt#Role"


def resource_api(kube: Any) -> Any:
    from kubernetes import client

    return client.ResourceV1Api(kube.api)


def _items(resp: Any) -> list[dict[str, Any]]:
    return list(json.loads(resp.data).get("items") or [])


def nodes(kube: Any) -> list[dict[str, Any]]:
    return _items(kube.core.list_node(_preload_content=False))


def slices(kube: Any) -> list[dict[str, Any]]:
    return _items(resource_api(kube).list_resource_slice(_preload_content=False))


def device_class_names(kube: Any) -> list[str]:
    return [str(c["metadata"]["name"]) for c in _items(resource_api(kube).list_device_class(_preload_content=False))]


def claims(kube: Any, namespace: str | None = None) -> list[dict[str, Any]]:
    api = resource_api(kube)
    if namespace is None:
        return _items(api.list_resource_claim_for_all_namespaces(_preload_content=False))
    return _items(api.list_namespaced_resource_claim(namespace, _preload_content=False))


def allocated(claim: dict[str, Any]) -> list[DeviceId]:
    results = (((claim.get("status") or {}).get("allocation") or {}).get("devices") or {}).get("results") or []
    return [(str(r["driver"]), str(r["pool"]), str(r["device"])) for r in results]


def all_allocations(kube: Any) -> dict[str, list[DeviceId]]:
    """``namespace/claim`` -> its allocated devices, for every claim in the cluster."""
    return {f"{c['metadata']['namespace']}/{c['metadata']['name']}": allocated(c) for c in claims(kube)}


def double_allocations(allocations: dict[str, list[DeviceId]]) -> dict[DeviceId, list[str]]:
    """Devices allocated to more than one claim (or twice to one), with the claims."""
    owners: dict[DeviceId, list[str]] = {}
    for claim, devices in allocations.items():
        for d in devices:
            owners.setdefault(d, []).append(claim)
    return {d: c for d, c in owners.items() if len(c) > 1}


def device_nodes(driver: str, published: list[dict[str, Any]]) -> dict[DeviceId, str]:
    """``(driver, pool, device)`` -> the node whose slice publishes it."""
    out: dict[DeviceId, str] = {}
    for node, entry in inventory(driver, published).items():
        for pool, device in entry.devices:
            out[(driver, pool, str(device.get("name")))] = node
    return out


@dataclass
class ClassView:
    """One declared DeviceClass as the cluster shows it right now."""

    caps: Capabilities
    cls: DeviceClassCapabilities
    nodes: list[str]  # nodes matching the selector
    devices: dict[str, list[DeviceId]]  # node -> the class's devices there
    free: dict[str, list[DeviceId]]  # node -> those not allocated to any claim

    @property
    def total_free(self) -> int:
        return sum(len(v) for v in self.free.values())

    @property
    def most_free_on_a_node(self) -> int:
        return max((len(v) for v in self.free.values()), default=0)

    @property
    def most_on_a_node(self) -> int:
        return max((len(v) for v in self.devices.values()), default=0)

    @property
    def title(self) -> str:
        return f"DeviceClass {self.cls.name} (driver {self.caps.driver}, {self.cls.level})"


def class_view(kube: Any, caps: Capabilities, cls: DeviceClassCapabilities) -> ClassView:
    published = slices(kube)
    inv = inventory(caps.driver, published)
    selected = matching_nodes(cls, nodes(kube))
    taken = {d for devices in all_allocations(kube).values() for d in devices}
    devices = {n: [(caps.driver, p, str(d.get("name"))) for p, d in class_devices(cls, inv.get(n))] for n in selected}
    free = {n: [d for d in ds if d not in taken] for n, ds in devices.items()}
    return ClassView(caps, cls, selected, devices, free)


def every_class(capabilities: list[Capabilities]) -> Iterator[tuple[Capabilities, DeviceClassCapabilities]]:
    for caps in capabilities:
        for cls in caps.device_classes:
            yield caps, cls


def require_class(kube: Any, cls: DeviceClassCapabilities) -> None:
    """Scheduling through a DeviceClass the cluster does not have cannot be judged here (the
    device-class test reports it)."""
    if cls.name not in device_class_names(kube):
        raise Inconclusive(
            f"DeviceClass {cls.name} does not exist, so nothing can be scheduled through it "
            "(see accelerators/device-class/exists)"
        )


# -- objects the tests make ----------------------------------------------------------------------------


def claim_template(manifest: Any, name: str, cls: DeviceClassCapabilities, count: int) -> dict[str, Any]:
    body: dict[str, Any] = manifest("accel-claim-template")
    body["metadata"]["name"] = name
    (request,) = body["spec"]["spec"]["devices"]["requests"]
    request["exactly"].update(deviceClassName=cls.name, count=count)
    return body


def create_claim_template(kube: Any, namespace: str, body: dict[str, Any]) -> None:
    resource_api(kube).create_namespaced_resource_claim_template(namespace, body)


def accel_modelserving(
    manifest: Any,
    caps: Capabilities,
    cls: DeviceClassCapabilities,
    *,
    name: str,
    template: str,
    replicas: int,
    worker_replicas: int,
    also_tolerate: list[dict[str, str]] | None = None,
) -> dict[str, Any]:
    """``accel-modelserving.yaml`` for ``cls``: every Pod claims through ``template``, runs the
    capability file's image, selects the declared nodes and tolerates their taints (and
    ``also_tolerate``: the real nodes' taints, so devices on real nodes count too)."""
    body: dict[str, Any] = manifest("accel-modelserving")
    body["metadata"]["name"] = name
    body["spec"]["replicas"] = replicas
    (role,) = body["spec"]["template"]["roles"]
    role["workerReplicas"] = worker_replicas
    for key in ("entryTemplate", "workerTemplate"):
        spec = role[key]["spec"]
        spec["resourceClaims"][0]["resourceClaimTemplateName"] = template
        spec["containers"][0]["image"] = caps.image
        spec["nodeSelector"] = dict(cls.nodes.selector)
        if cls.nodes.tolerations or also_tolerate:
            spec["tolerations"] = [t.as_pod() for t in cls.nodes.tolerations] + list(also_tolerate or [])
    if worker_replicas == 0:
        del role["workerTemplate"]
    return body


# -- what a Pod got ------------------------------------------------------------------------------------


def pod_devices(kube: Any, namespace: str, pod: Any) -> list[DeviceId]:
    """The devices allocated to the claims ``pod`` uses (from its resourceClaimStatuses)."""
    names = [s.resource_claim_name for s in (pod.status.resource_claim_statuses or []) if s.resource_claim_name]
    by_name = {c["metadata"]["name"]: c for c in claims(kube, namespace)}
    return [d for n in names for d in allocated(by_name.get(n, {}))]


def unschedulable_reason(pod: Any) -> str | None:
    """The scheduler's message when it reported ``pod`` Unschedulable (None otherwise)."""
    cond = next((c for c in pod.status.conditions or [] if c.type == "PodScheduled"), None)
    if cond is not None and cond.status == "False" and cond.reason == "Unschedulable":
        return str(cond.message or cond.reason)
    return None


def check_pod_devices(
    view: ClassView, pod: Any, got: list[DeviceId], want: int, where: dict[DeviceId, str]
) -> list[str]:
    """What is wrong with the devices ``pod`` got (empty: ``want`` devices of the class's driver,
    distinct, all on the Pod's own node and of the class)."""
    problems = []
    name, node = pod.metadata.name, pod.spec.node_name
    if len(got) != want:
        problems.append(f"Pod {name} got {len(got)} device(s) {got}, its claim asks for {want}")
    if len(set(got)) != len(got):
        problems.append(f"Pod {name} got one device twice: {got}")
    for d in got:
        if d[0] != view.caps.driver:
            problems.append(f"Pod {name} got {d} from driver {d[0]}, not {view.caps.driver}")
        elif where.get(d) != node:
            problems.append(f"Pod {name} runs on {node} but got {d}, published on {where.get(d) or 'no node'}")
        elif d not in view.devices.get(node, []):
            problems.append(f"Pod {name} got {d}, which is not a device of {view.cls.name} on a selected node")
    if node not in view.nodes:
        problems.append(f"Pod {name} runs on {node}, which does not match the selector {view.cls.nodes.selector}")
    return problems


# -- judging -------------------------------------------------------------------------------------------


class Verdicts:
    """Collects problems per DeviceClass at its level: MUST problems fail the test, SHOULD ones
    are warnings in the report; observations go to the report as notes."""

    def __init__(self, request: pytest.FixtureRequest, evidence_dir: Path) -> None:
        self.request = request
        self.evidence_dir = evidence_dir
        self.must: list[str] = []
        self.should: list[str] = []
        self.notes: list[str] = []

    def add(self, level: str, problems: list[str]) -> None:
        (self.must if level == "MUST" else self.should).extend(problems)

    def add_findings(self, findings: list[Finding]) -> None:
        for f in findings:
            self.add(f.level, [f"{f.subject}: {f.message}"])

    def evidence(self, name: str, content: Any) -> None:
        """Keep ``content`` under the test's artifacts directory and name it in the report."""
        self.evidence_dir.mkdir(parents=True, exist_ok=True)
        text = content if isinstance(content, str) else yaml.safe_dump(content, sort_keys=False, width=160)
        (self.evidence_dir / name).write_text(text)
        props = self.request.node.user_properties
        if ("evidence", str(self.evidence_dir)) not in props:
            props.append(("evidence", str(self.evidence_dir)))

    def finish(self) -> None:
        record_warnings(self.request.node, [f"SHOULD: {p}" for p in self.should])
        record_notes(self.request.node, self.notes)
        if self.must:
            raise NonConformant("; ".join(self.must))


def evidence_dir(suite: Any, behaviour_id: str) -> Path:
    return Path(suite.artifacts) / evidence.directory_name(behaviour_id)


def seconds(timeouts: Timeouts, name: str, fallback: str) -> float:
    """A documented wait, or ``fallback`` when this suite version does not define ``name``."""
    return timeouts.seconds(name if name in WAITS else fallback)


def shown(devices: list[DeviceId]) -> str:
    """``pool/device, ...`` (the driver is the class's)."""
    return ", ".join(f"{pool}/{device}" for _, pool, device in devices) or "none"


def short(name: str) -> str:
    """A DNS-label-safe short form of a DeviceClass name, for object names."""
    return re.sub(r"[^a-z0-9-]", "-", name.lower())[:30].strip("-") or "class"
