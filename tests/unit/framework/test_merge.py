"""Merging shard reports: N shards give the report one unsharded run gives (tests, counts,
verdicts, exit code, warnings) and ``verify`` accepts it; each reason to refuse is named; shard
errors, interruptions, preflight, accelerator warnings and the spec map's coverage carry over."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from conformance.cli import main
from conformance.framework.catalog import Behaviour
from conformance.framework.features import PROFILES, Feature
from conformance.framework.judged import judge
from conformance.framework.merge import MergeError, ShardReport, merge
from conformance.framework.outcomes import Outcome, TestResult, overall_verdict, profile_verdict, skipped_by_user
from conformance.framework.report import SCHEMA_VERSION, Report, verify, write
from conformance.framework.shard import Shard, assign
from tests.unit.framework.samples import SUPPORT

DIGEST = "sha256:" + "cd" * 32
SPEC = "api-reference-workload-v1alpha1.txt#ModelServingSpec"

# id, feature, serial, what happens when it runs
PLAN: list[tuple[str, Feature, bool, Outcome]] = [
    ("core/pods/created", Feature.CORE, False, Outcome.PASSED),
    ("core/pods/deleted", Feature.CORE, False, Outcome.PASSED),
    ("core/admission/reject", Feature.ADMISSION, False, Outcome.PASSED),
    ("core/recovery/replace", Feature.RECOVERY, True, Outcome.PASSED),
    ("core/recovery/restart", Feature.RECOVERY, True, Outcome.PASSED),
    ("core/scale/up", Feature.SCALE_SUBRESOURCE, False, Outcome.PASSED),
    ("plugins/framework/order", Feature.PLUGIN_FRAMEWORK, False, Outcome.ERROR),
    ("plugins/chain/immutable", Feature.PLUGIN_CHAIN_IMMUTABILITY, True, Outcome.NON_CONFORMANT),
    ("plugins/demo/tweaks", Feature.DEMO_POD_TWEAKS, False, Outcome.PASSED),
    ("dns/service/entry", Feature.HEADLESS_SERVICE, False, Outcome.PASSED),
    ("dns/resolve/pod", Feature.DNS_RESOLUTION, False, Outcome.PASSED),
]
CATALOG = [Behaviour(id, f"The implementation MUST do {id}.", SPEC, f, serial=s) for id, f, s, _ in PLAN]
OUTCOME = {id: o for id, _, _, o in PLAN}
ALL = ["Core", "Plugins", "HeadlessServiceDNS"]


def run(
    shard: Shard | None = None,
    profiles: list[str] | None = None,
    ids: list[str] | None = None,
    outcomes: dict[str, Outcome] | None = None,
) -> dict[str, Any]:
    """A report built the way ``kthena-conformance run [--shard I/N]`` builds one."""
    profiles = ALL if profiles is None else profiles
    wanted = {f for name in profiles for f in PROFILES[name].features}
    selected = [b for b in CATALOG if b.feature in wanted and (not ids or b.id in ids)]
    owners = assign(selected, shard.total) if shard else {}
    tests = []
    for i, b in enumerate(CATALOG):
        if b.feature not in wanted:
            continue
        if b not in selected:
            outcome, message, nodeid = Outcome.SKIPPED_BY_USER, "not selected (--profile/--feature/--id)", ""
        elif shard is not None and owners[b.id] != shard.index:
            outcome, message, nodeid = Outcome.SKIPPED_BY_USER, shard.skip_reason(owners[b.id]), ""
        elif not SUPPORT.supports(b.feature):
            outcome, message, nodeid = Outcome.NOT_SUPPORTED, f"{b.feature}: no DNS", ""
        else:
            outcome = (outcomes or OUTCOME)[b.id]
            message, nodeid = f"ran {b.id}", f"conformance/suites/test_x.py::test_{i}"
        tests.append(TestResult(b.id, nodeid, b.feature, outcome, 0.5, message, b.statement, b.spec))
    results = [profile_verdict(PROFILES[p], tests, SUPPORT) for p in profiles]
    verdict = overall_verdict(results, preflight_ok=True, interrupted=False)
    # the exit code follows the verdict on what was selected (conformance.framework.judged), as a run's does
    judged = judge([PROFILES[p] for p in profiles], tests, SUPPORT, preflight_ok=True, interrupted=False)
    index = shard.index if shard else 0
    data: dict[str, Any] = {
        "schemaVersion": SCHEMA_VERSION,
        "kind": "ConformanceReport",
        "suite": {"name": "kthena-conformance", "version": "0.1.0", "digest": DIGEST},
        "run": {
            "id": f"run-{index}",
            "startedAt": f"2026-01-02T03:{index:02}:00+00:00",
            "finishedAt": f"2026-01-02T04:{index:02}:00+00:00",
            "durationSeconds": 600.0,
            "command": ["kthena-conformance", "run"],
            "selection": {"profiles": profiles, "features": [], "ids": ids or []},
            "keep": "never",
            "timeouts": {"scale": 1.0},
        },
        "implementation": {**SUPPORT.as_report(), "deployedBy": "harness", "log": f"/m{index}/kthena-ref.log"},
        "cluster": {"provider": "local", "name": f"conformance-{index}"},
        "preflight": [{"name": "nodes-ready", "result": "ok", "message": f"{index + 2}/{index + 2} nodes Ready"}],
        "profiles": [r.as_dict() for r in results],
        "tests": [t.as_dict() for t in tests],
        "verdict": verdict.value,
        "notes": [],
        "exitCode": 0 if judged["verdict"] == "success" else 1,
    }
    if shard is not None:
        data["run"]["shard"] = shard.as_report(i for i, owner in owners.items() if owner == shard.index)
    return data


def shards(total: int, **kwargs: Any) -> list[ShardReport]:
    return [
        ShardReport(f"shard-{i}.json", Report.model_validate(run(Shard(i, total), **kwargs)))
        for i in range(1, total + 1)
    ]


def merged(items: list[ShardReport]) -> dict[str, Any]:
    return merge(items, run_id="merged", command=["kthena-conformance", "report", "merge"]).as_data()


def comparable(data: dict[str, Any]) -> dict[str, Any]:
    return {k: data[k] for k in ("tests", "profiles", "verdict", "exitCode")}


# -- N shards merged == one unsharded run -------------------------------------------------------------


@pytest.mark.parametrize(
    ("total", "kwargs"),
    [
        pytest.param(1, {}, id="one-shard"),
        pytest.param(2, {}, id="two-shards"),
        pytest.param(3, {}, id="three-shards"),
        pytest.param(4, {"profiles": ["Core"]}, id="four-shards-of-core"),
        pytest.param(20, {}, id="more-shards-than-behaviours"),
        pytest.param(2, {"ids": ["core/pods/created", "core/recovery/replace", "plugins/demo/tweaks"]}, id="ids"),
        pytest.param(
            2, {"outcomes": dict.fromkeys(OUTCOME, Outcome.PASSED), "profiles": ["Core", "Plugins"]}, id="all-pass"
        ),
    ],
)
def test_merged_shards_equal_one_unsharded_run(tmp_path: Path, total: int, kwargs: dict[str, Any]) -> None:
    parts = shards(total, **kwargs)
    for part in parts:  # a shard alone is partial: the other shards' behaviours are skipped-by-user
        if total > 1 and any(t.outcome is Outcome.PASSED for t in part.report.tests):
            assert part.report.verdict.value in ("partial", "failure")
    data = merged(list(reversed(parts)))  # any order
    assert comparable(data) == comparable(run(**kwargs))
    assert [s["index"] for s in data["run"]["shards"]] == list(range(1, total + 1))
    assert data["run"]["shard"] is None
    for path in write(data, tmp_path):
        assert verify(path, digest=DIGEST, catalog=CATALOG) == []


def test_the_merged_run_section_records_every_shard() -> None:
    data = merged(shards(2))
    run_section = data["run"]
    assert run_section["id"] == "merged" and run_section["command"] == ["kthena-conformance", "report", "merge"]
    assert run_section["startedAt"] == "2026-01-02T03:01:00Z" and run_section["finishedAt"] == "2026-01-02T04:02:00Z"
    assert run_section["durationSeconds"] == 3660.0
    one, two = run_section["shards"]
    assert (one["index"], one["total"], one["source"], one["runId"]) == (1, 2, "shard-1.json", "run-1")
    assert one["cluster"] == {"provider": "local", "name": "conformance-1"}
    assert two["cluster"]["name"] == "conformance-2" and two["implementationLog"] == "/m2/kthena-ref.log"
    assert one["behaviours"] + two["behaviours"] == len(CATALOG)
    assert data["cluster"] == one["cluster"]  # the first shard's, and a note says so
    assert "log" not in data["implementation"]
    assert any("merged from 2 shard reports" in n and "run.shards" in n for n in data["notes"])
    (check,) = data["preflight"]
    assert check == {
        "name": "nodes-ready",
        "result": "ok",
        "message": "shard 1/2: ok, 3/3 nodes Ready; shard 2/2: ok, 4/4 nodes Ready",
    }


# -- refusals -----------------------------------------------------------------------------------------


def change(index: int, edit: Callable[[dict[str, Any]], None], total: int = 2) -> list[ShardReport]:
    """The shards of a run, the ``index``-th (1-based) edited."""
    out = []
    for i in range(1, total + 1):
        data = run(Shard(i, total))
        if i == index:
            edit(data)
        out.append(ShardReport(f"shard-{i}.json", Report.model_validate(data)))
    return out


def other_implementation(d: dict[str, Any]) -> None:
    d["implementation"].update(name="vendor-x", version="2.0")


def other_features(d: dict[str, Any]) -> None:
    d["implementation"]["supportedFeatures"] = ["Core"]


def other_capabilities(d: dict[str, Any]) -> None:
    d["accelerators"] = {"capabilities": [{"file": "gpu.yaml", "sha256": "00", "vendor": "v", "driver": "d"}]}


def steal(d: dict[str, Any]) -> None:
    d["run"]["shard"]["behaviours"].append("core/admission/reject")  # shard 1's


def unshard(d: dict[str, Any]) -> None:
    d["run"]["shard"] = None


@pytest.mark.parametrize(
    ("items", "message"),
    [
        pytest.param(lambda: [], "no shard reports to merge", id="nothing"),
        pytest.param(
            lambda: change(2, unshard), "shard-2.json: not a shard report (its run had no --shard)", id="unsharded"
        ),
        pytest.param(
            lambda: change(2, lambda d: d["suite"].update(digest="sha256:" + "00" * 32)),
            "different suites (suite digests differ): shard-1.json: sha256:cdcd",
            id="different-digests",
        ),
        pytest.param(lambda: shards(2)[:1], "shard 2/2 is missing (given: 1/2)", id="missing-shard"),
        pytest.param(lambda: [shards(4)[i] for i in (0, 3)], "shards 2/4, 3/4 are missing", id="missing-shards"),
        pytest.param(
            lambda: [*shards(2), shards(3)[2]], "disagree on the number of shards", id="different-shard-counts"
        ),
        pytest.param(
            lambda: [shards(2)[0], shards(2)[0]], "shard 1 is given more than once", id="the-same-shard-twice"
        ),
        pytest.param(
            lambda: change(2, other_implementation),
            "mixed implementations): shard-1.json: kthena-ref 0.1.0",
            id="mixed-implementations",
        ),
        pytest.param(
            lambda: change(2, other_features), "shard-2.json: kthena-ref 0.1.0 supporting Core", id="mixed-support"
        ),
        pytest.param(
            lambda: change(2, lambda d: d["run"]["selection"].update(profiles=["Core"])),
            "shard-2.json selected profiles Core but shard-1.json selected profiles Core, Plugins, HeadlessServiceDNS",
            id="different-selections",
        ),
        pytest.param(
            lambda: change(2, steal),
            "overlapping shards: 1 behaviour was run by more than one shard: core/admission/reject "
            "(shard-1.json (shard 1/2), shard-2.json (shard 2/2))",
            id="overlap",
        ),
        pytest.param(
            lambda: change(2, other_capabilities), "other accelerator capability files", id="different-capabilities"
        ),
    ],
)
def test_merge_refuses_naming_the_reason(items: Callable[[], list[ShardReport]], message: str) -> None:
    with pytest.raises(MergeError) as caught:
        merged(items())
    assert any(message in p for p in caught.value.problems), caught.value.problems


def test_every_reason_is_named_at_once() -> None:
    def both(d: dict[str, Any]) -> None:
        other_implementation(d)
        d["suite"]["digest"] = "sha256:" + "00" * 32

    with pytest.raises(MergeError) as caught:
        merged(change(2, both, total=3)[:2])
    text = str(caught.value)
    assert "different suites" in text and "mixed implementations" in text and "shard 3/3 is missing" in text


# -- what carries over from the shards ----------------------------------------------------------------


def test_a_shard_that_failed_before_its_tests_makes_its_behaviours_errors_and_the_run_an_error(
    tmp_path: Path,
) -> None:
    def cluster_failed(d: dict[str, Any]) -> None:
        d.update(tests=[], profiles=[], preflight=[], cluster={}, verdict="error", exitCode=3)
        d["error"] = {"message": "the cluster did not come up", "hint": "see the log"}

    parts = change(2, cluster_failed)
    data = merged(parts)
    theirs = set(parts[1].report.run.shard.behaviours)  # type: ignore[union-attr]
    for t in data["tests"]:
        if t["id"] in theirs:
            assert t["outcome"] == "error"
            assert t["message"] == "not run: shard 2/2 reported no result: the cluster did not come up"
    assert data["verdict"] == "error" and data["exitCode"] == 3
    assert data["error"] == {"message": "shard 2/2: the cluster did not come up", "hint": "see the log"}
    assert data["cluster"] == {"provider": "local", "name": "conformance-1"}
    for path in write(data, tmp_path):
        assert verify(path, digest=DIGEST, catalog=CATALOG) == []


def test_shards_that_all_refused_their_input_merge_into_that_error(tmp_path: Path) -> None:
    def bad_input(d: dict[str, Any]) -> None:
        d.update(tests=[], profiles=[], preflight=[], cluster={}, verdict="error", exitCode=2)
        d["implementation"] = {"name": "reference"}
        d["run"]["shard"]["behaviours"] = []
        d["error"] = {"message": "--timeout nap=3: unknown wait", "hint": "see `kthena-conformance run --help`"}

    parts = [ShardReport(f"s{i}.json", Report.model_validate(_edited(run(Shard(i, 2)), bad_input))) for i in (1, 2)]
    data = merged(parts)
    assert data["verdict"] == "error" and data["exitCode"] == 2 and data["tests"] == [] and data["profiles"] == []
    both = "shard 1/2: --timeout nap=3: unknown wait; shard 2/2: --timeout nap=3: unknown wait"
    assert data["error"]["message"] == both
    # verify says of the merged report exactly what it says of one such run's (no declaration was read)
    single = write(parts[0].report, tmp_path / "single")[1]
    for path in write(data, tmp_path / "merged"):
        assert verify(path, digest=DIGEST, catalog=CATALOG) == verify(single, digest=DIGEST, catalog=CATALOG)


def test_an_interrupted_shard_interrupts_the_merged_run(tmp_path: Path) -> None:
    def interrupted(d: dict[str, Any]) -> None:
        d["run"].update(interrupted=True, interruption="interrupted (SIGINT) while running")
        d["verdict"], d["exitCode"] = "error", 130
        d["notes"] = ["the serial pass ended abnormally"]

    data = merged(change(1, interrupted))
    assert data["run"]["interrupted"] is True
    assert data["run"]["interruption"] == "shard 1/2: interrupted (SIGINT) while running"
    assert data["verdict"] == "error" and data["exitCode"] == 130
    assert "shard 1/2: the serial pass ended abnormally" in data["notes"]
    for path in write(data, tmp_path):
        assert verify(path, digest=DIGEST, catalog=CATALOG) == []


def test_a_failed_preflight_anywhere_is_the_merged_preflight() -> None:
    def no_nodes(d: dict[str, Any]) -> None:
        d["preflight"] = [
            {"name": "nodes-ready", "result": "missing", "message": "0/2 nodes Ready"},
            {"name": "admission-webhook", "result": "skipped", "message": "no webhook"},
        ]

    data = merged(change(2, no_nodes))
    assert data["preflight"] == [
        {"name": "nodes-ready", "result": "missing", "message": "shard 1/2: ok, 3/3 nodes Ready; "
         "shard 2/2: missing, 0/2 nodes Ready"},
        {"name": "admission-webhook", "result": "skipped", "message": "shard 2/2: skipped, no webhook"},
    ]  # fmt: skip
    assert data["verdict"] == "error"


def test_accelerator_warnings_are_the_union_of_the_shards() -> None:
    capabilities = [{"file": "gpu.yaml", "sha256": "00", "vendor": "v", "driver": "d"}]

    def warn(text: str) -> Callable[[dict[str, Any]], None]:
        def edit(d: dict[str, Any]) -> None:
            d["accelerators"] = {"capabilities": copy.deepcopy(capabilities), "warnings": [text, "shared"]}

        return edit

    parts = [ShardReport(f"s{i}.json", Report.model_validate(_edited(run(Shard(i, 2)), warn(f"w{i}")))) for i in (1, 2)]
    accelerators = merged(parts)["accelerators"]
    assert accelerators["warnings"] == ["w1", "shared", "w2"]
    assert [c["driver"] for c in accelerators["capabilities"]] == ["d"]


def _edited(data: dict[str, Any], edit: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    edit(data)
    return data


def test_the_skip_reason_of_another_shard_classifies_as_skipped_by_user() -> None:
    from conformance.framework.outcomes import classify

    reason = skipped_by_user(Shard(2, 4).skip_reason(3))
    assert reason == "skipped-by-user: in shard 3/4, not this one (2/4)"
    assert classify("setup", False, True, None, reason) is Outcome.SKIPPED_BY_USER


# -- the command line ---------------------------------------------------------------------------------


def save_shards(tmp_path: Path, total: int = 2) -> list[Path]:
    """The shards' reports as a run writes them, alternately YAML and JSON."""
    paths = []
    for i in range(1, total + 1):
        written = write(run(Shard(i, total)), tmp_path / f"shard-{i}")
        paths.append(written[i % 2])  # shard 1 JSON, shard 2 YAML, ...
    return paths


