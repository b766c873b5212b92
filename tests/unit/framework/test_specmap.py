"""The spec map (conformance/specmap.yaml): the loader on small fixtures (a valid map, every way a
map can be wrong, each named ``<file>: <field path>: <problem>``), the coverage arithmetic, and the
real map: every MUST statement asserted or explained, every behaviour it names in the catalog, and
the ratchet that keeps the asserted share of in-scope MUST statements from going down."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from conformance.framework import catalog, specmap
from conformance.framework.catalog import Behaviour
from conformance.framework.features import PROFILES, Feature
from conformance.framework.specmap import (
    Coverage,
    Figures,
    SpecMapError,
    Statement,
    coverage,
    load,
    percent_text,
    report_block,
)

# The asserted percentage of each in-scope topic's MUST statements in the real spec map may not fall
# below these. Raise them when coverage grows (never lower one to make a change pass: assert or
# explain the statement). AutoscalingPolicy came into scope on 2026-12-05 at 10 of 37.
# 2026-12-07 (issue 31, "the coverage map overclaims"): ModelServing 92.9 -> 91.2, the one lowering
# on record: four statements whose only behaviour the spec's own words make a SHOULD (an unchanged
# Role keeping its Pods, roleCoordination outside RoleRollingUpdate, retargeting an in-place update,
# and a Role partition's default, which no test reads back) are now `partial` with their reading,
# not claimed as asserted.
MUST_ASSERTED_FLOOR = {"ModelServing": 91.2, "AutoscalingPolicy": 72.9}

SPEC = "api-reference-workload-v1alpha1.txt#ModelServingSpec"
CATALOG = [
    Behaviour("core/pods/created", "The controller MUST create Pods.", SPEC, Feature.CORE),
    Behaviour("core/status/replicas", "Status MUST count replicas.", SPEC, Feature.CORE),
    Behaviour("plugins/chain/order", "Plugins MUST run in order.", SPEC, Feature.PLUGIN_FRAMEWORK),
]


def statement(id: str = "api/spec/replicas", **changes: Any) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "id": id,
        "document": "api-reference-workload-v1alpha1.txt",
        "section": "ModelServingSpec",
        "text": "replicas: Number of ServingGroups ... Default to 1.",
        "level": "MUST",
        "topic": "ModelServing",
        "profile": "Core",
        "behaviours": ["core/pods/created"],
    }
    entry.update(changes)
    if "proofs" not in changes:  # a claim names its test and fault (checked against the tables elsewhere)
        entry["proofs"] = [proof(b) for b in entry.get("behaviours") or []]
    return {k: v for k, v in entry.items() if v is not None and v != []}


def proof(behaviour: str) -> dict[str, str]:
    return {"behaviour": behaviour, "test": "conformance/suites/x/test_x.py::test_x", "fault": "some-fault"}


GAP = {"reason": "gap", "detail": "a test would scale to 0 and read status"}


def valid() -> dict[str, Any]:
    return {
        "apiVersion": "conformance.kthena.io/v1alpha1",
        "kind": "SpecMap",
        "documents": [
            {"file": "api-reference-workload-v1alpha1.txt", "scope": "in"},
            {"file": "plugin-framework-and-headless-service.txt", "scope": "in"},
            {"file": "modelplane-serving-stack-requirements.txt", "scope": "excluded", "reason": "another product"},
        ],
        "statements": [
            statement(),
            statement("api/status/replicas", behaviours=["core/status/replicas"], partial=["core/pods/created"]),
            statement("api/status/observed", behaviours=[], partial=["core/status/replicas"], notAsserted=GAP),
            statement(
                "plugins/order/list",
                document="plugin-framework-and-headless-service.txt",
                section="Plugin Execution Order",
                profile="Plugins",
                behaviours=["plugins/chain/order"],
            ),
            statement(
                "api/booster/name",
                topic="ModelBooster",
                profile=None,
                behaviours=[],
                notAsserted={"reason": "out-of-scope", "detail": "filed separately"},
            ),
        ],
    }


def write(tmp_path: Path, data: Any) -> Path:
    path = tmp_path / "specmap.yaml"
    path.write_text(data if isinstance(data, str) else yaml.safe_dump(data, sort_keys=False))
    return path


# -- the loader ----------------------------------------------------------------------------------------


def test_a_valid_map_loads(tmp_path: Path) -> None:
    path = write(tmp_path, valid())
    loaded = load(path, catalog=CATALOG)
    assert loaded.source == str(path)
    assert loaded.digest == specmap.digest_of(path.read_text()) and loaded.digest.startswith("sha256:")
    assert [d.scope for d in loaded.documents] == ["in", "in", "excluded"]
    first, second, third, _, autoscaling = loaded.statements
    assert first.behaviours == ("core/pods/created",) and first.asserted and first.in_scope
    assert first.where == SPEC
    assert second.partial == ("core/pods/created",)
    assert (third.asserted, third.reason, third.detail) == (False, "gap", GAP["detail"])
    assert autoscaling.profile is None and not autoscaling.in_scope
    assert loaded.named_behaviours() == {"core/pods/created", "core/status/replicas", "plugins/chain/order"}


def test_an_empty_statements_key_is_an_empty_list(tmp_path: Path) -> None:
    text = "apiVersion: conformance.kthena.io/v1alpha1\nkind: SpecMap\ndocuments:\n- {file: a.txt, scope: in}\nstatements:\n"
    assert load(write(tmp_path, text), catalog=[]).statements == ()


def edit(change: Any) -> dict[str, Any]:
    data = valid()
    change(data)
    return data


def s0(**changes: Any) -> Any:
    """An edit of the first statement (None removes a key)."""

    def change(data: dict[str, Any]) -> None:
        entry = data["statements"][0]
        entry.update(changes)
        for key in [k for k, v in entry.items() if v is None]:
            del entry[key]

    return change


PROBLEMS: list[Any] = [
    pytest.param("a: [", "not valid YAML: line 1, column 5: expected the node content", id="not-yaml"),
    pytest.param("a: 1\na: 2\n", "not valid YAML: line 2, column 1: key 'a' appears twice", id="duplicate-key"),
    pytest.param("", "expected a SpecMap mapping with apiVersion, kind, documents, statements; got empty", id="empty"),
    pytest.param("- a\n", "expected a SpecMap mapping with apiVersion, kind, documents, statements; got a list", id="list"),
    pytest.param(
        edit(lambda d: d.update(apiVersion="v1")), "apiVersion: expected 'conformance.kthena.io/v1alpha1', got 'v1'",
        id="api-version",
    ),
    pytest.param(edit(lambda d: d.update(kind="Map")), "kind: expected 'SpecMap', got 'Map'", id="kind"),
    pytest.param(edit(lambda d: d.update(extra=1)), "extra: unknown field", id="unknown-top-level-field"),
    pytest.param(edit(lambda d: d.pop("documents")), "documents: required field is missing", id="no-documents"),
    pytest.param(edit(lambda d: d.update(documents=[])), "documents: list should have at least 1 item", id="zero-documents"),
    pytest.param(
        edit(lambda d: d["documents"].append({"file": "api-reference-workload-v1alpha1.txt", "scope": "in"})),
        "documents[3].file: 'api-reference-workload-v1alpha1.txt' is listed twice",
        id="document-twice",
    ),
    pytest.param(
        edit(lambda d: d["documents"][2].pop("reason")),
        "documents[2].reason: an excluded document needs the reason it is excluded",
        id="excluded-without-reason",
    ),
    pytest.param(
        edit(lambda d: d["documents"][0].update(reason="x")),
        "documents[0].reason: only an excluded document has a reason (scope is 'in')",
        id="in-with-reason",
    ),
    pytest.param(
        edit(lambda d: d["documents"][0].update(scope="partly")),
        "documents[0].scope: expected 'in' or 'excluded', got 'partly'",
        id="document-scope",
    ),
    pytest.param(edit(lambda d: d["statements"].append("text")), "statements[5]: expected a mapping", id="not-a-mapping"),
    pytest.param(edit(s0(colour="red")), "statements[0].colour: unknown field", id="unknown-statement-field"),
    pytest.param(edit(s0(text=None)), "statements[0].text: required field is missing", id="no-text"),
    pytest.param(edit(s0(section="")), "statements[0].section: string should have at least 1 character", id="empty-section"),
    pytest.param(
        edit(s0(level="must")), "statements[0].level: expected 'MUST', 'SHOULD' or 'MAY', got 'must'", id="level-vocabulary"
    ),
    pytest.param(
        edit(s0(level="MUST NOT")), "statements[0].level: expected 'MUST', 'SHOULD' or 'MAY', got 'MUST NOT'", id="level-not-a-keyword"
    ),
    pytest.param(
        edit(s0(topic="Router")),
        "statements[0].topic: expected 'ModelServing', 'AutoscalingPolicy', 'ModelBooster' or 'LeaderWorkerSet', got 'Router'",
        id="topic-vocabulary",
    ),
    pytest.param(
        edit(s0(behaviours=[], notAsserted={"reason": "hard", "detail": "x"})),
        "statements[0].notAsserted.reason: expected 'needs-real-kubelet', 'not-modelserving', 'ambiguous', 'not-observable', 'out-of-scope' or 'gap', got 'hard'",
        id="reason-vocabulary",
    ),
    pytest.param(
        edit(s0(behaviours=[], notAsserted={"reason": "gap", "detail": ""})),
        "statements[0].notAsserted.detail: string should have at least 1 character",
        id="empty-detail",
    ),
    pytest.param(
        edit(s0(behaviours=[], notAsserted={"reason": "gap"})),
        "statements[0].notAsserted.detail: required field is missing",
        id="no-detail",
    ),
    pytest.param(edit(s0(behaviours="core/pods/created")), "statements[0].behaviours: input should be a valid list", id="behaviours-not-a-list"),
    pytest.param(
        edit(s0(id="API/Spec")),
        "statements[0].id: 'API/Spec' must be lowercase words joined by '-', in at least two '/'-separated parts",
        id="id-pattern",
    ),
    pytest.param(edit(s0(id="replicas")), "statements[0].id: 'replicas' must be lowercase", id="id-one-part"),
    pytest.param(
        edit(s0(id="api/status/replicas")),
        "statements[0].id: 'api/status/replicas' is used by 2 statements; ids are unique",
        id="duplicate-id",
    ),
    pytest.param(
        edit(s0(document="other.txt")),
        "statements[0].document: 'other.txt' (api/spec/replicas) is not listed in documents",
        id="document-not-listed",
    ),
    pytest.param(
        edit(s0(document="modelplane-serving-stack-requirements.txt")),
        "statements[0].document: 'modelplane-serving-stack-requirements.txt' (api/spec/replicas) is excluded in documents",
        id="document-excluded",
    ),
    pytest.param(
        edit(s0(profile=None)),
        "statements[0].profile: required for topic ModelServing (api/spec/replicas)",
        id="in-scope-without-profile",
    ),
    pytest.param(
        edit(s0(profile="core")),
        "statements[0].profile: unknown profile 'core' (api/spec/replicas); known: Core, Plugins",
        id="profile-unknown",
    ),
    pytest.param(
        edit(s0(behaviours=["core/pods/gone"])),
        "statements[0].behaviours[0]: behaviour 'core/pods/gone' (api/spec/replicas) is not in the behaviour catalog",
        id="unknown-behaviour",
    ),
    pytest.param(
        edit(s0(partial=["core/pods/gone"])),
        "statements[0].partial[0]: behaviour 'core/pods/gone' (api/spec/replicas) is not in the behaviour catalog",
        id="unknown-partial",
    ),
    pytest.param(
        edit(s0(behaviours=["core/pods/created", "core/pods/created"])),
        "statements[0].behaviours[1]: 'core/pods/created' (api/spec/replicas) is listed twice",
        id="behaviour-twice",
    ),
    pytest.param(
        edit(s0(partial=["core/pods/created"])),
        "statements[0].partial: core/pods/created (api/spec/replicas) also in behaviours",
        id="behaviour-and-partial",
    ),
    pytest.param(
        edit(s0(notAsserted=GAP)),
        "statements[0].notAsserted: api/spec/replicas is asserted (behaviours is not empty); drop notAsserted",
        id="asserted-and-explained",
    ),
    pytest.param(
        edit(s0(behaviours=[])),
        "statements[0].notAsserted: api/spec/replicas has no behaviours: say why it is not asserted",
        id="neither-asserted-nor-explained",
    ),
    pytest.param(
        edit(s0(behaviours=None, partial=["core/pods/created"])),
        "statements[0].notAsserted: api/spec/replicas has no behaviours",
        id="partial-only-needs-a-reason",
    ),
]  # fmt: skip


@pytest.mark.parametrize(("data", "problem"), PROBLEMS)
def test_every_problem_is_named_by_file_and_field(tmp_path: Path, data: Any, problem: str) -> None:
    path = write(tmp_path, data)
    with pytest.raises(SpecMapError) as caught:
        load(path, catalog=CATALOG)
    assert any(p.startswith(f"{path}: {problem}") for p in caught.value.problems), caught.value.problems
    assert all(p.startswith(f"{path}: ") for p in caught.value.problems)


def test_every_problem_at_once(tmp_path: Path) -> None:
    data = valid()
    data["statements"][0]["behaviours"] = ["core/pods/gone"]
    data["statements"][0]["proofs"] = [proof("core/pods/gone")]
    data["statements"][1]["profile"] = "Nope"
    data["statements"][3]["document"] = "missing.txt"
    with pytest.raises(SpecMapError) as caught:
        load(write(tmp_path, data), catalog=CATALOG)
    assert len(caught.value.problems) == 3, caught.value.problems


def test_an_unreadable_file(tmp_path: Path) -> None:
    with pytest.raises(SpecMapError, match=r"missing\.yaml: cannot read: No such file or directory"):
        load(tmp_path / "missing.yaml", catalog=CATALOG)


def test_the_catalog_decides_which_ids_exist(tmp_path: Path) -> None:
    path = write(tmp_path, valid())
    with pytest.raises(SpecMapError) as caught:
        load(path, catalog=CATALOG[:1])
    assert sum("is not in the behaviour catalog" in p for p in caught.value.problems) == 3


# -- coverage ------------------------------------------------------------------------------------------


def st(
    id: str, level: str = "MUST", profile: str | None = "Core", *, asserted: bool = True, reason: str | None = None,
    topic: str = "ModelServing",
) -> Statement:  # fmt: skip
    return Statement(
        id=id, document="a.txt", section="S", text="t", level=level, topic=topic, profile=profile,
        behaviours=("x/y",) if asserted else (), reason=None if asserted else (reason or "gap"),
        detail=None if asserted else "d",
    )  # fmt: skip


@pytest.mark.parametrize(
    ("statements", "core_must", "core_should", "plugins_must", "overall_must"),
    [
        pytest.param([], Figures(), Figures(), Figures(), Figures(), id="nothing"),
        pytest.param([st("a/a"), st("a/b")], Figures(2, 2), Figures(), Figures(), Figures(2, 2), id="all-asserted"),
        pytest.param(
            [st("a/a"), st("a/b", asserted=False), st("a/c", asserted=False, reason="ambiguous")],
            Figures(3, 1, 1, 1), Figures(), Figures(), Figures(3, 1, 1, 1),
            id="asserted-explained-gap",
        ),
        pytest.param(
            [st("a/a", "SHOULD"), st("a/b", "SHOULD", asserted=False), st("a/c", "MAY", asserted=False)],
            Figures(), Figures(2, 1, 0, 1), Figures(), Figures(),
            id="should-counted-apart-may-not-counted",
        ),
        pytest.param(
            [st("a/a"), st("p/a", profile="Plugins", asserted=False, reason="not-observable")],
            Figures(1, 1), Figures(), Figures(1, 0, 1, 0), Figures(2, 1, 1, 0),
            id="per-profile",
        ),
        pytest.param(
            [st("a/a"), st("o/a", profile=None, asserted=False, reason="out-of-scope", topic="ModelBooster"),
             st("o/b", profile="Core", topic="LeaderWorkerSet")],
            Figures(1, 1), Figures(), Figures(), Figures(1, 1),
            id="other-topics-out-of-scope",
        ),
        pytest.param(
            [st("a/a", asserted=False, reason="out-of-scope")],
            Figures(1, 0, 1, 0), Figures(), Figures(), Figures(1, 0, 1, 0),
            id="out-of-scope-reason-on-a-modelserving-statement-explains",
        ),
    ],
)  # fmt: skip
def test_coverage_arithmetic(
    statements: list[Statement], core_must: Figures, core_should: Figures, plugins_must: Figures, overall_must: Figures
) -> None:
    cov = coverage(statements)
    assert [p.profile for p in cov.profiles] == list(PROFILES)
    assert cov.profile("Core").must == core_must and cov.profile("Core").should == core_should
    assert cov.profile("Plugins").must == plugins_must
    assert cov.overall.must == overall_must and cov.overall.profile == "overall"
    for p in (*cov.profiles, cov.overall):
        for f in (p.must, p.should):
            assert f.total == f.asserted + f.explained + f.gaps


@pytest.mark.parametrize(
    ("statements", "expected"),
    [
        pytest.param([], Figures(), id="nothing"),
        pytest.param(
            [st("a/a"), st("a/b", asserted=False, reason="not-modelserving")], Figures(1, 1), id="go-code-left-out"
        ),
        pytest.param(
            [st("a/a", asserted=False, reason="not-observable"), st("a/b", asserted=False)],
            Figures(2, 0, 1, 1),
            id="other-reasons-and-gaps-stay",
        ),
        pytest.param(
            [st("a/a", "SHOULD"), st("o/a", topic="ModelBooster", asserted=False, reason="not-modelserving")],
            Figures(),
            id="must-and-in-scope-only",
        ),
    ],
)
def test_the_figure_without_implementation_code(statements: list[Statement], expected: Figures) -> None:
    assert specmap.without_implementation_code(statements) == expected


def test_uncovered_lists_in_scope_must_statements_gaps_first() -> None:
    statements = [
        st("a/explained", asserted=False, reason="ambiguous"),
        st("a/gap-1", asserted=False),
        st("a/asserted"),
        st("a/should-gap", "SHOULD", asserted=False),
        st("a/other-topic", asserted=False, topic="ModelBooster"),
        st("a/gap-2", profile="Plugins", asserted=False),
    ]
    assert [s.id for s in coverage(statements).uncovered] == ["a/gap-1", "a/gap-2", "a/explained"]


def test_coverage_of_chosen_profiles_in_their_order() -> None:
    cov = coverage([st("a/a")], profiles=["Plugins", "Core"])
    assert [p.profile for p in cov.profiles] == ["Plugins", "Core"]


@pytest.mark.parametrize(
    ("figures", "percent", "text"),
    [
        (Figures(), None, "n/a"),
        (Figures(4, 4), 100.0, "100.0%"),
        (Figures(3, 1, 2), 100 / 3, "33.3%"),
        (Figures(3, 2, 0, 1), 200 / 3, "66.6%"),
        (Figures(2000, 1899, 0, 101), 94.95, "94.9%"),
        (Figures(1, 0, 0, 1), 0.0, "0.0%"),
    ],
)
def test_percent(figures: Figures, percent: float | None, text: str) -> None:
    assert figures.percent == pytest.approx(percent) if percent is not None else figures.percent is None
    assert percent_text(figures.percent) == text


def test_the_report_block_has_the_judged_profiles(tmp_path: Path) -> None:
    loaded = load(write(tmp_path, valid()), catalog=CATALOG)
    block = report_block(loaded, coverage(loaded.statements), ["Plugins", "Rollout"])
    assert block["specMap"] == {"file": "specmap.yaml", "digest": loaded.digest, "statements": 5}
    assert block["scope"] == "ModelServing, AutoscalingPolicy"
    assert block["overall"]["must"] == {"total": 4, "asserted": 3, "explained": 0, "gaps": 1}
    assert [p["profile"] for p in block["profiles"]] == ["Plugins", "Rollout"]
    assert block["profiles"][0]["must"] == {"total": 1, "asserted": 1, "explained": 0, "gaps": 0}


def test_coverage_is_a_value() -> None:
    cov = coverage([st("a/a")])
    assert isinstance(cov, Coverage) and cov == coverage([st("a/a")])
    assert copy.deepcopy(cov) == cov


# -- the real spec map ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def real() -> specmap.SpecMap:
    if not specmap.SPECMAP_PATH.exists():
        pytest.skip(f"{specmap.SPECMAP_PATH} does not exist yet")
    return load(specmap.SPECMAP_PATH, catalog=catalog.collect())


def test_every_must_statement_is_asserted_or_explained(real: specmap.SpecMap) -> None:
    bare = [s.id for s in real.statements if s.level == "MUST" and not s.behaviours and not s.reason]
    assert not bare, f"MUST statements with neither behaviours nor notAsserted: {bare}"


def test_every_behaviour_named_exists(real: specmap.SpecMap) -> None:
    known = {b.id for b in catalog.collect()}
    assert sorted(real.named_behaviours() - known) == []


def test_every_asserting_behaviour_cites_a_listed_document(real: specmap.SpecMap) -> None:
    """A behaviour may assert statements of other sections (or documents) than the one it cites,
    but the document it cites is one of the spec map's."""
    documents = {d.file for d in real.documents}
    by_id = {b.id: b for b in catalog.collect()}
    cited = {b: by_id[b].spec.split("#", 1)[0] for s in real.statements for b in s.behaviours}
    assert {b: doc for b, doc in cited.items() if doc not in documents} == {}


