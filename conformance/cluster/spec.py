"""What a cluster should look like, independent of the provider that makes it.

A :class:`ClusterSpec` names the cluster and lists node pools (count, labels, capacity, taints).
The local provider turns each pool into kwok-managed Nodes, or, for a pool of ``kind: real``, into
real nodes (a containerd and a kubelet each, :mod:`.realnode`); kind turns pools into worker
containers. Validated with pydantic so a bad ``--config`` file names the field and the reason.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from .. import yamlio
from .errors import HarnessError

DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
# A label key: optional DNS-subdomain prefix, then a name of at most 63 characters.
LABEL_KEY = re.compile(r"^([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")
LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]{0,61})?[A-Za-z0-9])?$")

MAX_REAL_NODES = 4  # real nodes per cluster: each costs ~150 MB and a bridge, subnet and port set

DEFAULT_CAPACITY = {"cpu": "32", "memory": "256Gi", "pods": "110", "ephemeral-storage": "1Ti"}


def _check_label_key(key: str, what: str = "label key") -> None:
    prefix, _, _ = key.rpartition("/")
    if not LABEL_KEY.match(key) or len(prefix) > 253:
        raise ValueError(f"{what} {key!r} is not a valid Kubernetes label key")


class Taint(BaseModel):
    """A Node taint, as in ``core/v1`` (key and value follow label syntax)."""

    model_config = ConfigDict(extra="forbid")

    key: str
    value: str = ""
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"]

    @field_validator("key")
    @classmethod
    def _key_is_valid(cls, v: str) -> str:
        _check_label_key(v, "taint key")
        return v

    @field_validator("value")
    @classmethod
    def _value_is_valid(cls, v: str) -> str:
        if not LABEL_VALUE.match(v):
            raise ValueError(f"{v!r} is not a valid taint value (label value syntax, at most 63 characters)")
        return v


class NodePool(BaseModel):
    """``count`` identical nodes named ``<name>-<i>``: fake (kwok) ones, or real ones (``kind: real``:
    a containerd and a kubelet each on this host; ``capacity`` is then what the kubelet reports)."""

    model_config = ConfigDict(extra="forbid")

    name: str = "worker"
    kind: Literal["kwok", "real"] = "kwok"
    count: int = Field(default=2, ge=0, le=500)
    labels: dict[str, str] = Field(default_factory=dict)
    capacity: dict[str, str] = Field(default_factory=lambda: dict(DEFAULT_CAPACITY))
    taints: list[Taint] = Field(default_factory=list)

    @field_validator("name")
    @classmethod
    def _name_is_dns_label(cls, v: str) -> str:
        if not DNS_LABEL.match(v) or len(v) > 50:
            raise ValueError("must be a lowercase DNS label of at most 50 characters")
        return v

    @field_validator("labels")
    @classmethod
    def _labels_are_valid(cls, v: dict[str, str]) -> dict[str, str]:
        for key, value in v.items():
            _check_label_key(key)
            if not LABEL_VALUE.match(value):
                raise ValueError(f"label value {value!r} for {key!r} is not a valid Kubernetes label value")
        return v

    @model_validator(mode="after")
    def _real_pools_fit(self) -> NodePool:
        if self.kind == "real" and self.count > MAX_REAL_NODES:
            raise ValueError(f"a pool of kind real has at most {MAX_REAL_NODES} nodes, not {self.count}")
        return self

    def node_names(self) -> list[str]:
        return [f"{self.name}-{i}" for i in range(self.count)]


class ClusterSpec(BaseModel):
    """The cluster to provision."""

    model_config = ConfigDict(extra="forbid")

    name: str = "kthena"
    node_pools: list[NodePool] = Field(default_factory=lambda: [NodePool()])
    apiserver_port: int | None = Field(default=None, ge=1, le=65535)
    # kube-scheduler profiles besides default-scheduler; ModelServing defaults to "volcano".
    extra_scheduler_names: list[str] = Field(default_factory=lambda: ["volcano"])
    # Run the fake DRA drivers (fake-devices/) whose device-count label some node pool carries
    # (``gpu.fake.kthena-conformance.io/device-count``, ``npu.fake.kthena-conformance.io/device-count``):
    # their DeviceClasses and ResourceSlice publishers. Only the local provider runs them; kind uses their DaemonSets.
    fake_devices: bool = True
    # CustomResourceDefinitions to install while the cluster starts. The local provider creates
    # them, Established, before kube-controller-manager starts, so its garbage collector knows
    # them from its first discovery (a CRD made later is tracked only at the next 30 s resync:
    # until then a deleted owner's dependents stay). Other providers ignore them: there the
    # implementation's own installation creates its CRDs.
    crds: list[dict[str, Any]] = Field(default_factory=list)

    @field_validator("crds")
    @classmethod
    def _crds_are_crds(cls, v: list[dict[str, Any]]) -> list[dict[str, Any]]:
        names: list[str] = []
        for i, doc in enumerate(v):
            if doc.get("apiVersion") != "apiextensions.k8s.io/v1" or doc.get("kind") != "CustomResourceDefinition":
                raise ValueError(
                    f"crds[{i}] is a {doc.get('apiVersion')}/{doc.get('kind')}, "
                    "not an apiextensions.k8s.io/v1 CustomResourceDefinition"
                )
            name = (doc.get("metadata") or {}).get("name")
            if not isinstance(name, str) or not name:
                raise ValueError(f"crds[{i}] has no metadata.name")
            names.append(name)
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"CRDs must be named once, repeated: {', '.join(dupes)}")
        return v

    @field_validator("extra_scheduler_names")
    @classmethod
    def _scheduler_names_are_labels(cls, v: list[str]) -> list[str]:
        for name in v:
            if not DNS_LABEL.match(name):
                raise ValueError(f"scheduler name {name!r} must be a lowercase DNS label")
        return v

    @field_validator("name")
    @classmethod
    def _name_is_dns_label(cls, v: str) -> str:
        if not DNS_LABEL.match(v) or len(v) > 40:
            raise ValueError("must be a lowercase DNS label of at most 40 characters")
        return v

    @field_validator("node_pools")
    @classmethod
    def _pool_names_unique(cls, v: list[NodePool]) -> list[NodePool]:
        names = [p.name for p in v]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"node pool names must be unique, repeated: {', '.join(dupes)}")
        return v

    @field_validator("node_pools")
    @classmethod
    def _real_nodes_fit(cls, v: list[NodePool]) -> list[NodePool]:
        real = sum(p.count for p in v if p.kind == "real")
        if real > MAX_REAL_NODES:
            raise ValueError(f"at most {MAX_REAL_NODES} real nodes per cluster, {real} asked for")
        return v

    def node_names(self) -> list[str]:
        return [n for pool in self.node_pools for n in pool.node_names()]

    def real_pools(self) -> list[NodePool]:
        """The pools of real nodes (``kind: real``) with at least one node."""
        return [p for p in self.node_pools if p.kind == "real" and p.count > 0]

    def device_nodes(self) -> dict[str, list[str]]:
        """Fake DRA driver key (``gpu``, ``npu``) -> the nodes whose pool labels give them at
        least one device of it; empty when ``fake_devices`` is off. A label value that is not a
        device count gives no devices (the publisher logs it)."""
        from fake_devices.drivers import DRIVERS, parse_count

        out: dict[str, list[str]] = {}
        for key, shape in DRIVERS.items() if self.fake_devices else ():
            nodes = [
                n
                for pool in self.node_pools
                if shape.count_label in pool.labels and (parse_count(pool.labels[shape.count_label])[0] or 0) > 0
                for n in pool.node_names()
            ]
            if nodes or any(shape.count_label in pool.labels for pool in self.node_pools):
                out[key] = nodes
        return out

    @classmethod
    def from_file(cls, path: Path) -> ClusterSpec:
        """Load a YAML cluster spec, turning every problem into one clear message."""
        try:
            data = yaml.safe_load(path.read_text())
        except OSError as exc:
            raise HarnessError(f"cannot read cluster config {path}: {exc.strerror}", "check the path") from exc
        except UnicodeDecodeError as exc:
            raise HarnessError(
                f"cluster config {path} is not UTF-8 text: {exc.reason}", "save it as UTF-8 YAML"
            ) from exc
        except yaml.YAMLError as exc:
            raise HarnessError(f"cluster config {path} is not valid YAML: {exc}", "fix the YAML syntax") from exc
        return cls.parse(data or {}, source=str(path))

    @classmethod
    def parse(cls, data: object, *, source: str = "cluster spec") -> ClusterSpec:
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            raise HarnessError(
                f"{source} is invalid:\n{format_validation_error(exc)}", "fix the fields named above"
            ) from exc


def format_validation_error(exc: ValidationError) -> str:
    """One line per problem: ``  node_pools[0].count: Input should be ...``."""
    lines = []
    for err in exc.errors():
        loc = ""
        for part in err["loc"]:
            loc += f"[{part}]" if isinstance(part, int) else (f".{part}" if loc else str(part))
        lines.append(f"  {loc or '(top level)'}: {err['msg']}")
    return "\n".join(lines)


def load_crds(paths: list[Path]) -> list[dict[str, Any]]:
    """The CustomResourceDefinitions in YAML files (several documents per file allowed), for
    :attr:`ClusterSpec.crds`; other kinds are refused, naming the file and document."""
    out: list[dict[str, Any]] = []
    for path in paths:
        try:
            docs = [d for d in yamlio.load_all(path.read_text()) if d]
        except OSError as exc:
            raise HarnessError(f"cannot read CRD file {path}: {exc.strerror}", "check the path") from exc
        except (UnicodeDecodeError, yaml.YAMLError) as exc:
            raise HarnessError(f"CRD file {path} is not valid YAML: {exc}", "fix the file") from exc
        for i, doc in enumerate(docs):
            if not isinstance(doc, dict) or doc.get("kind") != "CustomResourceDefinition":
                kind = doc.get("kind") if isinstance(doc, dict) else type(doc).__name__
                raise HarnessError(
                    f"CRD file {path}, document {i + 1}: a {kind}, not a CustomResourceDefinition",
                    "pass only CRD manifests with --crd; apply other objects after the cluster is up",
                )
            out.append(doc)
    return out
