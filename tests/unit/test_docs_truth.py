"""The docs say what the code does: every figure, count, list, variable and example the docs quote
that can be checked against the code is, so a change to one without the other fails here.

Checked: the profiles (README's list, running-the-suite.md's table of required and optional
features, every "N profiles" and "runs all N"); the behaviour, profile and fault counts quoted; the
spec-map coverage quoted; the exit codes and their meanings; the environment variables the code
reads against docs/configuration.md's tables, both ways (and the Makefile's variables); every
behaviour id quoted exists in the catalog; every YAML example parses, and support, launch,
podLabels, controllerRestart and capability examples validate against their schemas; every
``.PHONY`` target of the Makefile has a rule; timing figures are dated; no module docstring
promises work "in later issues". Timing figures themselves are measured, not generated: the lead
fills README's "Measured times" rows.
"""

from __future__ import annotations

import ast
import fnmatch
import functools
import re
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from conformance.framework import catalog, specmap
from conformance.framework.capabilities import load_all
from conformance.framework.exit_codes import MEANINGS
from conformance.framework.features import PROFILES
from conformance.framework.support import load_support
from kthena_ref.faults import FAULTS

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
RUNNING = ROOT / "docs" / "running-the-suite.md"
CONFIGURATION = ROOT / "docs" / "configuration.md"
DOCS = [README, ROOT / "fake-devices" / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
CODE_ROOTS = ["conformance", "kthena_ref", "fake-devices/fake_devices", "bench", "ci"]

WORDS = [
    "one",
    "two",
    "three",
    "four",
    "five",
    "six",
    "seven",
    "eight",
    "nine",
    "ten",
    "eleven",
    "twelve",
    "thirteen",
    "fourteen",
    "fifteen",
]
NUMBER = r"(\d[\d,]*|" + "|".join(WORDS) + r")"

#: Ids the docs name on purpose although the catalog no longer has them (the reading says so).
REMOVED_IDS = {"plugins/framework/unknown-plugin-not-ignored"}  # spec-readings.md: "so it was removed"


@functools.cache
def _trees() -> dict[Path, ast.Module]:
    """Every module of the code roots, parsed once for all the tests here."""
    return {p: ast.parse(p.read_text()) for r in CODE_ROOTS for p in sorted((ROOT / r).rglob("*.py"))}


@functools.cache
def _ids() -> frozenset[str]:
    return frozenset(b.id for b in catalog.collect())


def _number(text: str) -> int:
    return WORDS.index(text) + 1 if text in WORDS else int(text.replace(",", ""))


def _flat(path: Path) -> str:
    """The file's text with every run of whitespace one space (figures wrap across lines)."""
    return " ".join(path.read_text().split())


def _doc_id(path: Path) -> str:
    return str(path.relative_to(ROOT))


# -- profiles ------------------------------------------------------------------------------------------


def test_the_readme_lists_every_profile_in_order() -> None:
    found = re.search(r"grouped into profiles \(([^)]*)\)", _flat(README))
    assert found, "README: the sentence 'Behaviours are grouped into profiles (...)' is gone"
    assert [n.strip() for n in found.group(1).split(",")] == list(PROFILES)


def test_the_profile_table_is_the_code_s() -> None:
    rows: dict[str, tuple[set[str], set[str]]] = {}
    section = RUNNING.read_text().split("## Profiles, features, support", 1)[1]
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 3 and cells[0] in PROFILES:
            rows[cells[0]] = ({f for f in cells[1].split(", ") if f}, {f for f in cells[2].split(", ") if f})
    expected = {p.name: ({str(f) for f in p.required}, {str(f) for f in p.optional}) for p in PROFILES.values()}
    assert rows == expected
    assert list(rows) == list(PROFILES)


@pytest.mark.parametrize("doc", DOCS, ids=_doc_id)
def test_every_profile_count_quoted_is_the_code_s(doc: Path) -> None:
    text = _flat(doc)
    quoted = [m.group(1) for m in re.finditer(rf"\b{NUMBER} profiles\b", text)]
    quoted += [m.group(1) for m in re.finditer(rf"\bruns all {NUMBER}\b", text)]
    assert [q for q in quoted if _number(q) != len(PROFILES)] == [], f"{doc.name}: there are {len(PROFILES)} profiles"


# -- counts and figures --------------------------------------------------------------------------------


def test_the_readme_s_behaviour_profile_and_fault_counts() -> None:
    text = _flat(README)
    found = re.search(
        rf"holds {NUMBER} behaviours in {NUMBER} profiles, each proven able to fail by one of the {NUMBER} reference faults",
        text,
    )
    assert found, (
        "README: the sentence 'The catalog holds N behaviours in M profiles, ... the K reference faults' is gone"
    )
    assert [_number(g) for g in found.groups()] == [len(_ids()), len(PROFILES), len(FAULTS)]


@pytest.mark.parametrize("doc", [README, RUNNING, ROOT / "docs" / "reference-controller.md"], ids=_doc_id)
def test_every_fault_count_quoted_is_the_code_s(doc: Path) -> None:
    """(docs/development.md's self-validation section keeps its own dated breakdown.)"""
    quoted = [m.group(1) for m in re.finditer(rf"\b{NUMBER} (?:named|reference) faults\b", _flat(doc))]
    assert [q for q in quoted if _number(q) != len(FAULTS)] == [], f"{doc.name}: kthena_ref/faults.py has {len(FAULTS)}"


def test_the_coverage_quoted_is_the_spec_map_s() -> None:
    loaded = specmap.load(specmap.SPECMAP_PATH, catalog=catalog.collect())
    overall = specmap.coverage(loaded.statements).overall.must
    api_only = specmap.without_implementation_code(loaded.statements)
    text = _flat(RUNNING)
    for figures, what in ((overall, "plain"), (api_only, "without them")):
        quoted = f"{figures.asserted}/{figures.total} ({specmap.percent_text(figures.percent)}) {what}"
        assert quoted in text, f"running-the-suite.md should say {quoted!r} (what `kthena-conformance coverage` prints)"


@pytest.mark.parametrize("doc", [README, RUNNING], ids=_doc_id)
def test_every_exit_code_is_documented_with_its_meaning(doc: Path) -> None:
    text = _flat(doc)
    for code, meaning in MEANINGS.items():
        assert f"{code} {meaning}" in text, f"{doc.name}: exit code {code} should read '{code} {meaning}'"


@pytest.mark.parametrize(
    "doc", [d for d in DOCS if d.name != "development.md" and "readings" not in d.name], ids=_doc_id
)
def test_timing_figures_are_dated(doc: Path) -> None:
    """A duration ("about 11 minutes", "2 m 10 s") in prose is dated where it stands; the measured
    figures live in docs/development.md#measured and README's Measured times table."""
    duration = re.compile(rf"\b(?:about|takes|took) {NUMBER} (?:minutes?|hours?)\b|\b\d+ m \d+ s\b")
    dated = re.compile(r"\b20\d\d-\d\d-\d\d\b")
    undated = [
        line.strip() for line in doc.read_text().splitlines() if duration.search(line) and not dated.search(line)
    ]
    assert undated == []


# -- environment variables -----------------------------------------------------------------------------


def _module_strings(tree: ast.Module) -> dict[str, str]:
    out = {}
    for node in tree.body:
        targets = (
            node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
        )
        value = getattr(node, "value", None)
        if isinstance(value, ast.Constant) and isinstance(value.value, str):
            out.update({t.id: value.value for t in targets if isinstance(t, ast.Name)})
    return out


def _is_environ(node: ast.AST) -> bool:
    return (
        isinstance(node, ast.Attribute)
        and node.attr == "environ"
        and isinstance(node.value, ast.Name)
        and node.value.id == "os"
    )


def _env_arguments(node: ast.AST) -> list[ast.AST]:
    """The variable-name arguments of an environment read at ``node`` (none if it is not one)."""
    if isinstance(node, ast.Subscript) and _is_environ(node.value) and isinstance(node.ctx, ast.Load):
        return [node.slice]
    if not isinstance(node, ast.Call):
        return []
    func, args = node.func, [k.value for k in node.keywords if k.arg == "envvar"]
    if (isinstance(func, ast.Attribute) and func.attr in ("get", "setdefault", "pop") and _is_environ(func.value)) or (
        isinstance(func, ast.Attribute) and func.attr == "getenv" and isinstance(func.value, ast.Name)
    ):
        args += node.args[:1]
    return args


def _string_values(
    arg: ast.AST, local: dict[str, str], alias: dict[str, str], everywhere: dict[str, set[str]]
) -> set[str]:
    if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
        return {arg.value}
    if isinstance(arg, ast.Name):
        return {local[arg.id]} if arg.id in local else everywhere.get(alias.get(arg.id, arg.id), set())
    return set()


def env_vars_read() -> dict[str, set[str]]:
    """Every environment variable the code reads (``os.environ.get/[]/setdefault/pop``, ``os.getenv``,
    click's ``envvar=``), a name given as a string or as a module constant, with the files reading it."""
    trees = {p: t for p, t in _trees().items() if "suites" not in p.parts}
    everywhere: dict[str, set[str]] = {}
    for tree in trees.values():
        for name, value in _module_strings(tree).items():
            everywhere.setdefault(name, set()).add(value)
    found: dict[str, set[str]] = {}
    for path, tree in trees.items():
        local = _module_strings(tree)
        alias = {a.asname or a.name: a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) for a in n.names}
        for node in ast.walk(tree):
            for arg in _env_arguments(node):
                for name in _string_values(arg, local, alias, everywhere):
                    found.setdefault(name, set()).add(str(path.relative_to(ROOT)))
    return found


