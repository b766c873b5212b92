"""Support declarations: a valid file, every way a file can be wrong (each naming the file and the
field), flags, and the report view."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from conformance.framework.features import Feature
from conformance.framework.support import (
    PodLabels,
    Support,
    SupportFileError,
    label_key_problem,
    load_support,
    support_from_flags,
)

VALID: dict[str, Any] = {
    "apiVersion": "conformance.kthena.io/v1alpha1",
    "kind": "ImplementationSupport",
    "implementation": {
        "name": "kthena-ref",
        "version": "0.1.0",
        "organization": "Kthena",
        "url": "https://example.com",
        "contact": ["a@example.com"],
    },
    "supportedFeatures": ["Core", "Admission", "PluginFramework", "HeadlessService"],
    "unsupportedFeatures": [{"name": "MigrationRequired", "reason": "not implemented"}],
}


def write(tmp_path: Path, data: Any) -> Path:
    path = tmp_path / "support.yaml"
    path.write_text(data if isinstance(data, str) else yaml.safe_dump(data, sort_keys=False))
    return path


def with_(**changes: Any) -> dict[str, Any]:
    """VALID with top-level keys replaced (None removes one)."""
    data = {**VALID, **changes}
    return {k: v for k, v in data.items() if v is not None}


def test_valid_file(tmp_path: Path) -> None:
    path = write(tmp_path, VALID)
    support = load_support(path)
    assert support.name == "kthena-ref"
    assert support.version == "0.1.0"
    assert support.source == f"file:{path}"
    assert support.supported == {Feature.CORE, Feature.ADMISSION, Feature.PLUGIN_FRAMEWORK, Feature.HEADLESS_SERVICE}
    assert support.supports(Feature.CORE)
    assert not support.supports(Feature.RECOVERY)
    assert support.reason(Feature.MIGRATION_REQUIRED) == "not implemented"
    assert support.reason(Feature.RECOVERY) == f"not declared supported by kthena-ref (file:{path})"
    hash(support)  # usable in sets and as a cache key


def test_minimal_file_and_case_insensitive_names(tmp_path: Path) -> None:
    text = """\
