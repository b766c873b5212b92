"""The report page (conformance/framework/html_report.py): sample reports rendered and read back
through the stdlib HTML parser, no browser: verdicts, rows, escaping, evidence links, optional
sections and columns, self-containment, and that report.write never loses YAML/JSON to the page."""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pytest

from conformance.framework import html_report
from conformance.framework import report as report_module
from conformance.framework.features import PROFILES, Feature
from conformance.framework.html_report import (
    Link,
    coverage_of,
    coverage_text,
    duration,
    levels_text,
    plain,
    relative_href,
    render,
    rfc2119,
    selection,
    spec_link,
    summary,
    timestamp,
)
from conformance.framework.outcomes import Outcome, TestResult, overall_verdict, profile_verdict
from conformance.framework.report import SCHEMA_VERSION, Report, ReportError
from tests.unit.framework.samples import SUPPORT

DIGEST = "sha256:" + "cd" * 32
NASTY = "<script>alert('x')</script> & \"quoted\" <b>bold</b> </pre></td></tr>"
SPEC_URL = "https://github.com/volcano-sh/kthena/blob/main/docs/api.md#modelservingspec"
SPEC_TEXT = "api-reference-workload-v1alpha1.txt#ModelServingSpec"
ACCELERATORS: dict[str, Any] = {
    "capabilities": [
        {
            "file": "fake-devices/capabilities/gpu.yaml",
            "sha256": "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
            "vendor": "Example <GPU> Inc.",
            "driver": "gpu.fake.kthena-conformance.io",
            "driverVersion": "1.2.3",
            "deviceClasses": [{"name": "gpu.fake.kthena-conformance.io", "level": "MUST"}],
        }
    ],
    "fakeDevices": True,
    "faults": [],
    "warnings": ["DeviceClass gpu-large.example.com (SHOULD) is missing"],
}


def figures(total: int, asserted: int, explained: int = 0) -> dict[str, int]:
    return {"total": total, "asserted": asserted, "explained": explained, "gaps": total - asserted - explained}


COVERAGE: dict[str, Any] = {
    "specMap": {"file": "specmap.yaml", "digest": "sha256:" + "ef" * 32, "statements": 120},
    "scope": "ModelServing",
    "overall": {"must": figures(100, 96, 2), "should": figures(4, 2)},
    "profiles": [{"profile": "Core", "must": figures(20, 17), "should": figures(2, 1, 1)}],
}

# (id, feature, outcome, message)
Plan = list[tuple[str, Feature, Outcome, str]]
ALL_PASS: Plan = [
    ("core/pods/created", Feature.CORE, Outcome.PASSED, ""),
    ("core/admission/reject", Feature.ADMISSION, Outcome.PASSED, ""),
    ("plugins/chain/immutable", Feature.PLUGIN_CHAIN_IMMUTABILITY, Outcome.PASSED, ""),
]
MIXED: Plan = [
    ("core/pods/created", Feature.CORE, Outcome.PASSED, ""),
    ("core/recovery/replace", Feature.RECOVERY, Outcome.NON_CONFORMANT, NASTY),
    ("core/scale/up", Feature.SCALE_SUBRESOURCE, Outcome.NON_CONFORMANT, "line\n" * 40),
    ("plugins/framework/order", Feature.PLUGIN_FRAMEWORK, Outcome.ERROR, "cluster went away"),
    ("dns/service/entry", Feature.HEADLESS_SERVICE, Outcome.PASSED, ""),
    ("dns/resolve/pod", Feature.DNS_RESOLUTION, Outcome.NOT_SUPPORTED, "not-supported: no DNS server"),
    ("rollout/surge/max", Feature.MAX_SURGE, Outcome.SKIPPED_BY_USER, "skipped-by-user: --skip-slow"),
]


