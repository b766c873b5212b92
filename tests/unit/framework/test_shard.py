"""Sharding: ``--shard I/N`` parsing (bad values named), the round-robin assignment over the ids
sorted within each pass (deterministic, balanced, a partition), and a shard's own verdict."""

from __future__ import annotations

import itertools
import json
import random
from dataclasses import dataclass
from pathlib import Path

import pytest
from click.testing import CliRunner

from conformance.cli import main
from conformance.framework.catalog import collect
from conformance.framework.features import PROFILES, Feature, SelectionError
from conformance.framework.outcomes import Outcome, TestResult, Verdict
from conformance.framework.shard import Shard, ShardError, assign, other_shard_ids, own_verdict
from conformance.framework.support import Support


@dataclass(frozen=True)
class B:
    id: str
    serial: bool = False


def behaviours(parallel: str, serial: str = "") -> list[B]:
    return [B(i) for i in parallel.split()] + [B(i, serial=True) for i in serial.split()]


# -- parsing -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "index", "total"),
    [("1/1", 1, 1), ("2/4", 2, 4), ("4/4", 4, 4), (" 3 / 4 ", 3, 4), ("10/12", 10, 12), ("01/2", 1, 2)],
)
def test_parse_accepts_i_of_n(text: str, index: int, total: int) -> None:
    shard = Shard.parse(text)
    assert (shard.index, shard.total) == (index, total)
    assert str(shard) == f"{index}/{total}"


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("", "expected I/N"),
        ("2", "expected I/N"),
        ("2-4", "expected I/N"),
        ("a/b", "expected I/N"),
        ("1/4/2", "expected I/N"),
        ("1.5/4", "expected I/N"),
        ("0/4", "I must be between 1 and N (4), got 0"),
        ("5/4", "I must be between 1 and N (4), got 5"),
        ("-1/4", "I must be between 1 and N (4), got -1"),
        ("1/0", "N (the number of shards) must be at least 1"),
        ("0/0", "N (the number of shards) must be at least 1"),
        ("1/-2", "N (the number of shards) must be at least 1"),
    ],
)
def test_parse_refuses_bad_values_naming_the_option_and_the_reason(text: str, reason: str) -> None:
    with pytest.raises(ShardError) as caught:
        Shard.parse(text)
    assert str(caught.value).startswith("--shard ")
    assert reason in str(caught.value)
    assert isinstance(caught.value, SelectionError)  # the run refuses it like a bad --profile: exit 2


# -- the assignment ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("selected", "total", "expected"),
    [
        pytest.param(behaviours("a b c"), 1, {"a": 1, "b": 1, "c": 1}, id="one-shard-runs-everything"),
        pytest.param(behaviours("c a d b"), 2, {"a": 1, "b": 2, "c": 1, "d": 2}, id="round-robin-over-sorted-ids"),
        pytest.param(
            behaviours("p1 p2 p3", "s1 s2 s3"),
            2,
            {"p1": 1, "p2": 2, "p3": 1, "s1": 2, "s2": 1, "s3": 2},
            id="the-serial-pass-continues-the-count",
        ),
        pytest.param(behaviours("a z", "b"), 2, {"a": 1, "z": 2, "b": 1}, id="parallel-before-serial-whatever-the-ids"),
        pytest.param(behaviours("", "s1 s2 s3 s4"), 3, {"s1": 1, "s2": 2, "s3": 3, "s4": 1}, id="serial-only"),
        pytest.param(behaviours("a"), 3, {"a": 1}, id="more-shards-than-behaviours"),
        pytest.param([], 2, {}, id="empty-selection"),
    ],
)
def test_assign_deals_round_robin_within_each_pass(selected: list[B], total: int, expected: dict[str, int]) -> None:
    assert assign(selected, total) == expected


def test_assign_is_independent_of_the_order_it_is_given() -> None:
    selected = behaviours("a b c d e f g", "s t u v")
    expected = assign(selected, 3)
    rng = random.Random(7)
    for _ in range(20):
        shuffled = selected[:]
        rng.shuffle(shuffled)
        assert assign(shuffled, 3) == expected


@pytest.mark.parametrize(
    ("parallel", "serial", "total"), list(itertools.product([0, 1, 5, 12], [0, 1, 4, 7], [1, 2, 3, 5]))
)
def test_each_pass_and_each_shard_is_balanced_within_one(parallel: int, serial: int, total: int) -> None:
    selected = [B(f"p/{i:02}") for i in range(parallel)] + [B(f"s/{i:02}", serial=True) for i in range(serial)]
    owners = assign(selected, total)
    for group in (
        [b for b in selected if not b.serial],
        [b for b in selected if b.serial],
        selected,
    ):
        sizes = [sum(1 for b in group if owners[b.id] == k) for k in range(1, total + 1)]
        assert max(sizes) - min(sizes) <= 1, (group, sizes)


def test_assign_refuses_duplicates_and_no_shards() -> None:
    with pytest.raises(ValueError, match="duplicate behaviour ids in the selection: a"):
        assign([B("a"), B("a", serial=True)], 2)
    with pytest.raises(ValueError, match="at least 1"):
        assign([B("a")], 0)


@pytest.mark.parametrize("total", [1, 2, 3, 4, 7])
def test_the_shards_of_the_real_catalog_partition_it(total: int) -> None:
    catalog = collect()
    shards = [Shard(i, total) for i in range(1, total + 1)]
    mine = [set(s.mine(catalog)) for s in shards]
    assert set().union(*mine) == {b.id for b in catalog}
    assert sum(len(m) for m in mine) == len(catalog)
    for b in catalog:
        (owner,) = [s.index for s in shards if s.selects(b.id, catalog)]
        assert all(s.owner(b.id, catalog) == owner for s in shards)


