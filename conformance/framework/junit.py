"""JUnit XML from the report, for CI systems that render test results.

Written from the merged report (not per pytest pass), so it holds every behaviour of the run
exactly once, with the suite's outcomes mapped onto JUnit's: non-conformant is a ``failure``,
error an ``error``, not-supported and skipped-by-user a ``skipped`` carrying the reason. JUnit has
no warning: a ``warning`` (a SHOULD or MAY behaviour that did not hold) is a passed test case, as
it does not fail the run, with its ``outcome`` property ``warning`` and the finding in its
``system-out`` (pytest's own convention for passed tests with something to say). Each test case
carries its behaviour id, feature, profile, level and spec reference as properties.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any


def render(report: dict[str, Any]) -> str:
    tests = report.get("tests") or []
    suites = ET.Element("testsuites", name="kthena-conformance")
    by_profile: dict[str, list[dict[str, Any]]] = {}
    for t in tests:
        by_profile.setdefault(t.get("profile") or "unknown", []).append(t)
    if report.get("error"):
        suite = ET.SubElement(suites, "testsuite", name="run", tests="1", failures="0", errors="1", skipped="0")
        case = ET.SubElement(suite, "testcase", classname="run", name="run")
        ET.SubElement(case, "error", message=str(report["error"].get("message", ""))[:500]).text = str(
            report["error"].get("hint") or ""
        )
    for profile, cases in by_profile.items():
        counts = {k: sum(1 for c in cases if c["outcome"] == k) for k in ("non-conformant", "error")}
        skipped = sum(1 for c in cases if c["outcome"] in ("not-supported", "skipped-by-user"))
        suite = ET.SubElement(
            suites,
            "testsuite",
            name=profile,
            tests=str(len(cases)),
            failures=str(counts["non-conformant"]),
            errors=str(counts["error"]),
            skipped=str(skipped),
            time=f"{sum(float(c.get('durationSeconds') or 0) for c in cases):.3f}",
        )
        for c in cases:
            case = ET.SubElement(
                suite, "testcase", classname=f"{profile}.{c.get('feature')}", name=c["id"],
                time=f"{float(c.get('durationSeconds') or 0):.3f}",
            )  # fmt: skip
            props = ET.SubElement(case, "properties")
            for key in ("id", "feature", "profile", "level", "spec", "outcome", "evidence"):
                if c.get(key):
                    ET.SubElement(props, "property", name=key, value=str(c[key]))
            message = str(c.get("message") or "")
            if c["outcome"] == "non-conformant":
                ET.SubElement(case, "failure", message=message[:500], type="NonConformant").text = message
            elif c["outcome"] == "error":
                ET.SubElement(case, "error", message=message[:500], type="Inconclusive").text = message
            elif c["outcome"] in ("not-supported", "skipped-by-user"):
                ET.SubElement(case, "skipped", message=f"{c['outcome']}: {message}"[:500])
            elif c["outcome"] == "warning":
                level = c.get("level") or "SHOULD"
                ET.SubElement(case, "system-out").text = f"warning: {level} not met (does not fail the run): {message}"
    ET.indent(suites)
    return ET.tostring(suites, encoding="unicode", xml_declaration=True) + "\n"


def write(report: dict[str, Any], path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    try:
        tmp.write_text(render(report))
        tmp.replace(path)
    except BaseException:  # a full disk, say: no half-written file stays behind
        tmp.unlink(missing_ok=True)
        raise
    return path