def sample(plan: Plan, *, exit_code: int = 1, **extra: Any) -> dict[str, Any]:
    """A report as the runner builds one (every number derived from the tests), plus ``extra``."""
    results = [
        TestResult(
            id,
            f"conformance/suites/test_x.py::test_{i}",
            feature,
            outcome,
            0.5 * i + 0.25,
            message=message,
            statement=f"The implementation MUST do {id}; it SHOULD NOT do less.",
            spec=SPEC_URL if i % 2 else SPEC_TEXT,
            evidence=f"reports/artifacts/{id.replace('/', '_')}" if outcome is Outcome.NON_CONFORMANT else None,
        )
        for i, (id, feature, outcome, message) in enumerate(plan)
    ]
    profiles = [profile_verdict(p, results, SUPPORT) for p in PROFILES.values()]
    judged = [p for p in profiles if any(r.profile == p.profile for r in results)]
    return {
        "schemaVersion": SCHEMA_VERSION,
        "kind": "ConformanceReport",
        "suite": {"name": "kthena-conformance", "version": "0.1.0", "digest": DIGEST},
        "run": {
            "id": "run-42",
            "startedAt": "2026-01-02T03:04:05+00:00",
            "finishedAt": "2026-01-02T03:14:10+00:00",
            "durationSeconds": 605.0,
            "command": ["kthena-conformance", "run", "--report-dir", "my reports"],
            "selection": {"profiles": [], "features": [], "ids": []},
            "keep": "on-failure",
            "timeouts": {"scale": 1.0, "waits": {"admission": {"seconds": 15, "default": 15, "description": "d"}}},
        },
        "implementation": {**SUPPORT.as_report(), "deployedBy": "harness", "log": "reports/kthena-ref.log"},
        "cluster": {
            "provider": "local",
            "name": "kthena",
            "kubernetesVersion": "v1.36.3",
            "simulates": ["kubelet (kwok)", "pod networking"],
            "versions": {"etcd": "3.6.16"},
            "nodes": ["node-1", "node-2"],
        },
        "preflight": [{"name": "nodes-ready", "result": "ok", "message": "2/2 nodes Ready"}],
        "profiles": [p.as_dict() for p in judged],
        "tests": [r.as_dict() for r in results],
        "verdict": overall_verdict(judged, preflight_ok=True, interrupted=False).value,
        "notes": ["a note with <angle> brackets"],
        "exitCode": exit_code,
        **extra,
    }


def error_only() -> dict[str, Any]:
    """A run that stopped before any test (no cluster came up)."""
    return {
        "suite": {"name": "kthena-conformance", "version": "0.1.0", "digest": DIGEST},
        "run": {"id": "run-err", "startedAt": "2026-01-02T03:04:05Z", "keep": "never"},
        "implementation": SUPPORT.as_report(),
        "verdict": "error",
        "error": {"message": "the cluster did not come up: <etcd> exited", "hint": "run `make binaries` & retry"},
        "exitCode": 3,
    }


# -- a small DOM over html.parser --------------------------------------------------------------------

VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}


@dataclass
class Node:
    tag: str
    attrs: dict[str, str]  # a value-less attribute (hidden) maps to ""
    children: list[Node | str] = field(default_factory=list)

    def text(self) -> str:
        return "".join(c if isinstance(c, str) else c.text() for c in self.children)

    def iter(self) -> Iterator[Node]:
        yield self
        for c in self.children:
            if isinstance(c, Node):
                yield from c.iter()

    def find_all(self, tag: str | None = None, **attrs: str | bool) -> list[Node]:
        """Elements by tag and attributes (``True``: present; ``class_``: one of its classes)."""

        def matches(n: Node) -> bool:
            for key, want in attrs.items():
                if key == "class_":
                    if want not in n.attrs.get("class", "").split():
                        return False
                    continue
                name = key.replace("_", "-")
                if want is True:
                    if name not in n.attrs:
                        return False
                elif n.attrs.get(name) != want:
                    return False
            return True

        return [n for n in self.iter() if (tag is None or n.tag == tag) and matches(n)]

    def one(self, tag: str | None = None, **attrs: str | bool) -> Node:
        found = self.find_all(tag, **attrs)
        assert len(found) == 1, f"expected one {tag} {attrs}, found {len(found)}"
        return found[0]


