"""The upstream PodSpec schema, made structural, for embedding in the ModelServing CRD.

Upstream Kthena's CRD embeds the full PodSpec schema (controller-gen does it) so the API server
rejects a pod template with a wrongly typed field at admission. We do the same from the source of
truth: the kube-apiserver's own OpenAPI v3 document (``/openapi/v3/api/v1``), converted here into
a CRD-compatible structural schema (references inlined, descriptions and object defaults dropped,
Quantity and IntOrString as ``x-kubernetes-int-or-string``). The result is checked in as
``podspec-<minor>.json`` and refreshed with ``kthena-ref crd --refresh-podspec`` against a cluster
of the pinned version, so generating the CRD needs no cluster. The lists kube-apiserver marks as
list-maps but does not key for a Pod (:data:`UNENFORCED_LISTS`) are made atomic when the snapshot is
loaded, so the CRD accepts every pod template a Pod accepts.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .. import faults

SNAPSHOT = Path(__file__).with_name("podspec-v1.36.json")
POD_SPEC = "io.k8s.api.core.v1.PodSpec"
REF_PREFIX = "#/components/schemas/"

# controller-gen's pattern for resource.Quantity.
QUANTITY_PATTERN = (
    r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))"
    r"(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$"
)
INT_OR_STRING = {"x-kubernetes-int-or-string": True, "anyOf": [{"type": "integer"}, {"type": "string"}]}
SPECIAL: dict[str, dict[str, Any]] = {
    "io.k8s.apimachinery.pkg.api.resource.Quantity": {
        **INT_OR_STRING,
        "pattern": QUANTITY_PATTERN,
    },
    "io.k8s.apimachinery.pkg.util.intstr.IntOrString": dict(INT_OR_STRING),
    "io.k8s.apimachinery.pkg.apis.meta.v1.Time": {"type": "string", "format": "date-time"},
    "io.k8s.apimachinery.pkg.apis.meta.v1.MicroTime": {"type": "string", "format": "date-time"},
    # Embedded ObjectMeta (ephemeral volume claim templates): kept, not validated, as controller-gen does.
    "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
}
KEEP_EXTENSIONS = {"x-kubernetes-list-type", "x-kubernetes-list-map-keys", "x-kubernetes-map-type"}
# List-maps (and sets) of the PodSpec whose keys kube-apiserver does NOT require unique for a Pod:
# its Go validation lets duplicates through (at most with a warning); the list-map markers serve
# server-side apply. A CRD schema enforces every list-map key, so embedded as they are these would
# refuse pod templates a Pod accepts: :func:`load_snapshot` makes them atomic lists. Measured
# against kube-apiserver v1.36.3 with dry-run Pods: two hostAliases entries for one IP, two env
# entries or imagePullSecrets of one name, two ports of one containerPort and protocol, an exit
# code twice in restartPolicyRules[].exitCodes.values are accepted; repeated containers, volumes,
# volumeMounts, volumeDevices, resourceClaims, resources.claims, schedulingGates and
# topologySpreadConstraints keys are refused, so those stay list-maps. (Paths in the PodSpec.)
CONTAINER_KINDS = ("containers", "initContainers", "ephemeralContainers")
UNENFORCED_LISTS = (
    "hostAliases",
    "imagePullSecrets",
    *(f"{kind}[].{field}" for kind in CONTAINER_KINDS for field in ("env", "ports")),
    *(f"{kind}[].restartPolicyRules[].exitCodes.values" for kind in CONTAINER_KINDS),
)
DROP = {
    "description",
    "x-kubernetes-patch-merge-key",
    "x-kubernetes-patch-strategy",
    "x-kubernetes-unions",
    "x-kubernetes-group-version-kind",
    "x-kubernetes-validations",
    "x-kubernetes-preserve-unknown-fields",
}


def structural(schemas: dict[str, Any], name: str, _stack: tuple[str, ...] = ()) -> dict[str, Any]:
    """The schema ``name`` from an OpenAPI v3 ``components.schemas`` map, inlined and structural."""
    if name in SPECIAL:
        return dict(SPECIAL[name])
    if name in _stack:
        raise ValueError(f"recursive schema {' -> '.join((*_stack, name))} cannot be inlined")
    return _convert(schemas, schemas[name], (*_stack, name))


def _convert(schemas: dict[str, Any], node: dict[str, Any], stack: tuple[str, ...]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if "$ref" in node:
        out.update(structural(schemas, node["$ref"].removeprefix(REF_PREFIX), stack))
    for part in node.get("allOf", []):
        out.update(_convert(schemas, part, stack))
    for key, value in node.items():
        if key in ("$ref", "allOf") or key in DROP:
            continue
        if key.startswith("x-") and key not in KEEP_EXTENSIONS:
            continue
        if key == "default":
            # Keep real scalar defaults (list-map keys such as a port's protocol need them); drop
            # object defaults and the "" zero values the generator writes for required enums.
            allowed = "enum" not in node or value in node["enum"]
            if not isinstance(value, (dict, list)) and value != "" and allowed:
                out["default"] = value
        elif key == "properties":
            out["properties"] = {k: _convert(schemas, v, stack) for k, v in value.items()}
        elif key in ("items", "additionalProperties") and isinstance(value, dict):
            out[key] = _convert(schemas, value, stack)
        elif key == "format" and value == "int-or-string":
            continue
        else:
            out[key] = value
    _keep_list_map_key_defaults(node, out)
    return out


def _keep_list_map_key_defaults(node: dict[str, Any], out: dict[str, Any]) -> None:
    """A list-map key must be required or defaulted: restore the "" default we dropped for it."""
    items = out.get("items")
    if not out.get("x-kubernetes-list-map-keys") or not isinstance(items, dict):
        return
    for key in out["x-kubernetes-list-map-keys"]:
        prop = items.get("properties", {}).get(key)
        if prop is not None and key not in items.get("required", []) and "default" not in prop:
            prop["default"] = ""


def pod_spec_from_openapi(document: dict[str, Any]) -> dict[str, Any]:
    """The structural PodSpec schema from a ``/openapi/v3/api/v1`` document."""
    return structural(document["components"]["schemas"], POD_SPEC)


def load_snapshot() -> dict[str, Any]:
    """The checked-in structural PodSpec schema, with the lists a Pod does not key made atomic."""
    data = json.loads(SNAPSHOT.read_text())
    schema = data["schema"] if isinstance(data, dict) else None
    if not isinstance(schema, dict):
        raise ValueError(f"{SNAPSHOT} holds no schema: regenerate it with `kthena-ref crd --refresh-podspec`")
    if not faults.active("pod-template-list-maps-enforced"):
        for path in UNENFORCED_LISTS:
            unkeyed(schema, path)
    if faults.active("pod-spec-schema-outdated"):  # an older PodSpec: kube-apiserver prunes what it lacks
        del schema["properties"]["resources"]
        for kind in CONTAINER_KINDS:
            del schema["properties"][kind]["items"]["properties"]["restartPolicyRules"]
    return schema


def unkeyed(schema: dict[str, Any], path: str) -> None:
    """Make the list-map or set at ``path`` (dotted; ``[]`` steps into a list's items) an atomic
    list; a path the schema lacks (an older PodSpec) is left alone."""
    node: Any = schema
    for part in path.split("."):
        node = (node.get("properties") or {}).get(part.removesuffix("[]"))
        if node is not None and part.endswith("[]"):
            node = node.get("items")
        if not isinstance(node, dict):
            return
    if node.get("x-kubernetes-list-type") in ("map", "set"):
        node["x-kubernetes-list-type"] = "atomic"
        node.pop("x-kubernetes-list-map-keys", None)


def write_snapshot(schema: dict[str, Any], source: str) -> None:
    """Check in ``schema`` with a note of where it came from."""
    SNAPSHOT.write_text(json.dumps({"source": source, "schema": schema}, indent=1, sort_keys=True) + "\n")
