"""The report: written as YAML and JSON with the same content, atomically; verify passes a
consistent report (warnings and the spec map's coverage included) and names each kind of
tampering."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from conformance.framework.catalog import Behaviour
from conformance.framework.features import PROFILES, Feature
from conformance.framework.outcomes import Outcome, TestResult, overall_verdict, profile_verdict
from conformance.framework.report import SCHEMA_VERSION, Report, ReportError, load, read, verify, write
from conformance.framework.timeouts import Timeouts
from tests.unit.framework.samples import SUPPORT

DIGEST = "sha256:" + "ab" * 32
SPEC = "api-reference-workload-v1alpha1.txt#ModelServingSpec"

PLAN = [
    ("core/pods/created", Feature.CORE, Outcome.PASSED),
    ("core/admission/reject", Feature.ADMISSION, Outcome.PASSED),
    ("core/recovery/replace", Feature.RECOVERY, Outcome.NON_CONFORMANT),
    ("core/scale/up", Feature.SCALE_SUBRESOURCE, Outcome.PASSED),
    ("plugins/framework/order", Feature.PLUGIN_FRAMEWORK, Outcome.ERROR),
    ("plugins/chain/immutable", Feature.PLUGIN_CHAIN_IMMUTABILITY, Outcome.PASSED),
    ("plugins/demo/tweaks", Feature.DEMO_POD_TWEAKS, Outcome.PASSED),
    ("dns/service/entry", Feature.HEADLESS_SERVICE, Outcome.PASSED),
    ("dns/resolve/pod", Feature.DNS_RESOLUTION, Outcome.NOT_SUPPORTED),
]
CATALOG = [Behaviour(id, f"The implementation MUST do {id}.", SPEC, feature) for id, feature, _ in PLAN]
# The same with a SHOULD behaviour that did not hold: a warning.
WARNED = ("core/status/hint", Feature.CORE, Outcome.WARNING)
WARN_PLAN = [*PLAN, WARNED]
WARN_CATALOG = [*CATALOG, Behaviour(WARNED[0], "The implementation SHOULD give a hint.", SPEC, WARNED[1])]


def figures(total: int, asserted: int, explained: int = 0) -> dict[str, int]:
    return {"total": total, "asserted": asserted, "explained": explained, "gaps": total - asserted - explained}


COVERAGE: dict[str, Any] = {
    "specMap": {"file": "specmap.yaml", "digest": "sha256:" + "ef" * 32, "statements": 120},
    "scope": "ModelServing",
    "overall": {"must": figures(100, 96, 2), "should": figures(4, 2)},
    "profiles": [
        {"profile": "Core", "must": figures(20, 17), "should": figures(2, 1, 1)},
        {"profile": "Plugins", "must": figures(10, 10), "should": figures(0, 0)},
    ],
}


def consistent_report(plan: list[tuple[str, Feature, Outcome]] = PLAN, levels: bool = True) -> dict[str, Any]:
    """A report built the way the runner builds one: every number derived from the tests."""
    level = {b.id: b.level for b in WARN_CATALOG}
    results = [
        TestResult(
            id, f"conformance/suites/test_x.py::test_{i}", feature, outcome, 0.25 * i, message=f"m{i}",
            level=level[id] if levels else None,
        )
        for i, (id, feature, outcome) in enumerate(plan)
    ]  # fmt: skip
    profiles = [profile_verdict(p, results, SUPPORT) for p in PROFILES.values()]
    return {
        "schemaVersion": SCHEMA_VERSION,
        "kind": "ConformanceReport",
        "suite": {"name": "kthena-conformance", "version": "0.1.0", "digest": DIGEST},
        "run": {
            "id": "run-1",
            "startedAt": "2026-01-02T03:04:05+00:00",
            "finishedAt": "2026-01-02T03:14:05+00:00",
            "durationSeconds": 600.0,
            "interrupted": False,
            "interruption": None,
            "command": ["kthena-conformance", "run"],
            "selection": {"profiles": [], "features": [], "ids": []},
            "keep": "on-failure",
            "timeouts": Timeouts.from_options(2, ["recovery=300"]).as_report(),
        },
        "implementation": {**SUPPORT.as_report(), "deployedBy": "harness", "log": "reports/kthena-ref.log"},
        "cluster": {"provider": "local", "simulated": ["kubelet", "dns"]},
        "preflight": [{"name": "nodes-ready", "result": "ok", "message": "3/3 nodes Ready"}],
        "profiles": [p.as_dict() for p in profiles],
        "tests": [r.as_dict() for r in results],
        "verdict": overall_verdict(profiles, preflight_ok=True, interrupted=False).value,
        "error": None,
        "notes": ["ünïcode survives"],
        "exitCode": 1,
    }


def save(tmp_path: Path, data: dict[str, Any], suffix: str = ".json") -> Path:
    path = tmp_path / f"report{suffix}"
    path.write_text(json.dumps(data) if suffix == ".json" else yaml.safe_dump(data))
    return path


def test_the_base_report_is_interesting() -> None:
    data = consistent_report()
    # The profiles after the first three have no test in the plan: not-run.
    later = ["not-run"] * (len(PROFILES) - 3)
    assert [p["verdict"] for p in data["profiles"]] == ["failure", "partial", "success", *later]
    assert data["verdict"] == "failure"


def test_write_then_verify_is_clean(tmp_path: Path) -> None:
    paths = write(consistent_report(), tmp_path / "out")
    assert [p.name for p in paths] == ["conformance-report.yaml", "conformance-report.json"]
    for path in paths:
        assert verify(path, digest=DIGEST, catalog=CATALOG) == []
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [
        "conformance-report.json",
        "conformance-report.yaml",
        "index.html",
    ]


def test_yaml_and_json_carry_the_same_content(tmp_path: Path) -> None:
    yaml_path, json_path = write(consistent_report(), tmp_path)
    from_yaml = yaml.safe_load(yaml_path.read_text(encoding="utf-8"))
    from_json = json.loads(json_path.read_text(encoding="utf-8"))
    assert from_yaml == from_json
    assert from_json["notes"] == ["ünïcode survives"]
    assert from_json["run"]["startedAt"] == "2026-01-02T03:04:05Z"
    assert load(yaml_path) == load(json_path)


def test_write_accepts_a_model_and_replaces_previous_files(tmp_path: Path) -> None:
    write({**consistent_report(), "notes": ["old"]}, tmp_path)
    write(Report.model_validate(consistent_report()), tmp_path)
    assert json.loads((tmp_path / "conformance-report.json").read_text())["notes"] == ["ünïcode survives"]


def test_minimal_report_gets_defaults(tmp_path: Path) -> None:
    minimal = {
        "suite": {"name": "kthena-conformance", "version": "0.1.0", "digest": DIGEST},
        "run": {"id": "r", "startedAt": "2026-01-02T03:04:05Z", "keep": "never"},
        "implementation": SUPPORT.as_report(),
        "verdict": "not-run",
    }
    _, json_path = write(minimal, tmp_path)
    data = json.loads(json_path.read_text())
    assert data["schemaVersion"] == SCHEMA_VERSION and data["kind"] == "ConformanceReport"
    assert data["run"]["selection"] == {"profiles": [], "features": [], "ids": []}
    assert data["tests"] == [] and data["profiles"] == [] and data["error"] is None
    assert verify(json_path, catalog=[]) == []


@pytest.mark.parametrize(
    ("change", "message"),
    [
        pytest.param(
            {"verdict": "great"},
            "verdict: input should be 'success', 'partial', 'failure', 'not-run' or 'error'",
            id="bad-verdict",
        ),
        pytest.param({"surprise": 1}, "surprise: unknown field", id="unknown-field"),
        pytest.param({"run": {"id": "r"}}, "run.startedAt: required field is missing", id="missing-nested"),
    ],
)
def test_write_rejects_invalid_reports_and_writes_nothing(tmp_path: Path, change: dict[str, Any], message: str) -> None:
    with pytest.raises(ReportError) as info:
        write({**consistent_report(), **change}, tmp_path / "out")
    assert message in str(info.value)
    assert not (tmp_path / "out").exists()


Tamper = Callable[[dict[str, Any]], None]


def _test(data: dict[str, Any], id: str) -> dict[str, Any]:
    return next(t for t in data["tests"] if t["id"] == id)


def _profile(data: dict[str, Any], name: str) -> dict[str, Any]:
    return next(p for p in data["profiles"] if p["profile"] == name)


def hide_failure_as_skip(data: dict[str, Any]) -> None:
    _test(data, "core/recovery/replace")["outcome"] = "not-supported"
    core = _profile(data, "Core")
    core["counts"].update({"non-conformant": 0, "not-supported": 1})
    core.update(verdict="success", nonConformant=[], notSupported=["core/recovery/replace"])
    data["verdict"] = "partial"


def drop_failing_profile(data: dict[str, Any]) -> None:
    data["profiles"] = [p for p in data["profiles"] if p["profile"] != "Core"]
    data["verdict"] = "partial"


def claim_dns_support(data: dict[str, Any]) -> None:
    data["implementation"]["supportedFeatures"].append("DNSResolution")


TAMPERING: list[Any] = [
    pytest.param(
        lambda d: d.update(schemaVersion="conformance.kthena.io/report/v0"),
        "unknown schemaVersion 'conformance.kthena.io/report/v0'",
        id="schema-version",
    ),
    pytest.param(
        lambda d: d.update(kind="Report"), "schema: kind: expected 'ConformanceReport', got 'Report'", id="schema-kind"
    ),
    pytest.param(
        lambda d: d["tests"][0].update(outcome="skipped"),
        "schema: tests[0].outcome: input should be",
        id="schema-outcome",
    ),
    pytest.param(
        lambda d: d["tests"][0].update(extra=1), "schema: tests[0].extra: unknown field", id="schema-unknown-field"
    ),
    pytest.param(
        lambda d: d["suite"].update(digest="sha256:" + "cd" * 32),
        "the report was produced by a different suite",
        id="digest",
    ),
    pytest.param(
        lambda d: _test(d, "core/scale/up").update(id="core/scale/sideways"),
        "test 'core/scale/sideways' is not in the behaviour catalog",
        id="unknown-test-id",
    ),
    pytest.param(
        lambda d: d["tests"].append(copy.deepcopy(d["tests"][0])),
        "duplicate test id 'core/pods/created' (2 entries)",
        id="duplicate-test",
    ),
    pytest.param(
        lambda d: _test(d, "core/scale/up").update(profile="Plugins"),
        "test 'core/scale/up' is reported under profile 'Plugins' but its feature ScaleSubresource belongs to Core",
        id="test-profile",
    ),
    pytest.param(
        lambda d: _test(d, "core/scale/up").update(feature="Recovery"),
        "test 'core/scale/up' is reported under feature Recovery but the catalog declares ScaleSubresource",
        id="test-feature-vs-catalog",
    ),
    pytest.param(
        lambda d: _test(d, "core/scale/up").update(feature="Teleport"),
        "schema: tests[3].feature: unknown feature 'Teleport'",
        id="test-unknown-feature",
    ),
    pytest.param(lambda d: _profile(d, "Plugins")["counts"].update(passed=5), "profile Plugins: counts", id="counts"),
    pytest.param(
        lambda d: _profile(d, "Plugins")["counts"].pop("error"), "profile Plugins: counts", id="counts-missing-key"
    ),
    pytest.param(
        lambda d: _profile(d, "Core").update(verdict="success"),
        "profile Core: verdict success differs from failure",
        id="profile-verdict",
    ),
    pytest.param(
        lambda d: _profile(d, "Core").update(nonConformant=[]),
        "profile Core: nonConformant lists [] but its tests give ['core/recovery/replace']",
        id="profile-list",
    ),
    pytest.param(
        lambda d: _profile(d, "Core").update(profile="Extended"),
        "profile 'Extended' is not a profile of this suite",
        id="unknown-profile",
    ),
    pytest.param(
        lambda d: d["profiles"].append(copy.deepcopy(d["profiles"][0])),
        "profile Core appears more than once",
        id="duplicate-profile",
    ),
    pytest.param(
        drop_failing_profile,
        "the report has tests of profile Core that ran but no result for that profile",
        id="dropped-profile",
    ),
    pytest.param(
        hide_failure_as_skip,
        "test 'core/recovery/replace' is reported not-supported although its feature Recovery is in implementation.supportedFeatures: a failure hidden as a skip",
        id="failure-hidden-as-skip",
    ),
    pytest.param(
        claim_dns_support,
        "test 'dns/resolve/pod' is reported not-supported although its feature DNSResolution",
        id="support-claimed-after-the-fact",
    ),
    pytest.param(
        lambda d: d["implementation"].pop("supportedFeatures"),
        "implementation.supportedFeatures: missing or not a list",
        id="support-missing",
    ),
    pytest.param(
        lambda d: d["implementation"].update(supportedFeatures=["Warp"]),
        "implementation.supportedFeatures[0]: unknown feature 'Warp'",
        id="support-unknown-feature",
    ),
    pytest.param(
        lambda d: d["tests"].pop(),
        "profile HeadlessServiceDNS was selected but 1 of its 2 catalog tests are missing from the report: dns/resolve/pod",
        id="missing-test",
    ),
    pytest.param(
        lambda d: d["run"]["selection"].update(profiles=["Nope"]),
        "run.selection.profiles: unknown profile 'Nope'",
        id="unknown-selected-profile",
    ),
    pytest.param(
        lambda d: d.update(verdict="success"),
        "overall verdict success is inconsistent: the profiles, preflight, error and interruption give failure",
        id="overall-verdict",
    ),
    pytest.param(
        lambda d: d["preflight"].append({"name": "crd", "result": "missing", "message": "m"}),
        "overall verdict failure is inconsistent",
        id="preflight-failed-but-verdict-kept",
    ),
    pytest.param(lambda d: d["run"].update(interrupted=True), "give error", id="interrupted-but-verdict-kept"),
    pytest.param(
        lambda d: d.update(error={"message": "boom", "hint": None}), "give error", id="error-but-verdict-kept"
    ),
]


@pytest.mark.parametrize("suffix", [".json", ".yaml"])
@pytest.mark.parametrize(("tamper", "message"), TAMPERING)
def test_verify_names_each_tampering(tmp_path: Path, tamper: Tamper, message: str, suffix: str) -> None:
    data = consistent_report()
    tamper(data)
    problems = verify(save(tmp_path, data, suffix), digest=DIGEST, catalog=CATALOG)
    assert any(message in p for p in problems), problems


def test_digest_not_checked_unless_given(tmp_path: Path) -> None:
    data = consistent_report()
    data["suite"]["digest"] = "sha256:other"
    assert verify(save(tmp_path, data), catalog=CATALOG) == []


def test_empty_catalog_skips_id_and_completeness_checks(tmp_path: Path) -> None:
    data = consistent_report()
    _test(data, "core/scale/up")["id"] = "core/scale/renamed"
    assert verify(save(tmp_path, data), digest=DIGEST, catalog=[]) == []


@pytest.mark.parametrize(
    "narrow",
    [
        pytest.param(lambda d: d["run"]["selection"].update(ids=["core/*"]), id="ids-selected"),
        pytest.param(lambda d: d["run"]["selection"].update(features=["Core"]), id="features-selected"),
        pytest.param(lambda d: d["run"]["selection"].update(profiles=["Core", "plugins"]), id="other-profile-selected"),
    ],
)
def test_missing_tests_allowed_when_the_selection_excludes_them(tmp_path: Path, narrow: Tamper) -> None:
    data = consistent_report()
    data["tests"] = [t for t in data["tests"] if t["profile"] != "HeadlessServiceDNS"]
    data["profiles"] = [p for p in data["profiles"] if p["profile"] != "HeadlessServiceDNS"]
    narrow(data)
    assert verify(save(tmp_path, data), digest=DIGEST, catalog=CATALOG) == []


def test_selected_profile_without_result(tmp_path: Path) -> None:
    data = consistent_report()
    data["tests"] = [t for t in data["tests"] if t["profile"] != "HeadlessServiceDNS"]
    data["profiles"] = [p for p in data["profiles"] if p["profile"] != "HeadlessServiceDNS"]
    problems = verify(save(tmp_path, data), digest=DIGEST, catalog=CATALOG)
    assert "profile HeadlessServiceDNS was selected but the report has no result for it" in problems


@pytest.mark.parametrize(
    "stop",
    [
        pytest.param(lambda d: d["run"].update(interrupted=True, interruption="SIGINT"), id="interrupted"),
        pytest.param(
            lambda d: d["preflight"].append({"name": "crd", "result": "missing", "message": "m"}), id="preflight-failed"
        ),
        pytest.param(
            lambda d: d.update(error={"message": "cluster did not start", "hint": "see log"}), id="harness-error"
        ),
    ],
)
def test_incomplete_runs_may_lack_tests_but_must_say_error(tmp_path: Path, stop: Tamper) -> None:
    data = consistent_report()
    data["tests"] = data["tests"][:2]
    results = [TestResult.from_dict(t) for t in data["tests"]]
    data["profiles"] = [profile_verdict(PROFILES["Core"], results, SUPPORT).as_dict()]
    stop(data)
    data["verdict"] = "error"
    assert verify(save(tmp_path, data), digest=DIGEST, catalog=CATALOG) == []


def test_skipped_preflight_is_not_a_failure(tmp_path: Path) -> None:
    data = consistent_report()
    data["preflight"].append({"name": "webhook", "result": "skipped", "message": "external"})
    assert verify(save(tmp_path, data), digest=DIGEST, catalog=CATALOG) == []


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        pytest.param("report.json", "{", "not valid JSON: line 1, column 2", id="malformed-json"),
        pytest.param("report.yaml", "a: [", "not valid YAML: line 1", id="malformed-yaml"),
        pytest.param("report.json", "[1]", "expected a ConformanceReport mapping, got list", id="not-a-mapping"),
        pytest.param("report.yaml", "", "expected a ConformanceReport mapping, got NoneType", id="empty"),
        pytest.param("report.txt", "{}", "expected a .yaml, .yml or .json report", id="unknown-extension"),
        pytest.param("missing.json", None, "cannot read: No such file or directory", id="unreadable"),
    ],
)
def test_unusable_files_raise_report_error(tmp_path: Path, name: str, content: str | None, message: str) -> None:
    path = tmp_path / name
    if content is not None:
        path.write_text(content)
    with pytest.raises(ReportError) as info:
        verify(path, catalog=CATALOG)
    assert str(info.value) == f"{path}: {message}" or str(info.value).startswith(f"{path}: {message}")


def test_load_names_schema_problems_by_path(tmp_path: Path) -> None:
    data = consistent_report()
    data["run"]["keep"] = 3
    path = save(tmp_path, data)
    with pytest.raises(ReportError, match=r"report\.json: run\.keep: expected a string, got 3"):
        load(path)
    assert read(path)["run"]["keep"] == 3


# -- warnings and coverage ---------------------------------------------------------------------------


def warned_report() -> dict[str, Any]:
    data = consistent_report(WARN_PLAN)
    data["coverage"] = copy.deepcopy(COVERAGE)
    return data


def test_warnings_and_coverage_verify_clean(tmp_path: Path) -> None:
    data = warned_report()
    core = _profile(data, "Core")
    assert core["warnings"] == ["core/status/hint"] and core["counts"]["warning"] == 1
    assert core["verdict"] == "failure"  # core/recovery/replace; the warning adds nothing to it
    for path in write(data, tmp_path / "out"):
        assert verify(path, digest=DIGEST, catalog=WARN_CATALOG) == []
    assert load(tmp_path / "out" / "conformance-report.json").coverage is not None


def test_a_profile_with_only_warnings_succeeds(tmp_path: Path) -> None:
    plan = [(id, feature, Outcome.PASSED) for id, feature, _ in PLAN if feature.value != "Core"] + [WARNED]
    data = consistent_report(plan)
    assert _profile(data, "Core")["verdict"] == "success" and _profile(data, "Core")["counts"]["passed"] == 3
    catalog = [b for b in WARN_CATALOG if b.id != "core/pods/created"]  # the plan left it out
    assert verify(save(tmp_path, data), digest=DIGEST, catalog=catalog) == []


def test_an_older_report_without_levels_warning_counts_or_coverage_verifies(tmp_path: Path) -> None:
    data = consistent_report(levels=False)
    for p in data["profiles"]:
        p["counts"].pop("warning")
        p.pop("warnings")
    for t in data["tests"]:
        t.pop("level")
    assert verify(save(tmp_path, data), digest=DIGEST, catalog=CATALOG) == []


def make_must_warn(data: dict[str, Any]) -> None:
    _test(data, "core/pods/created")["outcome"] = "warning"


WARNING_TAMPERING: list[Any] = [
    pytest.param(
        make_must_warn,
        WARN_CATALOG,
        "test 'core/pods/created' is a warning but its level is MUST: only a SHOULD or MAY behaviour may warn",
        id="must-reported-as-warning",
    ),
    pytest.param(
        lambda d: _test(d, "core/status/hint").update(outcome="non-conformant"),
        WARN_CATALOG,
        "test 'core/status/hint' is non-conformant but its level is SHOULD: a SHOULD or MAY that does not hold is a warning",
        id="should-reported-non-conformant",
    ),
    pytest.param(
        lambda d: _test(d, "core/status/hint").update(level="MUST"),
        WARN_CATALOG,
        "test 'core/status/hint' is reported at level MUST but the catalog's statement is SHOULD",
        id="level-differs-from-catalog",
    ),
    pytest.param(
        lambda d: _test(d, "core/status/hint").update(level=None),
        [],
        "test 'core/status/hint' is a warning but its level is not recorded",
        id="warning-without-level-or-catalog",
    ),
    pytest.param(
        lambda d: _test(d, "core/status/hint").update(level="MUST"),
        [],
        "test 'core/status/hint' is a warning but its level is MUST",
        id="warning-at-recorded-must-without-catalog",
    ),
    pytest.param(
        lambda d: _profile(d, "Core").update(warnings=[]),
        WARN_CATALOG,
        "profile Core: warnings lists [] but its tests give ['core/status/hint']",
        id="profile-warnings-list",
    ),
    pytest.param(
        lambda d: _profile(d, "Core")["counts"].update(warning=0),
        WARN_CATALOG,
        "profile Core: counts",
        id="profile-warning-count",
    ),
    pytest.param(
        lambda d: _test(d, "core/status/hint").update(level="SHOUD"),
        WARN_CATALOG,
        "schema: tests[9].level: expected 'MUST', 'SHOULD' or 'MAY', got 'SHOUD'",
        id="schema-level",
    ),
    pytest.param(
        lambda d: d["coverage"]["overall"]["must"].update(asserted=97),
        WARN_CATALOG,
        "coverage overall must: asserted 97 + explained 2 + gaps 2 is not the total 100",
        id="coverage-arithmetic",
    ),
    pytest.param(
        lambda d: d["coverage"]["profiles"][1].update(profile="Extended"),
        WARN_CATALOG,
        "coverage.profiles: 'Extended' is not a profile of this suite",
        id="coverage-unknown-profile",
    ),
    pytest.param(
        lambda d: d["coverage"]["profiles"][1].update(profile="Core"),
        WARN_CATALOG,
        "coverage.profiles: Core appears more than once",
        id="coverage-duplicate-profile",
    ),
    pytest.param(
        lambda d: d["coverage"]["profiles"][1].update(should=figures(5, 5)),
        WARN_CATALOG,
        "coverage Plugins should: 5 statements, more than overall's 4",
        id="coverage-profile-above-overall",
    ),
    pytest.param(
        lambda d: d["coverage"]["overall"]["must"].update(gaps=-1),
        WARN_CATALOG,
        "schema: coverage.overall.must.gaps: input should be greater than or equal to 0",
        id="coverage-schema",
    ),
    pytest.param(
        lambda d: d["coverage"].pop("specMap"),
        WARN_CATALOG,
        "schema: coverage.specMap: required field is missing",
        id="coverage-without-spec-map",
    ),
]


@pytest.mark.parametrize(("tamper", "catalog", "message"), WARNING_TAMPERING)
def test_verify_names_warning_and_coverage_tampering(
    tmp_path: Path, tamper: Tamper, catalog: list[Behaviour], message: str
) -> None:
    data = warned_report()
    tamper(data)
    problems = verify(save(tmp_path, data), digest=DIGEST, catalog=catalog)
    assert any(message in p for p in problems), problems
