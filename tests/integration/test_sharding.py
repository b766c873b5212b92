"""Sharding end to end: two shards of a small Core selection, merged with ``report merge``, give
the same outcomes, counts and verdicts as one unsharded run of that selection, and the merged
report verifies. The three runs share one kept embedded cluster (the reference controller is
deployed by each run, as usual)."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from conformance.cli import main
from conformance.framework import catalog, report
from conformance.framework.shard import Shard
from tests.integration.kept_runs import kept_cluster, kept_run

pytestmark = [pytest.mark.serial, pytest.mark.own_controller, pytest.mark.slow]

# Six quick Core behaviours (admission refusals, Pod creation, defaults, status, scale): small
# enough that the three runs stay around two minutes together.
IDS = [
    "core/admission/role-name-pattern",
    "core/admission/role-name-unique",
    "core/servinggroup/pods-created",
    "core/spec/defaults",
    "core/status/label-selector",
    "core/scale/subresource-up",
]


@pytest.fixture(scope="module")
def cluster_name() -> Iterator[str]:
    yield from kept_cluster(f"sharding-{os.getpid()}")


def suite(directory: Path, cluster: str, shard: str | None = None) -> dict[str, Any]:
    return kept_run(directory, cluster, profiles=["Core"], ids=IDS, shard=shard)


def outcomes(data: dict[str, Any]) -> dict[str, str]:
    return {t["id"]: t["outcome"] for t in data["tests"]}


def test_two_shards_merged_equal_one_unsharded_run(cluster_name: str, tmp_path: Path) -> None:
    whole = suite(tmp_path / "whole", cluster_name)
    ran = {id_: o for id_, o in outcomes(whole).items() if id_ in IDS}
    assert set(ran) == set(IDS) and set(ran.values()) == {"passed"}, (whole.get("error"), whole["tests"])

    selected = [b for b in catalog.collect() if b.id in IDS]
    shards = []
    for i in (1, 2):
        data = suite(tmp_path / f"shard-{i}", cluster_name, shard=f"{i}/2")
        mine = Shard(i, 2).mine(selected)
        assert data["run"]["shard"] == {"index": i, "total": 2, "behaviours": mine}
        assert sorted(id_ for id_, o in outcomes(data).items() if o == "passed") == mine
        others = [t for t in data["tests"] if t["id"] in IDS and t["id"] not in mine]
        assert others and all(t["outcome"] == "skipped-by-user" for t in others)
        assert all(t["message"].startswith("in shard ") and f"not this one ({i}/2)" in t["message"] for t in others)
        assert data["exitCode"] == whole["exitCode"]  # judged on its own behaviours, like the whole run
        shards.append(data)

    out = tmp_path / "merged"
    inputs = [tmp_path / "shard-1" / "conformance-report.json", tmp_path / "shard-2" / "conformance-report.yaml"]
    result = CliRunner().invoke(main, ["report", "merge", *map(str, inputs), "--output", str(out)])
    assert result.exit_code == whole["exitCode"], result.output
    merged = json.loads((out / "conformance-report.json").read_text())

    assert outcomes(merged) == outcomes(whole)

    def judged(data: dict[str, Any]) -> list[tuple[str, str, dict[str, int]]]:
        return [(p["profile"], p["verdict"], p["counts"]) for p in data["profiles"]]

    assert judged(merged) == judged(whole)
    assert (merged["verdict"], merged["exitCode"]) == (whole["verdict"], whole["exitCode"])
    assert [s["runId"] for s in merged["run"]["shards"]] == [s["run"]["id"] for s in shards]
    assert report.verify(out / "conformance-report.json", digest=catalog.suite_digest()) == []
    assert report.verify(out / "conformance-report.yaml", digest=catalog.suite_digest()) == []
    assert (out / "junit.xml").is_file()
