"""The real-node fleet's pure edges: where nodes keep their files, and a restore that has nothing
(or nothing readable) to restore from says so instead of guessing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conformance.cluster.realnode.fleet import STATE_FILE, nodes_root, restore


def test_nodes_root_is_short_and_one_per_run_directory() -> None:
    a = nodes_root(Path("/root/.cache/kthena-conformance/clusters/" + "x" * 40))
    b = nodes_root(Path("/root/.cache/kthena-conformance/clusters/other"))
    assert a != b and a == nodes_root(Path("/root/.cache/kthena-conformance/clusters/" + "x" * 40))
    socket = a / "real-nodes-3" / "containerd" / "containerd.sock.ttrpc"
    assert len(str(socket)) < 108, "a unix socket path has at most 107 bytes"


def test_a_cluster_that_never_ran_real_nodes_has_nothing_to_restore(tmp_path: Path) -> None:
    assert restore(tmp_path) == []


@pytest.mark.parametrize(
    ("content", "said"),
    [
        pytest.param("{not json", "unreadable", id="not-json"),
        pytest.param(json.dumps({"version": 1, "nodes": ["real-0"]}), "damaged", id="no-snapshot"),
        pytest.param(
            json.dumps({"version": 1, "snapshot": {"version": 99}, "binDir": "/b", "nodes": [], "root": "/r"}),
            "damaged",
            id="snapshot-of-another-version",
        ),
    ],
)
def test_an_unusable_snapshot_is_reported_not_acted_on(tmp_path: Path, content: str, said: str) -> None:
    (tmp_path / STATE_FILE).write_text(content)
    problems = restore(tmp_path)
    assert len(problems) == 1 and said in problems[0] and str(tmp_path / STATE_FILE) in problems[0], problems
    assert "the host was not restored" in problems[0]
