"""`kthena-conformance coverage`: the figures per profile and overall, the uncovered MUST
statements, --profile / --uncovered / --format json / --spec-map, and bad input as one clear
line on stderr with exit code 2, never a traceback. The spec map here is a small fixture naming
real catalog behaviours; the packaged one is only read when no --spec-map is given."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner, Result

from conformance.cli import main
from conformance.framework import catalog, specmap

CORE = next(b.id for b in catalog.collect() if b.profile.name == "Core")
PLUGINS = next(b.id for b in catalog.collect() if b.profile.name == "Plugins")


def entry(id: str, profile: str, level: str = "MUST", behaviours: list[str] | None = None, **kw: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "id": id,
        "document": "api-reference-workload-v1alpha1.txt",
        "section": "ModelServingSpec",
        "text": "t",
        "level": level,
        "topic": "ModelServing",
        "profile": profile,
        "behaviours": behaviours or [],
        # every claim names its test and fault (test_specmap_proofs checks the real map's against the tables)
        "proofs": [{"behaviour": b, "test": "t.py::test_t", "fault": "f"} for b in behaviours or []],
    }
    return {**data, **kw}


def gap(detail: str) -> dict[str, str]:
    return {"reason": "gap", "detail": detail}


MAP: dict[str, Any] = {
    "apiVersion": "conformance.kthena.io/v1alpha1",
    "kind": "SpecMap",
    "documents": [{"file": "api-reference-workload-v1alpha1.txt", "scope": "in"}],
    "statements": [
        entry("core/a/asserted", "Core", behaviours=[CORE]),
        entry("core/a/gap", "Core", notAsserted=gap("read status.replicas at 0")),
        entry("core/a/kubelet", "Core", notAsserted={"reason": "needs-real-kubelet", "detail": "a real restart"}),
        entry("core/a/should", "Core", "SHOULD", notAsserted=gap("HTTP 429")),
        entry("plugins/a/asserted", "Plugins", behaviours=[PLUGINS]),
        entry("plugins/a/gap", "Plugins", notAsserted=gap("scope roles")),
    ],
}


def invoke(tmp_path: Path, *args: str, data: Any = MAP) -> Result:
    path = tmp_path / "specmap.yaml"
    path.write_text(data if isinstance(data, str) else yaml.safe_dump(data, sort_keys=False))
    return CliRunner().invoke(main, ["coverage", "--spec-map", str(path), *args])


def test_text_shows_every_profile_the_overall_figure_and_the_uncovered(tmp_path: Path) -> None:
    result = invoke(tmp_path)
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    rows = {line.split()[0]: line for line in lines if line.split() and line.split()[0] in (*PROFILES_SHOWN, "all")}
    assert rows["Core"].split()[1:] == ["1/3", "(33.3%)", "1", "1", "0/1", "(0.0%)", "1"]
    assert rows["Plugins"].split()[1:] == ["1/2", "(50.0%)", "0", "1", "0/0", "(n/a)", "0"]
    assert rows["all"].split()[2:] == ["2/5", "(40.0%)", "1", "2", "0/1", "(0.0%)", "1"]
    assert "uncovered MUST statements: 3 (2 gaps, 1 explained):" in lines
    assert (
        "MUST, all profiles, without the 0 statement(s) about one implementation's own code "
        "(reason not-modelserving): 2/5 (40.0%)"
    ) in lines
    success = next(i for i, line in enumerate(lines) if line.startswith("what a success proves"))
    listed = [line.split()[0] for line in lines[:success] if line.startswith("  ") and not line.startswith("      ")]
    assert listed == ["core/a/gap", "plugins/a/gap", "core/a/kubelet"]  # gaps first
    # issue 31: per profile, what a success leaves unasserted (the fixture's claims are required features')
    assert "  Core: 0 a success can leave unasserted, 0 asserted in part, 1 claimed with a proof" in lines
    assert "      gap: read status.replicas at 0" in lines
    assert "      needs-real-kubelet: a real restart" in lines
    assert "core/a/should" not in result.stdout  # a SHOULD is never in the MUST list


PROFILES_SHOWN = ("Core", "Plugins", "HeadlessServiceDNS", "Rollout")


@pytest.mark.parametrize(
    ("args", "shown", "listed"),
    [
        pytest.param(["--profile", "plugins"], ["Plugins"], ["plugins/a/gap"], id="one-profile-any-case"),
        pytest.param(["--profile", "Core", "--profile", "Plugins"], ["Core", "Plugins"], None, id="two-profiles"),
        pytest.param(["--profile", "Rollout"], ["Rollout"], [], id="a-profile-without-statements"),
    ],
)
def test_profile_narrows_the_rows_and_the_list(
    tmp_path: Path, args: list[str], shown: list[str], listed: list[str] | None
) -> None:
    data = json.loads(invoke(tmp_path, *args, "--format", "json").stdout)
    assert [p["profile"] for p in data["profiles"]] == shown
    assert data["overall"]["must"]["total"] == 5  # the overall figure is always every profile's
    if listed is not None:
        assert [s["id"] for s in data["uncovered"]] == listed


def test_json(tmp_path: Path) -> None:
    result = invoke(tmp_path, "--format", "json")
    assert result.exit_code == 0
    data = json.loads(result.stdout)
    assert data["specMap"]["statements"] == 6 and data["specMap"]["digest"].startswith("sha256:")
    assert data["scope"] == "ModelServing, AutoscalingPolicy"
    core = next(p for p in data["profiles"] if p["profile"] == "Core")
    assert core["must"] == {"total": 3, "asserted": 1, "explained": 1, "gaps": 1, "percent": 33.33}
    assert data["overall"]["should"] == {"total": 1, "asserted": 0, "explained": 0, "gaps": 1, "percent": 0.0}
    assert data["overallWithoutImplementationCode"]["must"] == {
        "total": 5, "asserted": 2, "explained": 1, "gaps": 2, "percent": 40.0
    }  # fmt: skip
    assert data["uncovered"][0] == {
        "id": "core/a/gap",
        "document": "api-reference-workload-v1alpha1.txt",
        "section": "ModelServingSpec",
        "level": "MUST",
        "profile": "Core",
        "reason": "gap",
        "detail": "read status.replicas at 0",
    }
    assert CORE not in data["unmappedBehaviours"] and PLUGINS not in data["unmappedBehaviours"]


@pytest.mark.parametrize("fmt", ["text", "json"])
def test_uncovered_only(tmp_path: Path, fmt: str) -> None:
    result = invoke(tmp_path, "--uncovered", "--format", fmt)
    assert result.exit_code == 0
    if fmt == "json":
        assert list(json.loads(result.stdout)) == ["uncovered"]
    else:
        assert result.stdout.startswith("uncovered MUST statements: 3")
        assert "MUST asserted" not in result.stdout and "spec map" not in result.stdout


def invalid_map() -> dict[str, Any]:
    data: dict[str, Any] = copy.deepcopy(MAP)
    data["statements"][0]["behaviours"] = ["core/no/such-behaviour"]
    return data


@pytest.mark.parametrize(
    ("args", "data", "message"),
    [
        pytest.param(["--profile", "Nope"], MAP, "error: --profile: unknown profile 'Nope' (known: Core,", id="unknown-profile"),
        pytest.param([], "a: [", "specmap.yaml: not valid YAML: line 1", id="not-yaml"),
        pytest.param(
            [], invalid_map(), "statements[0].behaviours[0]: behaviour 'core/no/such-behaviour' (core/a/asserted) is not in",
            id="invalid",
        ),
        pytest.param(["--format", "xml"], MAP, "Invalid value for '--format'", id="unknown-format"),
    ],
)  # fmt: skip
def test_bad_input_is_one_clear_line_and_exit_2(tmp_path: Path, args: list[str], data: Any, message: str) -> None:
    result = invoke(tmp_path, *args, data=data)
    assert result.exit_code == 2
    assert message in result.stderr
    assert result.stdout == "" and "Traceback" not in result.output


def test_an_unreadable_spec_map(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["coverage", "--spec-map", str(tmp_path / "nope.yaml")])
    assert result.exit_code == 2
    assert result.stderr.strip() == f"error: {tmp_path / 'nope.yaml'}: cannot read: No such file or directory"


def test_the_packaged_spec_map_is_the_default() -> None:
    if not specmap.SPECMAP_PATH.exists():
        pytest.skip(f"{specmap.SPECMAP_PATH} does not exist yet")
    result = CliRunner().invoke(main, ["coverage", "--format", "json"])
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["specMap"]["file"] == str(specmap.SPECMAP_PATH)
