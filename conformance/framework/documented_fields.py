"""The ModelServing fields the spec documents, checked against an installed CRD's schema.

Why this module exists: when an implementation's CRD lacks a documented field, kube-apiserver
prunes it from every object (with only a warning), so every behaviour that sets it fails in its
own confusing way ("maxSurge 1 was not honoured"). One preflight line naming the missing fields
says it once; the report then points at it the failed behaviours that set one of those fields (their
test's source, or a manifest it applies, names the field), never one that does not.

:data:`DOCUMENTED` lists each field of the API reference's ModelServing tables (ModelServingSpec,
ServingGroup, Role, RolloutStrategy, RollingUpdateConfiguration, RoleCoordination,
RoleRolloutDependency, EvictionStrategySpec, GangPolicy, NetworkTopology, PluginSpec,
PluginScope, ModelServingStatus) as a dotted path (``[]`` for a list's items) with the feature
whose behaviours need it. A Pod template is checked only down to ``entryTemplate``/
``workerTemplate`` (its PodSpec is Kubernetes', not the spec's). A schema node that keeps unknown
fields (``x-kubernetes-preserve-unknown-fields``) holds every path below it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from .features import Feature

F = Feature
DOCUMENTED: dict[str, Feature] = {
    "spec.replicas": F.CORE,
    "spec.schedulerName": F.CORE,
    "spec.recoveryPolicy": F.RECOVERY,
    "spec.revisionHistoryLimit": F.REVISION_HISTORY_LIMIT,
    "spec.plugins[].name": F.PLUGIN_FRAMEWORK,
    "spec.plugins[].type": F.PLUGIN_FRAMEWORK,
    "spec.plugins[].config": F.PLUGIN_FRAMEWORK,
    "spec.plugins[].scope.roles": F.PLUGIN_FRAMEWORK,
    "spec.plugins[].scope.target": F.PLUGIN_FRAMEWORK,
    "spec.template.restartGracePeriodSeconds": F.RECOVERY,
    "spec.template.gangPolicy.minRoleReplicas": F.GANG_SCHEDULING,
    "spec.template.networkTopology.groupPolicy": F.NETWORK_TOPOLOGY,
    "spec.template.networkTopology.rolePolicy": F.NETWORK_TOPOLOGY,
    "spec.template.roles[].name": F.CORE,
    "spec.template.roles[].replicas": F.CORE,
    "spec.template.roles[].entryTemplate": F.CORE,
    "spec.template.roles[].workerReplicas": F.CORE,
    "spec.template.roles[].workerTemplate": F.CORE,
    "spec.template.roles[].maxUnavailable": F.ROLE_ROLLING_UPDATE,
    "spec.template.roles[].maxSurge": F.ROLE_ROLLING_UPDATE,
    "spec.template.roles[].partition": F.ROLE_ROLLING_UPDATE,
    "spec.rolloutStrategy.type": F.ROLLING_UPDATE,
    "spec.rolloutStrategy.updateMethod": F.IN_PLACE_UPDATE,
    "spec.rolloutStrategy.progressDeadlineSeconds": F.PROGRESS_DEADLINE,
    "spec.rolloutStrategy.rollingUpdateConfiguration.maxUnavailable": F.ROLLING_UPDATE,
    "spec.rolloutStrategy.rollingUpdateConfiguration.maxSurge": F.MAX_SURGE,
    "spec.rolloutStrategy.rollingUpdateConfiguration.partition": F.ROLLING_UPDATE,
    "spec.rolloutStrategy.roleCoordination.roles": F.ROLE_COORDINATION,
    "spec.rolloutStrategy.roleCoordination.maxSkew": F.ROLE_COORDINATION,
    "spec.rolloutStrategy.roleCoordination.dependencies[].role": F.ROLE_COORDINATION,
    "spec.rolloutStrategy.roleCoordination.dependencies[].dependsOn": F.ROLE_COORDINATION,
    "spec.rolloutStrategy.evictionStrategy.protectionLevel": F.EVICTION_BUDGET,
    "spec.rolloutStrategy.evictionStrategy.minAvailable": F.EVICTION_BUDGET,
    "spec.rolloutStrategy.evictionStrategy.roleMinAvailable": F.ROLE_EVICTION_BUDGET,
    "status.observedGeneration": F.CORE,
    "status.replicas": F.CORE,
    "status.currentReplicas": F.CORE,
    "status.updatedReplicas": F.CORE,
    "status.availableReplicas": F.CORE,
    "status.labelSelector": F.CORE,
    "status.currentRevision": F.CONTROLLER_REVISIONS,
    "status.updateRevision": F.CONTROLLER_REVISIONS,
    "status.collisionCount": F.CONTROLLER_REVISIONS,
}

KEEPS_UNKNOWN = "x-kubernetes-preserve-unknown-fields"


def has_path(schema: Mapping[str, Any], path: str) -> bool:
    """Whether the OpenAPI v3 ``schema`` (a CRD version's ``openAPIV3Schema``) keeps ``path``. Pure."""
    node: Mapping[str, Any] = schema
    for part in path.split("."):
        key, listed = (part[:-2], True) if part.endswith("[]") else (part, False)
        if node.get(KEEPS_UNKNOWN):
            return True
        child = (node.get("properties") or {}).get(key)
        if not isinstance(child, Mapping):
            return False
        if listed:
            if child.get(KEEPS_UNKNOWN):
                return True
            items = child.get("items")
            if not isinstance(items, Mapping):
                return False
            child = items
        node = child
    return True


def missing_fields(schema: Mapping[str, Any], paths: Iterable[str] = DOCUMENTED) -> list[str]:
    """The documented paths ``schema`` would prune, in table order. Pure."""
    return [p for p in paths if not has_path(schema, p)]


def affected_features(missing: Iterable[str]) -> dict[Feature, list[str]]:
    """Feature -> the missing fields its behaviours need. Pure."""
    out: dict[Feature, list[str]] = {}
    for path in missing:
        out.setdefault(DOCUMENTED[path], []).append(path)
    return out


def finding(missing: list[str]) -> str:
    """One line for the preflight: what is missing and what it means. Pure."""
    if not missing:
        return f"the installed CRD keeps every field the spec documents ({len(DOCUMENTED)} checked)"
    by_feature = affected_features(missing)
    parts = "; ".join(f"{f.value}: {', '.join(paths)}" for f, paths in by_feature.items())
    return (
        f"the installed CRD lacks {len(missing)} documented field(s), which kube-apiserver drops from every object, "
        f"so a behaviour that sets one cannot pass (each such failure says so): {parts}"
    )


def leaf(path: str) -> str:
    """The field's own name: ``maxSurge`` of ``spec.template.roles[].maxSurge``. Pure."""
    return path.rsplit(".", 1)[-1].removesuffix("[]")


def set_by(text: str, missing: Iterable[str]) -> list[str]:
    """The ``missing`` paths whose field name ``text`` (a test's source and the manifests it applies)
    names, as a whole word. Pure."""
    return [p for p in missing if re.search(rf"(?<![A-Za-z0-9_]){re.escape(leaf(p))}(?![A-Za-z0-9_])", text)]


def blame(features: Iterable[Feature], missing: list[str], text: str) -> str:
    """The prefix for a failed behaviour of ``features`` when the CRD lacks fields it sets: fields of
    its features that ``text`` (its test's source and the manifests it applies) names. Empty otherwise:
    a field the test never sets cannot be why it failed (issue 31). Pure."""
    wanted = set(features)
    theirs = set_by(text, [p for p in missing if DOCUMENTED[p] in wanted])
    if not theirs:
        return ""
    return f"the installed CRD lacks {', '.join(theirs)} (preflight crd-documented-fields), so this cannot pass: "
