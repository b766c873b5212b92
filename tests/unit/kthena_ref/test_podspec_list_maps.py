"""The embedded PodSpec schema keeps a list-map (or set) only where kube-apiserver itself requires
its keys unique for a Pod: a CRD enforces every list-map key, so one the Pod API does not enforce
would refuse a pod template (two hostAliases entries for one IP, say) that a Pod accepts."""

from __future__ import annotations

import json
from typing import Any

import pytest

from kthena_ref import faults
from kthena_ref.api.crd import crd
from kthena_ref.api.podspec import SNAPSHOT, load_snapshot, unkeyed


def _at(schema: dict[str, Any], path: str) -> dict[str, Any]:
    """The schema at a dotted path; ``[]`` steps into a list's items."""
    node = schema
    for part in path.split("."):
        items = part.endswith("[]")
        node = node["properties"][part.removesuffix("[]")]
        if items:
            node = node["items"]
    return node


ATOMIC = [  # duplicates accepted by kube-apiserver v1.36.3 for a Pod (dry-run)
    "hostAliases",
    "imagePullSecrets",
    "containers[].env",
    "containers[].ports",
    "initContainers[].env",
    "initContainers[].ports",
    "ephemeralContainers[].env",
    "ephemeralContainers[].ports",
    "containers[].restartPolicyRules[].exitCodes.values",
    "initContainers[].restartPolicyRules[].exitCodes.values",
]
ENFORCED = {  # duplicates refused for a Pod: the list-map stays, with its keys
    "containers": ["name"],
    "initContainers": ["name"],
    "ephemeralContainers": ["name"],
    "volumes": ["name"],
    "containers[].volumeMounts": ["mountPath"],
    "containers[].volumeDevices": ["devicePath"],
    "containers[].resources.claims": ["name"],
    "resourceClaims": ["name"],
    "schedulingGates": ["name"],
    "topologySpreadConstraints": ["topologyKey", "whenUnsatisfiable"],
}


@pytest.mark.parametrize("path", ATOMIC)
def test_lists_whose_keys_a_pod_does_not_enforce_are_atomic(path: str) -> None:
    node = _at(load_snapshot(), path)
    assert node["type"] == "array"
    assert node.get("x-kubernetes-list-type") == "atomic"
    assert "x-kubernetes-list-map-keys" not in node


@pytest.mark.parametrize(("path", "keys"), sorted(ENFORCED.items()))
def test_lists_whose_keys_a_pod_enforces_stay_list_maps(path: str, keys: list[str]) -> None:
    node = _at(load_snapshot(), path)
    assert (node.get("x-kubernetes-list-type"), node.get("x-kubernetes-list-map-keys")) == ("map", keys)


def test_a_port_keeps_its_protocol_default() -> None:
    assert _at(load_snapshot(), "containers[].ports[].protocol").get("default") == "TCP"


def test_every_other_list_map_of_the_snapshot_is_one_a_pod_enforces() -> None:
    """A refreshed snapshot with a new list-map must be measured and listed here, not pass silently."""
    found: dict[str, str] = {}

    def walk(node: dict[str, Any], path: str) -> None:
        kind = node.get("x-kubernetes-list-type")
        if kind in ("map", "set"):
            found[path] = str(kind)
        for name, child in (node.get("properties") or {}).items():
            walk(child, f"{path}.{name}" if path else name)
        if isinstance(node.get("items"), dict):
            walk(node["items"], path + "[]")

    walk(load_snapshot(), "")
    containers = [f"{kind}[].{rest}" for kind in ("initContainers", "ephemeralContainers") for rest in
                  ("volumeMounts", "volumeDevices", "resources.claims")]  # fmt: skip
    assert sorted(found) == sorted([*ENFORCED, *containers, "resources.claims"])
    assert set(found.values()) == {"map"}


def test_the_snapshot_on_disk_keeps_upstreams_list_maps() -> None:
    """The checked-in snapshot is kube-apiserver's schema as published; the lists are unkeyed when
    it is loaded, so a refresh (``kthena-ref crd --refresh-podspec``) needs no other step."""
    schema = json.loads(SNAPSHOT.read_text())["schema"]
    node = _at(schema, "hostAliases")
    assert (node["x-kubernetes-list-type"], node["x-kubernetes-list-map-keys"]) == ("map", ["ip"])


@pytest.mark.parametrize(
    ("node", "path", "after"),
    [
        pytest.param(
            {
                "properties": {
                    "l": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["k"]}
                }
            },
            "l",
            {"type": "array", "x-kubernetes-list-type": "atomic"},
            id="list-map",
        ),
        pytest.param(
            {"properties": {"l": {"type": "array", "x-kubernetes-list-type": "set"}}},
            "l",
            {"type": "array", "x-kubernetes-list-type": "atomic"},
            id="set",
        ),
        pytest.param(
            {"properties": {"c": {"items": {"properties": {"l": {"x-kubernetes-list-type": "map"}}}}}},
            "c[].l",
            {"x-kubernetes-list-type": "atomic"},
            id="inside-items",
        ),
        pytest.param({"properties": {}}, "missing[].l", None, id="absent-path-left-alone"),
    ],
)
def test_unkeyed(node: dict[str, Any], path: str, after: dict[str, Any] | None) -> None:
    unkeyed(node, path)
    if after is not None:
        assert _at(node, path) == after


def test_the_fault_keeps_every_list_map() -> None:
    with faults.injected("pod-template-list-maps-enforced"):
        node = _at(load_snapshot(), "containers[].env")
    assert (node["x-kubernetes-list-type"], node["x-kubernetes-list-map-keys"]) == ("map", ["name"])


def test_the_crd_embeds_the_atomic_host_aliases() -> None:
    version = crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    role = _at(version, "spec.template.roles[]")
    for kind in ("entryTemplate", "workerTemplate"):
        aliases = _at(role, f"{kind}.spec.hostAliases")
        assert aliases.get("x-kubernetes-list-type") == "atomic", kind
