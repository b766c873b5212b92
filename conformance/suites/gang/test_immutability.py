"""GangPolicyImmutability: gangPolicy.minRoleReplicas cannot change and gangPolicy cannot be removed
once set; its keys must name Roles.

These are upstream Kthena's webhook rules, not spec text (the API reference states no immutability
for gangPolicy and no rule for its keys): the feature is optional, for implementations that follow
upstream. Their level is MAY (issue 31: a rule the spec does not state is never a MUST), so an
implementation that accepts these changes gets a warning, never non-conformance. Each change is a
JSON merge patch that is expected refused (HTTP 400/403/422) with the stored spec unchanged; a change
elsewhere in the same ModelServing must be accepted, so refusing every update does not pass.
"""

from __future__ import annotations

import copy
from typing import Any

from conformance.framework.catalog import behaviour
from conformance.framework.features import Feature
from conformance.framework.modelserving import ModelServings

from . import GANG_POLICY

NAME = "gang"


def _create(ms: ModelServings, manifest: Any) -> dict[str, Any]:
    body: dict[str, Any] = manifest("gang-roles")
    body["spec"]["replicas"] = 0  # admission is the point: no Pods are needed
    ms.create(body)
    return body


def _gang_patch(gang_policy: Any) -> dict[str, Any]:
    return {"spec": {"template": {"gangPolicy": gang_policy}}}


def _accepted_elsewhere(ms: ModelServings) -> None:
    rejection = ms.try_patch(NAME, {"spec": {"replicas": 1}})
    assert rejection is None, f"expected a replicas change with gangPolicy untouched to be accepted; {rejection}"


@behaviour(
    "gang/admission/min-role-replicas-immutable",
    "An implementation MAY refuse a change of gangPolicy.minRoleReplicas after creation (a value, an added key or a "
    "removed key), leaving the stored spec unchanged: upstream's webhook rule, which the spec does not state.",
    GANG_POLICY,
    Feature.GANG_POLICY_IMMUTABILITY,
)
def test_min_role_replicas_is_immutable(ms: ModelServings, manifest: Any) -> None:
    _create(ms, manifest)
    changes = [
        ({"minRoleReplicas": {"prefill": 2}}, "changing minRoleReplicas[prefill] from 1 to 2"),
        ({"minRoleReplicas": {"decode": 1}}, "adding minRoleReplicas[decode]"),
        ({"minRoleReplicas": {"prefill": None}}, "removing minRoleReplicas[prefill]"),
        ({"minRoleReplicas": None}, "removing minRoleReplicas"),
    ]
    for patch, what in changes:
        ms.refused_patch(NAME, _gang_patch(patch), f"{what} on update")
    _accepted_elsewhere(ms)


@behaviour(
    "gang/admission/gang-policy-not-removable",
    "An implementation MAY refuse removing gangPolicy from a ModelServing that has one, leaving the stored spec "
    "unchanged: upstream's webhook rule, which the spec does not state.",
    GANG_POLICY,
    Feature.GANG_POLICY_IMMUTABILITY,
)
def test_gang_policy_cannot_be_removed(ms: ModelServings, manifest: Any) -> None:
    _create(ms, manifest)
    ms.refused_patch(NAME, _gang_patch(None), "removing gangPolicy on update")
    _accepted_elsewhere(ms)


@behaviour(
    "gang/admission/min-role-replicas-keys-name-roles",
    "An implementation MAY refuse at admission a gangPolicy.minRoleReplicas key that names no Role of the template: "
    "upstream's webhook rule, which the spec does not state.",
    GANG_POLICY,
    Feature.GANG_POLICY_IMMUTABILITY,
)
def test_min_role_replicas_keys_must_name_roles(ms: ModelServings, manifest: Any) -> None:
    body: dict[str, Any] = manifest("gang-roles")
    body["spec"]["replicas"] = 0
    bad = copy.deepcopy(body)
    bad["metadata"]["name"] = "unknown-role"
    bad["spec"]["template"]["gangPolicy"] = {"minRoleReplicas": {"prefill": 1, "router": 1}}
    ms.refused_create(bad, "minRoleReplicas naming 'router', which is no Role, at admission")
    rejection = ms.try_create(body)
    assert rejection is None, f"expected minRoleReplicas naming the Role 'prefill' to be accepted; {rejection}"
