"""What an accelerator vendor declares about a DRA driver: a strictly validated capability file.

The Accelerators profile certifies a DRA driver (not the ModelServing implementation) against the
file its vendor writes. Every check names the level it is held to: ``MUST`` findings make the
profile fail, ``SHOULD`` findings are warnings in the report. A file is checked hard, and every
mistake is reported as ``<file>:<line>: <field path>: <problem>`` (never a pydantic dump or a
traceback)::

    apiVersion: conformance.kthena.io/capabilities/v1
    kind: AcceleratorCapabilities
    vendor: Example Corp                 # required
    driver: gpu.fake.kthena-conformance.io              # required: the DRA driver name (ResourceSlice spec.driver)
    driverVersion: "1.0.0"               # optional, recorded in the report
    url: https://example.com/driver      # optional
    contact: [dra@example.com]           # optional
    pods:                                # optional: how the suite's Pods look on this cluster
      image: registry.k8s.io/pause:3.10  #   (default; must run on a real node, ignored on kwok)
    deviceClasses:                       # at least one
    - name: gpu.fake.kthena-conformance.io              # the DeviceClass (must exist in the cluster)
      level: MUST                        # MUST (default) or SHOULD: the level of every check below
      deviceNamePattern: "^gpu-[0-9]+$"  # optional: which of the driver's devices the class selects
      nodes:
        selector: {gpu.fake.kthena-conformance.io/device-count: "4"}   # the nodes that have these devices
        devicesPerNode: 4                # exactly this many on every selected node, or
        # minDevicesPerNode: 1           # at least this many (exactly one of the two)
        minNodes: 1                      # at least this many nodes match (default 1)
        tolerations:                     # optional: given to the suite's Pods (tainted device nodes)
        - {key: example.com/gpu, operator: Exists, effect: NoSchedule}
      attributes:                        # what every device of the class carries
      - {name: index, type: int}                         # level defaults to MUST
      - {name: model, type: string, level: MUST, pattern: "^[A-Z]"}
      - {name: driverVersion, type: version, atLeast: "1.0.0", level: SHOULD}
      - {name: memory, capacity: true, atLeast: 16Gi, level: SHOULD}
      claims:
        maxDevicesPerClaim: 2            # the largest ExactCount one claim may ask for (1..32)
      containerEnv:                      # optional: what a container sees for each device of a claim
      - {name: "GPU_DEVICE_{index}", value: "{device}"}  # (checked on real nodes: the CDI spec's env)

``containerEnv`` templates name the environment variables the driver's prepared claim (its CDI
spec) gives a container for each allocated device: ``{device}`` is the device's name and
``{<attribute>}`` the value of one of the class's declared attributes on that device (braces doubled
for a literal one). Observable only in a running container, so checked on the cluster's real nodes.

Attributes are either typed (``type``: ``int``, ``bool``, ``string`` or ``version``, the
``resource.k8s.io/v1`` DeviceAttribute kinds) or ``capacity: true`` (a DeviceCapacity quantity).
Constraints: ``equals`` (any kind), ``atLeast`` (int, version, capacity), ``pattern`` (a regular
expression a string must match, searched). Names may be qualified (``gpu.fake.kthena-conformance.io/model``);
qualified with the driver's own domain they equal the unqualified name, as in DRA.

:func:`load_capabilities` reads and validates a file; :func:`check_device_classes` and
:func:`check_devices` are the pure checks the suite runs on what the cluster publishes.
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
import string
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from .features import Feature
from .support import Support, field_path, validation_problems

API_VERSION = "conformance.kthena.io/capabilities/v1"
KIND = "AcceleratorCapabilities"
DEFAULT_IMAGE = "registry.k8s.io/pause:3.10"
MAX_DEVICES_PER_CLAIM = 32  # resource.k8s.io/v1 AllocationResultsMaxSize
MAX_DEVICES_PER_NODE = 128 * 64  # generous: many slices of 128 devices

Level = Literal["MUST", "SHOULD"]
MUST: Level = "MUST"
SHOULD: Level = "SHOULD"

_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_C_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_LABEL_NAME = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]{0,61})?[A-Za-z0-9])?$")
_SEMVER = re.compile(
    r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
    r"(?:-((?:0|[1-9]\d*|\d*[A-Za-z-][0-9A-Za-z-]*)(?:\.(?:0|[1-9]\d*|\d*[A-Za-z-][0-9A-Za-z-]*))*))?"
    r"(?:\+([0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*))?$"
)
_QUANTITY = re.compile(r"^([+-]?(?:\d+\.?\d*|\.\d+))(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E|[eE][+-]?\d+)?$")
_SUFFIX = {
    "": Decimal(1), "n": Decimal("1e-9"), "u": Decimal("1e-6"), "m": Decimal("1e-3"), "k": Decimal(10**3),
    "M": Decimal(10**6), "G": Decimal(10**9), "T": Decimal(10**12), "P": Decimal(10**15), "E": Decimal(10**18),
    "Ki": Decimal(2**10), "Mi": Decimal(2**20), "Gi": Decimal(2**30), "Ti": Decimal(2**40), "Pi": Decimal(2**50),
    "Ei": Decimal(2**60),
}  # fmt: skip


class CapabilityFileError(ValueError):
    """A capability file is unusable; ``problems`` holds one line per problem."""

    def __init__(self, problems: str | list[str]) -> None:
        self.problems = [problems] if isinstance(problems, str) else list(problems)
        super().__init__("\n".join(self.problems))


# -- the file --------------------------------------------------------------------------------------


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class Toleration(_Strict):
    key: str | None = None
    operator: Literal["Exists", "Equal"] = "Equal"
    value: str | None = None
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] | None = None

    def as_pod(self) -> dict[str, Any]:
        return {k: v for k, v in self.model_dump().items() if v is not None}


class Nodes(_Strict):
    selector: dict[str, str] = Field(min_length=1)
    devices_per_node: int | None = Field(default=None, alias="devicesPerNode", ge=1, le=MAX_DEVICES_PER_NODE)
    min_devices_per_node: int | None = Field(default=None, alias="minDevicesPerNode", ge=1, le=MAX_DEVICES_PER_NODE)
    min_nodes: int = Field(default=1, alias="minNodes", ge=1, le=5000)
    tolerations: list[Toleration] = Field(default_factory=list)

    @property
    def fewest_devices(self) -> int:
        """The device count every selected node has at least."""
        return self.devices_per_node or self.min_devices_per_node or 0


class Attribute(_Strict):
    name: str = Field(min_length=1)
    type: Literal["int", "bool", "string", "version"] | None = None
    capacity: bool = False
    level: Level = MUST
    equals: int | bool | str | None = None
    at_least: int | str | None = Field(default=None, alias="atLeast")
    pattern: str | None = None

    @property
    def kind(self) -> str:
        return "capacity" if self.capacity else str(self.type)


class Claims(_Strict):
    max_devices_per_claim: int = Field(alias="maxDevicesPerClaim", ge=1, le=MAX_DEVICES_PER_CLAIM)


class EnvTemplate(_Strict):
    name: str = Field(min_length=1)
    value: str


class DeviceClassCapabilities(_Strict):
    name: str = Field(min_length=1)
    level: Level = MUST
    device_name_pattern: str | None = Field(default=None, alias="deviceNamePattern")
    nodes: Nodes
    attributes: list[Attribute] = Field(default_factory=list)
    claims: Claims
    container_env: list[EnvTemplate] = Field(default_factory=list, alias="containerEnv")


class PodSettings(_Strict):
    image: str = Field(default=DEFAULT_IMAGE, min_length=1)


class _CapabilityFile(_Strict):
    api_version: Literal["conformance.kthena.io/capabilities/v1"] = Field(alias="apiVersion")
    kind: Literal["AcceleratorCapabilities"]
    vendor: str = Field(min_length=1)
    driver: str = Field(min_length=1)
    driver_version: str | None = Field(default=None, alias="driverVersion")
    url: str | None = None
    contact: list[str] | None = None
    pods: PodSettings = Field(default_factory=PodSettings)
    device_classes: list[DeviceClassCapabilities] = Field(alias="deviceClasses", min_length=1)


@dataclass(frozen=True)
class Capabilities:
    """A validated capability file."""

    path: Path
    sha256: str
    vendor: str
    driver: str
    driver_version: str | None
    image: str
    device_classes: tuple[DeviceClassCapabilities, ...]

    def as_report(self) -> dict[str, Any]:
        """What the report records: the file (path and digest) and what it declares."""
        return {
            "file": str(self.path),
            "sha256": self.sha256,
            "vendor": self.vendor,
            "driver": self.driver,
            "driverVersion": self.driver_version,
            "deviceClasses": [{"name": c.name, "level": c.level} for c in self.device_classes],
        }


def load_capabilities(path: Path) -> Capabilities:
    """Read and validate a capability file; :class:`CapabilityFileError` says what is wrong and
    where (``<file>:<line>: <field>: <problem>``)."""
    source = str(path)
    try:
        raw = path.read_bytes()
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise CapabilityFileError(f"{source}: not UTF-8 text") from None
    except OSError as exc:
        raise CapabilityFileError(f"{source}: cannot read: {exc.strerror or exc}") from None
    from .support import _UniqueKeyLoader, _yaml_problem

    try:
        node = yaml.compose(text, Loader=_UniqueKeyLoader)
        data = yaml.load(text, Loader=_UniqueKeyLoader)
    except yaml.YAMLError as exc:
        raise CapabilityFileError(f"{source}: not valid YAML: {_yaml_problem(exc)}") from None
    if not isinstance(data, dict):
        what = "empty" if data is None else f"a {type(data).__name__}"
        raise CapabilityFileError(
            f"{source}: expected a mapping with apiVersion, kind, vendor, driver, deviceClasses; got {what}"
        )
    try:
        parsed = _CapabilityFile.model_validate(data)
    except ValidationError as exc:
        lines = []
        for err, text_line in zip(exc.errors(), validation_problems(exc), strict=True):
            lines.append(f"{_where(source, node, err['loc'])}: {text_line}")
        raise CapabilityFileError(lines) from None
    problems = [f"{_where(source, node, loc)}: {field_path(loc)}: {msg}" for loc, msg in _semantic_problems(parsed)]
    if problems:
        raise CapabilityFileError(problems)
    return Capabilities(
        path=path,
        sha256=hashlib.sha256(raw).hexdigest(),
        vendor=parsed.vendor,
        driver=parsed.driver,
        driver_version=parsed.driver_version,
        image=parsed.pods.image,
        device_classes=tuple(parsed.device_classes),
    )


def load_all(paths: Iterable[Path]) -> list[Capabilities]:
    """Every file, validated; problems of all files together, and a driver named by two files."""
    problems: list[str] = []
    loaded: list[Capabilities] = []
    for path in paths:
        try:
            loaded.append(load_capabilities(path))
        except CapabilityFileError as exc:
            problems += exc.problems
    seen: dict[str, Path] = {}
    for caps in loaded:
        if caps.driver in seen:
            problems.append(f"{caps.path}: driver {caps.driver!r} is already declared by {seen[caps.driver]}")
        seen.setdefault(caps.driver, caps.path)
    classes: dict[str, Path] = {}
    for caps in loaded:
        for cls in caps.device_classes:
            if cls.name in classes and classes[cls.name] != caps.path:
                problems.append(f"{caps.path}: DeviceClass {cls.name!r} is already declared by {classes[cls.name]}")
            classes.setdefault(cls.name, caps.path)
    if problems:
        raise CapabilityFileError(problems)
    return loaded


Loc = tuple[int | str, ...]


def _semantic_problems(f: _CapabilityFile) -> list[tuple[Loc, str]]:
    out: list[tuple[Loc, str]] = []
    if not _DNS_SUBDOMAIN.match(f.driver) or len(f.driver) > 63:
        out.append((("driver",), f"{f.driver!r} is not a DRA driver name (a lowercase DNS subdomain, at most 63)"))
    seen: dict[str, int] = {}
    for i, cls in enumerate(f.device_classes):
        here: Loc = ("deviceClasses", i)
        if not _DNS_SUBDOMAIN.match(cls.name) or len(cls.name) > 253:
            out.append(((*here, "name"), f"{cls.name!r} is not a DeviceClass name (a lowercase DNS subdomain)"))
        if cls.name in seen:
            out.append(((*here, "name"), f"duplicate DeviceClass {cls.name!r} (also deviceClasses[{seen[cls.name]}])"))
        seen.setdefault(cls.name, i)
        if cls.device_name_pattern is not None:
            out += _regex_problem((*here, "deviceNamePattern"), cls.device_name_pattern)
        out += _node_problems((*here, "nodes"), cls.nodes)
        fewest = cls.nodes.fewest_devices
        if fewest and cls.claims.max_devices_per_claim > fewest:
            which = "devicesPerNode" if cls.nodes.devices_per_node else "minDevicesPerNode"
            out.append(
                (
                    (*here, "claims", "maxDevicesPerClaim"),
                    f"{cls.claims.max_devices_per_claim} is more than nodes.{which} ({fewest}): "
                    "no node could satisfy such a claim",
                )
            )
        names: dict[str, int] = {}
        for j, attr in enumerate(cls.attributes):
            where: Loc = (*here, "attributes", j)
            out += _attribute_problems(where, attr)
            key = attribute_key(attr.name, f.driver)
            if key in names:
                out.append(((*where, "name"), f"duplicate attribute {attr.name!r} (also attributes[{names[key]}])"))
            names.setdefault(key, j)
        declared = set(names)
        for j, env in enumerate(cls.container_env):
            for part in ("name", "value"):
                problem = _template_problem(getattr(env, part), declared)
                if problem:
                    out.append(((*here, "containerEnv", j, part), problem))
    return out


def _template_problem(text: str, attributes: set[str]) -> str | None:
    """Why ``text`` is not a containerEnv template: a placeholder that is neither ``{device}`` nor
    a declared attribute, a format spec or conversion, or unbalanced braces."""
    try:
        fields = list(string.Formatter().parse(text))
    except ValueError as exc:
        return f"{text!r}: {exc} (double a brace for a literal one)"
    for _, name, spec, conversion in fields:
        if name is None:
            continue
        if spec or conversion:
            return f"{text!r}: placeholder {{{name}}} takes no format spec or conversion"
        if name != "device" and name not in attributes:
            known = ", ".join(sorted({"device", *attributes}))
            return f"{text!r}: unknown placeholder {{{name}}} (known: {known}; attributes must be declared)"
    return None


def render_env(cls: DeviceClassCapabilities, driver: str, device: Mapping[str, Any]) -> dict[str, str]:
    """The environment ``cls.containerEnv`` promises for ``device`` (a ResourceSlice device): each
    template with ``{device}`` and the device's attribute values filled in. An attribute the device
    does not carry renders as ``<missing ...>`` (never matching). Pure."""
    values: dict[str, str] = {"device": str(device.get("name", ""))}
    for key, entry in (device.get("attributes") or {}).items():
        kinds = [k for k in ("int", "bool", "string", "version") if k in (entry or {})]
        if kinds:
            raw = entry[kinds[0]]
            values[attribute_key(key, driver)] = str(raw).lower() if isinstance(raw, bool) else str(raw)
    missing = {
        attribute_key(a.name, driver): f"<missing attribute {a.name}>"
        for a in cls.attributes
        if attribute_key(a.name, driver) not in values
    }
    table = {**missing, **values}
    return {env.name.format_map(table): env.value.format_map(table) for env in cls.container_env}


def env_problems(want: Mapping[str, str], seen: Mapping[str, str], device: str) -> list[str]:
    """What ``seen`` (a container's environment) lacks of ``want`` (:func:`render_env` for
    ``device``), one line each. Pure."""
    out = []
    for name, value in sorted(want.items()):
        if name not in seen:
            out.append(f"device {device}: {name}={value} expected, {name} is not set")
        elif seen[name] != value:
            out.append(f"device {device}: {name}={value} expected, {name}={seen[name]} seen")
    return out


def _node_problems(here: Loc, nodes: Nodes) -> list[tuple[Loc, str]]:
    out: list[tuple[Loc, str]] = []
    if (nodes.devices_per_node is None) == (nodes.min_devices_per_node is None):
        out.append((here, "give exactly one of devicesPerNode (an exact count) and minDevicesPerNode (a minimum)"))
    for key, value in nodes.selector.items():
        prefix, _, name = key.rpartition("/")
        if (prefix and (not _DNS_SUBDOMAIN.match(prefix) or len(prefix) > 253)) or not _LABEL_NAME.match(name):
            out.append(((*here, "selector", key), f"{key!r} is not a valid label key"))
        if not _LABEL_VALUE.match(value):
            out.append(((*here, "selector", key), f"{value!r} is not a valid label value"))
    for k, t in enumerate(nodes.tolerations):
        where: Loc = (*here, "tolerations", k)
        if t.operator == "Exists" and t.value:
            out.append(((*where, "value"), "must be empty when operator is Exists"))
        if t.operator == "Equal" and not t.key:
            out.append(((*where, "key"), "required when operator is Equal"))
    return out


def _attribute_problems(where: Loc, attr: Attribute) -> list[tuple[Loc, str]]:
    out: list[tuple[Loc, str]] = []
    prefix, _, name = attr.name.rpartition("/")
    if (prefix and not _DNS_SUBDOMAIN.match(prefix)) or not _C_IDENTIFIER.match(name) or len(name) > 64:
        out.append(
            ((*where, "name"), f"{attr.name!r} is not a DRA attribute name (a C identifier, optionally domain/)")
        )
    if attr.capacity == (attr.type is not None):
        out.append((where, "give exactly one of type (int, bool, string, version) and capacity: true"))
        return out
    kind = attr.kind
    if attr.pattern is not None:
        if kind != "string":
            out.append(((*where, "pattern"), f"only for string attributes, not {kind}"))
        else:
            out += _regex_problem((*where, "pattern"), attr.pattern)
    if attr.at_least is not None and kind in ("bool", "string"):
        out.append(((*where, "atLeast"), f"only for int, version and capacity attributes, not {kind}"))
    for key, value in (("equals", attr.equals), ("atLeast", attr.at_least)):
        if value is None or (key == "atLeast" and kind in ("bool", "string")):
            continue
        problem = _value_problem(kind, value)
        if problem:
            out.append(((*where, key), problem))
    return out


def _value_problem(kind: str, value: object) -> str | None:
    if kind == "int":
        return None if isinstance(value, int) and not isinstance(value, bool) else f"expected an integer, got {value!r}"
    if kind == "bool":
        return None if isinstance(value, bool) else f"expected true or false, got {value!r}"
    if kind == "string":
        return None if isinstance(value, str) else f"expected a string, got {value!r} (quote it)"
    if kind == "version":
        valid = isinstance(value, str) and _SEMVER.match(value) is not None
        return None if valid else f'expected a semantic version string such as "1.2.0", got {value!r}'
    ok = isinstance(value, str | int) and not isinstance(value, bool) and quantity(str(value)) is not None
    return None if ok else f"expected a quantity such as 16Gi or 80000000000, got {value!r}"


def _regex_problem(where: Loc, pattern: str) -> list[tuple[Loc, str]]:
    try:
        re.compile(pattern)
    except re.error as exc:
        return [(where, f"not a valid regular expression: {exc}")]
    return []


def _where(source: str, node: yaml.Node | None, loc: Sequence[int | str]) -> str:
    """``file:line`` of the deepest YAML node on ``loc`` that exists (the line of the key)."""
    line = _line(node, loc)
    return f"{source}:{line}" if line is not None else source


def _line(node: yaml.Node | None, loc: Sequence[int | str]) -> int | None:
    if node is None:
        return None
    best = node.start_mark.line + 1
    current: yaml.Node = node
    for part in loc:
        if isinstance(current, yaml.MappingNode) and isinstance(part, str):
            found = next(((k, v) for k, v in current.value if getattr(k, "value", None) == part), None)
            if found is None:
                break
            best = found[0].start_mark.line + 1
            current = found[1]
        elif isinstance(current, yaml.SequenceNode) and isinstance(part, int) and 0 <= part < len(current.value):
            current = current.value[part]
            best = current.start_mark.line + 1
        else:
            break
    return best


# -- values ----------------------------------------------------------------------------------------


def quantity(text: str) -> Decimal | None:
    """A Kubernetes quantity (``16Gi``, ``80000000000``, ``1.5k``, ``1e3``) as a number; None if not one."""
    match = _QUANTITY.match(text.strip())
    if not match:
        return None
    try:
        number = Decimal(match[1])
    except InvalidOperation:
        return None
    suffix = match[2] or ""
    if suffix[:1] in ("e", "E"):
        return number * Decimal(10) ** int(suffix[1:])
    return number * _SUFFIX[suffix]


def semver(text: str) -> tuple[Any, ...] | None:
    """A sortable key for a semantic version (prereleases before the release); None if not one."""
    match = _SEMVER.match(text)
    if not match:
        return None
    return (int(match[1]), int(match[2]), int(match[3]), _prerelease_key(match[4]))


def _prerelease_key(pre: str | None) -> tuple[Any, ...]:
    if pre is None:
        return (1,)  # a release sorts after its prereleases
    parts = [(0, int(p), "") if p.isdigit() else (1, 0, p) for p in pre.split(".")]
    return (0, *parts)


def attribute_key(name: str, driver: str) -> str:
    """DRA's rule: an attribute qualified with the driver's own domain is the unqualified name."""
    prefix, _, rest = name.rpartition("/")
    return rest if prefix == driver else name


# -- support ---------------------------------------------------------------------------------------

NO_CAPABILITIES = (
    "no capability file was given (--capabilities FILE, or --fake-devices for the fake drivers): the Accelerators "
    "profile certifies a DRA driver against its vendor's capability file"
)


def effective_support(support: Support, capabilities: Sequence[Capabilities]) -> Support:
    """The Accelerators features are the driver's: Accelerators (the implementation's Pods carry
    their claims and run on allocated devices) and DriverCertification (what the DRA driver and the
    scheduler do) are supported exactly when capability files are given (unless the implementation
    declares one unsupported with a reason, or lacks Core; DriverCertification also needs
    Accelerators)."""
    supported = set(support.supported)
    reasons = dict(support.unsupported_reasons)
    for feature in (Feature.ACCELERATORS, Feature.DRIVER_CERTIFICATION):
        declared_unsupported = feature in reasons and feature not in supported
        needs = Feature.CORE if feature is Feature.ACCELERATORS else Feature.ACCELERATORS
        if capabilities and not declared_unsupported and needs in supported:
            supported.add(feature)
            reasons.pop(feature, None)
        elif not declared_unsupported:
            supported.discard(feature)
            if not capabilities:
                reasons[feature] = NO_CAPABILITIES
            elif needs in reasons:
                reasons[feature] = f"{feature.value} requires {needs.value}: {reasons[needs]}"
            else:
                reasons[feature] = (
                    f"{feature.value} requires {needs.value}, which {support.name} does not declare supported"
                )
    return dataclasses.replace(support, supported=frozenset(supported), unsupported_reasons=reasons)


# -- checks on what the cluster publishes ----------------------------------------------------------


@dataclass(frozen=True)
class Finding:
    """One thing a check found wrong, at the level the capability file holds it to."""

    level: Level
    check: Literal["device-class", "nodes", "attributes"]
    subject: str  # what it is about: "DeviceClass gpu.fake.kthena-conformance.io", "node gpu-0", ...
    message: str

    def __str__(self) -> str:
        return f"{self.level}: {self.subject}: {self.message}"


def _level(*levels: Level) -> Level:
    return MUST if all(lv == MUST for lv in levels) else SHOULD


def check_device_classes(caps: Capabilities, existing: Iterable[str]) -> list[Finding]:
    """A finding for every declared DeviceClass the cluster does not have."""
    have = set(existing)
    return [
        Finding(cls.level, "device-class", f"DeviceClass {cls.name}", "does not exist in the cluster")
        for cls in caps.device_classes
        if cls.name not in have
    ]


@dataclass
class NodeDevices:
    """The devices one node publishes for one driver (complete pools at their latest generation)."""

    node: str
    pools: set[str] = field(default_factory=set)
    devices: list[tuple[str, dict[str, Any]]] = field(default_factory=list)  # (pool, device)
    incomplete: list[str] = field(default_factory=list)  # pools missing slices


def inventory(driver: str, slices: Iterable[Mapping[str, Any]]) -> dict[str, NodeDevices]:
    """Node name -> what ``driver`` publishes there (node-local slices only)."""
    pools: dict[str, list[Mapping[str, Any]]] = {}
    for s in slices:
        spec = s.get("spec") or {}
        if spec.get("driver") != driver:
            continue
        pools.setdefault(str((spec.get("pool") or {}).get("name", "")), []).append(s)
    out: dict[str, NodeDevices] = {}
    for pool, members in sorted(pools.items()):
        generation = max(int((m["spec"].get("pool") or {}).get("generation") or 0) for m in members)
        latest = [m for m in members if int((m["spec"].get("pool") or {}).get("generation") or 0) == generation]
        expected = max(int((m["spec"].get("pool") or {}).get("resourceSliceCount") or 1) for m in latest)
        for m in latest:
            node = m["spec"].get("nodeName")
            if not node:
                continue  # network-attached (nodeSelector / allNodes): not a node's own devices
            entry = out.setdefault(str(node), NodeDevices(str(node)))
            entry.pools.add(pool)
            entry.devices += [(pool, d) for d in m["spec"].get("devices") or []]
            if len(latest) < expected and pool not in entry.incomplete:
                entry.incomplete.append(pool)
    return out


def matching_nodes(cls: DeviceClassCapabilities, nodes: Iterable[Mapping[str, Any]]) -> list[str]:
    """The names of the nodes whose labels include the class's selector."""
    out = []
    for n in nodes:
        meta = n.get("metadata") or {}
        labels = meta.get("labels") or {}
        if all(labels.get(k) == v for k, v in cls.nodes.selector.items()):
            out.append(str(meta.get("name")))
    return sorted(out)


