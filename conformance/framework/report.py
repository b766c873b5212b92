"""The conformance report: a schema-versioned record of one run, and the check that it holds up.

A run writes ``conformance-report.yaml`` and ``conformance-report.json`` (same content; the YAML
for people, the JSON for tools), always, whatever happened. :func:`verify` re-reads a report and
checks what a reviewer of a conformance claim would: the schema, which suite produced it (its
digest), that every test is a catalog behaviour and every selected profile's behaviours are
there, that the counts and verdicts follow from the tests by the rules of :mod:`.outcomes`, and
that no failure hides as ``not-supported`` for a feature the implementation declares supported.

Top level (camelCase on disk): ``schemaVersion``, ``kind``, ``suite`` {name, version, digest},
``run`` {id, startedAt, finishedAt, durationSeconds, interrupted, interruption, command,
selection {profiles, features, ids}, keep, timeouts, shard {index, total, behaviours} of a sharded
run, shards [{index, total, runId, cluster, preflight, ...}] of a merged report}, ``implementation``
(``Support.as_report()`` plus deployedBy/log), ``cluster``, ``preflight`` [{name, result, message}], ``profiles``,
``tests``, ``verdict``, ``error`` {message, hint}, ``notes``, ``exitCode``, ``accelerators``
{capabilities [{file, sha256, vendor, driver, driverVersion, deviceClasses}], fakeDevices, faults,
warnings, drivers [{driver, fake, installedBy, version, executable, size, sha256, command, image, digest,
nodes}]} when the Accelerators profile had capability files, and ``coverage`` {specMap {file,
digest, statements}, scope, overall {must, should}, profiles [{profile, must, should}]} with each
figure {total, asserted, explained, gaps}: how much of the spec map (:mod:`.specmap`) the suite
asserts, for the profiles the run judged (optional: absent in older reports or when the spec map
could not be read), and ``causes`` [{cause, behaviours}]: failures sharing one cause, one entry
per cause (:mod:`.causes`).

A test's ``level`` is its behaviour's (MUST, SHOULD, MAY); ``warning``, the outcome of a SHOULD or
MAY behaviour that did not hold, is only ever on a SHOULD or MAY behaviour (``verify`` checks).
"""

from __future__ import annotations

import datetime as dt
import json
import os
import sys
import tempfile
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Final, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from pydantic.alias_generators import to_camel

from .catalog import Behaviour, collect
from .features import PROFILES, SelectionError, get_profile, profile_of
from .outcomes import (
    RAN,
    WARNING_LEVELS,
    Outcome,
    ProfileResult,
    TestResult,
    Verdict,
    overall_verdict,
    profile_verdict,
)
from .support import DocumentError, Support, SupportFileError, load_yaml, validation_problems

SCHEMA_VERSION: Final = "conformance.kthena.io/report/v1"
KIND: Final = "ConformanceReport"
YAML_NAME = "conformance-report.yaml"
JSON_NAME = "conformance-report.json"
PAGE_NAME = "index.html"  # the HTML page beside them (html_report)


class ReportError(Exception):
    """A report that cannot be read, parsed or (when writing) validated; ``problems`` lists why."""

    def __init__(self, problems: str | list[str]) -> None:
        self.problems = [problems] if isinstance(problems, str) else list(problems)
        super().__init__("\n".join(self.problems))


class _Model(BaseModel):
    model_config = ConfigDict(
        extra="forbid",
        alias_generator=to_camel,
        validate_by_name=True,
        validate_by_alias=True,
        serialize_by_alias=True,
    )


class SuiteInfo(_Model):
    name: str
    version: str
    digest: str


class Selection(_Model):
    profiles: list[str] = Field(default_factory=list)
    features: list[str] = Field(default_factory=list)
    ids: list[str] = Field(default_factory=list)

    @property
    def everything(self) -> bool:
        """Nothing narrowed the run below whole profiles."""
        return not self.features and not self.ids