@pytest.mark.parametrize("topic", MUST_ASSERTED_FLOOR)
def test_in_scope_must_coverage_does_not_go_down(real: specmap.SpecMap, topic: str) -> None:
    percent = coverage(s for s in real.statements if s.topic == topic).overall.must.percent or 0.0
    assert percent >= MUST_ASSERTED_FLOOR[topic], (
        f"{percent_text(percent)} of the {topic} MUST statements are asserted, below the floor "
        f"{MUST_ASSERTED_FLOOR[topic]}%: a behaviour that asserted a statement was removed or unmapped"
    )


# -- proofs, conditionalOn and what a success guarantees -------------------------------------------------


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        pytest.param(
            s0(proofs=[]),
            "statements[0].proofs: core/pods/created (api/spec/replicas) claim the statement without a proof",
            id="claim-without-proof",
        ),
        pytest.param(
            s0(proofs=[proof("core/pods/created"), proof("core/status/replicas")]),
            "statements[0].proofs[1].behaviour: 'core/status/replicas' (api/spec/replicas) is not in behaviours",
            id="proof-of-another-behaviour",
        ),
        pytest.param(
            s0(conditionalOn=["HeadlessServices"]),
            "statements[0].conditionalOn[0]: unknown feature 'HeadlessServices' (api/spec/replicas)",
            id="unknown-conditional-feature",
        ),
        pytest.param(
            s0(proofs=[{"behaviour": "core/pods/created", "test": "", "fault": "f"}]),
            "statements[0].proofs[0].test: ",
            id="empty-test",
        ),
    ],
)
def test_proof_and_condition_problems(tmp_path: Path, change: Any, problem: str) -> None:
    path = write(tmp_path, edit(change))
    with pytest.raises(SpecMapError) as caught:
        load(path, catalog=CATALOG)
    assert any(p.startswith(f"{path}: {problem}") for p in caught.value.problems), caught.value.problems