def class_devices(cls: DeviceClassCapabilities, node: NodeDevices | None) -> list[tuple[str, dict[str, Any]]]:
    """The node's devices that belong to the class (its ``deviceNamePattern``, or all)."""
    if node is None:
        return []
    if cls.device_name_pattern is None:
        return list(node.devices)
    pattern = re.compile(cls.device_name_pattern)
    return [(p, d) for p, d in node.devices if pattern.search(str(d.get("name", "")))]


def check_devices(
    caps: Capabilities, nodes: Iterable[Mapping[str, Any]], slices: Iterable[Mapping[str, Any]]
) -> list[Finding]:
    """Findings about the selected nodes' device counts (``check="nodes"``) and the devices'
    attributes (``check="attributes"``), from Node and ResourceSlice objects (pure)."""
    nodes = list(nodes)
    inv = inventory(caps.driver, slices)
    findings: list[Finding] = []
    for cls in caps.device_classes:
        selected = matching_nodes(cls, nodes)
        shown = ", ".join(f"{k}={v}" for k, v in cls.nodes.selector.items())
        if len(selected) < cls.nodes.min_nodes:
            findings.append(
                Finding(
                    cls.level,
                    "nodes",
                    f"DeviceClass {cls.name}",
                    f"{len(selected)} node(s) match the selector {shown}; at least {cls.nodes.min_nodes} declared",
                )
            )
        for name in selected:
            findings += _node_findings(caps, cls, name, inv.get(name))
        findings += _attribute_findings(caps, cls, [(n, inv.get(n)) for n in selected])
    return findings