class ProgressInfo(_Model):
    """A report written while the run went on (``run.progress``): how far it had got. The run
    rewrites its report as results arrive, marked interrupted until the last write, so a run
    killed at any moment leaves a valid report of what completed."""

    done: int = Field(ge=0)
    selected: int = Field(ge=0)
    updated_at: dt.datetime


class RunInfo(_Model):
    id: str
    started_at: dt.datetime
    finished_at: dt.datetime | None = None
    duration_seconds: float | None = None
    interrupted: bool = False
    interruption: str | None = None
    command: list[str] = Field(default_factory=list)
    selection: Selection = Field(default_factory=Selection)
    keep: str
    timeouts: dict[str, Any] = Field(default_factory=dict)
    shard: ShardInfo | None = None  # a sharded run (optional: older reports have none)
    shards: list[ShardRecord] | None = None  # a merged report (`report merge`): its shards
    progress: ProgressInfo | None = None  # a report written while the run went on (optional)


class PreflightCheck(_Model):
    name: str
    result: Literal["ok", "missing", "skipped"]
    message: str = ""


class ErrorInfo(_Model):
    message: str
    hint: str | None = None


class ShardInfo(_Model):
    """A sharded run's shard (``--shard INDEX/TOTAL``) and the behaviours it was given."""

    index: int
    total: int
    behaviours: list[str] = Field(default_factory=list)


class ShardRecord(_Model):
    """One shard of a merged report (``kthena-conformance report merge``): where and how it ran."""

    index: int
    total: int
    source: str = ""
    run_id: str
    started_at: dt.datetime
    finished_at: dt.datetime | None = None
    duration_seconds: float | None = None
    verdict: Verdict
    exit_code: int | None = None
    behaviours: int = 0
    cluster: dict[str, Any] = Field(default_factory=dict)
    preflight: list[PreflightCheck] = Field(default_factory=list)
    implementation_log: str | None = None
    error: ErrorInfo | None = None


class ProfileEntry(_Model):
    """:meth:`.outcomes.ProfileResult.as_dict` as the schema sees it."""

    profile: str
    verdict: Verdict
    counts: dict[str, int]
    non_conformant: list[str]
    warnings: list[str] = Field(default_factory=list)  # optional: older reports have none
    errors: list[str]
    not_supported: list[str]
    skipped_by_user: list[str] = Field(default_factory=list)
    unsupported_required: list[str]
    unsupported_optional: list[str] = Field(default_factory=list)
    message: str


class TestEntry(_Model):
    """:meth:`.outcomes.TestResult.as_dict` as the schema sees it."""

    __test__ = False  # not a pytest test class

    id: str
    nodeid: str
    feature: str
    profile: str
    level: Literal["MUST", "SHOULD", "MAY"] | None = None  # optional: older reports have none
    outcome: Outcome
    duration_seconds: float
    message: str = ""
    statement: str = ""
    spec: str = ""
    evidence: str | None = None
    # Where the Pod-level condition was observed (real nodes, or simulated); optional: most
    # behaviours do not depend on running containers, and older reports have none.
    observed: str | None = None


class CapabilityFileInfo(_Model):
    """One accelerator capability file the run certified a DRA driver against."""

    file: str
    sha256: str
    vendor: str
    driver: str
    driver_version: str | None = None
    device_classes: list[dict[str, str]] = Field(default_factory=list)


class CertifiedDriver(_Model):
    """Which build of a DRA driver the run certified: the fake drivers' package, an executable the
    cluster declares it runs per real node (path, size, SHA-256), an image (reference, digest), or
    a driver installed outside the harness that the cluster does not declare (``installedBy`` says
    so; nothing identifies the build then)."""

    driver: str
    fake: bool
    installed_by: str
    version: str | None = None
    executable: str | None = None
    size: int | None = None
    sha256: str | None = None
    command: list[str] | None = None
    image: str | None = None
    digest: str | None = None
    nodes: list[str] | None = None


