"""The support-file scaffold loads as written, declares every feature once under its profile, and
the CLI writes it, refuses to overwrite, and checks a file with one line per problem."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from conformance.cli import main
from conformance.framework.features import FEATURES, PROFILES, Feature
from conformance.framework.scaffold import support_scaffold
from conformance.framework.support import load_support


def test_the_scaffold_loads_and_declares_every_feature(tmp_path: Path) -> None:
    path = tmp_path / "support.yaml"
    path.write_text(support_scaffold("vendor-ctl", "1.10"))
    support = load_support(path)
    assert (support.name, support.version) == ("vendor-ctl", "1.10")  # a version stays a string
    assert support.supported == frozenset(Feature)
    assert support.restart is None and support.pod_labels == load_support(path).pod_labels


def test_each_feature_is_explained_under_its_profile() -> None:
    text = support_scaffold("x", "1")
    for profile in PROFILES.values():
        header = text.index(f"# Profile {profile.name}:")
        for feature in profile.features:
            line = text.index(f"  - {feature.value}\n")
            kind = "required" if feature in profile.required else "optional"
            assert header < line and f"# {feature.value} ({kind}): " in text
            assert FEATURES[feature].description.split()[0] in text


def test_support_init_writes_a_file_and_never_overwrites_without_force(tmp_path: Path) -> None:
    out = tmp_path / "support.yaml"
    runner = CliRunner()
    first = runner.invoke(main, ["support", "init", "--name", "ctl", "-o", str(out)])
    assert first.exit_code == 0, first.output
    assert load_support(out).name == "ctl"
    again = runner.invoke(main, ["support", "init", "-o", str(out)])
    assert again.exit_code == 2 and f"{out} exists" in again.output and "--force" in again.output
    assert runner.invoke(main, ["support", "init", "-o", str(out), "--force"]).exit_code == 0
    assert load_support(out).name == "my-implementation"


def test_support_check_says_which_profiles_can_pass(tmp_path: Path) -> None:
    needed = {r for info in FEATURES.values() for r in info.requires}
    profile = next(p for p in PROFILES.values() if p.name != "Core" and p.required - needed)
    dropped = sorted(f.value for f in profile.required - needed)[0]  # nothing else needs it
    path = tmp_path / "support.yaml"
    path.write_text(support_scaffold("ctl", "1").replace(f"  - {dropped}\n", ""))
    result = CliRunner().invoke(main, ["support", "check", str(path)])
    assert result.exit_code == 0, result.output
    assert f"{profile.name:20} cannot pass (required, not supported: {dropped}" in result.output
    assert "Core                 can pass" in result.output


def test_support_check_lists_every_problem(tmp_path: Path) -> None:
    path = tmp_path / "support.yaml"
    path.write_text(support_scaffold("ctl", "1").replace("  - Core\n", "  - Coer\n"))
    result = CliRunner().invoke(main, ["support", "check", str(path)])
    assert result.exit_code == 2
    assert "unknown feature 'Coer'" in result.output and "Traceback" not in result.output
