"""What an implementation declares it supports: a strictly validated file, or command-line flags.

The suite never guesses support from behaviour: a test whose feature is not declared supported is
reported ``not-supported`` with the reason below, and a profile whose *required* feature is not
supported fails. So the declaration is checked hard, and every mistake is reported as
``<file>: <field path>: <problem>`` (never a pydantic dump or a traceback)::

    apiVersion: conformance.kthena.io/v1alpha1
    kind: ImplementationSupport
    implementation:
      name: kthena-ref                 # required
      version: "0.1.0"                 # required (quote it: 1.10 is a number to YAML)
      organization: Example Corp       # optional
      url: https://example.com         # optional
      contact: [a@example.com]         # optional
    supportedFeatures: [Core, Admission, Recovery, ScaleSubresource]
    unsupportedFeatures:               # optional: declared NOT supported, each with a reason
      - {name: MigrationRequired, reason: "not implemented"}
    podLabels:                         # optional: the label keys below are the defaults (upstream Kthena's)
      servingGroup: modelserving.volcano.sh/group-name   # names a Pod's ServingGroup (value ends in its ordinal)
      roleInstance: modelserving.volcano.sh/role-id      # names a Pod's Role instance in it (value ends in its index)
    controllerRestart:                 # optional: how the suite restarts the controller (see below)
      command: [kubectl, -n, my-system, rollout, restart, deployment/my-controller]
      timeoutSeconds: 120              # optional (default 120): the command must return by then
    launch:                            # optional: the harness installs and starts your implementation
      command: [./bin/my-controller, --webhook-port, "{webhook_port}"]  # argv (or one shell-quoted string)
      also: [[./bin/my-webhook-shim, "{webhook_port}"]]  # optional: more commands, started after it, each
                                       # ready once it stayed up; restarts restart the first one only
      manifests: [deploy/crds.yaml]    # optional: applied before it starts
      # every relative path here (the program, its arguments, the manifests) is relative to this file:
      # the command runs in this file's directory
      readyLog: "caches synced"        # optional: ready once a line of its output matches this regex
      readyTimeoutSeconds: 60          # optional (default 60)
      webhook: true                    # optional: the harness makes a loopback certificate and port

Feature names match case-insensitively; the canonical spelling is kept. A feature may appear once,
in one of the two lists, and a supported feature's prerequisites (``FeatureInfo.requires``) must be
supported too.

``podLabels``: the spec names no Pod label for a ServingGroup or a Role instance, so tests that
must tell them apart (rollout budgets, partitions, eviction budgets) read the keys declared here.
Each must be a valid label key, the two must differ, and the value must end in the ordinal (index)
as ``-<n>`` or be the number itself; a key left out keeps its default. Role and entry/worker come
from the suite's own template labels and need no declaration.

``controllerRestart``: behaviours about what survives a controller restart (the headless-service
plugin's Services keep their UIDs) run the declared argv (no shell) and expect it to return once
the old controller process is gone and a new one is started; the suite then observes the new one
reconcile. Without it those behaviours are inconclusive. When the harness runs the controller
itself (the reference, or ``launch``), it restarts it and this field is not needed.

``launch``: the declarative form of ``run --implementation-command`` and its
``--implementation-manifest/-ready-log/-ready-timeout/-webhook`` flags (:mod:`conformance.run.launch`):
with it, ``run --support-file FILE`` on the local provider starts the implementation itself. A
support file with ``launch`` and those flags together is refused (one place says how to start it).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from .. import yamlio
from .features import FEATURES, Feature, SelectionError, feature_order, parse_feature

API_VERSION = "conformance.kthena.io/v1alpha1"
KIND = "ImplementationSupport"
FLAG = "--supported-features"


class SupportFileError(ValueError):
    """A support declaration is unusable; ``problems`` holds one line per problem."""

    def __init__(self, problems: str | list[str]) -> None:
        self.problems = [problems] if isinstance(problems, str) else list(problems)
        super().__init__("\n".join(self.problems))


class DocumentError(ValueError):
    """A YAML document could not be read or parsed (the message names the file)."""


# A label key: an optional DNS-subdomain prefix and '/', then a name of at most 63 characters.
_LABEL_NAME = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")
_LABEL_PREFIX = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def label_key_problem(key: str) -> str | None:
    """Why ``key`` is not a valid Kubernetes label key (None when it is one). Pure."""
    prefix, slash, name = key.rpartition("/")
    if slash and (not prefix or len(prefix) > 253 or not _LABEL_PREFIX.match(prefix)):
        return f"{key!r} is not a label key: the prefix before '/' must be a DNS subdomain"
    if not _LABEL_NAME.match(name):
        return (
            f"{key!r} is not a label key: the name must be 1-63 characters of letters, digits, '-', '_' or '.', "
            "starting and ending with a letter or digit"
        )
    return None


@dataclass(frozen=True)
class PodLabels:
    """Label keys on an implementation's Pods naming the ServingGroup and the Role instance each Pod
    belongs to (the support file's ``podLabels``; upstream Kthena's by default)."""

    serving_group: str = "modelserving.volcano.sh/group-name"
    role_instance: str = "modelserving.volcano.sh/role-id"

    def as_report(self) -> dict[str, str]:
        return {"servingGroup": self.serving_group, "roleInstance": self.role_instance}

    @classmethod
    def from_report(cls, data: Mapping[str, Any] | None) -> PodLabels:
        default = cls()
        data = data or {}
        return cls(
            serving_group=str(data.get("servingGroup") or default.serving_group),
            role_instance=str(data.get("roleInstance") or default.role_instance),
        )


@dataclass(frozen=True)
class ControllerRestart:
    """How to restart the implementation's controller: an argv that returns once it is restarted."""

    command: tuple[str, ...]
    timeout: float = 120.0
    source: str = "support file"


