"""Markdown summary of a conformance run for $GITHUB_STEP_SUMMARY (standard library only).

    python ci/step_summary.py REPORT_DIR >> "$GITHUB_STEP_SUMMARY"

Reads REPORT_DIR/conformance-report.json (verdict, implementation, profiles, the non-conformant and
erroring tests, the warnings (failed SHOULD/MAY behaviours), preflight, error) and
REPORT_DIR/junit.xml (totals and the failing test cases).
Whatever is missing or unreadable is said so in the summary; the script itself always exits 0, so
it never hides the run's own result.
"""

from __future__ import annotations

import contextlib
import json
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

MAX_FAILURES = 30


def _cell(value: object) -> str:
    return str(value).replace("|", "\\|").replace("\n", " ")


def report_lines(path: Path) -> list[str]:
    if not path.is_file():
        return [f"No conformance report ({path.name} was not written): the run stopped before the suite."]
    try:
        report: Any = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        return [f"The conformance report {path.name} is unreadable: {exc}"]
    if not isinstance(report, dict):
        return [f"The conformance report {path.name} is not a JSON object."]
    lines = [f"**Verdict: {report.get('verdict', 'unknown')}**", ""]
    implementation = report.get("implementation")
    if isinstance(implementation, dict):
        version = implementation.get("version")
        lines.append(f"- implementation: {implementation.get('name', '?')}{f' {version}' if version else ''}")
    cluster = report.get("cluster")
    if isinstance(cluster, dict):
        lines.append(f"- cluster: {cluster.get('provider', '?')}, Kubernetes {cluster.get('kubernetesVersion', '?')}")
    run = report.get("run") if isinstance(report.get("run"), dict) else report
    for key in ("startedAt", "finishedAt", "durationSeconds"):
        if key in run:
            lines.append(f"- {key}: {run[key]}")
    if "exitCode" in report:
        lines.append(f"- exit code: {report['exitCode']}")
    lines += _shard_lines(run if isinstance(run, dict) else {})
    error = report.get("error")
    if isinstance(error, dict):
        lines.append(f"- error: {error.get('message', '')} ({error.get('hint') or ''})")
    lines += [f"- note: {note}" for note in report.get("notes") or [] if isinstance(note, str)]
    profiles = [p for p in report.get("profiles") or [] if isinstance(p, dict)]
    if profiles:
        lines += ["", "| profile | verdict | counts | message |", "|---|---|---|---|"]
        for profile in profiles:
            counts = profile.get("counts") if isinstance(profile.get("counts"), dict) else {}
            counted = ", ".join(f"{n} {k}" for k, n in counts.items() if n)
            name = profile.get("profile", profile.get("name", "?"))
            verdict = profile.get("verdict", profile.get("result", "?"))
            message = profile.get("message", "")
            lines.append(f"| {_cell(name)} | {_cell(verdict)} | {_cell(counted)} | {_cell(message)} |")
    bad = [
        t for t in report.get("tests") or [] if isinstance(t, dict) and t.get("outcome") in ("non-conformant", "error")
    ]
    if bad:
        lines += ["", "| test | outcome | message |", "|---|---|---|"]
        for test in bad[:MAX_FAILURES]:
            message = str(test.get("message", ""))[:200]
            lines.append(f"| {_cell(test.get('id', '?'))} | {_cell(test.get('outcome'))} | {_cell(message)} |")
        if len(bad) > MAX_FAILURES:
            lines.append(f"| ... and {len(bad) - MAX_FAILURES} more | | |")
    warned = [t for t in report.get("tests") or [] if isinstance(t, dict) and t.get("outcome") == "warning"]
    if warned:  # a failed SHOULD/MAY: fails no profile, but the implementer should see it
        lines += ["", "| SHOULD/MAY not met (warning) | message |", "|---|---|"]
        for test in warned[:MAX_FAILURES]:
            lines.append(f"| {_cell(test.get('id', '?'))} | {_cell(str(test.get('message', ''))[:200])} |")
        if len(warned) > MAX_FAILURES:
            lines.append(f"| ... and {len(warned) - MAX_FAILURES} more | |")
    checks = [c for c in report.get("preflight") or [] if isinstance(c, dict)]
    if checks:
        lines += ["", "| preflight | result | message |", "|---|---|---|"]
        lines += [
            f"| {_cell(c.get('name', '?'))} | {_cell(c.get('result', '?'))} | {_cell(c.get('message', ''))} |"
            for c in checks
        ]
    return lines


def _shard_lines(run: dict[str, Any]) -> list[str]:
    """A shard's report names its shard; a merged report lists the shards it was merged from."""
    lines = []
    shard = run.get("shard")
    if isinstance(shard, dict):
        count = len(shard.get("behaviours") or [])
        lines.append(
            f"- shard: {shard.get('index', '?')}/{shard.get('total', '?')} ({count} behaviours; the other shards' "
            "are skipped-by-user here: the merged report has the verdict)"
        )
    shards = [s for s in run.get("shards") or [] if isinstance(s, dict)]
    if shards:
        lines.append(f"- merged from {len(shards)} shards:")
        for s in shards:
            cluster: dict[str, Any] = s["cluster"] if isinstance(s.get("cluster"), dict) else {}
            lines.append(
                f"  - shard {s.get('index', '?')}/{s.get('total', '?')}: {s.get('verdict', '?')}, exit code "
                f"{s.get('exitCode', '?')}, {s.get('durationSeconds', '?')} s, {s.get('behaviours', '?')} behaviours, "
                f"cluster {cluster.get('provider', '?')} {cluster.get('kubernetesVersion', '')}".rstrip()
            )
    return lines


def junit_lines(path: Path) -> list[str]:
    if not path.is_file():
        return [f"No JUnit report ({path.name})."]
    try:
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError) as exc:
        return [f"The JUnit report {path.name} is unreadable: {exc}"]
    suites = [root] if root.tag == "testsuite" else root.findall("testsuite")
    totals = dict.fromkeys(("tests", "failures", "errors", "skipped"), 0)
    for suite in suites:
        for key in totals:
            with contextlib.suppress(ValueError):
                totals[key] += int(suite.get(key, "0"))
    passed = totals["tests"] - totals["failures"] - totals["errors"] - totals["skipped"]
    lines = [
        f"JUnit: {totals['tests']} tests, {passed} passed, {totals['failures']} failed, "
        f"{totals['errors']} errors, {totals['skipped']} skipped"
    ]
    failing = [
        case for case in root.iter("testcase") if case.find("failure") is not None or case.find("error") is not None
    ]
    if failing:
        lines += ["", "| failing test | message |", "|---|---|"]
        for case in failing[:MAX_FAILURES]:
            problem = case.find("failure")
            if problem is None:
                problem = case.find("error")
            name = ".".join(filter(None, (case.get("classname"), case.get("name"))))
            message = (problem.get("message") if problem is not None else "") or ""
            lines.append(f"| {_cell(name)} | {_cell(message[:200])} |")
        if len(failing) > MAX_FAILURES:
            lines.append(f"| ... and {len(failing) - MAX_FAILURES} more | |")
    return lines


def summary(report_dir: Path) -> str:
    lines = ["## Conformance on kind", ""]
    lines += report_lines(report_dir / "conformance-report.json")
    lines += ["", *junit_lines(report_dir / "junit.xml"), ""]
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    report_dir = Path(argv[1]) if len(argv) > 1 else Path("reports")
    print(summary(report_dir))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