def test_selects_mine_skip_reason_and_the_report() -> None:
    selected = behaviours("a b c", "s")
    two, one = Shard(2, 2), Shard(1, 2)
    assert [id_ for id_ in ["a", "b", "c", "s"] if two.selects(id_, selected)] == ["b", "s"]
    assert two.mine(selected) == ["b", "s"]
    assert not two.selects("elsewhere", selected) and two.owner("elsewhere", selected) is None
    assert two.skip_reason(1) == "in shard 1/2, not this one (2/2)"
    assert two.as_report(["s", "b"]) == {"index": 2, "total": 2, "behaviours": ["b", "s"]}
    assert other_shard_ids(assign(selected, 2), one) == {"b", "s"}


# -- a shard's own verdict ---------------------------------------------------------------------------

SUPPORT = Support("impl", "1", frozenset(Feature) - {Feature.DNS_RESOLUTION}, {}, source="flags")
CORE = PROFILES["Core"]


def result(id_: str, outcome: Outcome, feature: Feature = Feature.CORE) -> TestResult:
    return TestResult(id_, "", feature, outcome, 0.0)


@pytest.mark.parametrize(
    ("tests", "others", "preflight_ok", "interrupted", "expected"),
    [
        pytest.param(
            [result("a", Outcome.PASSED), result("b", Outcome.SKIPPED_BY_USER)],
            {"b"},
            True,
            False,
            Verdict.SUCCESS,
            id="other-shards-skips-do-not-count",
        ),
        pytest.param(
            [result("a", Outcome.PASSED), result("b", Outcome.SKIPPED_BY_USER)],
            set(),
            True,
            False,
            Verdict.PARTIAL,
            id="a-users-skip-still-counts",
        ),
        pytest.param(
            [result("a", Outcome.NON_CONFORMANT), result("b", Outcome.SKIPPED_BY_USER)],
            {"b"},
            True,
            False,
            Verdict.FAILURE,
            id="own-failure",
        ),
        pytest.param(
            [result("a", Outcome.ERROR), result("b", Outcome.SKIPPED_BY_USER)],
            {"b"},
            True,
            False,
            Verdict.PARTIAL,
            id="own-error",
        ),
        pytest.param([result("b", Outcome.SKIPPED_BY_USER)], {"b"}, True, False, Verdict.SUCCESS, id="empty-shard"),
        pytest.param([result("b", Outcome.SKIPPED_BY_USER)], {"b"}, False, False, Verdict.ERROR, id="empty-preflight"),
        pytest.param([result("a", Outcome.PASSED)], set(), True, True, Verdict.ERROR, id="interrupted"),
        pytest.param(
            [result("a", Outcome.NOT_SUPPORTED, Feature.DNS_RESOLUTION)],
            set(),
            True,
            False,
            Verdict.SUCCESS,
            id="profile-of-other-tests-not-judged",
        ),
    ],
)
def test_own_verdict_judges_only_the_shards_behaviours(
    tests: list[TestResult], others: set[str], preflight_ok: bool, interrupted: bool, expected: Verdict
) -> None:
    got = own_verdict([CORE], tests, others, SUPPORT, preflight_ok=preflight_ok, interrupted=interrupted)
    assert got is expected


# -- the command line (no cluster: bad input and --dry-run) ------------------------------------------


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        ("0/4", "I must be between 1 and N (4), got 0"),
        ("5/4", "I must be between 1 and N (4), got 5"),
        ("1/0", "N (the number of shards) must be at least 1"),
        ("half", "expected I/N"),
    ],
)
@pytest.mark.parametrize("dry_run", [False, True])
def test_run_refuses_a_bad_shard_with_one_message_a_report_and_exit_code_2(
    tmp_path: Path, value: str, reason: str, dry_run: bool
) -> None:
    args = ["run", "--shard", value, "--report-dir", str(tmp_path / "r"), *(["--dry-run"] if dry_run else [])]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 2, result.output
    assert f"--shard {value}" in result.output or f"--shard {value!r}" in result.output
    assert reason in result.output
    assert "Traceback" not in result.output
    report = json.loads((tmp_path / "r" / "conformance-report.json").read_text())
    assert report["verdict"] == "error" and report["exitCode"] == 2
    assert reason in report["error"]["message"]


def listing(tmp_path: Path, *extra: str) -> list[str]:
    result = CliRunner().invoke(main, ["run", "--dry-run", "--report-dir", str(tmp_path / "r"), *extra])
    assert result.exit_code == 0, result.output
    return [line.split()[0] for line in result.stdout.splitlines() if line.strip()]


def test_dry_run_lists_only_this_shards_behaviours_and_the_shards_partition_the_selection(tmp_path: Path) -> None:
    whole = listing(tmp_path, "--profile", "Core")
    parts = [listing(tmp_path, "--profile", "Core", "--shard", f"{i}/3") for i in (1, 2, 3)]
    assert sorted(id_ for part in parts for id_ in part) == sorted(whole)
    assert all(len(part) in (len(whole) // 3, len(whole) // 3 + 1) for part in parts)
    catalog = [b for b in collect() if b.id in whole]
    assert parts[1] == [b.id for b in catalog if b.id in Shard(2, 3).mine(catalog)]