class AcceleratorsInfo(_Model):
    """The Accelerators profile's inputs: the drivers and their capability files, whether the
    harness ran the fake drivers (and any self-validation fault), and SHOULD-level warnings."""

    capabilities: list[CapabilityFileInfo] = Field(default_factory=list)
    fake_devices: bool = False
    # The fake drivers' shipped files were chosen because no --capabilities was given (optional:
    # older reports lack it).
    chosen_by_default: bool | None = None
    faults: list[str] = Field(default_factory=list)
    warnings: list[str] = Field(default_factory=list)
    # What was certified, one entry per capability file's driver (optional: older reports lack it).
    drivers: list[CertifiedDriver] | None = None


class CoverageFigures(_Model):
    """One level's in-scope statements: ``total = asserted + explained + gaps``."""

    total: int = Field(ge=0)
    asserted: int = Field(ge=0)
    explained: int = Field(ge=0)
    gaps: int = Field(ge=0)


class LevelCoverage(_Model):
    must: CoverageFigures
    should: CoverageFigures


class ProfileCoverage(LevelCoverage):
    profile: str


class SpecMapInfo(_Model):
    file: str
    digest: str
    statements: int = Field(ge=0)


class CoverageInfo(_Model):
    """How much of the spec map the suite asserts (:mod:`.specmap`), overall and per judged profile."""

    spec_map: SpecMapInfo
    scope: str
    overall: LevelCoverage
    profiles: list[ProfileCoverage] = Field(default_factory=list)


class CauseEntry(_Model):
    """A cause several failures share (:mod:`.causes`) and the behaviours it explains."""

    cause: str
    behaviours: list[str]


class NarrowedProfile(_Model):
    profile: str
    selected: int = Field(ge=0)
    of: int = Field(ge=0)


class JudgedInfo(_Model):
    """The verdict on what the run selected (:mod:`.judged`): the exit code follows it."""

    verdict: Verdict
    fully_run: list[str] = Field(default_factory=list)
    narrowed: list[NarrowedProfile] = Field(default_factory=list)


class Report(_Model):
    schema_version: Literal["conformance.kthena.io/report/v1"] = SCHEMA_VERSION
    kind: Literal["ConformanceReport"] = KIND
    suite: SuiteInfo
    run: RunInfo
    implementation: dict[str, Any]
    cluster: dict[str, Any] = Field(default_factory=dict)
    preflight: list[PreflightCheck] = Field(default_factory=list)
    profiles: list[ProfileEntry] = Field(default_factory=list)
    tests: list[TestEntry] = Field(default_factory=list)
    verdict: Verdict
    error: ErrorInfo | None = None
    notes: list[str] = Field(default_factory=list)
    exit_code: int | None = None
    accelerators: AcceleratorsInfo | None = None
    coverage: CoverageInfo | None = None
    causes: list[CauseEntry] = Field(default_factory=list)
    judged: JudgedInfo | None = None  # optional: older reports have none

    def as_data(self) -> dict[str, Any]:
        """Plain JSON-compatible data, camelCase keys: exactly what both files hold."""
        return self.model_dump(mode="json", by_alias=True)


# -- writing -----------------------------------------------------------------------------------------


def write(report: dict[str, Any] | Report, directory: Path) -> list[Path]:
    """Validate ``report`` and write it as YAML and JSON into ``directory``, each atomically.

    Returns ``[yaml_path, json_path]``; :class:`ReportError` (nothing written) if the report does
    not match the schema.
    """
    model = report if isinstance(report, Report) else _validated(report, "report")
    data = model.as_data()
    directory.mkdir(parents=True, exist_ok=True)
    yaml_path, json_path = directory / YAML_NAME, directory / JSON_NAME
    _atomic_write(yaml_path, yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=120))
    _atomic_write(json_path, json.dumps(data, indent=2, ensure_ascii=False) + "\n")
    _write_page(model, directory)
    return [yaml_path, json_path]


