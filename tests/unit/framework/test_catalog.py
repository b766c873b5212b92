"""Behaviour validation, the @behaviour decorator and its registry, collect, render/drift and the
suite digest."""

from __future__ import annotations

import importlib
import sys
import textwrap
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from conformance.framework.catalog import (
    CATALOG_PATH,
    HEADER,
    REGISTRY,
    Behaviour,
    behaviour,
    collect,
    drift,
    register_markers,
    render,
    suite_digest,
)
from conformance.framework.features import Feature

STATEMENT = "The controller MUST create every Pod of every ServingGroup."
SPEC = "api-reference-workload-v1alpha1.txt#ModelServingSpec"


def b(id: str = "core/pods/created", feature: Feature | str = Feature.CORE, **kw: Any) -> Behaviour:
    return Behaviour(id, kw.pop("statement", STATEMENT), kw.pop("spec", SPEC), feature, **kw)  # type: ignore[arg-type]


@pytest.fixture
def registry(pytestconfig: pytest.Config) -> dict[str, Behaviour]:
    """A private registry (REGISTRY stays untouched), with the markers registered for --strict-markers."""
    register_markers(pytestconfig)
    return {}


# -- Behaviour ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "keyword"),
    [
        pytest.param({}, "MUST", id="must"),
        pytest.param({"statement": "The controller MUST NOT delete foreign Pods."}, "MUST NOT", id="must-not"),
        pytest.param({"statement": "Status SHOULD report observedGeneration."}, "SHOULD", id="should"),
        pytest.param(
            {"statement": "Status SHOULD NOT lag, e.g. by minutes."}, "SHOULD NOT", id="should-not-with-abbreviation"
        ),
        pytest.param({"statement": "A controller MAY delay creation."}, "MAY", id="may"),
        pytest.param({"statement": "An owner reference is REQUIRED on every Pod."}, "REQUIRED", id="required"),
        pytest.param({"statement": "The controller SHALL set status.replicas."}, "SHALL", id="shall-with-dotted-field"),
        pytest.param({"id": "a/b"}, "MUST", id="shortest-id"),
        pytest.param({"id": "headless-service/dns/entry-address-2"}, "MUST", id="long-id"),
        pytest.param(
            {"spec": "plugin-framework-and-headless-service.txt#Using Plugins"}, "MUST", id="section-with-space"
        ),
        pytest.param({"spec": "sub/dir/file.md#x"}, "MUST", id="spec-in-subdirectory"),
        pytest.param({"feature": "headlessservice"}, "MUST", id="feature-by-name"),
    ],
)
def test_valid_behaviours(kwargs: dict[str, Any], keyword: str) -> None:
    declared = b(**kwargs)
    assert declared.keyword == keyword
    assert isinstance(declared.feature, Feature)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        pytest.param({"id": "core"}, "at least two '/'-separated parts", id="id-one-part"),
        pytest.param({"id": "Core/pods"}, "the id must be lowercase", id="id-uppercase"),
        pytest.param({"id": "core/pods_created"}, "the id must be lowercase", id="id-underscore"),
        pytest.param({"id": "core//pods"}, "the id must be lowercase", id="id-empty-part"),
        pytest.param({"id": "core/pods/"}, "the id must be lowercase", id="id-trailing-slash"),
        pytest.param({"id": "core/-pods"}, "the id must be lowercase", id="id-leading-hyphen"),
        pytest.param({"id": "core/pods--x"}, "the id must be lowercase", id="id-double-hyphen"),
        pytest.param({"statement": "The controller creates Pods."}, "RFC 2119 keyword in capitals", id="no-keyword"),
        pytest.param(
            {"statement": "The controller must create Pods."}, "RFC 2119 keyword in capitals", id="lowercase-keyword"
        ),
        pytest.param({"statement": "The controller MUSTER Pods."}, "RFC 2119 keyword", id="keyword-inside-word"),
        pytest.param({"statement": "The controller MUST create Pods"}, "ending with '.'", id="no-full-stop"),
        pytest.param({"statement": "Pods MUST exist. Services MUST exist."}, "a single sentence", id="two-sentences"),
        pytest.param({"statement": "Pods MUST exist!  Really."}, "a single sentence", id="two-sentences-exclamation"),
        pytest.param({"statement": "Pods MUST\nexist."}, "one line", id="multi-line"),
        pytest.param({"statement": " Pods MUST exist."}, "one line without surrounding whitespace", id="leading-space"),
        pytest.param({"statement": ""}, "one line", id="empty-statement"),
        pytest.param({"spec": ""}, "spec must be '<file>#<section>'", id="empty-spec"),
        pytest.param({"spec": "api-reference.txt"}, "spec must be '<file>#<section>'", id="spec-without-section"),
        pytest.param({"spec": "api-reference.txt#"}, "spec must be '<file>#<section>'", id="spec-empty-section"),
        pytest.param({"spec": "#ModelServingSpec"}, "spec must be '<file>#<section>'", id="spec-without-file"),
        pytest.param({"spec": "/abs/file.txt#S"}, "relative to the spec directory", id="spec-absolute"),
        pytest.param({"spec": "../notes/x.md#S"}, "relative to the spec directory", id="spec-parent"),
        pytest.param({"feature": "Nope"}, "unknown feature 'Nope'", id="unknown-feature"),
    ],
)
def test_invalid_behaviours(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError) as info:
        b(**kwargs)
    assert message in str(info.value)