def test_a_proof_and_a_condition_load(tmp_path: Path) -> None:
    loaded = load(write(tmp_path, edit(s0(conditionalOn=["HeadlessService"]))), catalog=CATALOG)
    first = loaded.statements[0]
    assert first.conditional_on == ("HeadlessService",)
    assert [p.as_dict() for p in first.proofs] == [proof("core/pods/created")]


PLUGINS = PROFILES["Plugins"]
ORDER = "plugin-framework-and-headless-service.txt#Plugin Execution Order"


def pb(id: str, feature: Feature, *requires: Feature, level: str = "MUST") -> Behaviour:
    return Behaviour(id, f"Plugins {level} run in order.", ORDER, feature, requires=requires)


@pytest.mark.parametrize(
    ("behaviours", "conditional_on", "why"),
    [
        pytest.param([pb("p/a", Feature.PLUGIN_FRAMEWORK)], (), None, id="required-feature"),
        pytest.param(
            [pb("p/a", Feature.PLUGIN_FRAMEWORK, Feature.DEMO_POD_TWEAKS)],
            (),
            "p/a also requires DemoPodTweaks, which a success on Plugins does not guarantee",
            id="requires-optional",
        ),
        pytest.param(
            [pb("p/a", Feature.PLUGIN_FRAMEWORK, Feature.DEMO_POD_TWEAKS)], ("DemoPodTweaks",), None, id="conditional"
        ),
        pytest.param(
            [pb("p/a", Feature.DEMO_POD_TWEAKS)],
            (),
            "p/a is feature DemoPodTweaks (optional in Plugins)",
            id="optional",
        ),
        pytest.param(
            [pb("p/a", Feature.PLUGIN_FRAMEWORK, level="SHOULD")],
            (),
            "p/a is SHOULD (a warning when it does not hold)",
            id="should",
        ),
        pytest.param(
            [pb("p/a", Feature.DEMO_POD_TWEAKS), pb("p/b", Feature.PLUGIN_CHAIN_IMMUTABILITY)],
            (),
            None,
            id="one-of-several-is-enough",
        ),
        pytest.param(
            [pb("p/a", Feature.PLUGIN_FRAMEWORK, Feature.ROLLING_UPDATE)],
            (),
            "p/a also requires RollingUpdate, which a success on Plugins does not guarantee",
            id="another-profiles-feature",
        ),
    ],
)
def test_success_gaps(behaviours: list[Behaviour], conditional_on: tuple[str, ...], why: str | None) -> None:
    s = Statement(
        "plugins/order/list", "x.txt", "Order", "text", "MUST", "ModelServing", "Plugins",
        behaviours=tuple(b.id for b in behaviours), conditional_on=conditional_on,
    )  # fmt: skip
    gaps = specmap.success_gaps([s], behaviours, PLUGINS)
    assert [g.why for g in gaps] == ([] if why is None else [why])


