"""Outcomes and verdicts: how a test's result and a profile's standing are decided.

Pure rules, kept apart from pytest so they can be read, tested and re-run by ``verify`` on a
report. The guiding principle: **a skip is never a pass**, and an inconclusive test is never
counted as a failure of the implementation. A behaviour's level (its statement's first RFC 2119
keyword, :attr:`.catalog.Behaviour.level`) decides what its failure means: a MUST that does not
hold is non-conformance; a SHOULD or MAY that does not hold is a ``warning``, reported and
counted, but never failing a profile.

One test (:func:`classify` per pytest phase, :func:`combine` over the phases):

==========================================================  ==================
what happened                                               outcome
==========================================================  ==================
failed in ``call`` with an AssertionError (``assert``,      ``non-conformant``
:class:`NonConformant`, ``WaitTimeout``), level MUST
the same, level SHOULD or MAY                               ``warning``
failed with :class:`Inconclusive`, any other exception,     ``error``
or in ``setup`` / ``teardown``
skipped, reason ``not-supported: ...``                      ``not-supported``
skipped, reason ``skipped-by-user: ...``                    ``skipped-by-user``
skipped for any other reason                                ``error``
none of the above                                           ``passed``
==========================================================  ==================

Over the phases the worst wins: non-conformant > error > warning > not-supported >
skipped-by-user > passed (so a teardown error after a non-conformant call stays non-conformant,
and one after a warning makes the test an error: the profile is partial, the message keeps both).

One profile (:func:`profile_verdict`), first matching row:

==========================================================  ===========
the profile's tests and the implementation's support        verdict
==========================================================  ===========
a test non-conformant, or a required feature not supported  ``failure``
a test errored or was skipped by the user                   ``partial``
no test passed or warned                                    ``not-run``
otherwise (unsupported *optional* features are listed only, ``success``
warnings are counted and listed)
==========================================================  ===========

The run (:func:`overall_verdict`): ``error`` if the preflight failed or the run was interrupted
(the report still carries what did run); else the worst profile verdict
(failure > partial > not-run > success); ``not-run`` when there are no profiles.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from .features import Feature, Profile, feature_order, profile_of
from .support import Support

NOT_SUPPORTED_PREFIX = "not-supported:"
SKIPPED_BY_USER_PREFIX = "skipped-by-user:"


class Outcome(StrEnum):
    PASSED = "passed"
    NON_CONFORMANT = "non-conformant"
    WARNING = "warning"  # a SHOULD or MAY behaviour that does not hold: reported, never failing
    ERROR = "error"
    NOT_SUPPORTED = "not-supported"
    SKIPPED_BY_USER = "skipped-by-user"


class Verdict(StrEnum):
    SUCCESS = "success"
    PARTIAL = "partial"
    FAILURE = "failure"
    NOT_RUN = "not-run"
    ERROR = "error"


class NonConformant(AssertionError):
    """The implementation's behaviour contradicts the spec (the test decided: it is wrong)."""


class Inconclusive(Exception):
    """The test could not decide: cluster trouble, a capability missing at run time, ..."""


@contextmanager
def precondition(what: str) -> Iterator[None]:
    """A test's setup, not the behaviour it judges: an assertion or wait failing inside is
    :class:`Inconclusive` ("precondition not met"), never a verdict on the behaviour. A SHOULD test
    whose ModelServing never became ready says nothing about that SHOULD (a warning about it would be
    wrong); a MUST the setup needs is judged by its own behaviour."""
    try:
        yield
    except AssertionError as exc:
        raise Inconclusive(f"precondition not met ({what}): {exc}") from None


# Worst first.
_OUTCOME_RANK = [
    Outcome.NON_CONFORMANT, Outcome.ERROR, Outcome.WARNING, Outcome.NOT_SUPPORTED, Outcome.SKIPPED_BY_USER,
    Outcome.PASSED,
]  # fmt: skip
# The levels whose failure is a warning (see the module docstring).
WARNING_LEVELS = frozenset({"SHOULD", "MAY"})
# Outcomes of tests that ran to a decision or could not decide (not skipped).
RAN = frozenset({Outcome.PASSED, Outcome.NON_CONFORMANT, Outcome.WARNING, Outcome.ERROR})
_VERDICT_RANK = [Verdict.FAILURE, Verdict.ERROR, Verdict.PARTIAL, Verdict.NOT_RUN, Verdict.SUCCESS]


def not_supported(reason: str) -> str:
    """The skip reason that classifies as ``not-supported``."""
    return f"{NOT_SUPPORTED_PREFIX} {reason}"


def skipped_by_user(reason: str) -> str:
    """The skip reason that classifies as ``skipped-by-user``."""
    return f"{SKIPPED_BY_USER_PREFIX} {reason}"