@dataclass(frozen=True)
class LaunchDeclaration:
    """How the harness starts the implementation (the support file's ``launch``): the command as one
    shell-quoted string, manifests as paths resolved against the file's directory."""

    command: str
    manifests: tuple[Path, ...] = ()
    ready_log: str | None = None
    ready_timeout: float = 60.0
    webhook: bool = False
    source: str = "support file"
    also: tuple[str, ...] = ()  # further commands (each one shell-quoted string), started after ``command``


@dataclass(frozen=True)
class Support:
    """The features an implementation supports, and the reasons it gave for the ones it does not.

    ``source`` says where the declaration came from: ``file:<path>``, ``flags`` or ``all``.
    """

    name: str
    version: str
    supported: frozenset[Feature]
    unsupported_reasons: dict[Feature, str] = field(default_factory=dict, hash=False)
    source: str = "flags"
    pod_labels: PodLabels = field(default_factory=PodLabels)
    restart: ControllerRestart | None = None
    launch: LaunchDeclaration | None = None

    def supports(self, feature: Feature) -> bool:
        return feature in self.supported

    def reason(self, feature: Feature) -> str:
        """Why ``feature`` is not tested: the declared reason, or that it was not declared."""
        return self.unsupported_reasons.get(feature) or f"not declared supported by {self.name} ({self.source})"

    def as_report(self) -> dict[str, Any]:
        """The report's view: every feature is either supported or listed with a reason."""
        return {
            "name": self.name,
            "version": self.version,
            "source": self.source,
            "supportedFeatures": sorted(f.value for f in self.supported),
            "unsupportedFeatures": [
                {"name": f.value, "reason": self.reason(f)}
                for f in sorted(set(Feature) - self.supported, key=lambda f: f.value)
            ],
            "podLabels": self.pod_labels.as_report(),
        }

    @classmethod
    def from_report(cls, data: Mapping[str, Any]) -> Support:
        """Read :meth:`as_report`'s output back (the report's ``implementation`` section).

        Raises :class:`SupportFileError` naming the ``implementation.*`` field that is wrong.
        """
        problems: list[str] = []
        supported: set[Feature] = set()
        reasons: dict[Feature, str] = {}
        raw_supported = data.get("supportedFeatures")
        if not isinstance(raw_supported, list):
            problems.append("implementation.supportedFeatures: missing or not a list")
            raw_supported = []
        for i, name in enumerate(raw_supported):
            feature = _feature(name, f"implementation.supportedFeatures[{i}]", problems)
            if feature is not None:
                supported.add(feature)
        raw_unsupported = data.get("unsupportedFeatures") or []
        for i, entry in enumerate(raw_unsupported if isinstance(raw_unsupported, list) else []):
            where = f"implementation.unsupportedFeatures[{i}]"
            if not isinstance(entry, Mapping):
                problems.append(f"{where}: expected a mapping with name and reason")
                continue
            feature = _feature(entry.get("name"), f"{where}.name", problems)
            if feature is not None:
                reasons[feature] = str(entry.get("reason", ""))
        if problems:
            raise SupportFileError(problems)
        return cls(
            name=str(data.get("name", "")),
            version=str(data.get("version", "")),
            supported=frozenset(supported),
            unsupported_reasons=reasons,
            source=str(data.get("source", "report")),
            pod_labels=PodLabels.from_report(data.get("podLabels")),
        )


