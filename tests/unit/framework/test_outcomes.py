"""classify / combine for every row of the table (warnings for SHOULD and MAY behaviours included),
profile_verdict for every rule, overall_verdict, and the dict forms of TestResult and ProfileResult."""

from __future__ import annotations

import pytest

from conformance.framework.features import PROFILES, Feature, Profile
from conformance.framework.outcomes import (
    Inconclusive,
    NonConformant,
    Outcome,
    ProfileResult,
    TestResult,
    Verdict,
    classify,
    combine,
    not_supported,
    overall_verdict,
    profile_verdict,
    skipped_by_user,
)
from conformance.framework.support import Support
from conformance.framework.waits import WaitTimeout

P = Outcome.PASSED
NC = Outcome.NON_CONFORMANT
E = Outcome.ERROR
NS = Outcome.NOT_SUPPORTED
SU = Outcome.SKIPPED_BY_USER
W = Outcome.WARNING


@pytest.mark.parametrize(
    ("when", "failed", "skipped", "exc", "reason", "expected"),
    [
        pytest.param("call", False, False, None, "", P, id="call-passed"),
        pytest.param("setup", False, False, None, "", P, id="setup-passed"),
        pytest.param("teardown", False, False, None, "", P, id="teardown-passed"),
        pytest.param("call", True, False, AssertionError("x"), "", NC, id="call-plain-assert"),
        pytest.param("call", True, False, NonConformant("x"), "", NC, id="call-non-conformant"),
        pytest.param("call", True, False, WaitTimeout("x"), "", NC, id="call-wait-timeout"),
        pytest.param("call", True, False, NonConformant, "", NC, id="call-exception-type"),
        pytest.param("call", True, False, Inconclusive("x"), "", E, id="call-inconclusive"),
        pytest.param("call", True, False, Inconclusive, "", E, id="call-inconclusive-type"),
        pytest.param("call", True, False, RuntimeError("x"), "", E, id="call-other-exception"),
        pytest.param("call", True, False, KeyboardInterrupt(), "", E, id="call-keyboard-interrupt"),
        pytest.param("call", True, False, None, "", E, id="call-failed-without-exception"),
        pytest.param("setup", True, False, AssertionError("x"), "", E, id="setup-assert-is-error"),
        pytest.param("setup", True, False, Inconclusive("x"), "", E, id="setup-inconclusive"),
        pytest.param("setup", True, False, RuntimeError("x"), "", E, id="setup-other"),
        pytest.param("teardown", True, False, NonConformant("x"), "", E, id="teardown-non-conformant-is-error"),
        pytest.param("teardown", True, False, RuntimeError("x"), "", E, id="teardown-other"),
        pytest.param("setup", False, True, None, "not-supported: HeadlessService", NS, id="skip-not-supported"),
        pytest.param(
            "setup", False, True, None, "Skipped: not-supported: x", NS, id="skip-not-supported-pytest-prefix"
        ),
        pytest.param("call", False, True, None, not_supported("x"), NS, id="skip-not-supported-in-call"),
        pytest.param("setup", False, True, None, "skipped-by-user: --id", SU, id="skip-by-user"),
        pytest.param("setup", False, True, None, skipped_by_user("x"), SU, id="skip-by-user-helper"),
        pytest.param("setup", False, True, None, "no cluster", E, id="other-skip-is-error"),
        pytest.param("setup", False, True, None, "", E, id="skip-without-reason-is-error"),
        pytest.param("setup", False, True, None, "Not-Supported: x", E, id="prefix-is-case-sensitive"),
        pytest.param("call", True, True, AssertionError("x"), "not-supported: x", NC, id="failure-beats-skip"),
    ],
)
def test_classify(
    when: str, failed: bool, skipped: bool, exc: BaseException | type | None, reason: str, expected: Outcome
) -> None:
    assert classify(when, failed, skipped, exc, reason) is expected
    assert classify(when, failed, skipped, exc, reason, "MUST") is expected


