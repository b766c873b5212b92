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
from .errors import BadInput

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


DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
FAKE_DRIVER_DOMAIN = "fake.kthena-conformance.io"  # fake_devices.drivers.FAKE_DOMAIN (the fakes' own switch)


class DraDriver(BaseModel):
    """A vendor's DRA driver run on the real nodes the way its kubelet plugin runs on a node: the
    local provider runs ``command`` once per real node of ``pools`` (every real pool when empty)
    with ``NODE_NAME``, ``KUBECONFIG`` (the cluster's admin kubeconfig), the kubelet's plugin and
    registration directories and the node's CDI directory in its environment
    (:func:`.local.components.driver_environment`), after creating the objects in ``manifests``
    (DeviceClasses, RBAC: YAML files, several documents each), and waits until each node's kubelet
    has registered a plugin named ``name``. The fake drivers are not run this way (``fake_devices``
    runs them): their domain is refused here, so a vendor's driver and a fake never share a name."""

    model_config = ConfigDict(extra="forbid")

    name: str
    command: list[str] = Field(min_length=1)
    env: dict[str, str] = Field(default_factory=dict)
    manifests: list[Path] = Field(default_factory=list)
    pools: list[str] = Field(default_factory=list)

    @field_validator("name")
    @classmethod
    def _name_is_a_driver_name(cls, v: str) -> str:
        if not DNS_SUBDOMAIN.match(v) or len(v) > 63:
            raise ValueError(f"{v!r} is not a DRA driver name (a lowercase DNS subdomain of at most 63 characters)")
        if v == FAKE_DRIVER_DOMAIN or v.endswith("." + FAKE_DRIVER_DOMAIN):
            raise ValueError(
                f"{v!r} is under {FAKE_DRIVER_DOMAIN}, the fake drivers' domain: the fakes run with fake_devices, "
                "a vendor's driver under its own name"
            )
        return v

    @field_validator("command")
    @classmethod
    def _command_has_a_program(cls, v: list[str]) -> list[str]:
        if not v[0].strip():
            raise ValueError("the first word (the program) is empty")
        return v

    @field_validator("env")
    @classmethod
    def _env_names(cls, v: dict[str, str]) -> dict[str, str]:
        for key in v:
            if not re.match(r"^[A-Za-z_][A-Za-z0-9_]*$", key):
                raise ValueError(f"{key!r} is not an environment variable name")
        return v


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
    # Vendors' DRA drivers, each run per real node by the local provider (see DraDriver).
    dra_drivers: list[DraDriver] = Field(default_factory=list)

    @field_validator("dra_drivers")
    @classmethod
    def _drivers_named_once(cls, v: list[DraDriver]) -> list[DraDriver]:
        names = [d.name for d in v]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"each driver once, repeated: {', '.join(dupes)}")
        return v

    def driver_problems(self) -> list[str]:
        """Why the ``dra_drivers`` cannot run on this spec's nodes, one line each (empty: they can).
        Checked when the cluster starts, not on load: ``cluster up --real-nodes N`` adds the real
        pool to a spec file after it is read."""
        real = {p.name for p in self.real_pools()}
        problems = []
        for i, driver in enumerate(self.dra_drivers):
            unknown = [p for p in driver.pools if p not in real]
            if not real:
                problems.append(
                    f"dra_drivers[{i}] ({driver.name}) needs real nodes: add a node pool of kind real "
                    "(or cluster up --real-nodes N); kwok nodes run no kubelet plugin"
                )
            elif unknown:
                problems.append(
                    f"dra_drivers[{i}].pools: {', '.join(unknown)}: no pool of kind real with nodes has that name "
                    f"(real pools: {', '.join(sorted(real))})"
                )
        return problems

    def driver_nodes(self, driver: DraDriver) -> list[str]:
        """The real nodes ``driver`` runs on."""
        return [n for p in self.real_pools() if not driver.pools or p.name in driver.pools for n in p.node_names()]

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
            raise BadInput(f"cannot read cluster config {path}: {exc.strerror}", "check the path") from exc
        except UnicodeDecodeError as exc:
            raise BadInput(f"cluster config {path} is not UTF-8 text: {exc.reason}", "save it as UTF-8 YAML") from exc
        except yaml.YAMLError as exc:
            raise BadInput(
                f"cluster config {path} is not valid YAML: {yamlio.problem(exc)}", "fix the YAML syntax"
            ) from exc
        data = data or {}
        if isinstance(data, dict) and isinstance(data.get("dra_drivers"), list):
            # manifests are relative to the spec file, like the paths a user writes beside it
            for driver in data["dra_drivers"]:
                if isinstance(driver, dict) and isinstance(driver.get("manifests"), list):
                    driver["manifests"] = [
                        str(path.parent / m) if isinstance(m, str) and not Path(m).is_absolute() else m
                        for m in driver["manifests"]
                    ]
        return cls.parse(data, source=str(path))

    @classmethod
    def parse(cls, data: object, *, source: str = "cluster spec") -> ClusterSpec:
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            raise BadInput(
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
            raise BadInput(f"cannot read CRD file {path}: {exc.strerror}", "check the path") from exc
        except UnicodeDecodeError as exc:
            raise BadInput(f"CRD file {path} is not UTF-8 text: {exc.reason}", "fix the file") from exc
        except yaml.YAMLError as exc:
            raise BadInput(f"CRD file {path} is not valid YAML: {yamlio.problem(exc)}", "fix the file") from exc
        for i, doc in enumerate(docs):
            if not isinstance(doc, dict) or doc.get("kind") != "CustomResourceDefinition":
                kind = doc.get("kind") if isinstance(doc, dict) else type(doc).__name__
                raise BadInput(
                    f"CRD file {path}, document {i + 1}: a {kind}, not a CustomResourceDefinition",
                    "pass only CRD manifests with --crd; apply other objects after the cluster is up",
                )
            out.append(doc)
    return out