def test_guaranteed_features_follow_prerequisites() -> None:
    guaranteed = specmap.guaranteed_features(PROFILES["InPlaceUpdate"])
    assert {Feature.IN_PLACE_UPDATE, Feature.ROLLING_UPDATE, Feature.CORE} <= guaranteed
    assert Feature.ROLE_ROLLING_UPDATE not in guaranteed


def test_partly_asserted_lists_statements_with_partial_only() -> None:
    full = Statement("a/b", "x", "y", "t", "MUST", "ModelServing", "Core", behaviours=("b/c",), partial=("b/d",))
    part = Statement("a/c", "x", "y", "t", "MUST", "ModelServing", "Core", partial=("b/d",), reason="gap", detail="d")
    should = Statement(
        "a/d", "x", "y", "t", "SHOULD", "ModelServing", "Core", partial=("b/d",), reason="gap", detail="d"
    )
    assert specmap.partly_asserted([full, part, should], "Core") == [part]


def test_the_real_map_leaves_no_must_to_an_optional_feature(real: specmap.SpecMap) -> None:
    """Issue 31: a profile's success means its MUST statements were asserted. What is left is listed
    by `kthena-conformance coverage` (success gaps); this ratchet keeps it from growing."""
    behaviours = catalog.collect()
    gaps = {p: len(specmap.success_gaps(real.statements, behaviours, prof)) for p, prof in PROFILES.items()}
    assert sum(gaps.values()) <= SUCCESS_GAP_CEILING, gaps


# 2026-12-07: the five left are asserted only where the cluster can show them (DNSResolution: a DNS
# server and running containers; PodMetricSource: real nodes), optional so that the embedded cluster's
# runs still succeed.
SUCCESS_GAP_CEILING = 5