@pytest.mark.parametrize(
    ("level", "when", "failed", "skipped", "exc", "reason", "expected"),
    [
        pytest.param("SHOULD", "call", True, False, AssertionError("x"), "", W, id="should-assert-is-warning"),
        pytest.param("SHOULD", "call", True, False, NonConformant("x"), "", W, id="should-non-conformant-is-warning"),
        pytest.param("SHOULD", "call", True, False, WaitTimeout("x"), "", W, id="should-wait-timeout-is-warning"),
        pytest.param("MAY", "call", True, False, NonConformant, "", W, id="may-is-warning"),
        pytest.param("MUST", "call", True, False, NonConformant("x"), "", NC, id="must-stays-non-conformant"),
        pytest.param("SHOULD", "call", True, False, Inconclusive("x"), "", E, id="should-inconclusive-stays-error"),
        pytest.param("SHOULD", "call", True, False, RuntimeError("x"), "", E, id="should-other-exception-is-error"),
        pytest.param("SHOULD", "setup", True, False, AssertionError("x"), "", E, id="should-setup-assert-is-error"),
        pytest.param("SHOULD", "teardown", True, False, NonConformant("x"), "", E, id="should-teardown-is-error"),
        pytest.param("SHOULD", "call", False, False, None, "", P, id="should-passed"),
        pytest.param("MAY", "setup", False, True, None, not_supported("x"), NS, id="may-not-supported"),
        pytest.param("SHOULD", "setup", False, True, None, "no cluster", E, id="should-other-skip-is-error"),
    ],
)
def test_classify_by_level(
    level: str, when: str, failed: bool, skipped: bool, exc: BaseException | type | None, reason: str, expected: Outcome
) -> None:
    assert classify(when, failed, skipped, exc, reason, level) is expected


@pytest.mark.parametrize(
    ("phases", "expected"),
    [
        pytest.param([P, P, P], P, id="all-passed"),
        pytest.param([P, NC, P], NC, id="call-non-conformant"),
        pytest.param([P, NC, E], NC, id="teardown-error-after-call-failure-keeps-non-conformant"),
        pytest.param([P, P, E], E, id="teardown-error-after-pass"),
        pytest.param([E], E, id="setup-error"),
        pytest.param([NS, P], NS, id="not-supported-skip-then-teardown"),
        pytest.param([SU, P], SU, id="skipped-by-user-then-teardown"),
        pytest.param([NS, E], E, id="teardown-error-after-skip"),
        pytest.param([SU, NS], NS, id="not-supported-beats-skipped-by-user"),
        pytest.param([], E, id="no-phases-is-error"),
        pytest.param([P, W, P], W, id="call-warning"),
        pytest.param([P, W, E], E, id="teardown-error-after-warning-is-error"),
        pytest.param([NS, W], W, id="warning-beats-not-supported"),
        pytest.param([W, NC], NC, id="non-conformant-beats-warning"),
    ],
)
def test_combine(phases: list[Outcome], expected: Outcome) -> None:
    assert combine(phases) is expected


def result(id: str, feature: Feature, outcome: Outcome) -> TestResult:
    return TestResult(id=id, nodeid=f"suites/test_x.py::{id}", feature=feature, outcome=outcome, duration=0.5)


ALL = Support("impl", "1", frozenset(Feature), source="all")
NO_ADMISSION = Support("impl", "1", frozenset(Feature) - {Feature.ADMISSION}, source="flags")
NO_OPTIONAL = Support("impl", "1", frozenset(Feature) - PROFILES["HeadlessServiceDNS"].optional, source="flags")
CORE = PROFILES["Core"]
DNS = PROFILES["HeadlessServiceDNS"]