apiVersion: conformance.kthena.io/v1alpha1
kind: ImplementationSupport
implementation: {name: other, version: "2"}
supportedFeatures: [core, SCALESUBRESOURCE]
"""
    support = load_support(write(tmp_path, text))
    assert support.supported == {Feature.CORE, Feature.SCALE_SUBRESOURCE}
    assert support.unsupported_reasons == {}


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        pytest.param("a: [", "not valid YAML: line 1, column 5: expected the node content", id="not-yaml"),
        pytest.param("a: 1\na: 2\n", "not valid YAML: line 2, column 1: key 'a' appears twice", id="duplicate-key"),
        pytest.param("", "expected a mapping with apiVersion, kind, implementation, ...; got empty", id="empty"),
        pytest.param(
            "- Core\n", "expected a mapping with apiVersion, kind, implementation, ...; got a list", id="a-list"
        ),
        pytest.param(
            with_(apiVersion="v1"),
            "apiVersion: expected 'conformance.kthena.io/v1alpha1', got 'v1'",
            id="wrong-api-version",
        ),
        pytest.param(with_(apiVersion=None), "apiVersion: required field is missing", id="missing-api-version"),
        pytest.param(with_(kind="Support"), "kind: expected 'ImplementationSupport', got 'Support'", id="wrong-kind"),
        pytest.param(with_(extra=1), "extra: unknown field", id="unknown-top-level-field"),
        pytest.param(
            with_(implementation={"name": "x", "version": "1", "vendor": "y"}),
            "implementation.vendor: unknown field",
            id="unknown-nested-field",
        ),
        pytest.param(
            with_(implementation=None), "implementation: required field is missing", id="missing-implementation"
        ),
        pytest.param(
            with_(implementation={"version": "1"}), "implementation.name: required field is missing", id="missing-name"
        ),
        pytest.param(
            with_(implementation={"name": "", "version": "1"}),
            "implementation.name: string should have at least 1 character",
            id="empty-name",
        ),
        pytest.param(
            with_(implementation={"name": "x"}),
            "implementation.version: required field is missing",
            id="missing-version",
        ),
        pytest.param(
            with_(implementation={"name": "x", "version": 1.1}),
            "implementation.version: expected a string, got 1.1 (quote it)",
            id="numeric-version",
        ),
        pytest.param(
            with_(implementation={"name": "x", "version": "1", "contact": "a@b"}),
            "implementation.contact: input should be a valid list",
            id="contact-not-a-list",
        ),
        pytest.param(
            with_(supportedFeatures=None), "supportedFeatures: required field is missing", id="missing-supported"
        ),
        pytest.param(
            with_(supportedFeatures="Core"),
            "supportedFeatures: input should be a valid list",
            id="supported-not-a-list",
        ),
        pytest.param(
            with_(supportedFeatures=["Core", "Admission", "Foo"]),
            "supportedFeatures[2]: unknown feature 'Foo' (known: Core, Admission,",
            id="unknown-feature",
        ),
        pytest.param(
            with_(supportedFeatures=["Core", 3]),
            "supportedFeatures[1]: expected a string, got 3",
            id="feature-not-a-string",
        ),
        pytest.param(
            with_(supportedFeatures=["Core", "core"]),
            "supportedFeatures[1]: duplicate feature 'Core'",
            id="duplicate-supported",
        ),
        pytest.param(
            with_(unsupportedFeatures=[{"name": "Bar", "reason": "r"}]),
            "unsupportedFeatures[0].name: unknown feature 'Bar'",
            id="unknown-unsupported",
        ),
        pytest.param(
            with_(unsupportedFeatures=[{"name": "Recovery", "reason": "a"}, {"name": "recovery", "reason": "b"}]),
            "unsupportedFeatures[1].name: duplicate feature 'Recovery'",
            id="duplicate-unsupported",
        ),
        pytest.param(
            with_(unsupportedFeatures=[{"name": "Admission", "reason": "r"}]),
            "unsupportedFeatures[0].name: 'Admission' is also in supportedFeatures[1]",
            id="both-supported-and-unsupported",
        ),
        pytest.param(
            with_(unsupportedFeatures=[{"name": "Recovery"}]),
            "unsupportedFeatures[0].reason: required field is missing",
            id="unsupported-without-reason",
        ),
        pytest.param(
            with_(unsupportedFeatures=[{"name": "Recovery", "reason": "r", "why": 1}]),
            "unsupportedFeatures[0].why: unknown field",
            id="unsupported-unknown-field",
        ),
        pytest.param(
            with_(supportedFeatures=["Core", "HeadlessService"]),
            "supportedFeatures[1]: 'HeadlessService' requires 'PluginFramework', which is not declared supported",
            id="missing-prerequisite",
        ),
        pytest.param(
            with_(supportedFeatures=["DNSResolution", "PluginFramework"]),
            "supportedFeatures[0]: 'DNSResolution' requires 'HeadlessService'",
            id="missing-prerequisite-one-level-up",
        ),
    ],
)
def test_invalid_file_names_file_and_field(tmp_path: Path, data: Any, expected: str) -> None:
    path = write(tmp_path, data)
    with pytest.raises(SupportFileError) as info:
        load_support(path)
    message = str(info.value)
    assert message.startswith(f"{path}: ")
    assert expected in message
    assert "pydantic" not in message and "Traceback" not in message and "errors.pydantic.dev" not in message
    assert isinstance(info.value, ValueError)


def test_unreadable_file(tmp_path: Path) -> None:
    path = tmp_path / "missing.yaml"
    with pytest.raises(SupportFileError, match=rf"^{path}: cannot read: No such file or directory$"):
        load_support(path)


def test_not_utf8(tmp_path: Path) -> None:
    path = tmp_path / "support.yaml"
    path.write_bytes(b"\xff\xfe")
    with pytest.raises(SupportFileError, match="not UTF-8 text"):
        load_support(path)


def test_every_problem_is_reported_one_per_line(tmp_path: Path) -> None:
    path = write(tmp_path, with_(supportedFeatures=["Foo", "Bar"]))
    with pytest.raises(SupportFileError) as info:
        load_support(path)
    assert info.value.problems == [
        f"{path}: supportedFeatures[0]: unknown feature 'Foo' (known: {', '.join(Feature)})",
        f"{path}: supportedFeatures[1]: unknown feature 'Bar' (known: {', '.join(Feature)})",
    ]


@pytest.mark.parametrize(
    ("features", "all_features", "expected", "source"),
    [
        pytest.param(None, False, set(), "flags", id="nothing"),
        pytest.param([], False, set(), "flags", id="empty-list"),
        pytest.param(["Core"], False, {Feature.CORE}, "flags", id="one"),
        pytest.param(
            ["Core,Admission", "recovery"],
            False,
            {Feature.CORE, Feature.ADMISSION, Feature.RECOVERY},
            "flags",
            id="comma-separated-and-repeated",
        ),
        pytest.param(["Core, ,Core,"], False, {Feature.CORE}, "flags", id="blanks-and-repeats-ignored"),
        pytest.param(None, True, set(Feature), "all", id="all-features"),
        pytest.param([], True, set(Feature), "all", id="all-features-empty-list"),
    ],
)
def test_support_from_flags(
    features: list[str] | None, all_features: bool, expected: set[Feature], source: str
) -> None:
    support = support_from_flags("impl", "1.0", features, all_features)
    assert support.supported == expected
    assert support.source == source
    assert support.reason(Feature.DNS_RESOLUTION).endswith(f"({source})") or Feature.DNS_RESOLUTION in expected


@pytest.mark.parametrize(
    ("features", "all_features", "expected"),
    [
        pytest.param(["Core,Foo"], False, "--supported-features: unknown feature 'Foo' (known: Core,", id="unknown"),
        pytest.param(
            ["DemoPodTweaks"],
            False,
            "--supported-features: 'DemoPodTweaks' requires 'PluginFramework'",
            id="missing-prerequisite",
        ),
        pytest.param(["Core"], True, "--supported-features: cannot be combined with --all-features", id="both"),
    ],
)
def test_support_from_flags_errors(features: list[str], all_features: bool, expected: str) -> None:
    with pytest.raises(SupportFileError) as info:
        support_from_flags("impl", "1.0", features, all_features)
    assert str(info.value).startswith(expected)


def test_as_report_lists_every_feature_once_and_round_trips() -> None:
    support = Support(
        name="impl",
        version="1.0",
        supported=frozenset({Feature.CORE, Feature.ADMISSION}),
        unsupported_reasons={Feature.RECOVERY: "later"},
        source="flags",
    )
    report = support.as_report()
    assert report["supportedFeatures"] == ["Admission", "Core"]
    unsupported = {u["name"]: u["reason"] for u in report["unsupportedFeatures"]}
    assert unsupported["Recovery"] == "later"
    assert unsupported["DNSResolution"] == "not declared supported by impl (flags)"
    assert sorted([*report["supportedFeatures"], *unsupported]) == sorted(Feature)
    again = Support.from_report(report)
    assert again.supported == support.supported
    assert all(again.reason(f) == support.reason(f) for f in Feature)


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        pytest.param({"name": "x"}, "implementation.supportedFeatures: missing or not a list", id="missing"),
        pytest.param(
            {"supportedFeatures": ["Nope"]}, "implementation.supportedFeatures[0]: unknown feature 'Nope'", id="unknown"
        ),
        pytest.param(
            {"supportedFeatures": [], "unsupportedFeatures": ["Core"]},
            "implementation.unsupportedFeatures[0]: expected a mapping",
            id="bad-entry",
        ),
    ],
)
def test_from_report_errors(data: dict[str, Any], expected: str) -> None:
    with pytest.raises(SupportFileError, match=expected.replace("[", r"\[").replace("]", r"\]")):
        Support.from_report(data)


# -- podLabels: the label keys naming a Pod's ServingGroup and Role instance -----------------------------


def test_pod_labels_default_to_upstreams(tmp_path: Path) -> None:
    support = load_support(write(tmp_path, VALID))
    assert support.pod_labels == PodLabels("modelserving.volcano.sh/group-name", "modelserving.volcano.sh/role-id")
    assert support_from_flags("impl", "1", None, True).pod_labels == PodLabels()


def test_declared_pod_labels_are_kept_and_a_missing_key_keeps_its_default(tmp_path: Path) -> None:
    support = load_support(write(tmp_path, with_(podLabels={"servingGroup": "example.com/serving-group"})))
    assert support.pod_labels == PodLabels("example.com/serving-group", "modelserving.volcano.sh/role-id")
    both = {"servingGroup": "group", "roleInstance": "example.com/instance"}
    assert load_support(write(tmp_path, with_(podLabels=both))).pod_labels == PodLabels("group", "example.com/instance")


@pytest.mark.parametrize(
    ("labels", "expected"),
    [
        pytest.param({"servingGroup": "-bad"}, "podLabels.servingGroup: '-bad' is not a label key", id="bad-name"),
        pytest.param(
            {"roleInstance": "Bad_Prefix/x"}, "podLabels.roleInstance: 'Bad_Prefix/x' is not a label key", id="prefix"
        ),
        pytest.param({"roleInstance": "a" * 64}, "is not a label key: the name must be 1-63", id="too-long"),
        pytest.param(
            {"servingGroup": "same", "roleInstance": "same"},
            "podLabels.roleInstance: the same key as podLabels.servingGroup",
            id="same-key",
        ),
        pytest.param({"group": "x"}, "podLabels.group: unknown field", id="unknown-field"),
        pytest.param({"servingGroup": 3}, "podLabels.servingGroup: expected a string, got 3", id="not-a-string"),
    ],
)
def test_bad_pod_labels_name_the_field(tmp_path: Path, labels: dict[str, Any], expected: str) -> None:
    with pytest.raises(SupportFileError) as info:
        load_support(write(tmp_path, with_(podLabels=labels)))
    assert any(expected in line for line in info.value.problems), info.value.problems


@pytest.mark.parametrize(
    ("key", "valid"),
    [
        ("modelserving.volcano.sh/group-name", True),
        ("group", True),
        ("a.b/c_d.e-f", True),
        ("/x", False),
        ("a/b/c", False),
        ("x/", False),
        ("UPPER.example/x", False),
        ("x-", False),
    ],
)
def test_label_key_problem(key: str, valid: bool) -> None:
    assert (label_key_problem(key) is None) is valid


def test_pod_labels_are_in_the_report_and_read_back() -> None:
    labels = PodLabels("example.com/group", "example.com/instance")
    support = Support("impl", "1", frozenset({Feature.CORE}), {}, "flags", labels)
    report = support.as_report()
    assert report["podLabels"] == {"servingGroup": "example.com/group", "roleInstance": "example.com/instance"}
    assert Support.from_report(report).pod_labels == labels
    del report["podLabels"]  # a report written before podLabels existed
    assert Support.from_report(report).pod_labels == PodLabels()


# -- controllerRestart: how the suite restarts the controller -------------------------------------------


def test_controller_restart_is_optional_and_kept_when_declared(tmp_path: Path) -> None:
    assert load_support(write(tmp_path, VALID)).restart is None
    declared = with_(controllerRestart={"command": ["kubectl", "rollout", "restart", "deploy/c"], "timeoutSeconds": 30})
    restart = load_support(write(tmp_path, declared)).restart
    assert restart is not None
    assert (restart.command, restart.timeout) == (("kubectl", "rollout", "restart", "deploy/c"), 30.0)
    assert str(tmp_path) in restart.source
    default = load_support(write(tmp_path, with_(controllerRestart={"command": ["true"]}))).restart
    assert default is not None and default.timeout == 120.0


@pytest.mark.parametrize(
    ("restart", "expected"),
    [
        pytest.param({}, "controllerRestart.command: required", id="no-command"),
        pytest.param({"command": []}, "controllerRestart.command:", id="empty-command"),
        pytest.param({"command": "kubectl rollout restart"}, "controllerRestart.command:", id="a-string"),
        pytest.param(
            {"command": [" "]}, "controllerRestart.command[0]: the program to run must not be empty", id="blank"
        ),
        pytest.param({"command": ["true"], "timeoutSeconds": 0}, "controllerRestart.timeoutSeconds:", id="zero"),
        pytest.param({"command": ["true"], "shell": True}, "controllerRestart.shell: unknown field", id="unknown"),
    ],
)
def test_bad_controller_restart_names_the_field(tmp_path: Path, restart: dict[str, Any], expected: str) -> None:
    with pytest.raises(SupportFileError) as info:
        load_support(write(tmp_path, with_(controllerRestart=restart)))
    assert any(expected in line for line in info.value.problems), info.value.problems


# -- launch: how the harness starts the implementation -----------------------------------------------


def test_launch_is_optional_and_kept_when_declared(tmp_path: Path) -> None:
    assert load_support(write(tmp_path, VALID)).launch is None
    (tmp_path / "deploy").mkdir()
    (tmp_path / "deploy" / "crds.yaml").write_text("")
    declared = with_(
        launch={
            "command": ["./bin/ctl", "--flag", "a b"],
            "manifests": ["deploy/crds.yaml"],
            "readyLog": "caches synced",
            "readyTimeoutSeconds": 30,
            "webhook": True,
        }
    )
    launch = load_support(write(tmp_path, declared)).launch
    assert launch is not None
    assert launch.command == "./bin/ctl --flag 'a b'"  # argv, quoted for Launch.parse's split
    assert launch.manifests == (tmp_path / "deploy" / "crds.yaml",)  # relative to the support file
    assert (launch.ready_log, launch.ready_timeout, launch.webhook) == ("caches synced", 30.0, True)
    assert launch.source == str(tmp_path / "support.yaml")
    minimal = load_support(write(tmp_path, with_(launch={"command": "ctl --x 'y z'"}))).launch
    assert minimal is not None
    assert (minimal.command, minimal.manifests, minimal.ready_log, minimal.ready_timeout, minimal.webhook) == (
        "ctl --x 'y z'",
        (),
        None,
        60.0,
        False,
    )


@pytest.mark.parametrize(
    ("launch", "expected"),
    [
        pytest.param({}, "launch.command: required field is missing", id="no-command"),
        pytest.param({"command": []}, "launch.command: expected a list of strings (argv) or one", id="empty-list"),
        pytest.param({"command": "  "}, "launch.command: expected a list of strings", id="blank-string"),
        pytest.param({"command": [1, 2]}, "launch.command: expected a list of strings", id="numbers"),
        pytest.param({"command": [" "]}, "launch.command[0]: the program to run must not be empty", id="blank"),
        pytest.param(
            {"command": "c", "manifests": ["nope.yaml"]},
            "launch.manifests[0]: 'nope.yaml': no such file",
            id="missing-manifest",
        ),
        pytest.param({"command": "c", "readyTimeoutSeconds": 0}, "launch.readyTimeoutSeconds:", id="zero-timeout"),
        pytest.param({"command": "c", "webhook": "yes"}, "launch.webhook:", id="webhook-not-bool"),
        pytest.param({"command": "c", "shell": True}, "launch.shell: unknown field", id="unknown"),
    ],
)
def test_bad_launch_names_the_field(tmp_path: Path, launch: dict[str, Any], expected: str) -> None:
    with pytest.raises(SupportFileError) as info:
        load_support(write(tmp_path, with_(launch=launch)))
    assert any(expected in line for line in info.value.problems), info.value.problems
    assert all(line.startswith(str(tmp_path / "support.yaml")) for line in info.value.problems)
