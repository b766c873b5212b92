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
    CONTROLLER_REVISIONS = "ControllerRevisions"
    REVISION_HISTORY_LIMIT = "RevisionHistoryLimit"
    PLUGIN_FRAMEWORK = "PluginFramework"
    PLUGIN_CHAIN_IMMUTABILITY = "PluginChainImmutability"
    DEMO_POD_TWEAKS = "DemoPodTweaks"
    HEADLESS_SERVICE = "HeadlessService"
    DELETION_IDENTITY = "DeletionIdentityChanged"
    MIGRATION_REQUIRED = "MigrationRequired"
    DNS_RESOLUTION = "DNSResolution"
    ROLLING_UPDATE = "RollingUpdate"
    MAX_SURGE = "MaxSurge"
    ROLE_ROLLING_UPDATE = "RoleRollingUpdate"
    ROLE_COORDINATION = "RoleCoordination"
    IN_PLACE_UPDATE = "InPlaceUpdate"
    IN_PLACE_FALLBACK = "InPlaceUpdateFallback"
    PROGRESS_DEADLINE = "ProgressDeadline"
    GANG_SCHEDULING = "GangScheduling"
    VOLCANO_POD_GROUP = "VolcanoPodGroup"
    GANG_POLICY_IMMUTABILITY = "GangPolicyImmutability"
    NETWORK_TOPOLOGY = "NetworkTopology"
    EVICTION_BUDGET = "EvictionBudget"
    ROLE_EVICTION_BUDGET = "RoleEvictionBudget"
    ACCELERATORS = "Accelerators"
    DRIVER_CERTIFICATION = "DriverCertification"
    AUTOSCALING = "Autoscaling"
    AUTOSCALING_ADMISSION = "AutoscalingAdmission"
    DISAGGREGATED_AUTOSCALING = "DisaggregatedAutoscaling"
    HETEROGENEOUS_AUTOSCALING = "HeterogeneousAutoscaling"
    POD_METRIC_SOURCE = "PodMetricSource"
    AUTOSCALING_PANIC = "AutoscalingPanic"
    MODEL_BOOSTER = "ModelBooster"
    MODEL_BOOSTER_ADMISSION = "ModelBoosterAdmission"
    LWS_CONVERSION = "LWSConversion"


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
            "Invalid ModelServings are refused at admission and not stored (the message naming the field is a SHOULD).",
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
            Feature.CONTROLLER_REVISIONS,
            "Each template revision is recorded as a ControllerRevision owned by the ModelServing; "
            "status.currentRevision and status.updateRevision name them.",
            Feature.CORE,
        ),
        _info(
            Feature.REVISION_HISTORY_LIMIT,
            "revisionHistoryLimit (default 10) bounds the non-live ControllerRevisions kept; live ones are never "
            "pruned.",
            Feature.CONTROLLER_REVISIONS,
        ),
        _info(
            Feature.PLUGIN_FRAMEWORK,
            "Plugins listed in spec.plugins run in order on every Pod; a failing one blocks the Pod and is reported "
            "(a Warning Event, or a status condition).",
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
        _info(
            Feature.ROLLING_UPDATE,
            "ServingGroupRollingUpdate replaces outdated ServingGroups within maxUnavailable (percentages rounded "
            "down), keeps the partition's lowest ordinals (percentages rounded up) and reports the rollout in status.",
            Feature.CORE,
        ),
        _info(
            Feature.MAX_SURGE,
            "maxSurge lets a rollout create ServingGroups or Role instances above the desired count (percentages "
            "rounded up), so maxUnavailable may be 0.",
            Feature.ROLLING_UPDATE,
        ),
        _info(
            Feature.ROLE_ROLLING_UPDATE,
            "RoleRollingUpdate updates only the changed Roles, within each Role's maxUnavailable and partition "
            "(percentages of the Role's replicas).",
            Feature.CORE,
        ),
        _info(
            Feature.ROLE_COORDINATION,
            "rolloutStrategy.roleCoordination keeps participating Roles within maxSkew of each other and starts "
            "dependent Roles after their dependencies; it is immutable.",
            Feature.ROLE_ROLLING_UPDATE,
        ),
        _info(
            Feature.IN_PLACE_UPDATE,
            "updateMethod InPlace patches the images of existing Pods when only regular-container images change, "
            "within the rollout budget.",
            Feature.ROLLING_UPDATE,
        ),
        _info(
            Feature.IN_PLACE_FALLBACK,
            "Under updateMethod InPlace, any other change (or a plugin without in-place support) recreates the "
            "Pods and reports an InPlaceUpdateFallback Event.",
            Feature.IN_PLACE_UPDATE,
        ),
        _info(
            Feature.PROGRESS_DEADLINE,
            "progressDeadlineSeconds (minimum 60) bounds an in-place update; after it a ProgressDeadlineExceeded "
            "Warning is reported and unready Pods follow the RecoveryPolicy.",
            Feature.IN_PLACE_UPDATE,
        ),
        _info(
            Feature.GANG_SCHEDULING,
            "GangPolicy through the gang scheduler's PodGroup (the spec's default scheduler volcano): one gang per "
            "ServingGroup whose size (minMember) and per-Role requirement (minTaskMember or subGroupPolicy) follow "
            "minRoleReplicas (Roles it does not name count in full).",
            Feature.CORE,
        ),
        _info(
            Feature.VOLCANO_POD_GROUP,
            "Volcano's PodGroup fields the spec does not state: minResources (the gang's summed requests) and the "
            "queue from the scheduling.volcano.sh/queue-name annotation.",
            Feature.GANG_SCHEDULING,
        ),
        _info(
            Feature.GANG_POLICY_IMMUTABILITY,
            "Upstream's webhook rules, not spec text: gangPolicy.minRoleReplicas is immutable, gangPolicy cannot be "
            "removed once set, and minRoleReplicas keys must name Roles.",
            Feature.GANG_SCHEDULING,
        ),
        _info(
            Feature.NETWORK_TOPOLOGY,
            "template.networkTopology is carried into each ServingGroup's PodGroup.",
            Feature.GANG_SCHEDULING,
        ),
        _info(
            Feature.EVICTION_BUDGET,
            "With evictionStrategy protectionLevel ServingGroup, an Eviction that would leave fewer ready "
            "ServingGroups than minAvailable is refused (HTTP 429 is a SHOULD); evicting any Pod disrupts its whole "
            "group.",
            Feature.CORE,
        ),
        _info(
            Feature.ROLE_EVICTION_BUDGET,
            "With protectionLevel Role, the same per Role from roleMinAvailable; Roles absent from it are unprotected.",
            Feature.EVICTION_BUDGET,
        ),
        _info(
            Feature.ACCELERATORS,
            "ModelServing Pods carry the device claims of their templates (ResourceClaimTemplates) and run on the "
            "devices allocated to them: the implementation's part of accelerator scheduling.",
            Feature.CORE,
        ),
        _info(
            Feature.DRIVER_CERTIFICATION,
            "Driver certification, not implementation conformance: the DRA driver publishes the devices its "
            "capability file declares, and the driver and scheduler allocate them exclusively, refuse claims no "
            "node can satisfy and free them with their claims.",
            Feature.ACCELERATORS,
        ),
        _info(
            Feature.AUTOSCALING,
            "An AutoscalingPolicy with a homogeneousTarget and a Prometheus metric source scales its ModelServing's "
            "spec.replicas within [minReplicas, maxReplicas], changes nothing on a metric it cannot read, and reports "
            "status.",
            Feature.CORE,
        ),
        _info(
            Feature.AUTOSCALING_ADMISSION,
            "The AutoscalingPolicy API's documented defaults and bounds, and the webhook's exactly-one-target rule.",
            Feature.AUTOSCALING,
        ),
        _info(
            Feature.DISAGGREGATED_AUTOSCALING,
            "A disaggregatedTarget scales Roles through their replicas, keeps fixed Roles at their size and keeps the "
            "ratio constraint, reporting ratioAdjusted.",
            Feature.AUTOSCALING,
        ),
        _info(
            Feature.HETEROGENEOUS_AUTOSCALING,
            "A heterogeneousTarget splits the replicas its metrics ask for across several ModelServings, the cheaper "
            "first, each within its bounds, and reports each in heterogeneousStatus.",
            Feature.AUTOSCALING,
        ),
        _info(
            Feature.POD_METRIC_SOURCE,
            "A pod metric source: the autoscaler scrapes http://<podIP>:<port><uri> of the target's Pods and reads "
            "the family its name (default: the metric key) identifies. Observed on real nodes only.",
            Feature.AUTOSCALING,
        ),
        _info(
            Feature.AUTOSCALING_PANIC,
            "Panic mode: a load far above panicThresholdPercent of the target values puts the unit in Panic mode, "
            "reported in its status.",
            Feature.AUTOSCALING,
        ),
        _info(
            Feature.MODEL_BOOSTER,
            "A ModelBooster (deprecated) gets one child ModelServing it controls: the worker's image, the backend's "
            "env, cache volume, downloader, scheduler and runtime class in its Pods; headless-service declared on "
            "a new child and kept as worker counts change; no workerTemplate for single-Pod workers.",
            Feature.CORE,
        ),
        _info(
            Feature.MODEL_BOOSTER_ADMISSION,
            "The ModelBooster API's documented enums, patterns and bounds are enforced at admission, and a create "
            "warns that the API is deprecated.",
            Feature.MODEL_BOOSTER,
        ),
        _info(
            Feature.LWS_CONVERSION,
            "A LeaderWorkerSet gets one child ModelServing it controls, with headless-service declared and its "
            "worker template kept at size 1, so every group gets the plugin's two Services and Pod DNS settings.",
            Feature.CORE,
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
            "The ModelServing API itself: workloads, admission, recovery, ControllerRevisions and their history "
            "limit; optionally the scale subresource.",
            [
                Feature.CORE,
                Feature.ADMISSION,
                Feature.RECOVERY,
                Feature.CONTROLLER_REVISIONS,
                Feature.REVISION_HISTORY_LIMIT,
            ],
            [Feature.SCALE_SUBRESOURCE],
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
            [Feature.HEADLESS_SERVICE, Feature.DELETION_IDENTITY, Feature.MIGRATION_REQUIRED],
            [Feature.DNS_RESOLUTION],
        ),
        _profile(
            "Rollout",
            "Rolling updates: ServingGroup and Role budgets, partitions, surge and cross-Role coordination.",
            [Feature.ROLLING_UPDATE, Feature.ROLE_ROLLING_UPDATE, Feature.MAX_SURGE, Feature.ROLE_COORDINATION],
        ),
        _profile(
            "InPlaceUpdate",
            "updateMethod InPlace: image patches that keep Pods, the recreate fallback and the progress deadline.",
            [Feature.IN_PLACE_UPDATE, Feature.IN_PLACE_FALLBACK, Feature.PROGRESS_DEADLINE],
        ),
        _profile(
            "GangScheduling",
            "GangPolicy and networkTopology through the gang scheduler's PodGroup: one gang per ServingGroup sized by "
            "minRoleReplicas; optionally Volcano's other PodGroup fields and gangPolicy immutability.",
            [Feature.GANG_SCHEDULING, Feature.NETWORK_TOPOLOGY],
            [Feature.VOLCANO_POD_GROUP, Feature.GANG_POLICY_IMMUTABILITY],
        ),
        _profile(
            "EvictionBudget",
            "rolloutStrategy.evictionStrategy: the Eviction API refuses disruptions below the budget.",
            [Feature.EVICTION_BUDGET, Feature.ROLE_EVICTION_BUDGET],
        ),
        _profile(
            "Accelerators",
            "Accelerator scheduling through DRA, against a vendor's capability file: the implementation's Pods "
            "(Accelerators) and the certification of the DRA driver (DriverCertification).",
            [Feature.ACCELERATORS],
            [Feature.DRIVER_CERTIFICATION],
        ),
        _profile(
            "Autoscaling",
            "AutoscalingPolicy: metric-driven replicas of a ModelServing (a real Prometheus the suite runs sets the "
            "signal), its admission, disaggregated Role scaling, heterogeneous splits by cost and panic mode; "
            "optionally Pods scraped for their metrics (observed on real nodes only).",
            [
                Feature.AUTOSCALING,
                Feature.AUTOSCALING_ADMISSION,
                Feature.DISAGGREGATED_AUTOSCALING,
                Feature.HETEROGENEOUS_AUTOSCALING,
                Feature.AUTOSCALING_PANIC,
            ],
            [Feature.POD_METRIC_SOURCE],
        ),
        _profile(
            "ModelBooster",
            "The deprecated ModelBooster API converted into a ModelServing (the ModelBooster CRD must be installed), "
            "with its admission rules and deprecation warning.",
            [Feature.MODEL_BOOSTER, Feature.MODEL_BOOSTER_ADMISSION],
        ),
        _profile(
            "LWSConversion",
            "LeaderWorkerSets (leaderworkerset.x-k8s.io/v1) converted into ModelServings with the headless-service "
            "plugin (the LeaderWorkerSet CRD must be installed; its controller is not needed).",
            [Feature.LWS_CONVERSION],
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