class TreeBuilder(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.root = Node("#document", {})
        self.stack = [self.root]

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        node = Node(tag, {k: v or "" for k, v in attrs})
        self.stack[-1].children.append(node)
        if tag not in VOID:
            self.stack.append(node)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.stack[-1].children.append(Node(tag, {k: v or "" for k, v in attrs}))

    def handle_endtag(self, tag: str) -> None:
        if tag in VOID:
            return
        assert self.stack[-1].tag == tag, f"</{tag}> closes <{self.stack[-1].tag}>: the page is not well nested"
        self.stack.pop()

    def handle_data(self, data: str) -> None:
        self.stack[-1].children.append(data)


def parse(html: str) -> Node:
    builder = TreeBuilder()
    builder.feed(html)
    builder.close()
    assert builder.stack == [builder.root], f"unclosed elements: {[n.tag for n in builder.stack[1:]]}"
    return builder.root


def words(node: Node) -> str:
    return " ".join(node.text().split())


def facts(dl: Node) -> dict[str, str]:
    """A ``<dl>``'s terms and their descriptions."""
    terms, descriptions = dl.find_all("dt"), dl.find_all("dd")
    return dict(zip([words(d) for d in terms], [words(d) for d in descriptions], strict=True))


# -- sample reports, table-driven --------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    name: str
    build: Callable[[], dict[str, Any]]
    verdict: str
    exit_code: str
    profiles: dict[str, str]
    outcomes: dict[str, str]
    coverage: dict[str, str] | None = None
    level: bool = False
    accelerators: bool = False
    error: bool = False


CASES = [
    Case(
        "success",
        lambda: sample(ALL_PASS, exit_code=0),
        "success",
        "0",
        {"Core": "success", "Plugins": "success"},
        {id: "passed" for id, *_ in ALL_PASS},
    ),
    Case(
        "failure-with-messages",
        lambda: sample(MIXED),
        "failure",
        "1",
        {"Core": "failure", "Plugins": "partial", "HeadlessServiceDNS": "success", "Rollout": "partial"},
        {id: outcome.value for id, _, outcome, _ in MIXED},
    ),
    Case("error-before-any-test", error_only, "error", "3", {}, {}, error=True),
    Case(
        "accelerators",
        lambda: sample(ALL_PASS, exit_code=0, accelerators=ACCELERATORS),
        "success",
        "0",
        {"Core": "success", "Plugins": "success"},
        {id: "passed" for id, *_ in ALL_PASS},
        accelerators=True,
    ),
    Case(
        "coverage-and-level",
        lambda: with_levels(sample(ALL_PASS, exit_code=0, coverage=COVERAGE)),
        "success",
        "0",
        {"Core": "success", "Plugins": "success"},
        {id: "passed" for id, *_ in ALL_PASS},
        coverage={"Core": "MUST 17/20 asserted (85.0%), 3 gaps; SHOULD 1/2 asserted (50.0%)", "Plugins": "—"},
        level=True,
    ),
    Case(
        "coverage-with-a-failure",
        lambda: sample(MIXED, coverage=COVERAGE),
        "failure",
        "1",
        {"Core": "failure", "Plugins": "partial", "HeadlessServiceDNS": "success", "Rollout": "partial"},
        {id: outcome.value for id, _, outcome, _ in MIXED},
        coverage={"Core": "MUST 17/20 asserted (85.0%), 3 gaps; SHOULD 1/2 asserted (50.0%)", "Rollout": "—"},
    ),
]


def with_levels(data: dict[str, Any]) -> dict[str, Any]:
    for i, t in enumerate(data["tests"]):
        t["level"] = "MUST" if i % 2 == 0 else "SHOULD"
    return data


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_sample_reports_render_what_people_need(case: Case, tmp_path: Path) -> None:
    data = case.build()
    doc = parse(render(data, tmp_path))

    verdict = doc.one(id="overall-verdict")
    assert words(verdict) == case.verdict and verdict.attrs["data-verdict"] == case.verdict
    assert words(doc.one(id="exit-code")) == case.exit_code
    assert case.verdict in words(doc.one("title"))

    rows = doc.find_all("tr", data_profile=True, data_verdict=True)
    assert {r.attrs["data-profile"]: r.attrs["data-verdict"] for r in rows} == case.profiles
    for row, entry in zip(rows, data.get("profiles", []), strict=True):
        counts = {c.attrs["data-count"]: int(words(c)) for c in row.find_all("td", data_count=True)}
        assert counts == {k: entry["counts"][k] for k in counts}
        assert entry["message"] in words(row)

    behaviours = doc.find_all("tr", data_behaviour=True)
    assert {r.attrs["data-behaviour"]: r.attrs["data-outcome"] for r in behaviours} == case.outcomes
    for row in behaviours:  # the outcome is written, never colour alone
        assert row.attrs["data-outcome"] in words(row.one("span", class_="badge"))

    headings = [words(th) for th in doc.find_all("th")]
    if case.coverage is None:
        assert "coverage" not in headings
        assert not doc.find_all(data_coverage=True)
    else:
        assert "coverage" in headings
        got = {r.attrs["data-profile"]: words(r.one("td", data_coverage=True)) for r in rows}
        assert {k: got[k] for k in case.coverage} == case.coverage
    assert ("level" in headings) is case.level
    assert bool(doc.find_all(id="accelerators")) is case.accelerators
    assert bool(doc.find_all(id="error")) is case.error
    if not case.outcomes:
        assert words(doc.one(id="no-behaviours")) == "No behaviour was reported."


def test_failure_messages_are_escaped_and_long_ones_collapse(tmp_path: Path) -> None:
    doc = parse(render(sample(MIXED), tmp_path))
    rows = {r.attrs["data-behaviour"]: r for r in doc.find_all("tr", data_behaviour=True)}

    nasty = rows["core/recovery/replace"]
    assert nasty.one("pre", class_="message").text() == NASTY  # text, not markup
    assert not nasty.find_all("b") and not nasty.find_all("script")
    assert len(doc.find_all("script")) == 1  # only the page's own filter script

    long = rows["core/scale/up"].one("details", class_="message")
    assert words(long.one("summary")) == "line (40 lines)"
    assert long.one("pre").text() == "line\n" * 40

    assert rows["dns/resolve/pod"].one("pre", class_="message").text() == "not-supported: no DNS server"
    assert not rows["core/pods/created"].find_all("pre")
    assert words(doc.one(id="notes")).endswith("a note with <angle> brackets")


def test_statement_keywords_and_spec_links(tmp_path: Path) -> None:
    doc = parse(render(sample(ALL_PASS, exit_code=0), tmp_path))
    first, second = doc.find_all("tr", data_behaviour=True)[:2]
    statement = first.one("div", class_="statement")
    assert [words(s) for s in statement.find_all("strong")] == ["MUST", "SHOULD NOT"]
    assert words(statement) == "The implementation MUST do core/pods/created; it SHOULD NOT do less."
    assert words(first.one(class_="spec")) == SPEC_TEXT and first.one(class_="spec").tag == "span"
    link = second.one("a", class_="spec")
    assert link.attrs["href"] == SPEC_URL and words(link) == SPEC_URL


def test_evidence_links_point_at_files_that_exist(tmp_path: Path) -> None:
    evidence = tmp_path / "artifacts" / "core_recovery_replace"
    evidence.mkdir(parents=True)
    (evidence / "pods.yaml").write_text("items: []\n")
    (evidence / "events with space.yaml").write_text("items: []\n")
    doc = parse(render(sample(MIXED), tmp_path))
    rows = {r.attrs["data-behaviour"]: r for r in doc.find_all("tr", data_behaviour=True)}

    directory = rows["core/recovery/replace"].one("a", class_="evidence-dir")
    assert directory.attrs["href"] == "artifacts/core_recovery_replace/"
    hrefs = [a.attrs["href"] for a in rows["core/recovery/replace"].find_all("a", class_="evidence-link")]
    assert hrefs == [
        "artifacts/core_recovery_replace/events%20with%20space.yaml",
        "artifacts/core_recovery_replace/pods.yaml",
    ]
    assert all((tmp_path / unquote(h)).is_file() for h in hrefs)
    # Recorded but absent on disk (core/scale/up), or never recorded (passed): no link.
    assert not rows["core/scale/up"].find_all("a")
    assert not rows["core/pods/created"].find_all(class_="evidence")


def test_support_preflight_cluster_and_accelerators(tmp_path: Path) -> None:
    (tmp_path / "kthena-ref.log").write_text("log\n")
    doc = parse(render(sample(ALL_PASS, exit_code=0, accelerators=ACCELERATORS), tmp_path))

    support = {r.attrs["data-feature"]: r for r in doc.one(id="support").find_all(data_feature=True)}
    assert support["DNSResolution"].attrs["data-supported"] == "false"
    assert "the embedded cluster has no DNS server" in words(support["DNSResolution"])
    assert support["Core"].attrs["data-supported"] == "true"
    assert doc.one(id="implementation").one("a").attrs["href"] == "kthena-ref.log"

    check = doc.one("tr", data_check="nodes-ready")
    assert check.attrs["data-result"] == "ok" and "2/2 nodes Ready" in words(check)

    assert facts(doc.one(id="cluster").one("dl")) == {
        "Provider": "local",
        "Name": "kthena",
        "Kubernetes": "v1.36.3",
        "etcd version": "3.6.16",
        "Nodes (2)": "node-1, node-2",
    }
    assert [words(li) for li in doc.one(id="simulates").find_all("li")] == ["kubelet (kwok)", "pod networking"]

    capability = doc.one("tr", data_driver="gpu.fake.kthena-conformance.io")
    assert ACCELERATORS["capabilities"][0]["sha256"] in words(capability)
    assert "Example <GPU> Inc." in words(capability) and "1.2.3" in words(capability)
    assert "gpu-large.example.com" in words(doc.one(id="accelerator-warnings"))


@pytest.mark.parametrize(("chosen", "said"), [(True, True), (False, False), (None, False)])
def test_fake_drivers_chosen_by_default_are_said_so(tmp_path: Path, chosen: bool | None, said: bool) -> None:
    accelerators = {**ACCELERATORS, "fakeDevices": True, "chosenByDefault": chosen}
    if chosen is None:
        del accelerators["chosenByDefault"]
    doc = parse(render(sample(ALL_PASS, exit_code=0, accelerators=accelerators), tmp_path))
    assert ("chosen by default" in words(doc.one(id="accelerators"))) is said


def test_run_facts(tmp_path: Path) -> None:
    doc = parse(render(sample(ALL_PASS, exit_code=0), tmp_path))
    pairs = facts(doc.one(id="run").one("dl"))
    assert pairs["Implementation"] == "kthena-ref 0.1.0"
    assert pairs["Suite"] == "kthena-conformance 0.1.0" and pairs["Suite digest"] == DIGEST
    assert pairs["Started"] == "2026-01-02 03:04:05 UTC" and pairs["Duration"] == "10 min 05 s"
    assert pairs["Command"] == "kthena-conformance run --report-dir 'my reports'"
    assert pairs["Selection"] == "every profile"
    assert "Spec coverage" not in pairs


def test_error_only_report_shows_message_and_hint(tmp_path: Path) -> None:
    doc = parse(render(error_only(), tmp_path))
    assert doc.one(id="error-message").text() == "the cluster did not come up: <etcd> exited"
    assert words(doc.one(id="error-hint")) == "Hint: run `make binaries` & retry"
    assert words(doc.one(id="no-profiles")) == "No profile was judged."
    assert "No cluster was recorded" in words(doc.one(id="cluster"))
    assert not doc.find_all(id="no-support")  # the declaration was read before the error

    bare = {**error_only(), "implementation": {"name": "reference"}}
    doc = parse(render(bare, tmp_path))
    assert words(doc.one(id="no-support")).startswith("No support declaration was recorded")
    assert not doc.find_all(id="support")


def test_a_report_model_renders_like_its_data(tmp_path: Path) -> None:
    data = sample(MIXED)
    assert render(Report.model_validate(data), tmp_path) == render(data, tmp_path)


def test_the_page_is_self_contained(tmp_path: Path) -> None:
    for name in ("conformance-report.yaml", "conformance-report.json"):
        (tmp_path / name).write_text("{}")
    doc = parse(render(sample(MIXED, accelerators=ACCELERATORS), tmp_path))
    csp = doc.one("meta", http_equiv="Content-Security-Policy").attrs["content"]
    assert "default-src 'none'" in csp
    script = doc.one("script")
    assert "src" not in script.attrs
    digest = base64.b64encode(hashlib.sha256(script.text().encode()).digest()).decode()
    assert f"script-src 'sha256-{digest}'" in csp  # the inline script is the one the policy allows
    for node in doc.iter():
        for attr in ("src", "href"):
            value = node.attrs.get(attr, "")
            if value and node.tag != "a":
                assert value.startswith("data:"), f"<{node.tag} {attr}={value!r}> would load something"
    assert [a.attrs["href"] for a in doc.one("footer").find_all("a")] == [
        "conformance-report.yaml",
        "conformance-report.json",
    ]
    # Without JavaScript the filter controls stay hidden and every row is shown.
    assert "hidden" in doc.one(id="filters").attrs
    assert not [r for r in doc.find_all("tr", data_behaviour=True) if "hidden" in r.attrs]


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        pytest.param(lambda d: d.update(verdict="great"), "report: verdict: input should be", id="bad-verdict"),
        pytest.param(lambda d: d.pop("suite"), "report: suite: required field is missing", id="missing-suite"),
        pytest.param(
            lambda d: d["tests"][0].update(outcome="meh"), "report: tests[0].outcome: input should be", id="bad-outcome"
        ),
        pytest.param(lambda d: d.update(surprise=1), "report: surprise: unknown field", id="unknown-key"),
    ],
)
def test_bad_input_is_a_clear_report_error(
    change: Callable[[dict[str, Any]], Any], problem: str, tmp_path: Path
) -> None:
    data = sample(ALL_PASS)
    change(data)
    with pytest.raises(ReportError) as info:
        render(data, tmp_path)
    assert any(p.startswith(problem) for p in info.value.problems), info.value.problems


