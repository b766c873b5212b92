"""The self-validation round planner (tests/integration/selfval_rounds.py): colouring, sentinels,
split-and-rerun, crash detection; and the rounds the real tables make."""

from __future__ import annotations

import pytest

from conformance.framework.catalog import collect
from tests.integration.selfval_rounds import Round, alone, crashed, expand, plan_rounds, reruns

IDS = ["a/1", "a/2", "a/3", "b/1", "b/2", "c/1", "s/1", "s/2", "s/3"]
SENTINELS = [["s/1", "s/3"], ["a/1", "s/2"]]


@pytest.mark.parametrize(
    ("caught_by", "options", "rounds"),
    [
        # disjoint targets: one round, every fault in it, two sentinels
        (
            {"f": ["a/1"], "g": ["b/*"]},
            {},
            [Round({"f": ("a/1",), "g": ("b/1", "b/2")}, ("s/1", "s/2"))],
        ),
        # a sentinel is the first untargeted one of its group; a fault alone in its round runs alone
        (
            {"f": ["c/1"], "g": ["s/1"], "h": ["a/1"]},
            {},
            [Round({"f": ("c/1",), "g": ("s/1",), "h": ("a/1",)}, ("s/3", "s/2"))],
        ),
        (
            {"f": ["c/1"]},
            {},
            [alone("f", ("c/1",))],
        ),
        # a shared target: two rounds (the fault with more targets first); a/1 is a sentinel only where untargeted
        (
            {"f": ["a/1"], "g": ["a/1", "a/2"], "h": ["c/1"]},
            {},
            [Round({"g": ("a/1", "a/2"), "h": ("c/1",)}, ("s/1", "s/2")), alone("f", ("a/1",))],
        ),
        # the cap on targets per round splits disjoint faults too
        (
            {"f": ["a/1", "a/2"], "g": ["b/1", "b/2"], "h": ["c/1"]},
            {"max_targets": 3},
            [Round({"f": ("a/1", "a/2"), "h": ("c/1",)}, ("s/1", "s/2")), alone("g", ("b/1", "b/2"))],
        ),
        # unscopable faults and faults matching nothing run alone, after the rounds
        (
            {"f": ["a/1"], "g": ["c/1"], "schema": ["b/1"], "nothing": ["z/*"]},
            {"unscopable": ["schema"], "sentinels": [["s/1"]]},
            [Round({"f": ("a/1",), "g": ("c/1",)}, ("s/1",)), alone("nothing", ()), alone("schema", ("b/1",))],
        ),
        # two ids with one namespace label count as one behaviour
        (
            {"f": ["a/1"], "g": ["a/2"]},
            {"key": lambda i: i[0], "sentinels": []},
            [alone("f", ("a/1",)), alone("g", ("a/2",))],
        ),
    ],
)
def test_rounds(caught_by: dict[str, list[str]], options: dict[str, object], rounds: list[Round]) -> None:
    assert plan_rounds(caught_by, IDS, **{"sentinels": SENTINELS, **options}) == rounds  # type: ignore[arg-type]


def test_a_round_lists_its_behaviours_and_the_reference_flags() -> None:
    made = Round({"f": ("a/1", "a/2"), "g": ("b/1",)}, ("s/1",))
    assert made.ids() == ["a/1", "a/2", "b/1", "s/1"]
    assert made.specs(lambda i: i.replace("/", ".")) == ["f@a.1", "f@a.2", "g@b.1"]
    assert alone("f", ("a/1",)).specs(str) == ["f"]
    assert expand(["a/*", "c/1"], IDS) == ("a/1", "a/2", "a/3", "c/1")


SCOPED = Round({"f": ("a/1",), "g": ("b/1",), "h": ("c/1",)}, ("s/1",), name="r")


