"""Scoped faults (``--fault NAME@PATTERN``): on only inside the namespaces whose behaviour label
matches, per task, off outside any namespace; process-wide faults unchanged."""

from __future__ import annotations

import asyncio

import pytest
import yaml
from click.testing import CliRunner

from kthena_ref import faults
from kthena_ref.cli import main
from kthena_ref.runtime import scope


@pytest.mark.parametrize(
    ("specs", "everywhere", "scoped"),
    [
        ([], set(), {}),
        (["no-recovery"], {"no-recovery"}, {}),
        (["no-recovery@core.recovery.*"], set(), {"no-recovery": ("core.recovery.*",)}),
        (
            ["no-recovery@a", " no-recovery @ b ", "no-recovery@a", "no-entry-label"],
            {"no-entry-label"},
            {"no-recovery": ("a", "b")},
        ),
        (["no-entry-label@x", "no-recovery@y"], set(), {"no-entry-label": ("x",), "no-recovery": ("y",)}),
    ],
)
def test_specs_make_a_plan(specs: list[str], everywhere: set[str], scoped: dict[str, tuple[str, ...]]) -> None:
    made = faults.plan(specs)
    assert made.everywhere == everywhere and dict(made.scoped) == scoped
    assert made.names() == everywhere | set(scoped)


@pytest.mark.parametrize(
    ("specs", "says"),
    [
        (["no-such-fault@x"], "unknown fault(s) in the fault list: no-such-fault (known: "),
        (["no-recovery@"], "'no-recovery@' has no namespace pattern after '@' (NAME@PATTERN)"),
        (["no-recovery", "no-recovery@x"], "no-recovery given both process-wide and scoped"),
    ],
)
def test_bad_specs_are_refused_with_a_clear_error(specs: list[str], says: str) -> None:
    with pytest.raises(ValueError) as raised:
        faults.plan(specs)
    assert says in str(raised.value)


@pytest.mark.parametrize(
    ("label", "on"),
    [
        (None, set()),
        ("core.recovery.none-deleted-pod", {"no-recovery"}),
        ("modelbooster.convert.cache-volume", {"booster-cache-entry-only", "no-entry-label"}),
        ("modelbooster.convert.worker-image", {"no-entry-label"}),
        ("dns.scope.roles", set()),
    ],
)
def test_a_namespace_label_turns_on_the_faults_whose_patterns_match(label: str | None, on: set[str]) -> None:
    specs = ["no-recovery@core.recovery.*", "booster-cache-entry-only@modelbooster.convert.cache-*",
             "no-entry-label@modelbooster.*"]  # fmt: skip
    with faults.injected(*specs):
        assert faults.matching(label) == on
        with faults.in_scope(label):
            assert {n for n in faults.FAULTS if faults.active(n)} == on


def test_a_scoped_fault_is_off_outside_any_namespace_and_process_wide_ones_stay_on() -> None:
    with faults.injected("no-recovery@core.*", "wrong-group-size"):
        assert faults.enabled() == {"wrong-group-size"}
        assert dict(faults.scoped()) == {"no-recovery": ("core.*",)}
        assert faults.active("wrong-group-size") and not faults.active("no-recovery")
        with faults.in_scope("dns.x"):
            assert faults.active("wrong-group-size") and not faults.active("no-recovery")
        with faults.in_scope("core.x"):
            assert faults.active("wrong-group-size") and faults.active("no-recovery")
        assert not faults.active("no-recovery"), "leaving the scope switches it off again"
    assert faults.enabled() == frozenset() and not faults.scoped()


def test_each_task_sees_its_own_namespace_scope() -> None:
    seen: dict[str, bool] = {}

    async def work(label: str, other_entered: asyncio.Event, entered: asyncio.Event) -> None:
        with faults.in_scope(label):
            entered.set()
            await other_entered.wait()  # both tasks are inside their scopes now
            seen[label] = faults.active("no-recovery")

    async def both() -> None:
        a, b = asyncio.Event(), asyncio.Event()
        await asyncio.gather(work("core.x", b, a), work("dns.x", a, b))

    with faults.injected("no-recovery@core.*"):
        asyncio.run(both())
    assert seen == {"core.x": True, "dns.x": False}


def test_the_runtime_scope_uses_the_namespace_label_and_is_a_no_op_without_scoped_faults() -> None:
    async def inside(namespace: str | None) -> tuple[frozenset[str], bool]:
        async with scope.namespace(namespace) as on:
            return on, faults.active("no-recovery")

    scope._LABELS.labels.update({"kc-1": "core.recovery.x", "kc-2": None})
    scope._LABELS.api = object()  # type: ignore[assignment]  # never called: both labels are known
    try:
        with faults.injected("no-recovery@core.*"):
            assert asyncio.run(inside("kc-1")) == (frozenset({"no-recovery"}), True)
            assert asyncio.run(inside("kc-2")) == (frozenset(), False)
            assert asyncio.run(inside(None)) == (frozenset(), False)
        with faults.injected("no-recovery"):
            assert asyncio.run(inside("kc-2")) == (frozenset(), True)
    finally:
        scope.use(None)


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--fault", "no-such-fault@x"], "unknown fault(s) in --fault: no-such-fault"),
        (["--fault", "no-recovery@"], "has no namespace pattern after '@'"),
        (["--fault", "no-recovery", "--fault", "no-recovery@x"], "given both process-wide and scoped"),
    ],
)
def test_the_cli_refuses_bad_scoped_faults_in_one_line(args: list[str], says: str) -> None:
    result = CliRunner().invoke(main, ["manifests", "crd", *args])
    assert result.exit_code == 2 and says in result.output and "Traceback" not in result.output


def test_scoped_faults_never_reach_the_schema_and_let_the_controller_read_namespaces() -> None:
    def rendered(*args: str) -> list[dict[str, object]]:
        result = CliRunner().invoke(main, ["manifests", "crd", "rbac", *args])
        assert result.exit_code == 0, result.output
        return [d for d in yaml.safe_load_all(result.output) if d]

    healthy = rendered()
    scoped = rendered("--fault", "no-schema-defaults@core.*")
    assert scoped[0] == healthy[0], "a scoped schema fault is off where the schema is rendered"
    assert rendered("--fault", "no-schema-defaults")[0] != healthy[0]
    role = next(d for d in scoped if d["kind"] == "ClusterRole")
    assert {"apiGroups": [""], "resources": ["namespaces"], "verbs": ["get"]} in role["rules"]  # type: ignore[operator]
    healthy_role = next(d for d in healthy if d["kind"] == "ClusterRole")
    assert all("namespaces" not in r["resources"] for r in healthy_role["rules"])  # type: ignore[attr-defined]