def test_profile_and_catalog_entry() -> None:
    declared = b("dns/records/pod", Feature.DNS_RESOLUTION, slow=True)
    assert declared.profile.name == "HeadlessServiceDNS"
    assert declared.as_dict() == {
        "id": "dns/records/pod",
        "profile": "HeadlessServiceDNS",
        "feature": "DNSResolution",
        "level": "MUST",
        "statement": STATEMENT,
        "spec": SPEC,
        "slow": True,
    }


@pytest.mark.parametrize(
    ("statement", "keyword", "level"),
    [
        pytest.param("Pods MUST exist.", "MUST", "MUST", id="must"),
        pytest.param("Pods MUST NOT leak.", "MUST NOT", "MUST", id="must-not"),
        pytest.param("Pods SHALL exist.", "SHALL", "MUST", id="shall"),
        pytest.param("Pods SHALL NOT leak.", "SHALL NOT", "MUST", id="shall-not"),
        pytest.param("An owner reference is REQUIRED.", "REQUIRED", "MUST", id="required"),
        pytest.param("Refusals SHOULD use HTTP 429.", "SHOULD", "SHOULD", id="should"),
        pytest.param("Status SHOULD NOT lag.", "SHOULD NOT", "SHOULD", id="should-not"),
        pytest.param("HTTP 429 is RECOMMENDED.", "RECOMMENDED", "SHOULD", id="recommended"),
        pytest.param("A controller MAY delay creation.", "MAY", "MAY", id="may"),
        pytest.param("A message is OPTIONAL.", "OPTIONAL", "MAY", id="optional"),
        pytest.param("Refusals SHOULD be 429 and MUST happen.", "SHOULD", "SHOULD", id="first-keyword-decides"),
        pytest.param("It MAY retry, but it MUST NOT loop.", "MAY", "MAY", id="may-before-must"),
    ],
)
def test_level_is_the_first_keywords(statement: str, keyword: str, level: str) -> None:
    declared = b(statement=statement)
    assert (declared.keyword, declared.level) == (keyword, level)
    assert declared.as_dict()["level"] == level


# -- the decorator -----------------------------------------------------------------------------------


def function(qualname: str, module: str = "suites.test_x") -> Callable[[], None]:
    def f() -> None:
        pass

    f.__qualname__ = f.__name__ = qualname
    f.__module__ = module
    return f


def test_decorator_registers_and_marks(registry: dict[str, Behaviour]) -> None:
    f = behaviour("core/pods/created", STATEMENT, SPEC, Feature.CORE, serial=True, slow=True, registry=registry)(
        function("test_created")
    )
    declared: Behaviour = f.__behaviour__  # type: ignore[attr-defined]
    assert registry == {"core/pods/created": declared}
    assert declared.origin == "suites.test_x.test_created"
    marks = {m.name: m for m in f.pytestmark}  # type: ignore[attr-defined]
    assert set(marks) == {"conformance", "serial", "slow"}
    assert marks["conformance"].args == (declared,)
    assert "core/pods/created" not in REGISTRY