def classify(
    when: str,
    failed: bool,
    skipped: bool,
    exc: BaseException | type | None,
    skip_reason: str = "",
    level: str = "MUST",
) -> Outcome:
    """The outcome of one pytest phase (``when`` is ``setup``, ``call`` or ``teardown``).

    ``exc`` is the exception (or its type) the phase raised, if any. ``skip_reason`` may carry
    pytest's ``"Skipped: "`` prefix. ``level`` is the behaviour's (``MUST``, ``SHOULD``, ``MAY``):
    what would be non-conformant for a MUST is a ``warning`` for the others. See the module
    docstring for the table.
    """
    if failed:
        kind = exc if isinstance(exc, type) else type(exc) if exc is not None else None
        if when != "call" or kind is None or issubclass(kind, Inconclusive):
            return Outcome.ERROR
        if not issubclass(kind, AssertionError):
            return Outcome.ERROR
        return Outcome.WARNING if level in WARNING_LEVELS else Outcome.NON_CONFORMANT
    if skipped:
        reason = skip_reason.strip().removeprefix("Skipped:").strip()
        if reason.startswith(NOT_SUPPORTED_PREFIX):
            return Outcome.NOT_SUPPORTED
        if reason.startswith(SKIPPED_BY_USER_PREFIX):
            return Outcome.SKIPPED_BY_USER
        return Outcome.ERROR
    return Outcome.PASSED


def combine(outcomes: list[Outcome]) -> Outcome:
    """One test's outcome from its phases: the worst wins. No phases at all is an ``error``."""
    if not outcomes:
        return Outcome.ERROR
    return min(outcomes, key=_OUTCOME_RANK.index)


@dataclass
class TestResult:
    """One test's outcome as the report carries it."""

    __test__ = False  # not a pytest test class

    id: str
    nodeid: str
    feature: Feature
    outcome: Outcome
    duration: float
    message: str = ""
    statement: str = ""
    spec: str = ""
    evidence: str | None = None
    level: str | None = None  # the behaviour's MUST / SHOULD / MAY (None: not recorded, older reports)
    # Where a Pod-level condition was observed: "real nodes: ..." (in running containers) or
    # "simulated: ..." (kwok); None when the behaviour does not depend on running containers.
    observed: str | None = None

    @property
    def profile(self) -> str:
        return profile_of(self.feature).name

    def as_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "nodeid": self.nodeid,
            "feature": self.feature.value,
            "profile": self.profile,
            "level": self.level,
            "outcome": self.outcome.value,
            "durationSeconds": self.duration,
            "message": self.message,
            "statement": self.statement,
            "spec": self.spec,
            "evidence": self.evidence,
            "observed": self.observed,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TestResult:
        """The inverse of :meth:`as_dict` (``profile`` is derived from ``feature``); ValueError or
        KeyError on bad input."""
        return cls(
            id=str(data["id"]),
            nodeid=str(data["nodeid"]),
            feature=Feature(data["feature"]),
            outcome=Outcome(data["outcome"]),
            duration=float(data["durationSeconds"]),
            message=str(data.get("message", "")),
            statement=str(data.get("statement", "")),
            spec=str(data.get("spec", "")),
            evidence=data.get("evidence"),
            level=str(data["level"]) if data.get("level") is not None else None,
            observed=str(data["observed"]) if data.get("observed") else None,
        )


@dataclass
class ProfileResult:
    """One profile's verdict, its counts and the tests and features behind it."""

    profile: str
    verdict: Verdict
    counts: dict[str, int]
    non_conformant: list[str]
    errors: list[str]
    not_supported: list[str]
    unsupported_required: list[str]
    message: str
    skipped_by_user: list[str] = field(default_factory=list)
    unsupported_optional: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "profile": self.profile,
            "verdict": self.verdict.value,
            "counts": dict(self.counts),
            "nonConformant": list(self.non_conformant),
            "warnings": list(self.warnings),
            "errors": list(self.errors),
            "notSupported": list(self.not_supported),
            "skippedByUser": list(self.skipped_by_user),
            "unsupportedRequired": list(self.unsupported_required),
            "unsupportedOptional": list(self.unsupported_optional),
            "message": self.message,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ProfileResult:
        return cls(
            profile=str(data["profile"]),
            verdict=Verdict(data["verdict"]),
            counts={str(k): int(v) for k, v in data["counts"].items()},
            non_conformant=list(data.get("nonConformant", [])),
            errors=list(data.get("errors", [])),
            not_supported=list(data.get("notSupported", [])),
            unsupported_required=list(data.get("unsupportedRequired", [])),
            message=str(data.get("message", "")),
            skipped_by_user=list(data.get("skippedByUser", [])),
            unsupported_optional=list(data.get("unsupportedOptional", [])),
            warnings=list(data.get("warnings", [])),
        )