def _write_page(model: Report, directory: Path) -> None:
    """``index.html`` beside the reports, for people; a page that cannot be rendered (Jinja2
    missing included) costs only the page (a stale one is removed, a note goes to stderr), never
    the YAML or JSON."""
    page = directory / PAGE_NAME
    try:
        from . import html_report

        html_report.write(model, directory)
    except Exception as exc:
        page.unlink(missing_ok=True)
        print(
            f"note: {page} was not written ({type(exc).__name__}: {exc}); the YAML and JSON reports are complete",
            file=sys.stderr,
        )


def _atomic_write(path: Path, text: str) -> None:
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


# -- reading -----------------------------------------------------------------------------------------


def read(path: Path) -> dict[str, Any]:
    """The report's raw data (YAML or JSON by extension); :class:`ReportError` if unusable."""
    source = str(path)
    if path.suffix in (".yaml", ".yml"):
        try:
            data = load_yaml(path)
        except DocumentError as exc:
            raise ReportError(str(exc)) from None
    elif path.suffix == ".json":
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except UnicodeDecodeError:
            raise ReportError(f"{source}: not UTF-8 text") from None
        except OSError as exc:
            raise ReportError(f"{source}: cannot read: {exc.strerror or exc}") from None
        except json.JSONDecodeError as exc:
            raise ReportError(f"{source}: not valid JSON: line {exc.lineno}, column {exc.colno}: {exc.msg}") from None
    else:
        raise ReportError(f"{source}: expected a .yaml, .yml or .json report")
    if not isinstance(data, dict):
        raise ReportError(f"{source}: expected a {KIND} mapping, got {type(data).__name__}")
    return data


def load(path: Path) -> Report:
    """Read and validate a report; :class:`ReportError` lists schema problems by field path."""
    return _validated(read(path), str(path))


def _validated(data: dict[str, Any], source: str) -> Report:
    try:
        return Report.model_validate(data)
    except ValidationError as exc:
        raise ReportError([f"{source}: {p}" for p in validation_problems(exc)]) from None


# -- verifying ---------------------------------------------------------------------------------------


def verify(path: Path, *, digest: str | None = None, catalog: Iterable[Behaviour] | None = None) -> list[str]:
    """Problems with the report at ``path`` (empty: it is valid and consistent).

    ``digest`` is the verifying suite's :func:`.catalog.suite_digest` (checked when given);
    ``catalog`` the behaviours to check test ids against (default: :func:`.catalog.collect`; an
    empty catalog skips the id checks). :class:`ReportError` if the file cannot be read at all.
    """
    data = read(path)
    version = data.get("schemaVersion")
    if version != SCHEMA_VERSION:
        return [f"unknown schemaVersion {version!r} (this verifier reads {SCHEMA_VERSION})"]
    try:
        report = Report.model_validate(data)
    except ValidationError as exc:
        return [f"schema: {p}" for p in validation_problems(exc)]
    behaviours = {b.id: b for b in (collect() if catalog is None else catalog)}

    problems: list[str] = []
    if digest is not None and report.suite.digest != digest:
        problems.append(
            f"the report was produced by a different suite: its digest is {report.suite.digest}, "
            f"this suite's is {digest}"
        )
    results = _test_problems(report, behaviours, problems)
    support: Support | None
    try:
        support = Support.from_report(report.implementation)
    except SupportFileError as exc:
        problems += exc.problems
        support = None
    if support is not None:
        for r in results:
            needed = behaviours[r.id].features if r.id in behaviours else (r.feature,)
            if r.outcome is Outcome.NOT_SUPPORTED and all(support.supports(f) for f in needed):
                problems.append(
                    f"test {r.id!r} is reported not-supported although its feature {r.feature.value} is in "
                    "implementation.supportedFeatures: a failure hidden as a skip"
                )
        _profile_problems(report, results, support, problems)

    _accelerator_problems(report, problems)
    _coverage_problems(report, problems)
    preflight_ok = all(c.result != "missing" for c in report.preflight)
    complete = report.error is None and preflight_ok and not report.run.interrupted
    if complete and report.run.selection.everything:
        _completeness_problems(report, behaviours, problems)
    expected = (
        Verdict.ERROR
        if report.error is not None
        else overall_verdict(
            [_as_result(p) for p in report.profiles], preflight_ok=preflight_ok, interrupted=report.run.interrupted
        )
    )
    if report.verdict != expected:
        problems.append(
            f"overall verdict {report.verdict.value} is inconsistent: the profiles, preflight, error and "
            f"interruption give {expected.value}"
        )
    if report.judged is not None and support is not None:
        _judged_problems(report, results, support, preflight_ok, problems)
    return problems


