"""Profile prerequisites: what each profile needs, what is installable, and the command's answers
without a cluster (listing, an unknown profile, a cluster that is not there)."""

from __future__ import annotations

from typing import Any

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


def test_lws_conversion_installs_the_lws_crd_and_model_booster_says_what_it_needs(monkeypatch: Any) -> None:
    from conformance.cluster import lws

    crd = {"kind": "CustomResourceDefinition", "metadata": {"name": lws.CRD_NAME}}
    monkeypatch.setattr(lws, "lws_crd", lambda *a, **k: crd)
    assert installable(["LWSConversion"]) == [crd]
    assert installable(["ModelBooster"]) == []
    (booster,) = for_profiles(["ModelBooster"])
    assert "modelboosters.workload.serving.volcano.sh" in booster.what and booster.load is None


def test_list_fetches_nothing(monkeypatch: Any) -> None:
    from conformance.cluster import lws

    def fetch(*_: Any, **__: Any) -> Any:
        raise AssertionError("--list must not fetch the LeaderWorkerSet CRD")

    monkeypatch.setattr(lws, "lws_crd", fetch)
    result = CliRunner().invoke(main, ["install", "prerequisites", "--list", "--name", "nowhere"])
    assert result.exit_code == 0, result.output
    assert (
        "LWSConversion: the LeaderWorkerSet CRD" in result.output
        and "ModelBooster: the ModelBooster CRD" in result.output
    )