def profile_verdict(profile: Profile, results: list[TestResult], support: Support) -> ProfileResult:
    """Judge ``profile`` from the results of its tests (others in ``results`` are ignored).

    First matching rule:

    - ``failure``: a test is non-conformant, or a required feature of the profile is not
      supported by the implementation;
    - ``partial``: a test errored or was skipped by the user;
    - ``not-run``: no test passed or warned (nothing ran, or everything was not-supported);
    - ``success``: otherwise. Optional features the implementation does not support do not lower
      the verdict; they are listed in ``unsupported_optional``. Warnings (SHOULD or MAY
      behaviours that did not hold) never lower it either: they are counted and listed in
      ``warnings``.

    The per-profile verdict is never ``error``: errors make it ``partial``.
    """
    mine = [r for r in results if r.feature in profile.features]
    by: dict[Outcome, list[str]] = {o: sorted(r.id for r in mine if r.outcome is o) for o in Outcome}
    counts = {o.value: len(by[o]) for o in Outcome}
    required = sorted((f.value for f in profile.required if not support.supports(f)), key=_order)
    optional = sorted((f.value for f in profile.optional if not support.supports(f)), key=_order)

    if by[Outcome.NON_CONFORMANT] or required:
        verdict = Verdict.FAILURE
        reasons = []
        if by[Outcome.NON_CONFORMANT]:
            reasons.append(f"{_tests(by[Outcome.NON_CONFORMANT])} non-conformant")
        if required:
            reasons.append(f"required {_plural(required, 'feature')} not supported by {support.name}")
        message = f"{profile.name} fails: " + " and ".join(reasons) + "."
    elif by[Outcome.ERROR] or by[Outcome.SKIPPED_BY_USER]:
        verdict = Verdict.PARTIAL
        reasons = []
        if by[Outcome.ERROR]:
            reasons.append(f"{_tests(by[Outcome.ERROR])} could not decide (error)")
        if by[Outcome.SKIPPED_BY_USER]:
            reasons.append(f"{_tests(by[Outcome.SKIPPED_BY_USER])} skipped by the user")
        message = f"{profile.name} is partial: {counts['passed']} passed but " + " and ".join(reasons) + "."
    elif not by[Outcome.PASSED] and not by[Outcome.WARNING]:
        verdict = Verdict.NOT_RUN
        detail = f"{len(by[Outcome.NOT_SUPPORTED])} not supported" if mine else "none ran"
        message = f"{profile.name} was not run: no test passed ({detail})."
    else:
        verdict = Verdict.SUCCESS
        extra = f"; optional {_plural(optional, 'feature')} not supported, not tested" if optional else ""
        if by[Outcome.WARNING]:
            message = (
                f"{profile.name} succeeds: {counts['passed']} passed and {_tests(by[Outcome.WARNING])} "
                f"warned (SHOULD/MAY not met; warnings do not fail a profile){extra}."
            )
        else:
            message = f"{profile.name} succeeds: all {counts['passed']} tests that ran passed{extra}."
    return ProfileResult(
        profile=profile.name,
        verdict=verdict,
        counts=counts,
        non_conformant=by[Outcome.NON_CONFORMANT],
        errors=by[Outcome.ERROR],
        not_supported=by[Outcome.NOT_SUPPORTED],
        unsupported_required=required,
        message=message,
        skipped_by_user=by[Outcome.SKIPPED_BY_USER],
        unsupported_optional=optional,
        warnings=by[Outcome.WARNING],
    )


def overall_verdict(profiles: list[ProfileResult], preflight_ok: bool, interrupted: bool) -> Verdict:
    """The run's verdict: ``error`` if the preflight failed or the run was interrupted, else the
    worst profile verdict (failure > partial > not-run > success), ``not-run`` with no profiles."""
    if not preflight_ok or interrupted:
        return Verdict.ERROR
    if not profiles:
        return Verdict.NOT_RUN
    return min((p.verdict for p in profiles), key=_VERDICT_RANK.index)


def _order(name: str) -> int:
    return feature_order(Feature(name))


def _tests(ids: list[str]) -> str:
    shown = ", ".join(ids[:5]) + (f", ... ({len(ids) - 5} more)" if len(ids) > 5 else "")
    return f"{len(ids)} {'test' if len(ids) == 1 else 'tests'} ({shown})"


def _plural(names: list[str], noun: str) -> str:
    return f"{noun}{'' if len(names) == 1 else 's'} {', '.join(names)}"
