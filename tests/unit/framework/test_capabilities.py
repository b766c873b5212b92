"""Accelerator capability files: valid files (the shipped ones included), every kind of malformed
file (each naming the file, the line and the field), the effective support, the pure checks on
published devices, and the CLI check."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from conformance.cli import main
from conformance.framework.capabilities import (
    CapabilityFileError,
    attribute_problem,
    check_device_classes,
    check_devices,
    effective_support,
    env_problems,
    load_all,
    load_capabilities,
    quantity,
    render_env,
    semver,
)
from conformance.framework.features import Feature
from conformance.framework.support import PodLabels, Support
from conformance.runner import device_pools, fake_capability_files
from fake_devices.drivers import GPU, NPU
from fake_devices.publisher import desired_slice, plan

ROOT = Path(__file__).resolve().parents[3]
SHIPPED = ROOT / "fake-devices" / "fake_devices" / "capabilities"

VALID: dict[str, Any] = {
    "apiVersion": "conformance.kthena.io/capabilities/v1",
    "kind": "AcceleratorCapabilities",
    "vendor": "Example Corp",
    "driver": "gpu.fake.kthena-conformance.io",
    "driverVersion": "1.0.0",
    "deviceClasses": [
        {
            "name": "gpu.fake.kthena-conformance.io",
            "level": "MUST",
            "nodes": {"selector": {"gpu.fake.kthena-conformance.io/device-count": "4"}, "devicesPerNode": 4},
            "attributes": [
                {"name": "model", "type": "string", "level": "MUST"},
                {"name": "index", "type": "int", "atLeast": 0},
                {"name": "driverVersion", "type": "version", "level": "SHOULD", "atLeast": "1.0.0"},
                {"name": "memory", "capacity": True, "level": "SHOULD", "atLeast": "16Gi"},
            ],
            "claims": {"maxDevicesPerClaim": 2},
        }
    ],
}


def write(tmp_path: Path, data: Any, name: str = "caps.yaml") -> Path:
    path = tmp_path / name
    path.write_text(data if isinstance(data, str) else yaml.safe_dump(data, sort_keys=False))
    return path


def changed(path: str, value: Any) -> dict[str, Any]:
    """VALID with the value at a dotted path (``deviceClasses.0.nodes.devicesPerNode``) replaced;
    ``DELETE`` removes it."""
    data = copy.deepcopy(VALID)
    *parents, last = path.split(".")
    node: Any = data
    for part in parents:
        node = node[int(part)] if isinstance(node, list) else node[part]
    key: Any = int(last) if isinstance(node, list) else last
    if value is DELETE:
        del node[key]
    else:
        node[key] = value
    return data


DELETE = object()


# -- valid files -------------------------------------------------------------------------------------


def test_valid_file(tmp_path: Path) -> None:
    caps = load_capabilities(write(tmp_path, VALID))
    assert (caps.vendor, caps.driver, caps.driver_version) == (
        "Example Corp",
        "gpu.fake.kthena-conformance.io",
        "1.0.0",
    )
    (cls,) = caps.device_classes
    assert cls.nodes.fewest_devices == 4 and cls.claims.max_devices_per_claim == 2
    assert [a.name for a in cls.attributes] == ["model", "index", "driverVersion", "memory"]
    assert cls.attributes[1].level == "MUST"  # the default
    report = caps.as_report()
    assert report["driver"] == "gpu.fake.kthena-conformance.io" and len(report["sha256"]) == 64
    assert report["deviceClasses"] == [{"name": "gpu.fake.kthena-conformance.io", "level": "MUST"}]


@pytest.mark.parametrize(
    ("path", "value"),
    [
        pytest.param("deviceClasses.0.nodes", {"selector": {"a": "b"}, "minDevicesPerNode": 2}, id="minimum-count"),
        pytest.param("deviceClasses.0.level", "SHOULD", id="should-class"),
        pytest.param("deviceClasses.0.attributes", [], id="no-attributes"),
        pytest.param("deviceClasses.0.deviceNamePattern", "^gpu-[0-9]+$", id="name-pattern"),
        pytest.param(
            "deviceClasses.0.attributes.0",
            {"name": "gpu.fake.kthena-conformance.io/model", "type": "string"},
            id="qualified",
        ),
        pytest.param(
            "deviceClasses.0.attributes.0", {"name": "brand", "type": "string", "equals": "X"}, id="equals-string"
        ),
        pytest.param("deviceClasses.0.attributes.0", {"name": "ok", "type": "bool", "equals": True}, id="equals-bool"),
        pytest.param(
            "deviceClasses.0.attributes.0", {"name": "mem", "capacity": True, "equals": 1000}, id="capacity-int"
        ),
        pytest.param("pods", {"image": "nvcr.io/nvidia/cuda:12.0-base"}, id="pod-image"),
        pytest.param("driverVersion", DELETE, id="no-driver-version"),
        pytest.param("contact", ["dra@example.com"], id="contact"),
        pytest.param(
            "deviceClasses.0.nodes.tolerations",
            [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
            id="tolerations",
        ),
    ],
)
def test_valid_variants(tmp_path: Path, path: str, value: Any) -> None:
    load_capabilities(write(tmp_path, changed(path, value)))


@pytest.mark.parametrize("name", ["gpu.yaml", "npu.yaml"])
def test_the_shipped_files_are_valid_and_match_the_fake_drivers(name: str) -> None:
    caps = load_capabilities(SHIPPED / name)
    shape = {GPU.driver: GPU, NPU.driver: NPU}[caps.driver]
    (cls,) = caps.device_classes
    nodes = [{"metadata": {"name": f"n-{i}", "labels": dict(cls.nodes.selector)}} for i in range(cls.nodes.min_nodes)]
    count = cls.nodes.fewest_devices
    assert cls.nodes.selector[shape.count_label] == str(count)
    published = [desired_slice(shape, n, count, 1) for n in nodes]
    assert check_devices(caps, nodes, published) == []  # every MUST and SHOULD holds
    assert sorted(p.name for p in fake_capability_files()) == ["gpu.yaml", "npu.yaml"]


# -- malformed files -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        pytest.param("a: [", "not valid YAML: line 1, column 5", id="not-yaml"),
        pytest.param("a: 1\na: 2\n", "not valid YAML: line 2, column 1: key 'a' appears twice", id="duplicate-key"),
        pytest.param("", "got empty", id="empty"),
        pytest.param("- gpu\n", "got a list", id="a-list"),
        pytest.param("a: 1\n---\nb: 2\n", "not valid YAML", id="two-documents"),
        pytest.param(
            changed("apiVersion", "v1"),
            ":1: apiVersion: expected 'conformance.kthena.io/capabilities/v1', got 'v1'",
            id="api-version",
        ),
        pytest.param(changed("kind", "Capabilities"), ":2: kind: expected 'AcceleratorCapabilities'", id="kind"),
        pytest.param(changed("vendor", DELETE), "vendor: required field is missing", id="no-vendor"),
        pytest.param(changed("vendor", ""), "vendor: string should have at least 1 character", id="empty-vendor"),
        pytest.param(changed("extra", 1), ":30: extra: unknown field", id="unknown-top-field"),
        pytest.param(
            changed("driver", "GPU_Example"), ":4: driver: 'GPU_Example' is not a DRA driver name", id="bad-driver"
        ),
        pytest.param(
            changed("driverVersion", 1.0), "driverVersion: expected a string, got 1.0 (quote it)", id="unquoted-version"
        ),
        pytest.param(changed("deviceClasses", []), "deviceClasses: list should have at least 1 item", id="no-classes"),
        pytest.param(
            changed("deviceClasses.0.name", "GPU!"),
            "deviceClasses[0].name: 'GPU!' is not a DeviceClass name",
            id="bad-class-name",
        ),
        pytest.param(
            changed("deviceClasses.0.level", "MAY"),
            "deviceClasses[0].level: expected 'MUST' or 'SHOULD'",
            id="bad-level",
        ),
        pytest.param(
            changed("deviceClasses.0.level", "must"),
            "deviceClasses[0].level: expected 'MUST' or 'SHOULD'",
            id="lowercase-level",
        ),
        pytest.param(
            changed("deviceClasses.0.nodes", DELETE), "deviceClasses[0].nodes: required field is missing", id="no-nodes"
        ),
        pytest.param(
            changed("deviceClasses.0.nodes.selector", {}),
            "deviceClasses[0].nodes.selector: dictionary should have at least 1 item",
            id="empty-selector",
        ),
        pytest.param(
            changed("deviceClasses.0.nodes.selector", {"gpu.fake.kthena-conformance.io/device-count": 4}),
            "deviceClasses[0].nodes.selector.gpu.fake.kthena-conformance.io/device-count: expected a string, got 4 (quote it)",
            id="unquoted-label",
        ),
        pytest.param(
            changed("deviceClasses.0.nodes.selector", {"bad key!": "x"}),
            "'bad key!' is not a valid label key",
            id="bad-label-key",
        ),
        pytest.param(
            changed("deviceClasses.0.nodes.selector", {"a": "not valid!"}),
            "'not valid!' is not a valid label value",
            id="bad-label-value",
        ),
        pytest.param(
            changed("deviceClasses.0.nodes.devicesPerNode", DELETE),
            "give exactly one of devicesPerNode (an exact count) and minDevicesPerNode",
            id="no-count",
        ),
        pytest.param(
            changed("deviceClasses.0.nodes.minDevicesPerNode", 2),
            "give exactly one of devicesPerNode",
            id="both-counts",
        ),
        pytest.param(
            changed("deviceClasses.0.nodes.devicesPerNode", 0),
            "devicesPerNode: input should be greater than or equal to 1",
            id="zero-devices",
        ),
        pytest.param(
            changed("deviceClasses.0.nodes.devicesPerNode", "4"),
            "devicesPerNode: input should be a valid integer",
            id="string-count",
        ),
        pytest.param(
            changed("deviceClasses.0.nodes.minNodes", 0),
            "minNodes: input should be greater than or equal to 1",
            id="zero-nodes",
        ),
        pytest.param(
            changed("deviceClasses.0.nodes.tolerations", [{"key": "a", "operator": "Exists", "value": "x"}]),
            "tolerations[0].value: must be empty when operator is Exists",
            id="toleration-value",
        ),
        pytest.param(
            changed("deviceClasses.0.nodes.tolerations", [{"operator": "Sometimes"}]),
            "tolerations[0].operator: expected 'Exists' or 'Equal'",
            id="toleration-operator",
        ),
        pytest.param(
            changed("deviceClasses.0.claims", DELETE),
            "deviceClasses[0].claims: required field is missing",
            id="no-claims",
        ),
        pytest.param(
            changed("deviceClasses.0.claims.maxDevicesPerClaim", 5),
            "maxDevicesPerClaim: 5 is more than nodes.devicesPerNode (4)",
            id="claim-larger-than-node",
        ),
        pytest.param(
            changed("deviceClasses.0.claims.maxDevicesPerClaim", 33),
            "maxDevicesPerClaim: input should be less than or equal to 32",
            id="claim-over-api-limit",
        ),
        pytest.param(
            changed("deviceClasses.0.deviceNamePattern", "gpu-("),
            "deviceNamePattern: not a valid regular expression",
            id="bad-name-pattern",
        ),
        pytest.param(
            changed("deviceClasses.0.attributes.0.type", "float"),
            "attributes[0].type: expected 'int', 'bool', 'string' or 'version'",
            id="bad-type",
        ),
        pytest.param(
            changed("deviceClasses.0.attributes.0.type", DELETE),
            "attributes[0]: give exactly one of type (int, bool, string, version) and capacity: true",
            id="no-type",
        ),
        pytest.param(
            changed("deviceClasses.0.attributes.3.type", "int"),
            "attributes[3]: give exactly one of type",
            id="type-and-capacity",
        ),
        pytest.param(
            changed("deviceClasses.0.attributes.0.name", "9lives"),
            "attributes[0].name: '9lives' is not a DRA attribute name",
            id="bad-attribute-name",
        ),
        pytest.param(
            changed("deviceClasses.0.attributes.1.name", "model"),
            "attributes[1].name: duplicate attribute 'model' (also attributes[0])",
            id="duplicate-attribute",
        ),
        pytest.param(
            changed("deviceClasses.0.attributes.1.name", "gpu.fake.kthena-conformance.io/model"),
            "duplicate attribute 'gpu.fake.kthena-conformance.io/model'",
            id="duplicate-qualified",
        ),
        pytest.param(
            changed("deviceClasses.0.attributes.1.atLeast", "zero"),
            "attributes[1].atLeast: expected an integer, got 'zero'",
            id="int-bound-string",
        ),
        pytest.param(
            changed("deviceClasses.0.attributes.1.equals", True),
            "attributes[1].equals: expected an integer, got True",
            id="int-equals-bool",
        ),
        pytest.param(
            changed("deviceClasses.0.attributes.0.atLeast", 3),
            "attributes[0].atLeast: only for int, version and capacity attributes, not string",
            id="string-bound",
        ),
        pytest.param(
            changed("deviceClasses.0.attributes.0.equals", 7),
            "attributes[0].equals: expected a string, got 7 (quote it)",
            id="string-equals-int",
        ),
        pytest.param(
            changed("deviceClasses.0.attributes.0.pattern", "(("),
            "attributes[0].pattern: not a valid regular expression",
            id="bad-pattern",
        ),
        pytest.param(
            changed("deviceClasses.0.attributes.1.pattern", "x"),
            "attributes[1].pattern: only for string attributes, not int",
            id="pattern-on-int",
        ),
        pytest.param(
            changed("deviceClasses.0.attributes.2.atLeast", "v1"),
            "attributes[2].atLeast: expected a semantic version string",
            id="bad-version",
        ),
        pytest.param(
            changed("deviceClasses.0.attributes.3.atLeast", "16 gigs"),
            "attributes[3].atLeast: expected a quantity such as 16Gi",
            id="bad-quantity",
        ),
        pytest.param(
            changed("deviceClasses.0.attributes.3.pattern", "x"),
            "attributes[3].pattern: only for string attributes, not capacity",
            id="pattern-on-capacity",
        ),
        pytest.param(
            changed("deviceClasses.0.attributes.0.colour", "red"),
            "attributes[0].colour: unknown field",
            id="unknown-attribute-field",
        ),
        pytest.param(
            changed("deviceClasses.0.attributes.0.level", None),
            "attributes[0].level: expected 'MUST' or 'SHOULD'",
            id="null-level",
        ),
        pytest.param(
            changed("pods", {"image": ""}), "pods.image: string should have at least 1 character", id="empty-image"
        ),
        pytest.param(
            changed("deviceClasses.0.containerEnv", [{"name": "GPU_{serial}", "value": "{device}"}]),
            "containerEnv[0].name: 'GPU_{serial}': unknown placeholder {serial} (known: device, driverVersion, index",
            id="env-undeclared-attribute",
        ),
        pytest.param(
            changed("deviceClasses.0.containerEnv", [{"name": "GPU", "value": "{index:03d}"}]),
            "containerEnv[0].value: '{index:03d}': placeholder {index} takes no format spec or conversion",
            id="env-format-spec",
        ),
        pytest.param(
            changed("deviceClasses.0.containerEnv", [{"name": "GPU_{", "value": "x"}]),
            "containerEnv[0].name: 'GPU_{': Single '{' encountered in format string (double a brace",
            id="env-unbalanced",
        ),
        pytest.param(
            changed("deviceClasses.0.containerEnv", [{"value": "x"}]),
            "containerEnv[0].name: required",
            id="env-no-name",
        ),
    ],
)
def test_malformed_files_name_the_file_line_and_field(tmp_path: Path, data: Any, expected: str) -> None:
    path = write(tmp_path, data)
    with pytest.raises(CapabilityFileError) as err:
        load_capabilities(path)
    text = str(err.value)
    assert expected in text, text
    assert all(line.startswith(str(path)) for line in err.value.problems), err.value.problems
    assert "Traceback" not in text and "pydantic" not in text.lower()


def test_errors_carry_the_line_of_the_field(tmp_path: Path) -> None:
    text = yaml.safe_dump(changed("deviceClasses.0.claims.maxDevicesPerClaim", 9), sort_keys=False)
    line = next(i for i, t in enumerate(text.splitlines(), 1) if "maxDevicesPerClaim" in t)
    path = write(tmp_path, text)
    with pytest.raises(CapabilityFileError) as err:
        load_capabilities(path)
    assert err.value.problems[0].startswith(f"{path}:{line}: deviceClasses[0].claims.maxDevicesPerClaim: 9 is more")


def test_a_missing_file_and_binary_content(tmp_path: Path) -> None:
    with pytest.raises(CapabilityFileError, match="cannot read"):
        load_capabilities(tmp_path / "absent.yaml")
    (tmp_path / "bin.yaml").write_bytes(b"\xff\xfe\x00")
    with pytest.raises(CapabilityFileError, match="not UTF-8 text"):
        load_capabilities(tmp_path / "bin.yaml")


def test_several_files_one_driver_each(tmp_path: Path) -> None:
    a = write(tmp_path, VALID, "a.yaml")
    b = write(tmp_path, VALID, "b.yaml")
    bad = write(tmp_path, changed("kind", "X"), "bad.yaml")
    with pytest.raises(CapabilityFileError) as err:
        load_all([a, b, bad])
    assert any("driver 'gpu.fake.kthena-conformance.io' is already declared by" in p for p in err.value.problems)
    assert any(p.startswith(f"{bad}:") for p in err.value.problems)
    assert len(load_all([SHIPPED / "gpu.yaml", SHIPPED / "npu.yaml"])) == 2


# -- values --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "value"),
    [("16Gi", 16 * 2**30), ("80000000000", 80 * 10**9), ("1.5k", 1500), ("1e3", 1000), ("500m", 0.5), ("x", None),
     ("16 Gi", None), ("", None)],
)  # fmt: skip
def test_quantities(text: str, value: float | None) -> None:
    got = quantity(text)
    assert (got is None and value is None) or (got is not None and float(got) == value)


def test_semantic_versions_order() -> None:
    ordered = ["1.0.0-alpha", "1.0.0-alpha.1", "1.0.0-beta", "1.0.0", "1.2.0", "1.10.0", "2.0.0"]
    keys = [semver(v) for v in ordered]
    assert all(k is not None for k in keys)
    assert keys == sorted(keys)  # type: ignore[type-var]
    assert semver("v1.0") is None and semver("1.0") is None


# -- support --------------------------------------------------------------------------------------------


def support(*features: Feature, reasons: dict[Feature, str] | None = None) -> Support:
    return Support("impl", "1", frozenset(features), reasons or {}, "flags")


def test_accelerators_is_supported_exactly_when_capability_files_are_given(tmp_path: Path) -> None:
    caps = [load_capabilities(write(tmp_path, VALID))]
    without = effective_support(support(Feature.CORE, Feature.ACCELERATORS), [])
    assert not without.supports(Feature.ACCELERATORS)
    assert "no capability file was given (--capabilities FILE" in without.reason(Feature.ACCELERATORS)
    assert effective_support(support(Feature.CORE), caps).supports(Feature.ACCELERATORS)
    declined = effective_support(support(Feature.CORE, reasons={Feature.ACCELERATORS: "no DRA"}), caps)
    assert not declined.supports(Feature.ACCELERATORS) and declined.reason(Feature.ACCELERATORS) == "no DRA"
    no_core = effective_support(support(), caps)
    assert "requires Core" in no_core.reason(Feature.ACCELERATORS)
    # the report's view round-trips (verify reads it back)
    back = Support.from_report(effective_support(support(Feature.CORE), caps).as_report())
    assert back.supports(Feature.ACCELERATORS)


def test_driver_certification_follows_accelerators(tmp_path: Path) -> None:
    caps = [load_capabilities(write(tmp_path, VALID))]
    given = effective_support(support(Feature.CORE), caps)
    assert given.supports(Feature.DRIVER_CERTIFICATION)
    without = effective_support(support(Feature.CORE, Feature.DRIVER_CERTIFICATION), [])
    assert not without.supports(Feature.DRIVER_CERTIFICATION)
    assert "no capability file was given" in without.reason(Feature.DRIVER_CERTIFICATION)
    declined = effective_support(support(Feature.CORE, reasons={Feature.ACCELERATORS: "no DRA"}), caps)
    assert not declined.supports(Feature.DRIVER_CERTIFICATION)
    assert declined.reason(Feature.DRIVER_CERTIFICATION) == "DriverCertification requires Accelerators: no DRA"
    only_driver = effective_support(support(Feature.CORE, reasons={Feature.DRIVER_CERTIFICATION: "no driver"}), caps)
    assert only_driver.supports(Feature.ACCELERATORS) and not only_driver.supports(Feature.DRIVER_CERTIFICATION)


def test_effective_support_keeps_the_declared_pod_labels(tmp_path: Path) -> None:
    caps = [load_capabilities(write(tmp_path, VALID))]
    labels = PodLabels("example.com/group", "example.com/instance")
    declared = Support("impl", "1", frozenset({Feature.CORE}), {}, "flags", labels)
    assert effective_support(declared, caps).pod_labels == labels


# -- checks on published devices -----------------------------------------------------------------------


def node(name: str, labels: dict[str, str]) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": labels}}


def gpu_cluster(counts: dict[str, int]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    nodes = [node(n, {GPU.count_label: "4"}) for n in counts] + [node("plain", {})]
    return nodes, [desired_slice(GPU, n, c, 1) for n, c in zip(nodes, counts.values(), strict=False) if c]


def test_device_checks_pass_for_what_the_file_declares(tmp_path: Path) -> None:
    caps = load_capabilities(write(tmp_path, VALID))
    nodes, slices = gpu_cluster({"gpu-0": 4, "gpu-1": 4})
    assert check_devices(caps, nodes, slices) == []
    assert check_device_classes(caps, ["gpu.fake.kthena-conformance.io", "other"]) == []


def test_device_checks_find_each_problem_at_its_level(tmp_path: Path) -> None:
    data = changed("deviceClasses.0.nodes.minNodes", 3)
    data["deviceClasses"][0]["attributes"].append({"name": "colour", "type": "string", "level": "SHOULD"})
    data["deviceClasses"][0]["attributes"].append(
        {"name": "model", "type": "string", "equals": "OTHER"} | {"name": "uuid"}
    )
    caps = load_capabilities(write(tmp_path, data))
    nodes, slices = gpu_cluster({"gpu-0": 3, "gpu-1": 0})
    found = {(f.level, f.check, f.subject, f.message) for f in check_devices(caps, nodes, slices)}
    assert (
        "MUST",
        "nodes",
        "DeviceClass gpu.fake.kthena-conformance.io",
        "2 node(s) match the selector gpu.fake.kthena-conformance.io/device-count=4; at least 3 declared",
    ) in found
    assert (
        "MUST",
        "nodes",
        "node gpu-1",
        "publishes no ResourceSlice of driver gpu.fake.kthena-conformance.io",
    ) in found
    assert any(f[2] == "node gpu-0" and "publishes 3 device(s)" in f[3] and "devicesPerNode 4" in f[3] for f in found)
    assert any(
        f[:3] == ("SHOULD", "attributes", "attribute colour of DeviceClass gpu.fake.kthena-conformance.io")
        and f[3].startswith("missing on 3 device(s)")
        for f in found
    )
    assert any(
        f[:3] == ("MUST", "attributes", "attribute uuid of DeviceClass gpu.fake.kthena-conformance.io")
        and "is 'gpu-" in f[3]
        for f in found
    )
    assert (
        check_device_classes(caps, []) and check_device_classes(caps, [])[0].message == "does not exist in the cluster"
    )


def test_the_off_by_one_fault_fails_the_device_count(tmp_path: Path) -> None:
    caps = load_capabilities(SHIPPED / "gpu.yaml")
    nodes = [node(f"gpu-{i}", {GPU.count_label: "4"}) for i in range(2)]
    broken = plan(GPU, nodes, [], frozenset({"device-count-off-by-one"})).creates
    assert [len(s["spec"]["devices"]) for s in broken] == [3, 3]
    found = check_devices(caps, nodes, broken)
    assert {f.check for f in found} == {"nodes"} and all(f.level == "MUST" for f in found)
    assert check_devices(caps, nodes, plan(GPU, nodes, []).creates) == []


@pytest.mark.parametrize(
    ("attr", "device", "problem"),
    [
        ({"name": "index", "type": "int"}, {"attributes": {"index": {"string": "0"}}}, "is of type string, declared int"),
        ({"name": "index", "type": "int", "atLeast": 2}, {"attributes": {"index": {"int": 1}}}, "is 1, declared at least 2"),
        ({"name": "v", "type": "version", "atLeast": "1.2.0"}, {"attributes": {"v": {"version": "1.1.9"}}}, "is 1.1.9, declared at least 1.2.0"),
        ({"name": "v", "type": "version"}, {"attributes": {"gpu.fake.kthena-conformance.io/v": {"version": "1.1.9"}}}, None),
        ({"name": "mem", "capacity": True, "atLeast": "16Gi"}, {"capacity": {"mem": {"value": "8Gi"}}}, "is 8Gi, declared at least 16Gi"),
        ({"name": "mem", "capacity": True, "atLeast": "16Gi"}, {"capacity": {"mem": {"value": "80Gi"}}}, None),
        ({"name": "mem", "capacity": True}, {"attributes": {"mem": {"int": 1}}}, "missing"),
        ({"name": "b", "type": "bool", "equals": True}, {"attributes": {"b": {"bool": False}}}, "is False, declared True"),
    ],
)  # fmt: skip
def test_attribute_problems(attr: dict[str, Any], device: dict[str, Any], problem: str | None) -> None:
    from conformance.framework.capabilities import Attribute

    assert attribute_problem("gpu.fake.kthena-conformance.io", Attribute.model_validate(attr), device) == problem


# -- the embedded cluster's pools and the CLI ---------------------------------------------------------


def test_fake_driver_pools_follow_the_capability_files() -> None:
    pools = {p.name: p for p in device_pools(load_all(fake_capability_files()))}
    assert set(pools) == {"accel-gpu", "accel-npu"}
    assert pools["accel-gpu"].labels[GPU.count_label] == "4" and pools["accel-gpu"].count == 2
    assert pools["accel-npu"].labels[NPU.count_label] == "8"
    assert [t.key for t in pools["accel-npu"].taints] == ["huawei.com/ascend"]


def test_with_real_nodes_one_node_of_each_class_is_real() -> None:
    pools = {p.name: p for p in device_pools(load_all(fake_capability_files()), real_nodes=True)}
    assert {n: (p.kind, p.count) for n, p in pools.items()} == {
        "accel-gpu-real": ("real", 1),
        "accel-gpu": ("kwok", 1),
        "accel-npu-real": ("real", 1),
        "accel-npu": ("kwok", 1),
    }
    assert pools["accel-npu-real"].labels == pools["accel-npu"].labels
    assert pools["accel-npu-real"].taints == pools["accel-npu"].taints


# -- containerEnv ---------------------------------------------------------------------------------------


def _device(name: str, **attributes: Any) -> dict[str, Any]:
    kinds = {bool: "bool", int: "int", str: "string"}
    return {"name": name, "attributes": {k: {kinds[type(v)]: v} for k, v in attributes.items()}}


@pytest.mark.parametrize(
    ("shipped", "device", "expected"),
    [
        pytest.param("gpu.yaml", _device("gpu-3", index=3), {"GPU_DEVICE_3": "gpu-3"}, id="gpu"),
        pytest.param(
            "npu.yaml",
            _device("npu-5-0", index=5),
            {"NPU_DEVICE_5_0": "npu-5-0", "ASCEND_VISIBLE_DEVICES": "5"},
            id="npu",
        ),
        pytest.param(
            "gpu.yaml",
            {"name": "gpu-1", "attributes": {"gpu.fake.kthena-conformance.io/index": {"int": 1}}},
            {"GPU_DEVICE_1": "gpu-1"},
            id="qualified-attribute",
        ),
        pytest.param("gpu.yaml", _device("gpu-1"), {"GPU_DEVICE_<missing attribute index>": "gpu-1"}, id="missing"),
    ],
)
def test_container_env_renders_per_device(shipped: str, device: dict[str, Any], expected: dict[str, str]) -> None:
    caps = load_capabilities(SHIPPED / shipped)
    (cls,) = caps.device_classes
    assert render_env(cls, caps.driver, device) == expected


def test_the_shipped_env_is_what_the_fake_kubelet_plugin_writes() -> None:
    from fake_devices.kubeletplugin.cdi import device_env

    for shipped, shape in (("gpu.yaml", GPU), ("npu.yaml", NPU)):
        caps = load_capabilities(SHIPPED / shipped)
        (cls,) = caps.device_classes
        for device in shape.devices("node-a", 3):
            written = dict(v.split("=", 1) for v in device_env(shape, str(device["name"])))
            assert render_env(cls, caps.driver, device) == written


@pytest.mark.parametrize(
    ("seen", "problems"),
    [
        pytest.param({"A": "1", "B": "2", "PATH": "/bin"}, [], id="all-there"),
        pytest.param({"A": "1"}, ["device d: B=2 expected, B is not set"], id="missing"),
        pytest.param({"A": "1", "B": "3"}, ["device d: B=2 expected, B=3 seen"], id="wrong"),
    ],
)
def test_env_problems(seen: dict[str, str], problems: list[str]) -> None:
    assert env_problems({"A": "1", "B": "2"}, seen, "d") == problems


def test_cli_check(tmp_path: Path) -> None:
    runner = CliRunner()
    ok = runner.invoke(main, ["capabilities", "check", str(SHIPPED / "gpu.yaml"), str(SHIPPED / "npu.yaml")])
    assert ok.exit_code == 0, ok.output
    assert (
        "valid: driver gpu.fake.kthena-conformance.io" in ok.output
        and "valid: driver npu.fake.kthena-conformance.io" in ok.output
    )
    bad = write(tmp_path, changed("deviceClasses.0.nodes.devicesPerNode", -1))
    result = runner.invoke(main, ["capabilities", "check", str(bad)])
    assert result.exit_code == 1
    assert f"error: {bad}:" in result.output and "devicesPerNode" in result.output
    assert "Traceback" not in result.output


# -- the report ------------------------------------------------------------------------------------------


def accelerators_report(with_files: bool) -> dict[str, Any]:
    from conformance.framework.features import PROFILES
    from conformance.framework.outcomes import Outcome, TestResult, overall_verdict, profile_verdict
    from conformance.framework.report import SCHEMA_VERSION

    support = Support("kthena-ref", "0.1.0", frozenset({Feature.CORE, Feature.ACCELERATORS}), {}, "flags")
    results = [TestResult("accelerators/x/y", "t.py::t", Feature.ACCELERATORS, Outcome.PASSED, 1.0)]
    profiles = [profile_verdict(PROFILES["Accelerators"], results, support)]
    caps = load_capabilities(SHIPPED / "gpu.yaml").as_report()
    return {
        "schemaVersion": SCHEMA_VERSION,
        "kind": "ConformanceReport",
        "suite": {"name": "kthena-conformance", "version": "0.1.0", "digest": "sha256:00"},
        "run": {"id": "r", "startedAt": "2026-01-02T03:04:05+00:00", "keep": "never",
                "selection": {"profiles": ["Accelerators"], "features": [], "ids": []}},
        "implementation": support.as_report(),
        "profiles": [p.as_dict() for p in profiles],
        "tests": [r.as_dict() for r in results],
        "verdict": overall_verdict(profiles, preflight_ok=True, interrupted=False).value,
        "accelerators": {"capabilities": [caps] if with_files else [], "fakeDevices": True, "faults": [],
                         "warnings": ["accelerators/x/y: SHOULD: something"]},
    }  # fmt: skip


def test_the_report_records_the_drivers_and_verify_requires_them(tmp_path: Path) -> None:
    from conformance.framework.report import verify, write

    (good, _) = write(accelerators_report(True), tmp_path / "good")
    assert verify(good, catalog=[]) == []
    assert (
        yaml.safe_load(good.read_text())["accelerators"]["capabilities"][0]["driver"]
        == "gpu.fake.kthena-conformance.io"
    )
    (bad, _) = write(accelerators_report(False), tmp_path / "bad")
    assert verify(bad, catalog=[]) == [
        "1 Accelerators test(s) ran but the report names no driver and capability file (accelerators.capabilities)"
    ]


def test_the_publisher_refuses_an_unknown_fault(monkeypatch: pytest.MonkeyPatch) -> None:
    from fake_devices import cli
    from fake_devices.drivers import FAULT_ENV, parse_faults

    assert parse_faults(" device-count-off-by-one, ") == {"device-count-off-by-one"}
    assert parse_faults(None) == frozenset()
    monkeypatch.setenv(FAULT_ENV, "melt")
    assert cli.main(["publish", "--driver", "gpu", "--kubeconfig", "/nonexistent"]) == 2
    with pytest.raises(SystemExit):
        cli.main(["publish", "--driver", "gpu", "--fault", "melt"])