# -- the file ----------------------------------------------------------------------------------------


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class _Implementation(_Strict):
    name: str = Field(min_length=1)
    version: str = Field(min_length=1)
    organization: str | None = None
    url: str | None = None
    contact: list[str] | None = None


class _Unsupported(_Strict):
    name: str
    reason: str = Field(min_length=1)


class _PodLabels(_Strict):
    serving_group: str = Field(default=PodLabels.serving_group, alias="servingGroup")
    role_instance: str = Field(default=PodLabels.role_instance, alias="roleInstance")


class _ControllerRestart(_Strict):
    command: list[str] = Field(min_length=1)
    timeout_seconds: float = Field(default=120.0, gt=0, le=3600, alias="timeoutSeconds")


class _Launch(_Strict):
    command: Any  # a list of strings (argv) or one shell-quoted string: checked in _launch_declaration
    also: list[Any] = Field(default_factory=list)  # further commands, each like command
    manifests: list[str] = Field(default_factory=list)
    ready_log: str | None = Field(default=None, alias="readyLog")
    ready_timeout_seconds: float = Field(default=60.0, gt=0, le=3600, alias="readyTimeoutSeconds")
    webhook: bool = False


class _SupportFile(_Strict):
    api_version: Literal["conformance.kthena.io/v1alpha1"] = Field(alias="apiVersion")
    kind: Literal["ImplementationSupport"]
    implementation: _Implementation
    supported_features: list[str] = Field(alias="supportedFeatures")
    unsupported_features: list[_Unsupported] = Field(default_factory=list, alias="unsupportedFeatures")
    pod_labels: _PodLabels = Field(default_factory=_PodLabels, alias="podLabels")
    controller_restart: _ControllerRestart | None = Field(default=None, alias="controllerRestart")
    launch: _Launch | None = None