def _judged_problems(
    report: Report, results: list[TestResult], support: Support, preflight_ok: bool, problems: list[str]
) -> None:
    """``judged`` (the verdict on the selection) recomputed from the tests."""
    from .judged import judge

    try:
        profiles = [get_profile(p.profile) for p in report.profiles]
    except SelectionError as exc:
        problems.append(f"judged: {exc}")
        return
    expected = judge(
        profiles,
        results,
        support,
        preflight_ok=preflight_ok,
        interrupted=report.run.interrupted,
        error=report.error is not None,
    )
    seen = report.judged.model_dump(mode="json", by_alias=True) if report.judged else {}
    if seen != expected:
        problems.append(f"judged {seen} is inconsistent: the tests give {expected}")


def _test_problems(report: Report, behaviours: dict[str, Behaviour], problems: list[str]) -> list[TestResult]:
    counts = Counter(t.id for t in report.tests)
    for id_, n in sorted(counts.items()):
        if n > 1:
            problems.append(f"duplicate test id {id_!r} ({n} entries)")
    results = []
    for i, t in enumerate(report.tests):
        try:
            result = TestResult.from_dict(t.model_dump(mode="json", by_alias=True))
        except ValueError:
            problems.append(f"schema: tests[{i}].feature: unknown feature {t.feature!r}")
            continue
        results.append(result)
        if t.profile != result.profile:
            problems.append(
                f"test {t.id!r} is reported under profile {t.profile!r} but its feature {t.feature} belongs to "
                f"{result.profile}"
            )
        declared = behaviours.get(t.id)
        if behaviours:
            if declared is None:
                problems.append(f"test {t.id!r} is not in the behaviour catalog")
            elif declared.feature is not result.feature:
                problems.append(
                    f"test {t.id!r} is reported under feature {t.feature} but the catalog declares "
                    f"{declared.feature.value}"
                )
        _level_problems(t, declared, problems)
    return results


def _level_problems(t: TestEntry, declared: Behaviour | None, problems: list[str]) -> None:
    """A warning only ever on a SHOULD or MAY behaviour, non-conformance only on a MUST one (the
    catalog's level decides; without the behaviour in the catalog, the level the report records)."""
    if declared is not None and t.level is not None and t.level != declared.level:
        problems.append(f"test {t.id!r} is reported at level {t.level} but the catalog's statement is {declared.level}")
    level = declared.level if declared is not None else t.level
    if t.outcome is Outcome.WARNING and level not in WARNING_LEVELS:
        problems.append(
            f"test {t.id!r} is a warning but its level is {level or 'not recorded'}: only a SHOULD or MAY behaviour "
            "may warn (a MUST that does not hold is non-conformant)"
        )
    if t.outcome is Outcome.NON_CONFORMANT and level in WARNING_LEVELS:
        problems.append(
            f"test {t.id!r} is non-conformant but its level is {level}: a SHOULD or MAY that does not hold is a warning"
        )


