"""Features and profiles: the pinned tables, lookups by any case, and errors naming the valid names."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from conformance.framework.features import (
    FEATURES,
    PROFILES,
    Feature,
    SelectionError,
    get_profile,
    parse_feature,
    profile_of,
)


def test_every_feature_has_info_and_exactly_one_profile() -> None:
    assert list(FEATURES) == list(Feature)
    for feature in Feature:
        assert FEATURES[feature].feature is feature
        assert FEATURES[feature].description.endswith(".")
        owners = [p.name for p in PROFILES.values() if feature in p.features]
        assert owners == [profile_of(feature).name], feature


def test_profiles_in_order_with_disjoint_required_and_optional() -> None:
    assert list(PROFILES) == [
        "Core",
        "Plugins",
        "HeadlessServiceDNS",
        "Rollout",
        "InPlaceUpdate",
        "GangScheduling",
        "EvictionBudget",
        "Accelerators",
        "Autoscaling",
        "ModelBooster",
        "LWSConversion",
    ]
    for profile in PROFILES.values():
        assert not profile.required & profile.optional
        assert profile.features == profile.required | profile.optional
        assert profile.required, f"{profile.name} has no required feature"


def test_prerequisites_are_known_and_acyclic() -> None:
    def closure(feature: Feature, path: tuple[Feature, ...] = ()) -> None:
        assert feature not in path, f"cycle: {(*path, feature)}"
        for required in FEATURES[feature].requires:
            closure(required, (*path, feature))

    for feature in Feature:
        closure(feature)


@pytest.mark.parametrize(
    ("feature", "requires"),
    [
        pytest.param(Feature.CORE, set(), id="core-is-a-root"),
        pytest.param(Feature.ADMISSION, {Feature.CORE}, id="admission"),
        pytest.param(Feature.RECOVERY, {Feature.CORE}, id="recovery"),
        pytest.param(Feature.SCALE_SUBRESOURCE, {Feature.CORE}, id="scale"),
        pytest.param(Feature.PLUGIN_FRAMEWORK, set(), id="plugin-framework-is-a-root"),
        pytest.param(Feature.PLUGIN_CHAIN_IMMUTABILITY, {Feature.PLUGIN_FRAMEWORK}, id="chain-immutability"),
        pytest.param(Feature.DEMO_POD_TWEAKS, {Feature.PLUGIN_FRAMEWORK}, id="demo-pod-tweaks"),
        pytest.param(Feature.HEADLESS_SERVICE, {Feature.PLUGIN_FRAMEWORK}, id="headless-service"),
        pytest.param(Feature.DELETION_IDENTITY, {Feature.HEADLESS_SERVICE}, id="deletion-identity"),
        pytest.param(Feature.MIGRATION_REQUIRED, {Feature.HEADLESS_SERVICE}, id="migration-required"),
        pytest.param(Feature.DNS_RESOLUTION, {Feature.HEADLESS_SERVICE}, id="dns-resolution"),
        pytest.param(Feature.ROLLING_UPDATE, {Feature.CORE}, id="rolling-update"),
        pytest.param(Feature.MAX_SURGE, {Feature.ROLLING_UPDATE}, id="max-surge"),
        pytest.param(Feature.ROLE_ROLLING_UPDATE, {Feature.CORE}, id="role-rolling-update"),
        pytest.param(Feature.ROLE_COORDINATION, {Feature.ROLE_ROLLING_UPDATE}, id="role-coordination"),
        pytest.param(Feature.IN_PLACE_UPDATE, {Feature.ROLLING_UPDATE}, id="in-place-update"),
        pytest.param(Feature.IN_PLACE_FALLBACK, {Feature.IN_PLACE_UPDATE}, id="in-place-fallback"),
        pytest.param(Feature.PROGRESS_DEADLINE, {Feature.IN_PLACE_UPDATE}, id="progress-deadline"),
        pytest.param(Feature.VOLCANO_POD_GROUP, {Feature.GANG_SCHEDULING}, id="volcano-pod-group"),
        pytest.param(Feature.DRIVER_CERTIFICATION, {Feature.ACCELERATORS}, id="driver-certification"),
        pytest.param(Feature.AUTOSCALING, {Feature.CORE}, id="autoscaling"),
        pytest.param(Feature.AUTOSCALING_ADMISSION, {Feature.AUTOSCALING}, id="autoscaling-admission"),
        pytest.param(Feature.DISAGGREGATED_AUTOSCALING, {Feature.AUTOSCALING}, id="disaggregated-autoscaling"),
        pytest.param(Feature.HETEROGENEOUS_AUTOSCALING, {Feature.AUTOSCALING}, id="heterogeneous-autoscaling"),
        pytest.param(Feature.POD_METRIC_SOURCE, {Feature.AUTOSCALING}, id="pod-metric-source"),
        pytest.param(Feature.AUTOSCALING_PANIC, {Feature.AUTOSCALING}, id="autoscaling-panic"),
        # A converter declares headless-service on its children, but only the behaviours about the plugin
        # need it (they say so in their own requires): admission and the rest of the conversion do not.
        pytest.param(Feature.MODEL_BOOSTER, {Feature.CORE}, id="model-booster"),
        pytest.param(Feature.MODEL_BOOSTER_ADMISSION, {Feature.MODEL_BOOSTER}, id="model-booster-admission"),
        pytest.param(Feature.LWS_CONVERSION, {Feature.CORE}, id="lws-conversion"),
    ],
)
def test_prerequisites(feature: Feature, requires: set[Feature]) -> None:
    assert FEATURES[feature].requires == requires


@pytest.mark.parametrize(
    ("profile", "required", "optional"),
    [
        # A profile's success means its MUST statements were asserted (issue 31): every feature whose
        # statements the spec makes MUST for the API is required. The spec never mentions the scale
        # subresource: optional. Revisions and their history limit are documented status and spec
        # fields: required.
        pytest.param(
            "Core",
            {"Core", "Admission", "Recovery", "ControllerRevisions", "RevisionHistoryLimit"},
            {"ScaleSubresource"},
            id="core",
        ),
        pytest.param("Plugins", {"PluginFramework", "PluginChainImmutability"}, {"DemoPodTweaks"}, id="plugins"),
        # DNS resolution needs a DNS server (and a running container) the cluster may not have: optional.
        pytest.param(
            "HeadlessServiceDNS",
            {"HeadlessService", "DeletionIdentityChanged", "MigrationRequired"},
            {"DNSResolution"},
            id="headless-service-dns",
        ),
        # maxSurge and roleCoordination are documented fields with MUST semantics: an implementation
        # without them (upstream's Go controller of 2026-08) is not a success on Rollout.
        pytest.param(
            "Rollout", {"RollingUpdate", "RoleRollingUpdate", "MaxSurge", "RoleCoordination"}, set(), id="rollout"
        ),
        pytest.param(
            "InPlaceUpdate",
            {"InPlaceUpdate", "InPlaceUpdateFallback", "ProgressDeadline"},
            set(),
            id="in-place-update",
        ),
        # The spec states what gangPolicy and networkTopology require, not Volcano's other PodGroup
        # fields (minResources, the queue annotation) nor upstream's webhook rules (immutability): those
        # are optional.
        pytest.param(
            "GangScheduling",
            {"GangScheduling", "NetworkTopology"},
            {"VolcanoPodGroup", "GangPolicyImmutability"},
            id="gang-scheduling",
        ),
        pytest.param("EvictionBudget", {"EvictionBudget", "RoleEvictionBudget"}, set(), id="eviction-budget"),
        # What the DRA driver and the scheduler do is driver certification, kept apart from the
        # implementation's own part (its Pods carry their claims and run on allocated devices).
        pytest.param("Accelerators", {"Accelerators"}, {"DriverCertification"}, id="accelerators"),
        pytest.param(
            "Autoscaling",
            {
                "Autoscaling",
                "AutoscalingAdmission",
                "DisaggregatedAutoscaling",
                "HeterogeneousAutoscaling",
                "AutoscalingPanic",
            },
            # Pods scraped for their metrics are observed on real nodes only.
            {"PodMetricSource"},
            id="autoscaling",
        ),
        # A deprecated API is still an API: its documented enums, patterns and bounds are required.
        pytest.param("ModelBooster", {"ModelBooster", "ModelBoosterAdmission"}, set(), id="model-booster"),
        pytest.param("LWSConversion", {"LWSConversion"}, set(), id="lws-conversion"),
    ],
)
def test_profile_contents(profile: str, required: set[str], optional: set[str]) -> None:
    assert {f.value for f in PROFILES[profile].required} == required
    assert {f.value for f in PROFILES[profile].optional} == optional


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        pytest.param("Core", Feature.CORE, id="canonical"),
        pytest.param("core", Feature.CORE, id="lowercase"),
        pytest.param("dnsresolution", Feature.DNS_RESOLUTION, id="lowercase-acronym"),
        pytest.param("  HeadlessService ", Feature.HEADLESS_SERVICE, id="surrounding-space"),
        pytest.param("DELETIONIDENTITYCHANGED", Feature.DELETION_IDENTITY, id="uppercase"),
        pytest.param(Feature.ADMISSION, Feature.ADMISSION, id="enum-member"),
        pytest.param("inplaceupdatefallback", Feature.IN_PLACE_FALLBACK, id="in-place-fallback"),
        pytest.param("InPlaceUpdate", Feature.IN_PLACE_UPDATE, id="feature-named-like-its-profile"),
    ],
)
def test_parse_feature(name: str, expected: Feature) -> None:
    assert parse_feature(name) is expected


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        pytest.param("Core", "Core", id="canonical"),
        pytest.param("plugins", "Plugins", id="lowercase"),
        pytest.param("HEADLESSSERVICEDNS", "HeadlessServiceDNS", id="uppercase"),
        pytest.param("rollout", "Rollout", id="rollout"),
        pytest.param("inplaceupdate", "InPlaceUpdate", id="profile-named-like-its-feature"),
    ],
)
def test_get_profile(name: str, expected: str) -> None:
    assert get_profile(name).name == expected


@pytest.mark.parametrize(
    ("lookup", "name", "kind", "known"),
    [
        pytest.param(parse_feature, "Foo", "feature", "Core, Admission, Recovery", id="unknown-feature"),
        pytest.param(parse_feature, "", "feature", "DNSResolution", id="empty-feature"),
        pytest.param(parse_feature, "Plugins", "feature", "PluginFramework", id="profile-is-not-a-feature"),
        pytest.param(
            get_profile,
            "Extended",
            "profile",
            "Core, Plugins, HeadlessServiceDNS, Rollout, InPlaceUpdate",
            id="unknown-profile",
        ),
        pytest.param(get_profile, "Admission", "profile", "Core, Plugins", id="feature-is-not-a-profile"),
    ],
)
def test_unknown_names_list_the_valid_ones(lookup: Callable[[str], object], name: str, kind: str, known: str) -> None:
    with pytest.raises(SelectionError) as info:
        lookup(name)
    message = str(info.value)
    assert f"unknown {kind} {name!r}" in message
    assert known in message
    assert isinstance(info.value, ValueError)