@pytest.mark.parametrize(
    ("serial", "slow", "marks"),
    [
        pytest.param(False, False, {"conformance"}, id="plain"),
        pytest.param(True, False, {"conformance", "serial"}, id="serial"),
        pytest.param(False, True, {"conformance", "slow"}, id="slow"),
    ],
)
def test_decorator_marks(registry: dict[str, Behaviour], serial: bool, slow: bool, marks: set[str]) -> None:
    f = behaviour("core/a", STATEMENT, SPEC, "Core", serial=serial, slow=slow, registry=registry)(function("test_a"))
    assert {m.name for m in f.pytestmark} == marks  # type: ignore[attr-defined]


def test_duplicate_id_names_both_functions(registry: dict[str, Behaviour]) -> None:
    behaviour("core/a", STATEMENT, SPEC, Feature.CORE, registry=registry)(function("test_one", "suites.test_x"))
    with pytest.raises(ValueError) as info:
        behaviour("core/a", STATEMENT, SPEC, Feature.CORE, registry=registry)(function("test_two", "suites.test_y"))
    assert str(info.value) == (
        "behaviour id 'core/a' is declared twice: by suites.test_x.test_one and by suites.test_y.test_two"
    )


def test_same_function_declared_again_replaces_its_entry(registry: dict[str, Behaviour]) -> None:
    behaviour("core/a", STATEMENT, SPEC, Feature.CORE, registry=registry)(function("test_one"))
    behaviour("core/a", "Pods MUST exist.", SPEC, Feature.CORE, registry=registry)(function("test_one"))
    assert registry["core/a"].statement == "Pods MUST exist."


def test_one_behaviour_per_function(registry: dict[str, Behaviour]) -> None:
    f = behaviour("core/a", STATEMENT, SPEC, Feature.CORE, registry=registry)(function("test_one"))
    with pytest.raises(ValueError, match="already declares behaviour 'core/a'; one behaviour per test"):
        behaviour("core/b", STATEMENT, SPEC, Feature.CORE, registry=registry)(f)


def test_invalid_declaration_fails_before_decorating(registry: dict[str, Behaviour]) -> None:
    with pytest.raises(ValueError, match="RFC 2119"):
        behaviour("core/a", "Pods exist.", SPEC, Feature.CORE, registry=registry)
    assert registry == {}


# -- collect -----------------------------------------------------------------------------------------