def _profile_problems(report: Report, results: list[TestResult], support: Support, problems: list[str]) -> None:
    seen: set[str] = set()
    for entry in report.profiles:
        name = entry.profile
        if name in seen:
            problems.append(f"profile {name} appears more than once")
            continue
        seen.add(name)
        if name not in PROFILES:
            problems.append(f"profile {name!r} is not a profile of this suite (known: {', '.join(PROFILES)})")
            continue
        expected = profile_verdict(PROFILES[name], results, support)
        if _nonzero(entry.counts) != _nonzero(expected.counts):  # an older report has no "warning": 0
            problems.append(
                f"profile {name}: counts {entry.counts} do not match its tests, which give {expected.counts}"
            )
        if entry.verdict != expected.verdict:
            problems.append(
                f"profile {name}: verdict {entry.verdict.value} differs from {expected.verdict.value}, which its "
                f"tests and the implementation's declared support give ({expected.message})"
            )
        reported, recomputed = _as_result(entry).as_dict(), expected.as_dict()
        for key in ("nonConformant", "warnings", "errors", "notSupported", "skippedByUser", "unsupportedRequired"):
            if sorted(reported[key]) != sorted(recomputed[key]):
                problems.append(f"profile {name}: {key} lists {reported[key]} but its tests give {recomputed[key]}")
    # Tests the user deselected (or that were not supported) need no verdict; tests that ran do.
    judged = {r.profile for r in results if r.outcome in RAN}
    for profile in sorted(judged - seen, key=list(PROFILES).index):
        problems.append(f"the report has tests of profile {profile} that ran but no result for that profile")


def _completeness_problems(report: Report, behaviours: dict[str, Behaviour], problems: list[str]) -> None:
    if report.run.selection.profiles:
        selected = []
        for name in report.run.selection.profiles:
            try:
                selected.append(get_profile(name).name)
            except SelectionError as exc:
                problems.append(f"run.selection.profiles: {exc}")
    else:
        selected = list(PROFILES)
    present = {t.id for t in report.tests}
    judged = {p.profile for p in report.profiles}
    for name in selected:
        expected = sorted(b.id for b in behaviours.values() if profile_of(b.feature).name == name)
        if not expected:
            continue
        if name not in judged:
            problems.append(f"profile {name} was selected but the report has no result for it")
        missing = [id_ for id_ in expected if id_ not in present]
        if missing:
            shown = ", ".join(missing[:10]) + (", ..." if len(missing) > 10 else "")
            problems.append(
                f"profile {name} was selected but {len(missing)} of its {len(expected)} catalog tests are missing "
                f"from the report: {shown}"
            )


def _accelerator_problems(report: Report, problems: list[str]) -> None:
    """A certification names what it certified: Accelerators tests that ran need the driver(s)
    and capability file(s) in the report."""
    ran = [t.id for t in report.tests if t.profile == "Accelerators" and t.outcome in RAN]
    if ran and (report.accelerators is None or not report.accelerators.capabilities):
        problems.append(
            f"{len(ran)} Accelerators test(s) ran but the report names no driver and capability file "
            "(accelerators.capabilities)"
        )


def _coverage_problems(report: Report, problems: list[str]) -> None:
    """The coverage block adds up: every figure's parts make its total, profiles are known, once."""
    cov = report.coverage
    if cov is None:
        return
    entries: list[tuple[str, LevelCoverage]] = [("overall", cov.overall)]
    seen: set[str] = set()
    for p in cov.profiles:
        if p.profile not in PROFILES:
            problems.append(f"coverage.profiles: {p.profile!r} is not a profile of this suite")
        elif p.profile in seen:
            problems.append(f"coverage.profiles: {p.profile} appears more than once")
        seen.add(p.profile)
        entries.append((p.profile, p))
    for name, figures in entries:
        for level, f in (("must", figures.must), ("should", figures.should)):
            if f.asserted + f.explained + f.gaps != f.total:
                problems.append(
                    f"coverage {name} {level}: asserted {f.asserted} + explained {f.explained} + gaps {f.gaps} "
                    f"is not the total {f.total}"
                )
            overall = getattr(cov.overall, level)
            if name != "overall" and f.total > overall.total:
                problems.append(f"coverage {name} {level}: {f.total} statements, more than overall's {overall.total}")


def _nonzero(counts: dict[str, int]) -> dict[str, int]:
    return {k: v for k, v in counts.items() if v}


def _as_result(entry: ProfileEntry) -> ProfileResult:
    return ProfileResult.from_dict(entry.model_dump(mode="json", by_alias=True))