@pytest.mark.parametrize(
    ("profile", "results", "support", "verdict", "message"),
    [
        pytest.param(
            CORE,
            [result("core/a", Feature.CORE, P), result("core/b", Feature.RECOVERY, P)],
            ALL,
            Verdict.SUCCESS,
            "Core succeeds: all 2 tests that ran passed.",
            id="success",
        ),
        pytest.param(
            CORE,
            [result("core/a", Feature.CORE, P), result("core/b", Feature.CORE, NC)],
            ALL,
            Verdict.FAILURE,
            "Core fails: 1 test (core/b) non-conformant.",
            id="failure-non-conformant",
        ),
        pytest.param(
            CORE,
            [result("core/a", Feature.CORE, P)],
            NO_ADMISSION,
            Verdict.FAILURE,
            "Core fails: required feature Admission not supported by impl.",
            id="failure-required-unsupported",
        ),
        pytest.param(
            CORE,
            [result("core/b", Feature.CORE, NC), result("core/c", Feature.CORE, E)],
            NO_ADMISSION,
            Verdict.FAILURE,
            "Core fails: 1 test (core/b) non-conformant and required feature Admission not supported by impl.",
            id="failure-both-reasons",
        ),
        pytest.param(
            CORE,
            [result("core/a", Feature.CORE, P), result("core/b", Feature.CORE, NC), result("core/c", Feature.CORE, E)],
            ALL,
            Verdict.FAILURE,
            "non-conformant",
            id="failure-beats-error",
        ),
        pytest.param(
            CORE,
            [result("core/a", Feature.CORE, P), result("core/c", Feature.CORE, E)],
            ALL,
            Verdict.PARTIAL,
            "Core is partial: 1 passed but 1 test (core/c) could not decide (error).",
            id="partial-error",
        ),
        pytest.param(
            CORE,
            [result("core/a", Feature.CORE, P), result("core/c", Feature.CORE, SU)],
            ALL,
            Verdict.PARTIAL,
            "Core is partial: 1 passed but 1 test (core/c) skipped by the user.",
            id="partial-skipped-by-user",
        ),
        pytest.param(
            CORE,
            [result("core/c", Feature.CORE, E)],
            ALL,
            Verdict.PARTIAL,
            "could not decide",
            id="partial-even-if-nothing-passed",
        ),
        pytest.param(
            CORE, [], ALL, Verdict.NOT_RUN, "Core was not run: no test passed (none ran).", id="not-run-no-tests"
        ),
        pytest.param(
            CORE,
            [result("dns/a", Feature.HEADLESS_SERVICE, P)],
            ALL,
            Verdict.NOT_RUN,
            "none ran",
            id="other-profiles-tests-ignored",
        ),
        pytest.param(
            DNS,
            [result("dns/x", Feature.DNS_RESOLUTION, NS)],
            NO_OPTIONAL,
            Verdict.NOT_RUN,
            "HeadlessServiceDNS was not run: no test passed (1 not supported).",
            id="not-run-all-not-supported",
        ),
        pytest.param(
            DNS,
            [result("dns/a", Feature.HEADLESS_SERVICE, P), result("dns/x", Feature.DNS_RESOLUTION, NS)],
            NO_OPTIONAL,
            Verdict.SUCCESS,
            "succeeds: all 1 tests that ran passed; optional feature DNSResolution not supported, not tested.",
            id="success-optional-unsupported",
        ),
        pytest.param(
            CORE,
            [result("core/a", Feature.CORE, P), result("core/w", Feature.CORE, W)],
            ALL,
            Verdict.SUCCESS,
            "Core succeeds: 1 passed and 1 test (core/w) warned (SHOULD/MAY not met; warnings do not fail a profile).",
            id="success-with-warning",
        ),
        pytest.param(
            CORE,
            [result("core/w", Feature.CORE, W)],
            ALL,
            Verdict.SUCCESS,
            "Core succeeds: 0 passed and 1 test (core/w) warned",
            id="only-warnings-is-success-not-not-run",
        ),
        pytest.param(
            CORE,
            [result("core/w", Feature.CORE, W), result("core/c", Feature.CORE, E)],
            ALL,
            Verdict.PARTIAL,
            "Core is partial: 0 passed but 1 test (core/c) could not decide (error).",
            id="warning-with-error-is-partial",
        ),
        pytest.param(
            CORE,
            [result("core/w", Feature.CORE, W), result("core/b", Feature.CORE, NC)],
            ALL,
            Verdict.FAILURE,
            "Core fails: 1 test (core/b) non-conformant.",
            id="warning-with-non-conformant-is-failure",
        ),
    ],
)
def test_profile_verdict(
    profile: Profile, results: list[TestResult], support: Support, verdict: Verdict, message: str
) -> None:
    judged = profile_verdict(profile, results, support)
    assert judged.verdict is verdict
    assert message in judged.message
    assert judged.message.endswith(".")
    assert set(judged.counts) == {o.value for o in Outcome}
    assert sum(judged.counts.values()) == len([r for r in results if r.feature in profile.features])


def test_profile_verdict_lists() -> None:
    results = [
        result("dns/b", Feature.HEADLESS_SERVICE, NC),
        result("dns/a", Feature.HEADLESS_SERVICE, NC),
        result("dns/e", Feature.MIGRATION_REQUIRED, E),
        result("dns/n", Feature.DNS_RESOLUTION, NS),
        result("dns/u", Feature.DELETION_IDENTITY, SU),
        result("dns/p", Feature.HEADLESS_SERVICE, P),
        result("dns/w", Feature.HEADLESS_SERVICE, W),
    ]
    support = Support("impl", "1", frozenset(Feature) - {Feature.HEADLESS_SERVICE, Feature.DNS_RESOLUTION})
    judged = profile_verdict(DNS, results, support)
    assert judged.non_conformant == ["dns/a", "dns/b"]
    assert judged.warnings == ["dns/w"]
    assert judged.errors == ["dns/e"]
    assert judged.not_supported == ["dns/n"]
    assert judged.skipped_by_user == ["dns/u"]
    assert judged.unsupported_required == ["HeadlessService"]
    assert judged.unsupported_optional == ["DNSResolution"]
    assert judged.counts == {
        "passed": 1, "non-conformant": 2, "warning": 1, "error": 1, "not-supported": 1, "skipped-by-user": 1
    }  # fmt: skip
    assert ProfileResult.from_dict(judged.as_dict()) == judged