def test_not_a_mapping_is_a_clear_report_error(tmp_path: Path) -> None:
    with pytest.raises(ReportError, match="expected a mapping or a Report, got list"):
        render([], tmp_path)  # type: ignore[arg-type]


# -- writing, and report.write's hook ------------------------------------------------------------------


def test_write_puts_index_html_in_the_report_dir(tmp_path: Path) -> None:
    path = html_report.write(sample(ALL_PASS), tmp_path / "new")
    assert path == tmp_path / "new" / "index.html"
    assert words(parse(path.read_text(encoding="utf-8")).one(id="overall-verdict")) == "success"
    assert [p.name for p in (tmp_path / "new").iterdir()] == ["index.html"]  # no temporary file left


def test_report_write_also_writes_the_page(tmp_path: Path) -> None:
    paths = report_module.write(sample(MIXED), tmp_path)
    assert [p.name for p in paths] == ["conformance-report.yaml", "conformance-report.json"]
    doc = parse((tmp_path / "index.html").read_text(encoding="utf-8"))
    assert words(doc.one(id="overall-verdict")) == "failure"


def test_a_page_that_cannot_render_never_costs_the_report(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "index.html").write_text("stale page of an earlier run")

    def broken(*_: Any) -> str:
        raise RuntimeError("template exploded")

    monkeypatch.setattr(html_report, "render", broken)
    paths = report_module.write(sample(MIXED), tmp_path)
    assert json.loads(paths[1].read_text())["verdict"] == "failure"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["conformance-report.json", "conformance-report.yaml"]
    err = capsys.readouterr().err
    assert "index.html was not written (RuntimeError: template exploded)" in err
    assert "the YAML and JSON reports are complete" in err