def test_report_merge_writes_yaml_json_and_junit_and_exits_like_the_run(tmp_path: Path) -> None:
    paths = save_shards(tmp_path)
    out = tmp_path / "merged"
    result = CliRunner().invoke(main, ["report", "merge", *map(str, paths), "--output", str(out)])
    unsharded = run()
    assert result.exit_code == unsharded["exitCode"] == 1, result.output  # the plan has a non-conformant test
    assert f"merged 2 shard reports; verdict: {unsharded['verdict']}" in result.output
    assert {"conformance-report.json", "conformance-report.yaml", "junit.xml"} <= {p.name for p in out.iterdir()}
    data = json.loads((out / "conformance-report.json").read_text())
    assert comparable(data) == comparable(unsharded)
    assert [s["source"] for s in data["run"]["shards"]] == list(map(str, paths))
    assert verify(out / "conformance-report.yaml", digest=DIGEST, catalog=CATALOG) == []
    junit = (out / "junit.xml").read_text()
    assert junit.count("<testcase ") == len(unsharded["tests"]) and "shard" not in junit


@pytest.mark.parametrize(
    ("args", "message"),
    [
        pytest.param(lambda p, out: [str(p[0])], "shard 2/2 is missing (given: 1/2)", id="missing-shard"),
        pytest.param(lambda p, out: [str(p[0]), str(p[0])], "shard 1 is given more than once", id="repeated"),
        pytest.param(lambda p, out: [*map(str, p), str(out / "nope.json")], "nope.json: cannot read", id="unreadable"),
        pytest.param(lambda p, out: [*map(str, p), str(p[0].with_suffix(".txt"))], "expected a .yaml", id="not-yaml"),
        pytest.param(lambda p, out: [*map(str, p)], "would overwrite the shard report", id="output-over-an-input"),
    ],
)
def test_report_merge_refuses_with_exit_code_2_and_the_reason(
    tmp_path: Path, args: Callable[[list[Path], Path], list[str]], message: str
) -> None:
    paths = save_shards(tmp_path)
    out = paths[0].parent if "overwrite" in message else tmp_path / "merged"
    result = CliRunner().invoke(main, ["report", "merge", *args(paths, out), "--output", str(out)])
    assert result.exit_code == 2, result.output
    assert message in result.output
    assert "Traceback" not in result.output
    assert not (tmp_path / "merged").exists()