@pytest.mark.parametrize(
    ("done", "proven", "trusted", "again"),
    [
        (SCOPED, {"f": True, "g": True, "h": True}, True, []),
        (SCOPED, {"f": True, "g": False, "h": True}, True, [alone("g", ("b/1",))]),
        (
            SCOPED,
            {"f": False, "g": False, "h": False},
            True,
            [alone("f", ("a/1",)), alone("g", ("b/1",)), alone("h", ("c/1",))],
        ),
        # a sentinel failed: every verdict of the round is set aside, its halves run again
        (
            SCOPED,
            {"f": True, "g": True, "h": True},
            False,
            [Round({"f": ("a/1",)}, ("s/1",)), Round({"g": ("b/1",), "h": ("c/1",)}, ("s/1",))],
        ),
        (Round({"f": ("a/1",)}, ("s/1",)), {"f": True}, False, [alone("f", ("a/1",))]),
        # alone, a verdict is final
        (alone("f", ("a/1",)), {"f": False}, True, []),
        (alone("f", ("a/1",)), {"f": True}, False, []),
    ],
)
def test_reruns(done: Round, proven: dict[str, bool], trusted: bool, again: list[Round]) -> None:
    assert reruns(done, proven, trusted) == again


@pytest.mark.parametrize(
    ("log", "died"),
    [
        ("", False),
        ("2026 INFO x: caches synced\n", False),
        ("2026 ERROR kthena_ref.runtime.informer: handler failed\nTraceback (most recent call last):\n  x\n", False),
        ("2026 INFO x: caches synced\nTraceback (most recent call last):\n  File x\nKeyError: 'a'\n", True),
        ("Traceback (most recent call last):\n", True),
    ],
)
def test_a_crash_is_a_traceback_nothing_logged(log: str, died: bool) -> None:
    assert crashed(log) is died


def test_the_tables_make_rounds_where_no_behaviour_meets_two_faults() -> None:
    from tests.integration.selfval_runs import label
    from tests.integration.test_self_validation import CAUGHT_BY, ROUNDS, SENTINELS, UNSCOPABLE

    ids = [b.id for b in collect()]
    assert {i for group in SENTINELS for i in group} <= set(ids), "a sentinel is not a behaviour of the catalog"
    planned = [f for r in ROUNDS for f in r.faults]
    assert sorted(planned) == sorted(CAUGHT_BY), "every fault in exactly one round"
    for made in ROUNDS:
        labels = [label(i) for targets in made.faults.values() for i in targets]
        assert len(labels) == len(set(labels)), f"{made.name}: a behaviour is the target of two faults"
        assert not {label(i) for i in made.sentinels} & set(labels), f"{made.name}: a sentinel is a target"
        assert made.scoped or len(made.faults) == 1
    assert {f for r in ROUNDS if not r.scoped for f in r.faults} >= UNSCOPABLE & set(CAUGHT_BY)
    assert sum(r.scoped for r in ROUNDS) < len(CAUGHT_BY) / 5, "rounds must grow much slower than faults"


def test_behaviours_sharing_a_namespace_share_its_label_and_every_shared_namespace_is_known() -> None:
    import re
    from pathlib import Path

    from tests.integration.selfval_runs import SHARED_NAMESPACES, label

    assert label("inplace/progress-deadline/role-recreate") == label("inplace/progress-deadline/recovery-none")
    assert label("inplace/progress-deadline/role-recreate") == "inplace.progress-deadline"
    assert label("core/status/settled") == "core.status.settled"
    root = Path(__file__).resolve().parents[2] / "conformance"
    calls = {
        (str(path.relative_to(root)), m.group(1).strip())
        for path in root.rglob("*.py")
        for m in re.finditer(r"namespaces\.create\(\s*\w+,\s*[\w.]+,\s*([^,]+),", path.read_text())
    }
    shared = {(f, n) for f, n in calls if n != "bid"}
    assert ("framework/plugin.py", "bid") in calls, calls
    assert {n.strip('"') for _, n in shared} == set(SHARED_NAMESPACES.values()), (
        f"a suite module creates a namespace shared by several behaviours: add it to SHARED_NAMESPACES; {shared}"
    )
