"""The spec map: the spec's normative statements, and which behaviours assert each (or why none does).

``conformance/specmap.yaml`` lists every normative statement of the spec documents: where it is
(document and section), what it says, its level (MUST, SHOULD or MAY), its topic and the profile
whose coverage it counts in, and either the catalog behaviours whose tests fully assert it or the
reason it is not asserted::

    apiVersion: conformance.kthena.io/v1alpha1
    kind: SpecMap
    documents:
    - {file: api-reference-workload-v1alpha1.txt, scope: in}
    - {file: other.txt, scope: excluded, reason: "why it is not ModelServing's spec"}
    statements:
    - id: api/modelservingspec/replicas-default
      document: api-reference-workload-v1alpha1.txt
      section: ModelServingSpec
      text: "replicas: Number of ServingGroups ... Default to 1."
      level: MUST                     # MUST | SHOULD | MAY
      topic: ModelServing             # ModelServing | AutoscalingPolicy | ModelBooster | LeaderWorkerSet
      profile: Core                   # a profile of the suite (required for topic ModelServing)
      behaviours: [core/defaults/replicas]
      partial: []                     # ids that check only part of it (they do not count)
      notAsserted: {reason: gap, detail: "..."}   # exactly when behaviours is empty

:func:`load` reads and validates it strictly, every problem as ``<file>: <field path>: <problem>``
(:class:`SpecMapError`), and cross-checks it against the behaviour catalog: every behaviour it
names exists. :func:`coverage` is pure arithmetic over a loaded map: statements of topic
ModelServing are in scope; per profile and overall, for MUST and for SHOULD, how many are asserted
(at least one behaviour), explained (not asserted, for a reason other than ``gap``) and gaps.
``kthena-conformance coverage`` prints it and every run's report carries it.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from .catalog import ID_PATTERN, PACKAGE_DIR, Behaviour
from .features import FEATURES, PROFILES, Feature, Profile
from .support import DocumentError, load_yaml, validation_problems

FEATURE_NAMES = frozenset(f.value for f in Feature)

API_VERSION = "conformance.kthena.io/v1alpha1"
KIND = "SpecMap"
SPECMAP_PATH = PACKAGE_DIR / "specmap.yaml"

LEVELS = ("MUST", "SHOULD", "MAY")
TOPICS = ("ModelServing", "AutoscalingPolicy", "ModelBooster", "LeaderWorkerSet")
IN_SCOPE = ("ModelServing", "AutoscalingPolicy")  # the topics whose statements count; the others are filed separately
SCOPE_TEXT = ", ".join(IN_SCOPE)
REASONS = ("needs-real-kubelet", "not-modelserving", "ambiguous", "not-observable", "out-of-scope", "gap")
GAP = "gap"  # not asserted yet: uncovered, never an explanation

Level = Literal["MUST", "SHOULD", "MAY"]
Topic = Literal["ModelServing", "AutoscalingPolicy", "ModelBooster", "LeaderWorkerSet"]
Reason = Literal["needs-real-kubelet", "not-modelserving", "ambiguous", "not-observable", "out-of-scope", "gap"]


class SpecMapError(ValueError):
    """The spec map is unusable; ``problems`` holds one ``<file>: <field path>: <problem>`` line each."""

    def __init__(self, problems: str | list[str]) -> None:
        self.problems = [problems] if isinstance(problems, str) else list(problems)
        super().__init__("\n".join(self.problems))


# -- the file ----------------------------------------------------------------------------------------


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class _Document(_Strict):
    file: str = Field(min_length=1)
    scope: Literal["in", "excluded"]
    reason: str | None = Field(default=None, min_length=1)


class _NotAsserted(_Strict):
    reason: Reason
    detail: str = Field(min_length=1)


class _Proof(_Strict):
    behaviour: str
    test: str = Field(min_length=1)
    fault: str = Field(min_length=1)


class _Statement(_Strict):
    id: str
    document: str = Field(min_length=1)
    section: str = Field(min_length=1)
    text: str = Field(min_length=1)
    level: Level
    topic: Topic
    profile: str | None = None
    behaviours: list[str] = Field(default_factory=list)
    partial: list[str] = Field(default_factory=list)
    not_asserted: _NotAsserted | None = Field(default=None, alias="notAsserted")
    conditional_on: list[str] = Field(default_factory=list, alias="conditionalOn")
    proofs: list[_Proof] = Field(default_factory=list)


class _SpecMapFile(_Strict):
    api_version: Literal["conformance.kthena.io/v1alpha1"] = Field(alias="apiVersion")
    kind: Literal["SpecMap"]
    documents: list[_Document] = Field(min_length=1)
    statements: list[_Statement] = Field(default_factory=list)

    @field_validator("statements", mode="before")
    @classmethod
    def _empty(cls, value: Any) -> Any:
        return [] if value is None else value  # `statements:` with nothing under it


# -- the loaded map ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Document:
    file: str
    scope: str  # "in" or "excluded"
    reason: str | None = None


@dataclass(frozen=True)
class Proof:
    """What makes a behaviour's claim on a statement mean something: the test that asserts it
    (``<file>::<function>``, the file relative to the repository) and a fault of the reference whose
    variant that test catches (self-validation's tables name the behaviour under it)."""

    behaviour: str
    test: str
    fault: str

    def as_dict(self) -> dict[str, str]:
        return {"behaviour": self.behaviour, "test": self.test, "fault": self.fault}


@dataclass(frozen=True)
class Statement:
    """One normative statement and what asserts it."""

    id: str
    document: str
    section: str
    text: str
    level: str
    topic: str
    profile: str | None
    behaviours: tuple[str, ...] = ()
    partial: tuple[str, ...] = ()
    reason: str | None = None  # notAsserted.reason, exactly when behaviours is empty
    detail: str | None = None
    # Features without which the statement binds nothing (it is about them: "ModelServings that include
    # headless-service ...", a scope target only demo-pod-tweaks accepts): an implementation without them
    # cannot get it wrong, so a success that leaves it unasserted for lack of them hides nothing.
    conditional_on: tuple[str, ...] = ()
    proofs: tuple[Proof, ...] = ()

    @property
    def in_scope(self) -> bool:
        return self.topic in IN_SCOPE

    @property
    def asserted(self) -> bool:
        return bool(self.behaviours)

    @property
    def where(self) -> str:
        """``document#section``, as the catalog's ``spec`` writes it."""
        return f"{self.document}#{self.section}"

    def as_dict(self) -> dict[str, Any]:
        """The uncovered-list entry of ``coverage --format json``."""
        return {
            "id": self.id,
            "document": self.document,
            "section": self.section,
            "level": self.level,
            "profile": self.profile,
            "reason": self.reason,
            "detail": self.detail,
        }


@dataclass(frozen=True)
class SpecMap:
    source: str
    digest: str  # sha256:<hex> of the file (line endings read as LF)
    documents: tuple[Document, ...]
    statements: tuple[Statement, ...]

    def named_behaviours(self) -> set[str]:
        """Every behaviour id a statement names (asserting or partial)."""
        return {b for s in self.statements for b in (*s.behaviours, *s.partial)}


def digest_of(text: str) -> str:
    return "sha256:" + hashlib.sha256(text.replace("\r\n", "\n").encode("utf-8")).hexdigest()


def load(path: Path = SPECMAP_PATH, *, catalog: Iterable[Behaviour]) -> SpecMap:
    """Read, validate and cross-check the spec map at ``path`` against ``catalog`` (the behaviours
    its statements may name); :class:`SpecMapError` lists every problem."""
    source = str(path)
    try:
        data = load_yaml(path, fast=True)
    except DocumentError as exc:
        raise SpecMapError(str(exc)) from None
    if not isinstance(data, dict):
        what = "empty" if data is None else f"a {type(data).__name__}"
        raise SpecMapError(
            f"{source}: expected a {KIND} mapping with apiVersion, kind, documents, statements; got {what}"
        )
    try:
        parsed = _SpecMapFile.model_validate(data)
    except ValidationError as exc:
        raise SpecMapError([f"{source}: {_worded(p)}" for p in validation_problems(exc)]) from None
    problems = _problems(parsed, {b.id for b in catalog})
    if problems:
        raise SpecMapError([f"{source}: {p}" for p in problems])
    return SpecMap(
        source=source,
        digest=digest_of(path.read_text(encoding="utf-8")),
        documents=tuple(Document(d.file, d.scope, d.reason) for d in parsed.documents),
        statements=tuple(
            Statement(
                id=s.id,
                document=s.document,
                section=s.section,
                text=s.text,
                level=s.level,
                topic=s.topic,
                profile=s.profile,
                behaviours=tuple(s.behaviours),
                partial=tuple(s.partial),
                reason=s.not_asserted.reason if s.not_asserted else None,
                detail=s.not_asserted.detail if s.not_asserted else None,
                conditional_on=tuple(s.conditional_on),
                proofs=tuple(Proof(p.behaviour, p.test, p.fault) for p in s.proofs),
            )
            for s in parsed.statements
        ),
    )


def _worded(problem: str) -> str:
    """A pydantic "valid dictionary or instance of _Statement" in the file's words."""
    where, sep, message = problem.partition(": ")
    if sep and message.startswith("input should be a valid dictionary or instance of"):
        return f"{where}: expected a mapping"
    return problem


def _problems(parsed: _SpecMapFile, known: set[str]) -> list[str]:
    """What the schema cannot say: unique ids and files, references that resolve, notAsserted
    present exactly when nothing asserts the statement."""
    problems: list[str] = []
    scopes: dict[str, str] = {}
    for i, d in enumerate(parsed.documents):
        where = f"documents[{i}]"
        if d.file in scopes:
            problems.append(f"{where}.file: {d.file!r} is listed twice")
        scopes.setdefault(d.file, d.scope)
        if d.scope == "excluded" and d.reason is None:
            problems.append(f"{where}.reason: an excluded document needs the reason it is excluded")
        if d.scope == "in" and d.reason is not None:
            problems.append(f"{where}.reason: only an excluded document has a reason (scope is 'in')")
    ids = Counter(s.id for s in parsed.statements)
    for i, s in enumerate(parsed.statements):
        where = f"statements[{i}]"
        if not ID_PATTERN.match(s.id):
            problems.append(
                f"{where}.id: {s.id!r} must be lowercase words joined by '-', in at least two '/'-separated parts "
                "(e.g. 'api/modelservingspec/replicas-default')"
            )
        if ids[s.id] > 1:
            problems.append(f"{where}.id: {s.id!r} is used by {ids[s.id]} statements; ids are unique")
        if s.document not in scopes:
            problems.append(f"{where}.document: {s.document!r} ({s.id}) is not listed in documents")
        elif scopes[s.document] == "excluded":
            problems.append(f"{where}.document: {s.document!r} ({s.id}) is excluded in documents; it has no statements")
        if s.profile is None:
            if s.topic in IN_SCOPE:
                problems.append(f"{where}.profile: required for topic {s.topic} ({s.id}): the profile it counts in")
        elif s.profile not in PROFILES:
            problems.append(f"{where}.profile: unknown profile {s.profile!r} ({s.id}); known: {', '.join(PROFILES)}")
        for key, listed in (("behaviours", s.behaviours), ("partial", s.partial)):
            seen: set[str] = set()
            for j, b in enumerate(listed):
                if b in seen:
                    problems.append(f"{where}.{key}[{j}]: {b!r} ({s.id}) is listed twice")
                seen.add(b)
                if b not in known:
                    problems.append(f"{where}.{key}[{j}]: behaviour {b!r} ({s.id}) is not in the behaviour catalog")
        both = sorted(set(s.behaviours) & set(s.partial))
        if both:
            problems.append(
                f"{where}.partial: {', '.join(both)} ({s.id}) also in behaviours: a behaviour asserts a statement "
                "fully or partly, not both"
            )
        for j, f in enumerate(s.conditional_on):
            if f not in FEATURE_NAMES:
                problems.append(f"{where}.conditionalOn[{j}]: unknown feature {f!r} ({s.id})")
        proved = [p.behaviour for p in s.proofs]
        for j, p in enumerate(s.proofs):
            if p.behaviour not in s.behaviours:
                problems.append(
                    f"{where}.proofs[{j}].behaviour: {p.behaviour!r} ({s.id}) is not in behaviours: a proof is given "
                    "for a behaviour that claims the statement"
                )
        unproved = [b for b in s.behaviours if b not in proved]
        if unproved:
            problems.append(f"{where}.proofs: {', '.join(unproved)} ({s.id}) claim the statement without a proof")
        if s.behaviours and s.not_asserted is not None:
            problems.append(f"{where}.notAsserted: {s.id} is asserted (behaviours is not empty); drop notAsserted")
        if not s.behaviours and s.not_asserted is None:
            problems.append(
                f"{where}.notAsserted: {s.id} has no behaviours: say why it is not asserted "
                f"(reason: {' | '.join(REASONS)}, and a detail)"
            )
    return problems


# -- coverage (pure) ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Figures:
    """One level's statements in one profile: ``total = asserted + explained + gaps``."""

    total: int = 0
    asserted: int = 0
    explained: int = 0
    gaps: int = 0

    @property
    def percent(self) -> float | None:
        """Asserted of total, in percent (None when there is no statement)."""
        return 100.0 * self.asserted / self.total if self.total else None

    def as_dict(self) -> dict[str, Any]:
        return {"total": self.total, "asserted": self.asserted, "explained": self.explained, "gaps": self.gaps}


@dataclass(frozen=True)
class ProfileCoverage:
    profile: str  # a profile name, or "overall"
    must: Figures
    should: Figures

    def as_dict(self) -> dict[str, Any]:
        return {"profile": self.profile, "must": self.must.as_dict(), "should": self.should.as_dict()}


OVERALL = "overall"


@dataclass(frozen=True)
class Coverage:
    """The spec map's coverage: ``overall`` over every in-scope statement, ``profiles`` in profile
    order, and the in-scope MUST statements no behaviour asserts (gaps first, then the explained
    ones, each in file order)."""

    overall: ProfileCoverage
    profiles: tuple[ProfileCoverage, ...]
    uncovered: tuple[Statement, ...]

    def profile(self, name: str) -> ProfileCoverage:
        return next(p for p in self.profiles if p.profile == name)


def figures(statements: Iterable[Statement]) -> Figures:
    """Count ``statements`` (already filtered to one level and scope)."""
    total = asserted = explained = gaps = 0
    for s in statements:
        total += 1
        if s.asserted:
            asserted += 1
        elif s.reason == GAP:
            gaps += 1
        else:
            explained += 1
    return Figures(total, asserted, explained, gaps)


def _profile_coverage(name: str, statements: Sequence[Statement]) -> ProfileCoverage:
    return ProfileCoverage(
        name,
        must=figures(s for s in statements if s.level == "MUST"),
        should=figures(s for s in statements if s.level == "SHOULD"),
    )


def coverage(statements: Iterable[Statement], profiles: Iterable[str] = PROFILES) -> Coverage:
    """The coverage of the in-scope (:data:`IN_SCOPE` topics) ``statements``, per profile (every name
    in ``profiles``, in that order, also those with no statement) and overall."""
    scoped = [s for s in statements if s.in_scope]
    per_profile = tuple(_profile_coverage(name, [s for s in scoped if s.profile == name]) for name in profiles)
    missing = [s for s in scoped if s.level == "MUST" and not s.asserted]
    uncovered = tuple([s for s in missing if s.reason == GAP] + [s for s in missing if s.reason != GAP])
    return Coverage(_profile_coverage(OVERALL, scoped), per_profile, uncovered)


# -- what a profile's success guarantees (pure) -------------------------------------------------------


def guaranteed_features(profile: Profile) -> frozenset[Feature]:
    """The features every implementation succeeding on ``profile`` supports: its required features and
    their prerequisites (a success needs every required feature supported, and a feature cannot be
    supported without its prerequisites)."""
    out: set[Feature] = set()
    todo = list(profile.required)
    while todo:
        f = todo.pop()
        if f not in out:
            out.add(f)
            todo.extend(FEATURES[f].requires)
    return frozenset(out)


def runs_on_success(b: Behaviour, profile: Profile, conditional_on: Iterable[str] = ()) -> bool:
    """Whether a ``success`` on ``profile`` means ``b`` was asserted: a MUST behaviour (a SHOULD or MAY
    that does not hold is only a warning) of a required feature of the profile, whose further
    requirements every such implementation supports, or the statement is about
    (``conditional_on``: without them it binds nothing). Anything else may come out not-supported,
    or a warning, in a run the profile still succeeds."""
    conditions = {Feature(f) for f in conditional_on}
    allowed = guaranteed_features(profile) | conditions
    return b.level == "MUST" and b.feature in profile.required | conditions and set(b.requires) <= allowed


@dataclass(frozen=True)
class SuccessGap:
    """A MUST statement of a profile that a success on it can leave unasserted, and why."""

    statement: Statement
    why: str

    def as_dict(self) -> dict[str, Any]:
        return {"id": self.statement.id, "where": self.statement.where, "why": self.why}


def _why_not(b: Behaviour, profile: Profile, conditional_on: Iterable[str]) -> str:
    if b.level != "MUST":
        return f"{b.id} is {b.level} (a warning when it does not hold)"
    conditions = {Feature(f) for f in conditional_on}
    allowed = guaranteed_features(profile) | conditions
    if b.feature not in profile.required | conditions:
        owner = "optional in " + profile.name if b.feature in profile.optional else f"not a feature of {profile.name}"
        return f"{b.id} is feature {b.feature.value} ({owner})"
    missing = ", ".join(sorted(f.value for f in b.requires if f not in allowed))
    return f"{b.id} also requires {missing}, which a success on {profile.name} does not guarantee"


def success_gaps(statements: Iterable[Statement], catalog: Iterable[Behaviour], profile: Profile) -> list[SuccessGap]:
    """The in-scope MUST statements of ``profile`` that its ``success`` can leave unasserted: asserted
    (``behaviours`` not empty) but by no behaviour :func:`runs_on_success` vouches for. A statement no
    behaviour asserts is an uncovered statement (:func:`coverage`), not listed here."""
    by_id = {b.id: b for b in catalog}
    gaps: list[SuccessGap] = []
    for s in statements:
        if not (s.in_scope and s.level == "MUST" and s.profile == profile.name and s.asserted):
            continue
        found = [by_id[b] for b in s.behaviours if b in by_id]
        if any(runs_on_success(b, profile, s.conditional_on) for b in found):
            continue
        gaps.append(SuccessGap(s, "; ".join(_why_not(b, profile, s.conditional_on) for b in found)))
    return gaps


def partly_asserted(statements: Iterable[Statement], profile: str) -> list[Statement]:
    """The in-scope MUST statements of ``profile`` that behaviours assert only in part (``partial``, no
    full ``behaviours``); ``detail`` says what is missing."""
    return [
        s
        for s in statements
        if s.in_scope and s.level == "MUST" and s.profile == profile and s.partial and not s.asserted
    ]


NOT_MODELSERVING = "not-modelserving"


def without_implementation_code(statements: Iterable[Statement]) -> Figures:
    """The in-scope MUST figures without the statements explained as ``not-modelserving``: those
    about one implementation's own code (Kthena's Go plugin interface, instructions to its plugin
    developers), which no implementation of the API can be judged by. A second figure beside the
    plain one, never instead of it."""
    return figures(
        s for s in statements if s.in_scope and s.level == "MUST" and (s.asserted or s.reason != NOT_MODELSERVING)
    )


def percent_text(value: float | None) -> str:
    """``87.5%``; rounded down to one decimal, so 94.96% never reads as 95.0%; ``n/a`` for None."""
    if value is None:
        return "n/a"
    tenths = int(value * 10 + 1e-9)
    return f"{tenths // 10}.{tenths % 10}%"


def report_block(specmap: SpecMap, cov: Coverage, profiles: Iterable[str]) -> dict[str, Any]:
    """The report's ``coverage`` block: the spec map's digest, the overall figures and those of
    ``profiles`` (the profiles the run judged)."""
    wanted = list(profiles)
    return {
        "specMap": {"file": Path(specmap.source).name, "digest": specmap.digest, "statements": len(specmap.statements)},
        "scope": SCOPE_TEXT,
        "overall": {"must": cov.overall.must.as_dict(), "should": cov.overall.should.as_dict()},
        "profiles": [p.as_dict() for p in cov.profiles if p.profile in wanted],
    }
