"""Named waits: defaults, scaling, overrides, option parsing and its errors, the report and docs."""

from __future__ import annotations

import pytest

from conformance.framework.timeouts import WAITS, TimeoutConfigError, Timeouts, documentation

EXPECTED_DEFAULTS = {
    "admission": 15,
    "pods-created": 60,
    "pods-running": 120,
    "servinggroups-ready": 180,
    "status-updated": 60,
    "scale": 180,
    "recovery": 180,
    "services": 60,
    "endpoints": 60,
    "events": 60,
    "deletion": 120,
    "steady-state": 8,
    "namespace-cleanup": 120,
    "controller-ready": 60,
    "rollout": 240,
    "progress-deadline": 180,
    "podgroups": 60,
    "eviction": 60,
    "drain": 240,
    "autoscale": 120,
    "autoscale-down": 420,
    "autoscale-steady": 30,
}


def test_documented_defaults() -> None:
    for name, seconds in EXPECTED_DEFAULTS.items():
        assert WAITS[name].seconds == seconds
        assert WAITS[name].name == name
        assert WAITS[name].description.endswith(".")


@pytest.mark.parametrize(
    ("scale", "overrides", "name", "expected"),
    [
        pytest.param("1", [], "admission", 15, id="default"),
        pytest.param(2, [], "admission", 30, id="scaled"),
        pytest.param("0.5", [], "pods-running", 60, id="scaled-down"),
        pytest.param("1", ["recovery=300"], "recovery", 300, id="override"),
        pytest.param("3", ["recovery=300"], "recovery", 900, id="override-is-scaled"),
        pytest.param("1", ["recovery=300"], "scale", 180, id="override-touches-one-wait"),
        pytest.param("1", ["recovery=300s"], "recovery", 300, id="seconds-suffix"),
        pytest.param("1", ["recovery=1.5"], "recovery", 1.5, id="fractional"),
        pytest.param("1", ["recovery=10,scale=20"], "scale", 20, id="comma-separated"),
        pytest.param("1", [" recovery = 10 "], "recovery", 10, id="spaces"),
        pytest.param("100", [], "steady-state", 800, id="max-scale"),
    ],
)
def test_effective_seconds(scale: float | str, overrides: list[str], name: str, expected: float) -> None:
    assert Timeouts.from_options(scale, overrides).seconds(name) == pytest.approx(expected)


@pytest.mark.parametrize(
    ("scale", "overrides", "expected"),
    [
        pytest.param("fast", [], "--timeout-scale: not a number: 'fast'", id="scale-not-a-number"),
        pytest.param("0", [], "--timeout-scale: must be > 0 and <= 100, got '0'", id="scale-zero"),
        pytest.param(-1, [], "--timeout-scale: must be > 0 and <= 100, got -1", id="scale-negative"),
        pytest.param("101", [], "--timeout-scale: must be > 0 and <= 100", id="scale-too-large"),
        pytest.param("nan", [], "--timeout-scale: not a finite number: 'nan'", id="scale-nan"),
        pytest.param("inf", [], "--timeout-scale: not a finite number: 'inf'", id="scale-inf"),
        pytest.param("1", ["recovery"], "--timeout: expected name=seconds, got 'recovery'", id="no-equals"),
        pytest.param("1", ["=5"], "--timeout: expected name=seconds, got '=5'", id="no-name"),
        pytest.param(
            "1", ["recover=5"], "--timeout: unknown wait 'recover' (known: admission, pods-created,", id="unknown-wait"
        ),
        pytest.param("1", ["recovery=soon"], "--timeout: not a number: 'recovery=soon'", id="seconds-not-a-number"),
        pytest.param("1", ["recovery=0"], "--timeout: seconds must be > 0, got 'recovery=0'", id="seconds-zero"),
        pytest.param("1", ["recovery=-3"], "--timeout: seconds must be > 0, got 'recovery=-3'", id="seconds-negative"),
        pytest.param("1", ["recovery=inf"], "--timeout: not a finite number: 'recovery=inf'", id="seconds-inf"),
        pytest.param("1", ["recovery=1", "recovery=2"], "--timeout: 'recovery' given more than once", id="given-twice"),
    ],
)
def test_option_errors_name_the_option_and_value(scale: float | str, overrides: list[str], expected: str) -> None:
    with pytest.raises(TimeoutConfigError) as info:
        Timeouts.from_options(scale, overrides)
    assert str(info.value).startswith(expected)
    assert isinstance(info.value, ValueError)


def test_unknown_wait_lists_known_names() -> None:
    with pytest.raises(TimeoutConfigError, match=r"unknown wait 'pods' \(known: admission, .*autoscale-steady\)"):
        Timeouts().seconds("pods")


@pytest.mark.parametrize(
    ("kwargs", "expected"),
    [
        pytest.param({"scale": 0.0}, "timeout scale must be > 0", id="scale-zero"),
        pytest.param({"overrides": {"nope": 1.0}}, "unknown wait 'nope'", id="unknown-override"),
        pytest.param({"overrides": {"scale": 0.0}}, "timeout 'scale' must be > 0 seconds", id="zero-override"),
    ],
)
def test_direct_construction_is_validated(kwargs: dict[str, object], expected: str) -> None:
    with pytest.raises(TimeoutConfigError, match=expected):
        Timeouts(**kwargs)  # type: ignore[arg-type]


def test_as_report() -> None:
    report = Timeouts.from_options("2", ["events=10"]).as_report()
    assert report["scale"] == 2
    assert list(report["waits"]) == list(WAITS)
    assert report["waits"]["events"] == {"seconds": 20, "default": 60, "description": WAITS["events"].description}
    assert report["waits"]["admission"]["seconds"] == 30


def test_timeouts_are_hashable_values() -> None:
    assert Timeouts.from_options(1, ["events=10"]) == Timeouts(1.0, {"events": 10.0})
    hash(Timeouts())


def test_documentation_is_a_table_of_every_wait() -> None:
    doc = documentation()
    rows = [line for line in doc.splitlines() if line.startswith("| `")]
    assert [row.split("`")[1] for row in rows] == list(WAITS)
    assert "| `steady-state` | 8 |" in doc
    assert "--timeout-scale" in doc and "--timeout name=seconds" in doc
