"""Whether a run's embedded cluster gets real nodes (conformance.run.realnodes): pure decisions."""

from __future__ import annotations

import pytest

from conformance.cluster.errors import HarnessError
from conformance.framework.features import Feature
from conformance.framework.outcomes import Outcome, TestResult
from conformance.run.realnodes import asked_by_env, observed_notes, plan_real_nodes


@pytest.mark.parametrize(
    ("asked", "provider", "problem", "use", "note"),
    [
        pytest.param(None, "local", None, True, "real nodes: yes", id="auto-host-fine"),
        pytest.param(True, "local", None, True, "real nodes: yes", id="asked-host-fine"),
        pytest.param(None, "local", "no root", False, "the host cannot run them (no root); kwok only", id="auto-no"),
        pytest.param(False, "local", None, False, "none (--no-real-nodes)", id="off"),
        pytest.param(None, "kind", None, False, "as the kind cluster declares them", id="kind"),
        pytest.param(False, "existing", None, False, "as the existing cluster declares them", id="existing-off"),
    ],
)
def test_plan(asked: bool | None, provider: str, problem: str | None, use: bool, note: str) -> None:
    plan = plan_real_nodes(asked, provider, problem)
    assert plan.use is use and note in plan.note, plan


@pytest.mark.parametrize(
    ("provider", "problem", "message"),
    [
        pytest.param("local", "runc is missing", "--real-nodes: runc is missing", id="host-cannot"),
        pytest.param("kind", None, "real nodes are the embedded cluster's (provider local)", id="not-local"),
    ],
)
def test_asking_for_real_nodes_that_cannot_be_had_is_an_error(provider: str, problem: str | None, message: str) -> None:
    with pytest.raises(HarnessError) as err:
        plan_real_nodes(True, provider, problem)
    assert message in err.value.message and err.value.hint


@pytest.mark.parametrize(
    ("value", "expected"),
    [(None, None), ("", None), ("auto", None), ("on", True), ("OFF", False), (" off ", False)],
)
def test_the_environment_variable(value: str | None, expected: bool | None) -> None:
    assert asked_by_env(value) is expected


def test_a_bad_environment_value_names_the_variable() -> None:
    with pytest.raises(HarnessError) as err:
        asked_by_env("maybe")
    assert "KTHENA_REAL_NODES='maybe': expected on, off or auto" in err.value.message


def _result(bid: str, observed: str | None) -> TestResult:
    return TestResult(bid, "n", Feature.CORE, Outcome.PASSED, 1.0, observed=observed)


def test_observed_notes_list_real_and_simulated_behaviours() -> None:
    tests = [
        _result("b/real", "real nodes: in running containers on n1"),
        _result("a/sim", "simulated: kwok"),
        _result("c/none", None),
        _result("a/real", "real nodes: in running containers on n2"),
    ]
    assert observed_notes(tests) == [
        "observed in running containers on real nodes: a/real, b/real",
        "simulated (no container ran: kwok's stages played the kubelet): a/sim",
    ]
    assert observed_notes([_result("c/none", None)]) == []