def _node_findings(
    caps: Capabilities, cls: DeviceClassCapabilities, name: str, published: NodeDevices | None
) -> list[Finding]:
    subject = f"node {name}"
    devices = class_devices(cls, published)
    if published is None or not published.pools:
        return [Finding(cls.level, "nodes", subject, f"publishes no ResourceSlice of driver {caps.driver}")]
    out = []
    if published.incomplete:
        out.append(
            Finding(
                cls.level,
                "nodes",
                subject,
                f"pool(s) {', '.join(published.incomplete)} lack slices "
                "(fewer than resourceSliceCount at the latest generation)",
            )
        )
    names = [str(d.get("name")) for _, d in devices]
    if len(set(names)) != len(names):
        dupes = sorted({n for n in names if names.count(n) > 1})
        out.append(Finding(cls.level, "nodes", subject, f"device name(s) published twice: {', '.join(dupes)}"))
    want, exact = cls.nodes.fewest_devices, cls.nodes.devices_per_node is not None
    have = len(devices)
    if (exact and have != want) or (not exact and have < want):
        declared = f"devicesPerNode {want}" if exact else f"minDevicesPerNode {want}"
        out.append(
            Finding(
                cls.level,
                "nodes",
                subject,
                f"publishes {have} device(s) of DeviceClass {cls.name} in pool(s) {', '.join(sorted(published.pools))}"
                f"; the capability file declares {declared}",
            )
        )
    return out