# -- the formatting helpers --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (None, ""),
        (0, "0.00 s"),
        (0.254, "0.25 s"),
        (9.999, "10.00 s"),
        (12.34, "12.3 s"),
        (59.94, "59.9 s"),
        (65, "1 min 05 s"),
        (605, "10 min 05 s"),
        (3599.4, "59 min 59 s"),
        (3725, "1 h 02 min"),
    ],
)
def test_duration(seconds: float | None, text: str) -> None:
    assert duration(seconds) == text


@pytest.mark.parametrize(
    ("value", "text"),
    [
        ("2026-01-02T03:04:05Z", "2026-01-02 03:04:05 UTC"),
        ("2026-01-02T03:04:05.123456+00:00", "2026-01-02 03:04:05 UTC"),
        ("2026-01-02T03:04:05+02:00", "2026-01-02 03:04:05 UTC+0200"),
        ("2026-01-02T03:04:05", "2026-01-02 03:04:05"),
        ("yesterday", "yesterday"),
    ],
)
def test_timestamp(value: str, text: str) -> None:
    assert timestamp(value) == text


@pytest.mark.parametrize(
    ("sel", "text"),
    [
        ({"profiles": [], "features": [], "ids": []}, "every profile"),
        ({"profiles": ["Core"], "features": [], "ids": ["core/*", "dns/*"]}, "profiles: Core; ids: core/*, dns/*"),
        ({"features": ["MaxSurge"]}, "features: MaxSurge"),
    ],
)
def test_selection(sel: dict[str, list[str]], text: str) -> None:
    assert selection(sel) == text