def test_many_ids_are_abbreviated_in_the_message() -> None:
    results = [result(f"core/t{i}", Feature.CORE, NC) for i in range(8)]
    message = profile_verdict(CORE, results, ALL).message
    assert "8 tests (core/t0, core/t1, core/t2, core/t3, core/t4, ... (3 more)) non-conformant" in message


def pr(verdict: Verdict) -> ProfileResult:
    return ProfileResult("Core", verdict, {}, [], [], [], [], "")


@pytest.mark.parametrize(
    ("verdicts", "preflight_ok", "interrupted", "expected"),
    [
        pytest.param([], True, False, Verdict.NOT_RUN, id="no-profiles"),
        pytest.param([Verdict.SUCCESS], True, False, Verdict.SUCCESS, id="one-success"),
        pytest.param([Verdict.SUCCESS, Verdict.PARTIAL], True, False, Verdict.PARTIAL, id="partial-beats-success"),
        pytest.param([Verdict.SUCCESS, Verdict.NOT_RUN], True, False, Verdict.NOT_RUN, id="not-run-beats-success"),
        pytest.param([Verdict.NOT_RUN, Verdict.PARTIAL], True, False, Verdict.PARTIAL, id="partial-beats-not-run"),
        pytest.param(
            [Verdict.PARTIAL, Verdict.FAILURE, Verdict.SUCCESS], True, False, Verdict.FAILURE, id="failure-beats-all"
        ),
        pytest.param([Verdict.SUCCESS], False, False, Verdict.ERROR, id="preflight-failed"),
        pytest.param([Verdict.SUCCESS], True, True, Verdict.ERROR, id="interrupted"),
        pytest.param([], False, True, Verdict.ERROR, id="no-profiles-preflight-failed"),
        pytest.param([Verdict.FAILURE], True, True, Verdict.ERROR, id="interrupted-beats-failure"),
    ],
)
def test_overall_verdict(verdicts: list[Verdict], preflight_ok: bool, interrupted: bool, expected: Verdict) -> None:
    assert overall_verdict([pr(v) for v in verdicts], preflight_ok, interrupted) is expected


def test_test_result_dict_round_trip() -> None:
    r = TestResult(
        "dns/a", "n::a", Feature.DNS_RESOLUTION, NC, 1.25, "m", "The x MUST y.", "f.txt#S", "evidence/dns-a", "MUST"
    )
    data = r.as_dict()
    assert data == {
        "id": "dns/a",
        "nodeid": "n::a",
        "feature": "DNSResolution",
        "profile": "HeadlessServiceDNS",
        "level": "MUST",
        "outcome": "non-conformant",
        "durationSeconds": 1.25,
        "message": "m",
        "statement": "The x MUST y.",
        "spec": "f.txt#S",
        "evidence": "evidence/dns-a",
        "observed": None,
    }
    assert TestResult.from_dict(data) == r
    older = {k: v for k, v in data.items() if k not in ("level", "observed")}  # reports from before levels
    assert TestResult.from_dict(older).level is None
    real = TestResult("dns/a", "n::a", Feature.DNS_RESOLUTION, NC, 1.0, observed="real nodes: in running containers")
    assert TestResult.from_dict(real.as_dict()) == real


@pytest.mark.parametrize(
    ("change", "error"),
    [
        pytest.param({"feature": "Nope"}, ValueError, id="unknown-feature"),
        pytest.param({"outcome": "skipped"}, ValueError, id="unknown-outcome"),
    ],
)
def test_test_result_from_dict_rejects(change: dict[str, str], error: type[Exception]) -> None:
    data = {**result("core/a", Feature.CORE, P).as_dict(), **change}
    with pytest.raises(error):
        TestResult.from_dict(data)


def test_a_failed_precondition_is_inconclusive_not_a_verdict() -> None:
    """Issue 31: a SHOULD test whose setup did not hold was a warning about that SHOULD."""
    from conformance.framework.outcomes import Inconclusive, precondition

    with (
        pytest.raises(Inconclusive, match=r"precondition not met \(Pods running\): saw 3"),
        precondition("Pods running"),
    ):
        raise AssertionError("saw 3")
    with pytest.raises(ValueError), precondition("Pods running"):  # anything else is left alone (an error already)
        raise ValueError("boom")
    with precondition("nothing fails"):
        pass