def _attribute_findings(
    caps: Capabilities, cls: DeviceClassCapabilities, nodes: list[tuple[str, NodeDevices | None]]
) -> list[Finding]:
    out = []
    devices = [(f"{n}/{p}/{d.get('name')}", d) for n, published in nodes for p, d in class_devices(cls, published)]
    for attr in cls.attributes:
        bad: dict[str, list[str]] = {}
        for label, device in devices:
            problem = attribute_problem(caps.driver, attr, device)
            if problem is not None:
                bad.setdefault(problem, []).append(label)
        for problem, where in sorted(bad.items()):
            shown = ", ".join(where[:4]) + (f", ... ({len(where) - 4} more)" if len(where) > 4 else "")
            out.append(
                Finding(
                    _level(cls.level, attr.level),
                    "attributes",
                    f"{'capacity' if attr.capacity else 'attribute'} {attr.name} of DeviceClass {cls.name}",
                    f"{problem} on {len(where)} device(s): {shown}",
                )
            )
    return out


def attribute_problem(driver: str, attr: Attribute, device: Mapping[str, Any]) -> str | None:
    """Why ``device`` does not carry ``attr`` as declared (None: it does)."""
    key = attribute_key(attr.name, driver)
    if attr.capacity:
        table = {attribute_key(k, driver): v for k, v in (device.get("capacity") or {}).items()}
        if key not in table:
            return "missing"
        raw = str((table[key] or {}).get("value", ""))
        value = quantity(raw)
        if value is None:
            return f"not a quantity ({raw!r})"
        if attr.equals is not None and value != quantity(str(attr.equals)):
            return f"is {raw}, declared {attr.equals}"
        if attr.at_least is not None and value < (quantity(str(attr.at_least)) or Decimal(0)):
            return f"is {raw}, declared at least {attr.at_least}"
        return None
    table = {attribute_key(k, driver): v for k, v in (device.get("attributes") or {}).items()}
    if key not in table:
        return "missing"
    entry = table[key] or {}
    kinds = [k for k in ("int", "bool", "string", "version") if k in entry]
    if kinds != [attr.type]:
        return f"is of type {'/'.join(kinds) or 'none'}, declared {attr.type}"
    value = entry[attr.type]
    if attr.equals is not None and value != attr.equals:
        return f"is {value!r}, declared {attr.equals!r}"
    if attr.pattern is not None and not re.search(attr.pattern, str(value)):
        return f"is {value!r}, which does not match {attr.pattern!r}"
    if attr.at_least is not None:
        if attr.type == "int" and isinstance(value, int) and isinstance(attr.at_least, int) and value < attr.at_least:
            return f"is {value}, declared at least {attr.at_least}"
        if attr.type == "version":
            have, floor = semver(str(value)), semver(str(attr.at_least))
            if have is None:
                return f"is {value!r}, not a semantic version"
            if floor is not None and have < floor:
                return f"is {value}, declared at least {attr.at_least}"
    return None
