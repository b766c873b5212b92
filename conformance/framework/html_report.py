"""The conformance report as a page people read: ``<report-dir>/index.html``.

The YAML and JSON reports are the record and what tools read; this page is for the person who
opens a CI artifact or a laptop's ``reports/`` folder: the verdict and exit code first, then each
profile, then every behaviour with its RFC 2119 statement, spec section, failure message and a
link to its evidence, then preflight, cluster, the implementation's declared support and the
accelerators. One self-contained file (inline CSS, a small optional filter script, a
Content-Security-Policy that forbids any fetch), readable from ``file://`` without JavaScript.

:func:`render` is data in, HTML out (Jinja2, autoescaped, ``templates/report.html.j2``); it looks
at the disk only to link evidence files that exist. :func:`write` puts the page beside the
reports. A report's ``coverage`` block (how much of the spec map the suite asserts) is shown in
the run's facts and per profile; each behaviour's level (MUST, SHOULD, MAY) in its own column, and
``warning`` (a SHOULD or MAY that did not hold: it does not fail a profile) as its own outcome.
"""

from __future__ import annotations

import base64
import copy
import dataclasses
import datetime as dt
import functools
import hashlib
import json
import os
import re
import shlex
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final
from urllib.parse import quote, urlparse

import jinja2
from markupsafe import Markup, escape

from .evidence import directory_name
from .exit_codes import MEANINGS
from .messages import sentence
from .report import PAGE_NAME, Report, ReportError, _atomic_write, _validated
from .specmap import percent_text

INDEX_NAME: Final = PAGE_NAME
TEMPLATE: Final = "report.html.j2"
SCRIPT_TEMPLATE: Final = "filter.js.j2"

#: Outcomes in the order the page lists them, each with a symbol so colour is never the only cue.
OUTCOMES: Final = {
    "passed": "\u2714",  # heavy check mark
    "warning": "\u26a0",  # warning sign
    "non-conformant": "\u2718",  # heavy ballot x
    "error": "!",
    "not-supported": "\u2205",  # empty set
    "skipped-by-user": "\u2013",  # en dash
}
#: The behaviours table lists these first, in this order (then the rest as the report lists them).
FIRST: Final = {"non-conformant": 0, "error": 1, "warning": 2}
#: Count keys as :func:`.outcomes.profile_verdict` writes them, with their column headings.
COUNT_COLUMNS: Final = (
    ("passed", "passed"),
    ("warning", "warning"),
    ("non-conformant", "non-conformant"),
    ("error", "error"),
    ("not-supported", "not supported"),
    ("skipped-by-user", "skipped"),
)
VERDICTS: Final = {
    "success": "every selected profile succeeded",
    "partial": "some tests could not decide (error) or were deselected",
    "failure": "a behaviour is non-conformant or a required feature is not supported",
    "not-run": "no test passed",
    "error": "the run could not judge the implementation (preflight failed, interrupted or an error)",
}
#: The exit codes of ``kthena-conformance run``.
EXIT_CODES: Final = MEANINGS
#: The run's other records, linked from the page when they are beside it.
RECORDS: Final = ("conformance-report.yaml", "conformance-report.json", "junit.xml", "allure-results")
#: A failure message longer than this (characters or lines) is collapsed behind its first line.
LONG_MESSAGE_CHARS: Final = 400
LONG_MESSAGE_LINES: Final = 6
_RFC2119 = re.compile(r"\b(MUST NOT|MUST|SHALL NOT|SHALL|SHOULD NOT|SHOULD|REQUIRED|RECOMMENDED|MAY|OPTIONAL)\b")


@dataclasses.dataclass(frozen=True)
class Link:
    text: str
    href: str


@dataclasses.dataclass(frozen=True)
class Evidence:
    """What a behaviour left under ``artifacts/``: the directory and its files, as relative links."""

    directory: Link
    files: list[Link]


@dataclasses.dataclass(frozen=True)
class Row:
    """One behaviour as the page shows it."""

    id: str
    profile: str
    feature: str
    level: str | None
    outcome: str
    symbol: str
    duration: str
    statement: str
    spec: Link | str
    message: str
    message_long: bool
    message_head: str
    evidence: Evidence | None


@dataclasses.dataclass(frozen=True)
class ProfileRow:
    name: str
    verdict: str
    counts: list[tuple[str, int]]
    coverage: str | None
    message: str
    unsupported_required: list[str]
    unsupported_optional: list[str]