def load_support(path: Path) -> Support:
    """Read and validate a support file; :class:`SupportFileError` says what is wrong and where."""
    source = str(path)
    try:
        data = load_yaml(path)
    except DocumentError as exc:
        raise SupportFileError(str(exc)) from None
    if not isinstance(data, dict):
        what = "empty" if data is None else f"a {type(data).__name__}"
        raise SupportFileError([f"{source}: expected a mapping with apiVersion, kind, implementation, ...; got {what}"])
    try:
        parsed = _SupportFile.model_validate(data)
    except ValidationError as exc:
        raise SupportFileError([f"{source}: {p}" for p in validation_problems(exc)]) from None

    problems: list[str] = []
    supported: dict[Feature, int] = {}
    for i, name in enumerate(parsed.supported_features):
        feature = _feature(name, f"supportedFeatures[{i}]", problems)
        if feature is None:
            continue
        if feature in supported:
            problems.append(f"supportedFeatures[{i}]: duplicate feature {feature.value!r}")
        supported.setdefault(feature, i)
    reasons: dict[Feature, str] = {}
    for i, entry in enumerate(parsed.unsupported_features):
        where = f"unsupportedFeatures[{i}].name"
        feature = _feature(entry.name, where, problems)
        if feature is None:
            continue
        if feature in reasons:
            problems.append(f"{where}: duplicate feature {feature.value!r}")
        elif feature in supported:
            problems.append(
                f"{where}: {feature.value!r} is also in supportedFeatures[{supported[feature]}]; "
                "a feature is either supported or not"
            )
        reasons.setdefault(feature, entry.reason)
    problems += _missing_prerequisites(supported, "supportedFeatures[{index}]")
    labels = PodLabels(parsed.pod_labels.serving_group, parsed.pod_labels.role_instance)
    problems += pod_label_problems(labels)
    restart = parsed.controller_restart
    if restart is not None and not all(arg.strip() for arg in restart.command[:1]):
        problems.append("controllerRestart.command[0]: the program to run must not be empty")
    launch = None if parsed.launch is None else _launch_declaration(parsed.launch, path, problems)
    if problems:
        raise SupportFileError([f"{source}: {p}" for p in problems])
    return Support(
        name=parsed.implementation.name,
        version=parsed.implementation.version,
        supported=frozenset(supported),
        unsupported_reasons={f: r for f, r in reasons.items() if f not in supported},
        source=f"file:{source}",
        pod_labels=labels,
        restart=None if restart is None else ControllerRestart(tuple(restart.command), restart.timeout_seconds, source),
        launch=launch,
    )


def _command_text(command: Any, where: str, problems: list[str]) -> str | None:
    """A command (argv or one shell-quoted string) as one shell-quoted string; None and a problem
    appended when it is neither."""
    if isinstance(command, list) and command and all(isinstance(a, str) for a in command):
        if not command[0].strip():
            problems.append(f"{where}[0]: the program to run must not be empty")
        return shlex.join(command)
    if isinstance(command, str) and command.strip():
        return command
    problems.append(f"{where}: expected a list of strings (argv) or one non-empty string, got {command!r}")
    return None


def _launch_declaration(raw: _Launch, path: Path, problems: list[str]) -> LaunchDeclaration | None:
    """The ``launch`` section checked (command form, manifest files present); problems appended."""
    text = _command_text(raw.command, "launch.command", problems)
    if text is None:
        return None
    also = [_command_text(c, f"launch.also[{i}]", problems) for i, c in enumerate(raw.also)]
    manifests = []
    for i, name in enumerate(raw.manifests):
        manifest = (path.parent / name) if not Path(name).is_absolute() else Path(name)
        if not manifest.is_file():
            problems.append(f"launch.manifests[{i}]: {name!r}: no such file (paths are relative to the support file)")
        manifests.append(manifest)
    return LaunchDeclaration(
        command=text,
        also=tuple(a for a in also if a is not None),
        manifests=tuple(manifests),
        ready_log=raw.ready_log,
        ready_timeout=raw.ready_timeout_seconds,
        webhook=raw.webhook,
        source=str(path),
    )


def pod_label_problems(labels: PodLabels) -> list[str]:
    """What is wrong with declared Pod label keys (``podLabels.<key>: problem``). Pure."""
    problems = []
    for key, value in labels.as_report().items():
        problem = label_key_problem(value)
        if problem:
            problems.append(f"podLabels.{key}: {problem}")
    if labels.serving_group == labels.role_instance:
        problems.append(
            f"podLabels.roleInstance: the same key as podLabels.servingGroup ({labels.serving_group!r}); a Pod needs "
            "one label for its ServingGroup and another for its Role instance"
        )
    return problems


def support_from_flags(name: str, version: str, features: list[str] | None, all_features: bool) -> Support:
    """Support declared on the command line: ``--supported-features A,B --supported-features C``,
    or ``--all-features``. Unknown names and missing prerequisites raise :class:`SupportFileError`
    naming the flag."""
    names = [item.strip() for entry in features or [] for item in entry.split(",") if item.strip()]
    if all_features:
        if names:
            raise SupportFileError([f"{FLAG}: cannot be combined with --all-features (which declares every feature)"])
        return Support(name=name, version=version, supported=frozenset(Feature), source="all")
    problems: list[str] = []
    supported: dict[Feature, int] = {}
    for i, item in enumerate(names):
        feature = _feature(item, FLAG, problems)
        if feature is not None:
            supported.setdefault(feature, i)
    problems += _missing_prerequisites(supported, FLAG)
    if problems:
        raise SupportFileError(problems)
    return Support(name=name, version=version, supported=frozenset(supported), source="flags")


