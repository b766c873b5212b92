"""Profile prerequisites: what each profile needs, what is installable, and the command's answers
without a cluster (listing, an unknown profile, a cluster that is not there)."""

from __future__ import annotations

from click.testing import CliRunner

from conformance.cli import main
from conformance.framework.features import PROFILES
from conformance.run.prerequisites import PREREQUISITES, for_profiles, installable


def test_every_prerequisite_belongs_to_a_profile_and_gang_needs_the_podgroup_crd() -> None:
    assert {p.profile for p in PREREQUISITES} <= set(PROFILES)
    docs = installable(["GangScheduling"])
    assert [(d["kind"], d["metadata"]["name"]) for d in docs] == [
        ("CustomResourceDefinition", "podgroups.scheduling.volcano.sh")
    ]
    assert installable(["Core", "Rollout"]) == []
    assert [p.profile for p in for_profiles([])] == [p.profile for p in PREREQUISITES]


def test_list_says_what_each_profile_needs_and_installs_nothing() -> None:
    result = CliRunner().invoke(main, ["install", "prerequisites", "--list", "--name", "nowhere"])
    assert result.exit_code == 0, result.output
    assert "GangScheduling: Volcano's PodGroup CRD" in result.output and "(installed by this command)" in result.output
    assert "Accelerators: a DRA driver" in result.output and "(not installable by this command)" in result.output


def test_an_unknown_profile_is_refused_with_the_known_ones() -> None:
    result = CliRunner().invoke(main, ["install", "prerequisites", "--profile", "Nope"])
    assert result.exit_code == 2 and "unknown profile 'Nope'" in result.output and "GangScheduling" in result.output


def test_a_missing_cluster_is_one_clear_error() -> None:
    result = CliRunner().invoke(main, ["install", "prerequisites", "--profile", "GangScheduling", "--name", "nowhere"])
    assert result.exit_code == 1 and "no running local cluster named 'nowhere'" in result.output
    assert "Traceback" not in result.output
    nothing = CliRunner().invoke(main, ["install", "prerequisites", "--profile", "Core", "--name", "nowhere"])
    assert nothing.exit_code == 0, "nothing to install needs no cluster"