# -- warnings and the spec map's coverage ---------------------------------------------------------------


def _coverage(digest: str) -> dict[str, Any]:
    figures = {"total": 4, "asserted": 3, "explained": 0, "gaps": 1}
    return {
        "specMap": {"file": "specmap.yaml", "digest": digest, "statements": 9},
        "scope": "ModelServing",
        "overall": {"must": figures, "should": {"total": 0, "asserted": 0, "explained": 0, "gaps": 0}},
        "profiles": [
            {"profile": "Core", "must": figures, "should": {"total": 0, "asserted": 0, "explained": 0, "gaps": 0}}
        ],
    }


def _with_coverage(digests: list[str | None]) -> list[ShardReport]:
    parts = []
    for i, digest in enumerate(digests, start=1):
        data = run(Shard(i, len(digests)))
        if digest is not None:
            data["coverage"] = _coverage(digest)
        parts.append(ShardReport(f"shard-{i}.json", Report.model_validate(data)))
    return parts


@pytest.mark.parametrize(
    "digests",
    [
        pytest.param(["sha256:aa", "sha256:aa"], id="every-shard"),
        pytest.param([None, "sha256:aa", None], id="one-shard-of-three"),
    ],
)
def test_the_spec_maps_coverage_is_carried_through(tmp_path: Path, digests: list[str | None]) -> None:
    data = merged(_with_coverage(digests))
    assert data["coverage"] == _coverage("sha256:aa")
    for path in write(data, tmp_path):
        assert verify(path, digest=DIGEST, catalog=CATALOG) == []