@pytest.mark.parametrize(
    ("totals", "text"),
    [
        ({"passed": 0, "error": 0}, "no behaviour was reported"),
        ({"passed": 1, "error": 0}, "1 behaviour: 1 passed"),
        ({"passed": 3, "non-conformant": 1, "error": 0}, "4 behaviours: 3 passed, 1 non-conformant"),
    ],
)
def test_summary(totals: dict[str, int], text: str) -> None:
    assert summary(totals) == text


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        (SPEC_URL, Link(SPEC_URL, SPEC_URL)),
        (" http://example.com/x ", Link("http://example.com/x", "http://example.com/x")),
        (SPEC_TEXT, SPEC_TEXT),
        ("javascript:alert(1)", "javascript:alert(1)"),
        ("https:no-host", "https:no-host"),
        ("", ""),
    ],
)
def test_spec_link(spec: str, expected: Link | str) -> None:
    assert spec_link(spec) == expected


@pytest.mark.parametrize(
    ("figures_", "level", "text"),
    [
        (figures(20, 17), "MUST", "MUST 17/20 asserted (85.0%)"),
        (figures(3, 2), "SHOULD", "SHOULD 2/3 asserted (66.6%)"),
        (figures(1000, 949), "MUST", "MUST 949/1000 asserted (94.9%)"),
        (figures(2000, 1899), "MUST", "MUST 1899/2000 asserted (94.9%)"),  # 94.95% is not rounded up to 95.0%
        (figures(4, 4), "MUST", "MUST 4/4 asserted (100.0%)"),
        (figures(4, 0), "MUST", "MUST 0/4 asserted (0.0%)"),
        (figures(0, 0), "MUST", None),
        ({}, "MUST", None),
    ],
)
def test_coverage_text(figures_: dict[str, int], level: str, text: str | None) -> None:
    assert coverage_text(figures_, level) == text