@dataclasses.dataclass(frozen=True)
class Page:
    """Everything the template shows, already formatted: the template only lays it out."""

    title: str
    verdict: str
    verdict_meaning: str
    exit_code: int | None
    exit_meaning: str
    summary: str
    facts: list[tuple[str, str]]
    waits: list[tuple[str, str, str]]
    profiles: list[ProfileRow]
    has_coverage: bool
    rows: list[Row]
    has_level: bool
    warnings: int
    outcome_totals: list[tuple[str, str, int]]
    preflight: list[dict[str, Any]]
    cluster: list[tuple[str, str]]
    simulates: list[str]
    implementation: list[tuple[str, str | Link]]
    declared: bool
    supported: list[str]
    unsupported: list[tuple[str, str]]
    accelerators: dict[str, Any] | None
    notes: list[str]
    causes: list[tuple[str, list[str]]]
    error: dict[str, Any] | None
    generated_by: str
    records: list[Link]
    script: Markup = dataclasses.field(default_factory=Markup)
    script_hash: str = ""


# -- entry points ------------------------------------------------------------------------------------


def render(report: dict[str, Any] | Report, report_dir: Path) -> str:
    """The page for ``report`` (a :class:`.report.Report` or its data, camelCase keys).

    ``report_dir`` is where the page will live: evidence links are relative to it and only made
    for files that exist there. :class:`.report.ReportError` (naming the fields) if ``report`` is
    not a valid report.
    """
    data = _normalized(report)
    env = _environment()
    script = env.get_template(SCRIPT_TEMPLATE).render()
    page = _page(data, report_dir)
    page = _with_script(page, script)
    return env.get_template(TEMPLATE).render(page=page, columns=COUNT_COLUMNS)


def write(report: dict[str, Any] | Report, report_dir: Path) -> Path:
    """Render ``report`` into ``<report_dir>/index.html`` (atomically); returns its path."""
    report_dir.mkdir(parents=True, exist_ok=True)
    path = report_dir / INDEX_NAME
    _atomic_write(path, render(report, report_dir))
    return path