def test_no_coverage_in_the_shards_none_merged() -> None:
    assert merged(_with_coverage([None, None]))["coverage"] is None


def test_coverage_of_different_spec_maps_is_refused() -> None:
    with pytest.raises(MergeError) as caught:
        merged(_with_coverage(["sha256:aa", "sha256:bb"]))
    assert any(
        "different spec maps (coverage.specMap.digest differs): shard-1.json: sha256:aa; shard-2.json: sha256:bb" in p
        for p in caught.value.problems
    ), caught.value.problems


def test_warnings_merge_like_one_run(tmp_path: Path) -> None:
    outcomes = {**OUTCOME, "dns/service/entry": Outcome.WARNING}
    catalog = [
        Behaviour(b.id, "The implementation SHOULD do it.", b.spec, b.feature, serial=b.serial)
        if b.id == "dns/service/entry"
        else b
        for b in CATALOG
    ]
    data = merged(shards(3, outcomes=outcomes))
    assert comparable(data) == comparable(run(outcomes=outcomes))
    dns = next(p for p in data["profiles"] if p["profile"] == "HeadlessServiceDNS")
    assert dns["verdict"] == "success" and dns["warnings"] == ["dns/service/entry"] and dns["counts"]["warning"] == 1
    for path in write(data, tmp_path):
        assert verify(path, digest=DIGEST, catalog=catalog) == []