def documented_env_vars() -> tuple[set[str], set[str]]:
    """(variables the code reads, variables of the Makefile) as docs/configuration.md's tables list them."""
    code, make = set(), set()
    for line in CONFIGURATION.read_text().splitlines():
        if not line.startswith("| `"):
            continue
        first = line.split("|")[1]
        names = set(re.findall(r"`([A-Z][A-Z0-9_]*)`", first))
        (make if "(make)" in first else code).update(names)
    return code, make


def test_every_environment_variable_the_code_reads_is_documented_and_no_other() -> None:
    read = env_vars_read()
    code, _ = documented_env_vars()
    assert sorted(set(read) - code) == [], (
        f"read by the code, missing from docs/configuration.md: { {n: sorted(read[n]) for n in set(read) - code} }"
    )
    assert sorted(code - set(read)) == [], "in docs/configuration.md but read by no code"


def test_every_makefile_variable_is_documented_and_no_other() -> None:
    makefile = (ROOT / "Makefile").read_text()
    settable = set(re.findall(r"^([A-Z][A-Z0-9_]*)\s*\?=", makefile, re.MULTILINE))
    settable |= set(re.findall(r"\$\(if \$\(([A-Z][A-Z0-9_]*)\)", makefile))
    _, make = documented_env_vars()
    assert make == settable


