"""Features and profiles: the vocabulary that decides what the suite runs and how it is judged.

A *feature* is one unit of behaviour an implementation may or may not support (``Core``,
``HeadlessService``, ...); its value is the name users write in support files, on the command line
and in reports. A feature may require others (``HeadlessService`` needs ``PluginFramework``): an
implementation cannot claim it without them.

A *profile* groups features into what an implementation claims conformance to. Its *required*
features must all be supported for the profile to succeed; its *optional* features are tested when
supported and listed (never counted against the profile) when not. Every feature belongs to
exactly one profile.

The tables here are data, not configuration: changing them changes what conformance means, so a
unit test pins them.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum


class Feature(StrEnum):
    """One unit of behaviour; the value is the spelling users write."""

    CORE = "Core"
    ADMISSION = "Admission"
    RECOVERY = "Recovery"
    SCALE_SUBRESOURCE = "ScaleSubresource"
    PLUGIN_FRAMEWORK = "PluginFramework"
    PLUGIN_CHAIN_IMMUTABILITY = "PluginChainImmutability"
    DEMO_POD_TWEAKS = "DemoPodTweaks"
    HEADLESS_SERVICE = "HeadlessService"
    DELETION_IDENTITY = "DeletionIdentityChanged"
    MIGRATION_REQUIRED = "MigrationRequired"
    DNS_RESOLUTION = "DNSResolution"


@dataclass(frozen=True)
class FeatureInfo:
    """What a feature covers and which features it cannot be supported without."""

    feature: Feature
    description: str
    requires: frozenset[Feature]


def _info(feature: Feature, description: str, *requires: Feature) -> tuple[Feature, FeatureInfo]:
    return feature, FeatureInfo(feature, description, frozenset(requires))


FEATURES: dict[Feature, FeatureInfo] = dict(
    [
        _info(
            Feature.CORE,
            "ModelServing basics: ServingGroups and role Pods created, owned, labelled and reported in status.",
        ),
        _info(
            Feature.ADMISSION,
            "Invalid ModelServings are rejected at admission with a message naming the field.",
            Feature.CORE,
        ),
        _info(
            Feature.RECOVERY,
            "Failed or deleted Pods are replaced according to the recovery policy.",
            Feature.CORE,
        ),
        _info(
            Feature.SCALE_SUBRESOURCE,
            "The scale subresource reads and changes spec.replicas and reports status.replicas.",
            Feature.CORE,
        ),
        _info(
            Feature.PLUGIN_FRAMEWORK,
            "Plugins listed in spec.plugins run in order on every Pod and report failures in status.",
        ),
        _info(
            Feature.PLUGIN_CHAIN_IMMUTABILITY,
            "The substantive plugin chain of a ModelServing is immutable after creation.",
            Feature.PLUGIN_FRAMEWORK,
        ),
        _info(
            Feature.DEMO_POD_TWEAKS,
            "The built-in demo-pod-tweaks plugin sets runtimeClassName, annotations and environment variables.",
            Feature.PLUGIN_FRAMEWORK,
        ),
        _info(
            Feature.HEADLESS_SERVICE,
            "The headless-service plugin creates the entry and discovery Services and the Pods' DNS settings.",
            Feature.PLUGIN_FRAMEWORK,
        ),
        _info(
            Feature.DELETION_IDENTITY,
            "A deletion finding a new Pod that reused an instance identity preserves it and reports "
            "DeletionIdentityChanged.",
            Feature.HEADLESS_SERVICE,
        ),
        _info(
            Feature.MIGRATION_REQUIRED,
            "An instance already using an all-member Service as subdomain keeps that layout and reports "
            "MigrationRequired.",
            Feature.HEADLESS_SERVICE,
        ),
        _info(
            Feature.DNS_RESOLUTION,
            "Pod hostnames resolve through cluster DNS (needs a DNS server in the cluster).",
            Feature.HEADLESS_SERVICE,
        ),
    ]
)


@dataclass(frozen=True)
class Profile:
    """A named set of features an implementation claims conformance to."""

    name: str
    description: str
    required: frozenset[Feature]
    optional: frozenset[Feature]

    @property
    def features(self) -> frozenset[Feature]:
        return self.required | self.optional


def _profile(name: str, description: str, required: Iterable[Feature], optional: Iterable[Feature] = ()) -> Profile:
    return Profile(name, description, frozenset(required), frozenset(optional))


PROFILES: dict[str, Profile] = {
    p.name: p
    for p in (
        _profile(
            "Core",
            "The ModelServing API itself: workloads, admission, recovery and the scale subresource.",
            [Feature.CORE, Feature.ADMISSION, Feature.RECOVERY, Feature.SCALE_SUBRESOURCE],
        ),
        _profile(
            "Plugins",
            "The plugin framework: ordered plugin chains applied to Pods.",
            [Feature.PLUGIN_FRAMEWORK, Feature.PLUGIN_CHAIN_IMMUTABILITY],
            [Feature.DEMO_POD_TWEAKS],
        ),
        _profile(
            "HeadlessServiceDNS",
            "The headless-service plugin: stable per-Pod DNS names for multi-node serving.",
            [Feature.HEADLESS_SERVICE],
            [Feature.DELETION_IDENTITY, Feature.MIGRATION_REQUIRED, Feature.DNS_RESOLUTION],
        ),
    )
}

_PROFILE_OF: dict[Feature, Profile] = {f: p for p in PROFILES.values() for f in p.features}


class SelectionError(ValueError):
    """An unknown feature or profile name (the message lists the valid ones)."""


def profile_of(feature: Feature) -> Profile:
    """The one profile ``feature`` belongs to."""
    return _PROFILE_OF[feature]


def feature_order(feature: Feature) -> int:
    """Position of ``feature`` in the feature table (profile order): a stable sort key for reports."""
    return list(Feature).index(feature)


def get_profile(name: str) -> Profile:
    """The profile called ``name`` (any case); :class:`SelectionError` if there is none."""
    return PROFILES[_lookup("profile", name, list(PROFILES))]


def parse_feature(name: str) -> Feature:
    """The feature called ``name`` (any case, canonical spelling returned); :class:`SelectionError`
    if there is none."""
    return Feature(_lookup("feature", name, [f.value for f in Feature]))


def _lookup(kind: str, name: str, known: list[str]) -> str:
    wanted = name.strip().casefold()
    for candidate in known:
        if candidate.casefold() == wanted:
            return candidate
    raise SelectionError(f"unknown {kind} {name!r} (known: {', '.join(known)})")