def _feature(name: object, where: str, problems: list[str]) -> Feature | None:
    if not isinstance(name, str):
        problems.append(f"{where}: expected a feature name, got {name!r}")
        return None
    try:
        return parse_feature(name)
    except SelectionError as exc:
        problems.append(f"{where}: {exc}")
        return None


def _missing_prerequisites(supported: Mapping[Feature, int], where: str) -> list[str]:
    problems = []
    for feature, index in sorted(supported.items(), key=lambda item: item[1]):
        missing = sorted(FEATURES[feature].requires - supported.keys(), key=feature_order)
        if missing:
            names = ", ".join(repr(m.value) for m in missing)
            problems.append(
                f"{where.format(index=index)}: {feature.value!r} requires {names}, which is not declared supported"
            )
    return problems


# -- helpers shared with the report ------------------------------------------------------------------


def load_yaml(path: Path, *, fast: bool = False) -> Any:
    """Parse one YAML document, rejecting duplicate keys; :class:`DocumentError` on any failure.
    ``fast``: through libyaml (:mod:`conformance.yamlio`), for large generated files; a file it
    refuses is parsed again by the pure-Python parser, whose message names the line."""
    source = str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise DocumentError(f"{source}: not UTF-8 text") from None
    except OSError as exc:
        raise DocumentError(f"{source}: cannot read: {exc.strerror or exc}") from None
    if fast:
        try:
            return yaml.load(text, Loader=_FastUniqueKeyLoader)
        except yaml.YAMLError:
            pass  # parsed again below, for the pure-Python parser's message
    try:
        return yaml.load(text, Loader=_UniqueKeyLoader)
    except yaml.YAMLError as exc:
        raise DocumentError(f"{source}: not valid YAML: {_yaml_problem(exc)}") from None


def validation_problems(exc: ValidationError) -> list[str]:
    """One ``field.path[i]: problem`` line per pydantic error, in words a user can act on."""
    lines = []
    for err in exc.errors():
        loc = field_path(err["loc"])
        kind = err["type"]
        if kind == "extra_forbidden":
            message = "unknown field"
        elif kind == "missing":
            message = "required field is missing"
        elif kind == "literal_error":
            expected = (err.get("ctx") or {}).get("expected", "")
            message = f"expected {expected}, got {err['input']!r}"
        elif kind in ("string_type", "str_type"):
            message = f"expected a string, got {err['input']!r}" + (
                " (quote it)" if isinstance(err["input"], int | float) else ""
            )
        else:
            message = str(err["msg"])
            message = message[0].lower() + message[1:] if message else kind
        lines.append(f"{loc or '(top level)'}: {message}")
    return lines


def field_path(loc: Iterable[int | str]) -> str:
    """``("a", 2, "b")`` -> ``a[2].b``."""
    text = ""
    for part in loc:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text


class _UniqueKeys(yaml.constructor.SafeConstructor):
    """A safe constructor that rejects a key given twice in one mapping (PyYAML keeps the last
    silently)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if isinstance(key, str) and key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"key {key!r} appears twice in one mapping", key_node.start_mark
                )
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


class _UniqueKeyLoader(_UniqueKeys, yaml.SafeLoader):
    """For files people write: the pure-Python parser, whose messages the error tests pin."""


class _FastUniqueKeyLoader(_UniqueKeys, yamlio.Loader):  # type: ignore[misc,valid-type]
    """For the large files this project generates and checks in (the spec map): libyaml."""


def _yaml_problem(exc: yaml.YAMLError) -> str:
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None) or str(exc)
    where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
    return f"{where}{problem}"