# -- behaviour ids and examples ------------------------------------------------------------------------


@pytest.mark.parametrize("doc", DOCS, ids=_doc_id)
def test_every_behaviour_id_quoted_exists(doc: Path) -> None:
    ids = _ids()
    prefixes = sorted({i.split("/")[0] for i in ids})
    pattern = re.compile(r"(?<![\w./-])((?:" + "|".join(prefixes) + r")/[a-z0-9*][a-z0-9/*_-]*[a-z0-9*])")
    unknown = []
    for number, line in enumerate(doc.read_text().splitlines(), 1):
        for match in pattern.finditer(line):
            quoted = match.group(1)
            if re.fullmatch(r"core/v\d+\w*", quoted) or quoted in REMOVED_IDS:  # the core/v1 API group
                continue
            if not any(fnmatch.fnmatchcase(i, quoted) or i.startswith(quoted + "/") for i in ids):
                unknown.append(f"{doc.name}:{number}: {quoted}")
    assert unknown == []


def yaml_examples() -> Iterator[Any]:
    for doc in DOCS:
        lines = doc.read_text().splitlines()
        for i, line in enumerate(lines):
            if line.strip() == "```yaml":
                end = next(j for j in range(i + 1, len(lines)) if lines[j].strip() == "```")
                text = textwrap.dedent("\n".join(lines[i + 1 : end]))
                yield pytest.param(text, id=f"{doc.name}:{i + 1}")


SUPPORT_FRAGMENTS = {"launch", "podLabels", "controllerRestart", "unsupportedFeatures"}
MINIMAL_SUPPORT = {
    "apiVersion": "conformance.kthena.io/v1alpha1",
    "kind": "ImplementationSupport",
    "implementation": {"name": "example", "version": "1.0"},
    "supportedFeatures": ["Core", "Admission", "Recovery"],
}


@pytest.mark.parametrize("text", list(yaml_examples()))
def test_every_yaml_example_parses_and_validates(tmp_path: Path, text: str) -> None:
    data = yaml.safe_load(text)
    assert data is not None
    path = tmp_path / "example.yaml"
    if isinstance(data, dict) and data.get("kind") == "ImplementationSupport":
        path.write_text(text)
        load_support(path)
    elif isinstance(data, dict) and set(data) <= SUPPORT_FRAGMENTS:  # "beside supportedFeatures"
        for manifest in (data.get("launch") or {}).get("manifests") or []:
            (tmp_path / manifest).parent.mkdir(parents=True, exist_ok=True)
            (tmp_path / manifest).write_text("{}\n")
        path.write_text(yaml.safe_dump({**MINIMAL_SUPPORT, **data}))
        load_support(path)
    elif isinstance(data, dict) and data.get("kind") == "AcceleratorCapabilities":
        path.write_text(text)
        load_all([path])


# -- the Makefile and the docstrings -------------------------------------------------------------------


def test_every_phony_target_has_a_rule() -> None:
    makefile = (ROOT / "Makefile").read_text()
    phony = set(re.search(r"^\.PHONY:(.*)$", makefile, re.MULTILINE).group(1).split())  # type: ignore[union-attr]
    rules = set(re.findall(r"^([a-z][a-z0-9-]*):", makefile, re.MULTILINE))
    assert phony - rules == set(), "declared .PHONY without a rule: `make` says 'Nothing to be done' and succeeds"
    assert rules - phony == set()


def test_no_docstring_promises_later_work() -> None:
    """Module, class and function docstrings (a click command's is its --help) say what is true today."""
    stale = re.compile(r"\(later\)|in later issues|\(in a later|implemented later", re.IGNORECASE)
    found = []
    for path, tree in _trees().items():
        for node in ast.walk(tree):
            documented = isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
            if documented and stale.search(ast.get_docstring(node) or ""):  # type: ignore[arg-type]
                found.append(f"{path.relative_to(ROOT)}: {getattr(node, 'name', '(module)')}")
    assert found == []