@pytest.fixture
def suite_package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, registry: dict[str, Behaviour]) -> Iterator[str]:
    """A throwaway suites package whose test modules register into their own registry."""
    name = f"fakesuites_{uuid.uuid4().hex[:8]}"
    root = tmp_path / name
    (root / "core").mkdir(parents=True)

    def module(rel: str, body: str) -> None:
        (root / rel).write_text(textwrap.dedent(body))

    module("__init__.py", "REG: dict = {}\n")
    module("core/__init__.py", "")
    declare = "from conformance.framework.catalog import behaviour\nfrom {pkg} import REG\n"
    module(
        "core/test_pods.py",
        declare.format(pkg=name)
        + '@behaviour("core/pods/b", "Pods MUST exist.", "f.txt#S", "Core", registry=REG)\ndef test_b(): pass\n'
        + '@behaviour("core/pods/a", "Pods MUST run.", "f.txt#S", "Recovery", registry=REG)\ndef test_a(): pass\n',
    )
    module(
        "test_dns.py",
        declare.format(pkg=name)
        + '@behaviour("dns/a", "Names MUST resolve.", "f.txt#S", "DNSResolution", registry=REG)\ndef test_a(): pass\n',
    )
    module("helpers.py", "raise RuntimeError('helpers are not imported by collect')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    yield name
    for loaded in [m for m in sys.modules if m == name or m.startswith(name + ".")]:
        del sys.modules[loaded]


def test_collect_imports_test_modules_recursively(suite_package: str) -> None:
    pkg_registry: dict[str, Behaviour] = importlib.import_module(suite_package).REG
    assert pkg_registry == {}
    found = collect(suite_package, registry=pkg_registry)
    assert [x.id for x in found] == ["core/pods/a", "core/pods/b", "dns/a"]
    assert found[0].origin == f"{suite_package}.core.test_pods.test_a"
    assert collect(suite_package, registry=pkg_registry) == found  # idempotent: modules are imported once


@pytest.mark.parametrize(
    "package",
    [
        pytest.param("no_such_suites_package", id="top-level"),
        pytest.param("conformance.no_such_suites", id="inside-conformance"),
    ],
)
def test_collect_missing_package_is_empty(package: str) -> None:
    assert collect(package) == []


def test_collect_ignores_behaviours_outside_the_package(registry: dict[str, Behaviour]) -> None:
    behaviour("core/a", STATEMENT, SPEC, Feature.CORE, registry=registry)(function("test_a", "elsewhere.test_x"))
    assert collect("conformance.framework", registry=registry) == []


def test_collect_propagates_broken_suite_modules(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    name = f"brokensuites_{uuid.uuid4().hex[:8]}"
    (tmp_path / name).mkdir()
    (tmp_path / name / "__init__.py").write_text("")
    (tmp_path / name / "test_broken.py").write_text("import not_a_module_anywhere\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        with pytest.raises(ModuleNotFoundError, match="not_a_module_anywhere"):
            collect(name)
    finally:
        for loaded in [m for m in sys.modules if m.startswith(name)]:
            del sys.modules[loaded]


# -- render / drift ----------------------------------------------------------------------------------

BEHAVIOURS = [
    b("dns/records/pod", Feature.DNS_RESOLUTION, slow=True),
    b("plugins/chain/immutable", Feature.PLUGIN_CHAIN_IMMUTABILITY),
    b("core/scale/up", Feature.SCALE_SUBRESOURCE, serial=True),
    b("core/admission/reject", Feature.ADMISSION, statement="Invalid specs MUST be rejected."),
]


def test_render_groups_by_profile_then_id() -> None:
    text = render(BEHAVIOURS)
    assert text.startswith(HEADER + "\n")
    data = yaml.safe_load(text)
    assert data["apiVersion"] == "conformance.kthena.io/v1alpha1"
    assert data["kind"] == "BehaviourCatalog"
    assert [e["id"] for e in data["behaviours"]] == [
        "core/admission/reject",
        "core/scale/up",
        "plugins/chain/immutable",
        "dns/records/pod",
    ]
    assert data["behaviours"][1] == {
        "id": "core/scale/up",
        "profile": "Core",
        "feature": "ScaleSubresource",
        "level": "MUST",
        "statement": STATEMENT,
        "spec": SPEC,
        "serial": True,
    }
    assert "slow" not in data["behaviours"][0] and "serial" not in data["behaviours"][0]
    assert render(list(reversed(BEHAVIOURS))) == text


def test_render_empty() -> None:
    text = render([])
    assert yaml.safe_load(text)["behaviours"] == []
    assert drift([], text) == []


def test_render_drift_round_trip() -> None:
    assert drift(BEHAVIOURS, render(BEHAVIOURS)) == []


def _edit(text: str, old: str, new: str) -> str:
    assert old in text
    return text.replace(old, new)


@pytest.mark.parametrize(
    ("behaviours", "edit", "expected"),
    [
        pytest.param(
            [*BEHAVIOURS, b("core/new/one")],
            None,
            ["added: core/new/one (declared by a test, missing from the catalog)"],
            id="added",
        ),
        pytest.param(
            BEHAVIOURS[1:], None, ["removed: dns/records/pod (in the catalog, declared by no test)"], id="removed"
        ),
        pytest.param(
            [b("dns/records/pod", Feature.DNS_RESOLUTION, slow=True, statement="Names MUST resolve."), *BEHAVIOURS[1:]],
            None,
            [f"changed: dns/records/pod: statement: {STATEMENT!r} -> 'Names MUST resolve.'"],
            id="changed-statement",
        ),
        pytest.param(
            [b("dns/records/pod", Feature.DNS_RESOLUTION), *BEHAVIOURS[1:]],
            None,
            ["changed: dns/records/pod: slow: True -> None"],
            id="changed-flag",
        ),
        pytest.param(
            [b("dns/records/pod", Feature.MIGRATION_REQUIRED, slow=True), *BEHAVIOURS[1:]],
            None,
            ["changed: dns/records/pod: feature: 'DNSResolution' -> 'MigrationRequired'"],
            id="changed-feature",
        ),
        pytest.param(
            BEHAVIOURS,
            ("kind: BehaviourCatalog", "kind: Catalog"),
            ["the catalog's apiVersion/kind are not conformance.kthena.io/v1alpha1/BehaviourCatalog"],
            id="wrong-kind",
        ),
        pytest.param(
            BEHAVIOURS, ("behaviours:\n", "behaviours: [\n"), ["the catalog is not valid YAML"], id="not-yaml"
        ),
        pytest.param(
            BEHAVIOURS, (HEADER, "# hand edited"), ["its layout is not the generated one"], id="hand-edited-comment"
        ),
        pytest.param(
            BEHAVIOURS,
            ("  profile: Core\n  feature: ScaleSubresource\n", "  feature: ScaleSubresource\n  profile: Core\n"),
            ["its layout is not the generated one"],
            id="reordered-keys",
        ),
    ],
)
def test_drift(behaviours: list[Behaviour], edit: tuple[str, str] | None, expected: list[str]) -> None:
    text = render(BEHAVIOURS)
    if edit is not None:
        text = _edit(text, *edit)
    problems = drift(behaviours, text)
    assert len(problems) == len(expected), problems
    for problem, fragment in zip(problems, expected, strict=True):
        assert fragment in problem


def test_catalog_path_is_inside_the_conformance_package() -> None:
    assert CATALOG_PATH.name == "catalog.yaml"
    assert (CATALOG_PATH.parent / "framework" / "catalog.py").is_file()


# -- suite_digest ------------------------------------------------------------------------------------


def tree(root: Path, files: dict[str, bytes]) -> Path:
    for rel, content in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content)
    return root


FILES = {
    "suites/__init__.py": b"",
    "suites/core/test_pods.py": b"def test(): pass\n",
    "suites/core/pods.yaml": b"kind: ModelServing\n",
    "framework/waits.py": b"x = 1\n",
}


def test_digest_is_stable_across_locations(tmp_path: Path) -> None:
    one = suite_digest(tree(tmp_path / "a", FILES))
    two = suite_digest(tree(tmp_path / "elsewhere" / "b", dict(reversed(FILES.items()))))
    assert one == two
    assert one.startswith("sha256:") and len(one) == len("sha256:") + 64


@pytest.mark.parametrize(
    ("change", "same"),
    [
        pytest.param({"suites/core/test_pods.py": b"def test(): pass \n"}, False, id="byte-changed"),
        pytest.param({"suites/core/pods.yaml": b"kind: ModelServing\n\n"}, False, id="yaml-changed"),
        pytest.param({"framework/new.py": b""}, False, id="file-added"),
        pytest.param(
            {"suites/core/test_pods.py": None, "suites/core/test_pod.py": b"def test(): pass\n"},
            False,
            id="file-renamed",
        ),
        pytest.param(
            {"suites/core/__pycache__/test_pods.cpython-311.pyc": b"junk", "suites/__pycache__/x.py": b"junk"},
            True,
            id="pycache-ignored",
        ),
        pytest.param(
            {"suites/core/notes.md": b"text", "suites/core/data.json": b"{}"}, True, id="other-extensions-ignored"
        ),
        pytest.param({"other/test_x.py": b"x", "cli.py": b"x"}, True, id="outside-suites-and-framework-ignored"),
        pytest.param({"suites/core/test_pods.py": b"def test(): pass\r\n"}, True, id="crlf-reads-as-lf"),
    ],
)
def test_digest_changes_with_content_only(tmp_path: Path, change: dict[str, bytes | None], same: bool) -> None:
    before = suite_digest(tree(tmp_path / "before", FILES))
    after_root = tree(tmp_path / "after", FILES)
    for rel, content in change.items():
        if content is None:
            (after_root / rel).unlink()
        else:
            tree(after_root, {rel: content})
    assert (suite_digest(after_root) == before) is same


def test_digest_of_an_empty_tree_and_the_real_suite(tmp_path: Path) -> None:
    assert suite_digest(tmp_path) == suite_digest(tmp_path / "missing")
    assert suite_digest().startswith("sha256:")