@pytest.mark.parametrize(
    ("entry", "text"),
    [
        (
            {"must": figures(20, 17), "should": figures(2, 2)},
            "MUST 17/20 asserted (85.0%), 3 gaps; SHOULD 2/2 asserted (100.0%)",
        ),
        ({"must": figures(20, 17, 3), "should": figures(0, 0)}, "MUST 17/20 asserted (85.0%)"),
        ({"must": figures(2, 1), "should": figures(0, 0)}, "MUST 1/2 asserted (50.0%), 1 gap"),
        ({"must": figures(0, 0), "should": figures(3, 1, 2)}, "SHOULD 1/3 asserted (33.3%)"),
        ({"must": figures(0, 0), "should": figures(0, 0)}, "no statements"),
    ],
)
def test_levels_text(entry: dict[str, Any], text: str) -> None:
    assert levels_text(entry) == text


def test_coverage_of() -> None:
    assert coverage_of(None) == (None, {})
    overall, per_profile = coverage_of(COVERAGE)
    assert overall == (
        "MUST 96/100 asserted (96.0%), 2 gaps; SHOULD 2/4 asserted (50.0%), 2 gaps of the ModelServing statements "
        "(spec map specmap.yaml sha256:efefefefefef..., 120 statements)"
    )
    assert per_profile == {"Core": "MUST 17/20 asserted (85.0%), 3 gaps; SHOULD 1/2 asserted (50.0%)"}


def test_run_facts_show_spec_coverage(tmp_path: Path) -> None:
    doc = parse(render(sample(ALL_PASS, exit_code=0, coverage=COVERAGE), tmp_path))
    assert facts(doc.one(id="run").one("dl"))["Spec coverage"].startswith("MUST 96/100 asserted (96.0%)")


def test_warnings_are_shown_apart_and_do_not_fail(tmp_path: Path) -> None:
    plan: Plan = [*ALL_PASS, ("core/status/label-selector", Feature.CORE, Outcome.WARNING, "SHOULD <not> met")]
    data = sample(plan, exit_code=0)
    _test(data, "core/status/label-selector")["level"] = "SHOULD"
    assert data["verdict"] == "success"
    doc = parse(render(data, tmp_path))

    row = doc.one("tr", data_behaviour="core/status/label-selector")
    assert row.attrs["data-outcome"] == "warning"
    badge = row.one("span", class_="badge")
    assert "o-warning" in badge.attrs["class"] and words(badge) == "\u26a0 warning"
    assert row.one("pre", class_="message").text() == "SHOULD <not> met"
    assert words(row.one("td", data_level=True)) == "SHOULD"
    core = doc.one("tr", data_profile="Core", data_verdict=True)
    assert core.attrs["data-verdict"] == "success"
    assert words(core.one("td", data_count="warning")) == "1"
    assert "warned" in words(core)
    assert "1 warning" in words(doc.one(id="summary"))
    assert "never makes a profile fail or partial" in words(doc.one(id="warning-note"))
    assert [b.attrs["data-filter"] for b in doc.one(id="filters").find_all("button")][-2:] == ["passed", "warning"]