@functools.cache
def _environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("conformance.framework", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.filters["rfc2119"] = rfc2119
    return env


def _with_script(page: Page, script: str) -> Page:
    """The filter script inlined, and its hash for the Content-Security-Policy (no other script runs)."""
    digest = base64.b64encode(hashlib.sha256(script.encode("utf-8")).digest()).decode("ascii")
    return dataclasses.replace(page, script=Markup(script), script_hash=f"sha256-{digest}")


# -- the data ----------------------------------------------------------------------------------------


def _normalized(report: dict[str, Any] | Report) -> dict[str, Any]:
    """The report's data with every default filled in."""
    if isinstance(report, Report):
        return report.as_data()
    if not isinstance(report, Mapping):
        raise ReportError(f"report: expected a mapping or a Report, got {type(report).__name__}")
    return _validated(copy.deepcopy(dict(report)), "report").as_data()


def _page(data: dict[str, Any], report_dir: Path) -> Page:
    run, suite, impl = data["run"], data["suite"], data["implementation"]
    verdict = str(data["verdict"])
    exit_code = data.get("exitCode")
    overall_coverage, profile_coverage = coverage_of(data.get("coverage"))
    profile_rows = [_profile_row(p, profile_coverage) for p in data["profiles"]]
    rows = sorted((_row(t, report_dir) for t in data["tests"]), key=lambda r: FIRST.get(r.outcome, len(FIRST)))
    totals = {name: 0 for name in OUTCOMES}
    for row in rows:
        totals[row.outcome] = totals.get(row.outcome, 0) + 1

    facts = [
        ("Implementation", " ".join(str(v) for v in (impl.get("name"), impl.get("version")) if v)),
        ("Suite", f"{suite['name']} {suite['version']}"),
        ("Suite digest", suite["digest"]),
        ("Run id", run["id"]),
        ("Started", timestamp(run["startedAt"])),
        ("Finished", timestamp(run["finishedAt"]) if run.get("finishedAt") else "not recorded"),
        ("Duration", duration(run["durationSeconds"]) if run.get("durationSeconds") is not None else "not recorded"),
        ("Command", shlex.join(run["command"]) if run["command"] else "not recorded"),
        ("Selection", selection(run["selection"])),
        ("Keep namespaces", str(run["keep"])),
    ]
    shard = run.get("shard")
    if isinstance(shard, Mapping):
        facts.append(
            ("Shard", f"{shard.get('index')} of {shard.get('total')} ({len(shard.get('behaviours') or [])} behaviours)")
        )
    shards = run.get("shards")
    if isinstance(shards, list) and shards:
        facts.append(("Merged from", f"{len(shards)} shards: " + "; ".join(_shard(s) for s in shards)))
    if run.get("interrupted"):
        facts.append(("Interrupted", run.get("interruption") or "yes"))
    progress = run.get("progress")
    if isinstance(progress, Mapping) and not run.get("finishedAt"):
        facts.append(
            ("Written while running", f"{progress.get('done')} of {progress.get('selected')} behaviours done "
             f"at {timestamp(progress.get('updatedAt', ''))}")
        )  # fmt: skip
    judged = data.get("judged")
    if isinstance(judged, Mapping):
        from .judged import judged_text

        facts.append(("Judged on the selection", judged_text(dict(judged))))
    if overall_coverage is not None:
        facts.append(("Spec coverage", overall_coverage))
    timeouts = run.get("timeouts") or {}
    if "scale" in timeouts:
        facts.append(("Timeout scale", plain(timeouts["scale"])))
    waits = [
        (name, plain(w.get("seconds")), str(w.get("description", "")))
        for name, w in (timeouts.get("waits") or {}).items()
        if isinstance(w, Mapping)
    ]

    return Page(
        title=f"Kthena conformance: {verdict} ({impl.get('name', 'implementation')})",
        verdict=verdict,
        verdict_meaning=VERDICTS.get(verdict, ""),
        exit_code=exit_code,
        exit_meaning=EXIT_CODES.get(exit_code, "") if isinstance(exit_code, int) else "",
        summary=summary(totals),
        facts=facts,
        waits=waits,
        profiles=profile_rows,
        has_coverage=any(p.coverage is not None for p in profile_rows),
        rows=rows,
        has_level=any(r.level for r in rows),
        warnings=totals.get("warning", 0),
        outcome_totals=[(name, OUTCOMES.get(name, ""), n) for name, n in totals.items()],
        preflight=list(data["preflight"]),
        cluster=_cluster(data["cluster"]),
        simulates=[str(s) for s in data["cluster"].get("simulates") or []],
        implementation=_implementation(impl, report_dir),
        declared="supportedFeatures" in impl or "unsupportedFeatures" in impl,
        supported=[str(f) for f in impl.get("supportedFeatures") or []],
        unsupported=[
            (str(u.get("name", "")), str(u.get("reason", "")))
            for u in impl.get("unsupportedFeatures") or []
            if isinstance(u, Mapping)
        ],
        accelerators=data.get("accelerators"),
        notes=[str(n) for n in data["notes"]],
        causes=[(sentence(str(c["cause"])), [str(b) for b in c["behaviours"]]) for c in data.get("causes") or []],
        error=data.get("error"),
        generated_by=f"{suite['name']} {suite['version']}",
        records=[
            Link(name, relative_href(report_dir / name, report_dir)) for name in RECORDS if (report_dir / name).exists()
        ],
    )


def _profile_row(p: dict[str, Any], coverage: dict[str, str]) -> ProfileRow:
    return ProfileRow(
        name=p["profile"],
        verdict=p["verdict"],
        counts=[(key, int(p["counts"].get(key, 0))) for key, _ in COUNT_COLUMNS],
        coverage=coverage.get(p["profile"]),
        message=p["message"],
        unsupported_required=list(p["unsupportedRequired"]),
        unsupported_optional=list(p["unsupportedOptional"]),
    )


def _row(t: dict[str, Any], report_dir: Path) -> Row:
    message = sentence(str(t.get("message") or ""))
    lines = message.splitlines()
    long = len(message) > LONG_MESSAGE_CHARS or len(lines) > LONG_MESSAGE_LINES
    head = lines[0] if lines else ""
    if len(head) > 160:
        head = head[:157] + "..."
    level = t.get("level")
    return Row(
        id=t["id"],
        profile=t["profile"],
        feature=t["feature"],
        level=str(level) if level else None,
        outcome=t["outcome"],
        symbol=OUTCOMES.get(t["outcome"], "?"),
        duration=duration(t["durationSeconds"]),
        statement=t["statement"],
        spec=spec_link(t["spec"]),
        message=message,
        message_long=long,
        message_head=head + (f" ({len(lines)} lines)" if len(lines) > 1 else ""),
        evidence=find_evidence(t["id"], t.get("evidence"), report_dir),
    )


def _shard(s: Mapping[str, Any]) -> str:
    """One shard of a merged report: ``1/3 run-a: success, exit 0, 12 behaviours``."""
    text = f"{s.get('index')}/{s.get('total')} {s.get('runId', '')}: {s.get('verdict', '')}"
    if s.get("exitCode") is not None:
        text += f", exit {s['exitCode']}"
    text += f", {s.get('behaviours', 0)} behaviours"
    error = s.get("error")
    return text + (f" ({error.get('message')})" if isinstance(error, Mapping) else "")


def _cluster(cluster: dict[str, Any]) -> list[tuple[str, str]]:
    labels = {
        "provider": "Provider",
        "name": "Name",
        "kubernetesVersion": "Kubernetes",
        "context": "Context",
        "dns": "DNS",
    }
    facts = [(label, plain(cluster[key])) for key, label in labels.items() if cluster.get(key) not in (None, "")]
    versions = cluster.get("versions")
    if isinstance(versions, Mapping):
        facts += [(f"{name} version", plain(v)) for name, v in versions.items()]
    nodes = cluster.get("nodes")
    if isinstance(nodes, list):
        facts.append((f"Nodes ({len(nodes)})", plain(nodes)))
    shown = {*labels, "versions", "nodes", "simulates"}
    facts += [(key, plain(value)) for key, value in cluster.items() if key not in shown]
    return facts


def _implementation(impl: dict[str, Any], report_dir: Path) -> list[tuple[str, str | Link]]:
    labels = {"name": "Name", "version": "Version", "source": "Declared by", "deployedBy": "Deployed by"}
    facts: list[tuple[str, str | Link]] = [(label, plain(impl[k])) for k, label in labels.items() if impl.get(k)]
    log = impl.get("log")
    if log:
        found = _existing(report_dir, [Path(str(log)), Path(str(log)).name])
        facts.append(("Log", Link(str(log), relative_href(found, report_dir)) if found else plain(log)))
    shown = {*labels, "log", "supportedFeatures", "unsupportedFeatures"}
    facts += [(key, plain(value)) for key, value in impl.items() if key not in shown]
    return facts


# -- formatting (pure; table-tested) ---------------------------------------------------------------


def duration(seconds: float | int | None) -> str:
    """``0.25 s``, ``12.3 s``, ``2 min 05 s``, ``1 h 02 min``."""
    if seconds is None:
        return ""
    s = float(seconds)
    if s < 10:
        return f"{s:.2f} s"
    if s < 60:
        return f"{s:.1f} s"
    whole = round(s)
    if whole < 3600:
        return f"{whole // 60} min {whole % 60:02d} s"
    return f"{whole // 3600} h {whole % 3600 // 60:02d} min"


def timestamp(value: str | dt.datetime) -> str:
    """An ISO timestamp as people read it: ``2026-01-02 03:04:05 UTC``; unparseable text as is."""
    try:
        when = value if isinstance(value, dt.datetime) else dt.datetime.fromisoformat(str(value))
    except ValueError:
        return str(value)
    if when.tzinfo is None:
        return when.strftime("%Y-%m-%d %H:%M:%S")
    if when.utcoffset() == dt.timedelta(0):
        return when.strftime("%Y-%m-%d %H:%M:%S UTC")
    return when.strftime("%Y-%m-%d %H:%M:%S UTC%z")


def selection(sel: Mapping[str, Any]) -> str:
    """What the run selected: ``every profile`` or ``profiles: Core; ids: core/*``."""
    parts = [f"{key}: {', '.join(str(v) for v in sel.get(key) or [])}" for key in ("profiles", "features", "ids")]
    chosen = [p for p, key in zip(parts, ("profiles", "features", "ids"), strict=True) if sel.get(key)]
    return "; ".join(chosen) if chosen else "every profile"


def summary(totals: Mapping[str, int]) -> str:
    """``12 behaviours: 10 passed, 1 non-conformant, 1 error`` (zero counts left out)."""
    total = sum(totals.values())
    if not total:
        return "no behaviour was reported"
    noun = "behaviour" if total == 1 else "behaviours"
    return f"{total} {noun}: " + ", ".join(f"{n} {name}" for name, n in totals.items() if n)


def spec_link(spec: str) -> Link | str:
    """An ``http(s)`` URL as a link; anything else (``file.txt#Section``) stays text."""
    parsed = urlparse(spec.strip())
    if parsed.scheme in ("http", "https") and parsed.netloc:
        return Link(spec.strip(), spec.strip())
    return spec


def coverage_text(figures: Mapping[str, Any], level: str) -> str | None:
    """One level's figures as ``MUST 17/20 asserted (85.0%)``; None when it has no statement."""
    total, asserted = int(figures.get("total") or 0), int(figures.get("asserted") or 0)
    if not total:
        return None
    return f"{level} {asserted}/{total} asserted ({percent_text(100.0 * asserted / total)})"


def levels_text(entry: Mapping[str, Any]) -> str:
    """``MUST 17/20 asserted (85.0%), 2 gaps; SHOULD 1/2 asserted (50.0%)``, or ``no statements``."""
    parts = []
    for key, level in (("must", "MUST"), ("should", "SHOULD")):
        figures = entry.get(key) or {}
        text = coverage_text(figures, level)
        if text is not None:
            gaps = int(figures.get("gaps") or 0)
            parts.append(text + (f", {gaps} {'gap' if gaps == 1 else 'gaps'}" if gaps else ""))
    return "; ".join(parts) or "no statements"


def coverage_of(block: Mapping[str, Any] | None) -> tuple[str | None, dict[str, str]]:
    """The report's ``coverage`` block as the run's figure (with the spec map it was measured
    against) and each listed profile's; ``(None, {})`` without one."""
    if not block:
        return None, {}
    spec_map = block.get("specMap") or {}
    digest = str(spec_map.get("digest", ""))
    overall = (
        f"{levels_text(block.get('overall') or {})} of the {block.get('scope', '')} statements "
        f"(spec map {spec_map.get('file', '')} {digest[:19]}{'...' if len(digest) > 19 else ''}, "
        f"{spec_map.get('statements', 0)} statements)"
    )
    per_profile = {str(p["profile"]): levels_text(p) for p in block.get("profiles") or [] if "profile" in p}
    return overall, per_profile


def plain(value: Any) -> str:
    """A value as one line of text: scalars as is, a list of scalars comma-separated, else JSON."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, str | int | float):
        return str(value)
    if isinstance(value, list) and all(isinstance(v, str | int | float) for v in value):
        return ", ".join(str(v) for v in value)
    return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)


def rfc2119(text: str) -> Markup:
    """``text`` escaped, its RFC 2119 keywords (MUST, SHOULD NOT, ...) in ``<strong>``."""
    escaped = str(escape(text))
    return Markup(_RFC2119.sub(r'<strong class="kw">\1</strong>', escaped))


# -- evidence on disk --------------------------------------------------------------------------------


def find_evidence(behaviour: str, recorded: str | None, report_dir: Path) -> Evidence | None:
    """The behaviour's evidence under ``report_dir`` if it exists: the recorded path (absolute,
    or relative to the report directory), else ``artifacts/<its name>``, else the layout's
    ``artifacts/<id with / as _>`` (:mod:`.evidence`)."""
    candidates: list[Path | str] = []
    if recorded:
        candidates += [Path(recorded), Path("artifacts") / Path(recorded).name]
    candidates.append(Path("artifacts") / directory_name(behaviour))
    found = _existing(report_dir, candidates)
    if found is None:
        return None
    href = relative_href(found, report_dir)
    if found.is_file():
        return Evidence(Link(found.name, href), [])
    files = sorted(p for p in found.iterdir() if not p.name.startswith("."))
    links = [Link(p.name + ("/" if p.is_dir() else ""), relative_href(p, report_dir)) for p in files]
    return Evidence(Link(f"{found.name}/", href), links)


def _existing(report_dir: Path, candidates: list[Path | str]) -> Path | None:
    for candidate in candidates:
        path = Path(candidate)
        path = path if path.is_absolute() else report_dir / path
        if path.exists():
            return path
    return None


def relative_href(path: Path, report_dir: Path) -> str:
    """``path`` as a URL relative to a page in ``report_dir`` (percent-encoded, ``/`` separated;
    a directory ends in ``/``)."""
    rel = os.path.relpath(path.resolve(), report_dir.resolve())
    href = "/".join(quote(part) for part in Path(rel).parts)
    return href + "/" if path.is_dir() else href