def test_no_warning_note_without_warnings(tmp_path: Path) -> None:
    assert not parse(render(sample(ALL_PASS, exit_code=0), tmp_path)).find_all(id="warning-note")


def _test(data: dict[str, Any], id: str) -> dict[str, Any]:
    return next(t for t in data["tests"] if t["id"] == id)


@pytest.mark.parametrize(
    ("value", "text"),
    [(None, ""), (True, "yes"), ("x", "x"), (3, "3"), (["a", 1], "a, 1"), ({"b": 1, "a": [2]}, '{"a": [2], "b": 1}')],
)
def test_plain(value: Any, text: str) -> None:
    assert plain(value) == text


@pytest.mark.parametrize(
    ("text", "html"),
    [
        ("It MUST work.", 'It <strong class="kw">MUST</strong> work.'),
        ("MUST NOT <b>", '<strong class="kw">MUST NOT</strong> &lt;b&gt;'),
        ("must, MUSTARD", "must, MUSTARD"),
        ("SHOULD or MAY", '<strong class="kw">SHOULD</strong> or <strong class="kw">MAY</strong>'),
    ],
)
def test_rfc2119(text: str, html: str) -> None:
    assert str(rfc2119(text)) == html


def test_relative_href(tmp_path: Path) -> None:
    (tmp_path / "a dir").mkdir()
    (tmp_path / "a dir" / "f#1.txt").write_text("")
    (tmp_path / "outside.log").write_text("")
    report_dir = tmp_path / "reports"
    report_dir.mkdir()
    assert relative_href(tmp_path / "a dir", tmp_path) == "a%20dir/"
    assert relative_href(tmp_path / "a dir" / "f#1.txt", tmp_path) == "a%20dir/f%231.txt"
    assert relative_href(tmp_path / "outside.log", report_dir) == "../outside.log"


def test_shard_and_merged_run_facts(tmp_path: Path) -> None:
    shard = sample(ALL_PASS, exit_code=0)
    shard["run"]["shard"] = {"index": 2, "total": 3, "behaviours": ["core/pods/created", "core/admission/reject"]}
    assert facts(parse(render(shard, tmp_path)).one(id="run").one("dl"))["Shard"] == "2 of 3 (2 behaviours)"

    merged = sample(ALL_PASS, exit_code=0)
    merged["run"]["shards"] = [
        {
            "index": 1,
            "total": 2,
            "runId": "run-a",
            "startedAt": "2026-01-02T03:04:05Z",
            "verdict": "success",
            "exitCode": 0,
            "behaviours": 2,
        },
        {
            "index": 2,
            "total": 2,
            "runId": "run-b",
            "startedAt": "2026-01-02T03:04:05Z",
            "verdict": "error",
            "behaviours": 0,
            "error": {"message": "no <cluster>"},
        },
    ]
    assert facts(parse(render(merged, tmp_path)).one(id="run").one("dl"))["Merged from"] == (
        "2 shards: 1/2 run-a: success, exit 0, 2 behaviours; 2/2 run-b: error, 0 behaviours (no <cluster>)"
    )


def test_failures_come_first_and_messages_are_sentences(tmp_path: Path) -> None:
    """Non-conformant, then error, then warning rows, then the rest in the report's order; an API
    error quoted in a message or a cause shows without its HTTP headers."""
    data = sample(MIXED)
    headers = "(500)\nReason: Internal Server Error\nHTTP response headers: HTTPHeaderDict({'Audit-Id': 'x'})\n"
    data["tests"][3]["message"] = headers + 'HTTP response body: {"message": "webhook down"}\n'
    data["causes"] = [{"cause": "feature X: the first: " + headers, "behaviours": ["plugins/framework/order"]}]
    doc = parse(render(data, tmp_path))
    order = [r.attrs["data-outcome"] for r in doc.find_all("tr", data_behaviour=True)]
    ranks = {"non-conformant": 0, "error": 1, "warning": 2}
    assert order == sorted(order, key=lambda o: ranks.get(o, 3)), order
    page = doc.text()
    assert "HTTP response headers" not in page and "Audit-Id" not in page
    assert "HTTP 500 Internal Server Error: webhook down" in page
