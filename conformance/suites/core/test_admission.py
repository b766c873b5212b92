"""Admission: invalid ModelServings are refused at create and not stored.

Each test feeds one rule of the API reference several invalid inputs; a refusal must be an HTTP
400, 403 or 422 and the object must not exist afterwards. Where the rule has a boundary the spec
allows (a 12-character Role name, revisionHistoryLimit 0), that input must be accepted, so an
implementation cannot pass by refusing everything.

The refusal is the MUST. The message's wording is not: the OpenAPI schema, CEL and a webhook word
refusals differently, so that a message names the offending field path is one separate SHOULD
behaviour (core/admission/message-names-field) over a refusal of each kind.
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Callable
from typing import Any

from conformance.framework.catalog import behaviour
from conformance.framework.features import Feature
from conformance.framework.modelserving import ModelServings, Rejection, names_field

API = "api-reference-workload-v1alpha1.txt"


def _variant(base: dict[str, Any], name: str, change: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    body = copy.deepcopy(base)
    body["metadata"]["name"] = name
    body["spec"]["replicas"] = 0  # admission is the point: no Pods are needed
    change(body)
    return body


def _set_role_name(body: dict[str, Any], name: str) -> None:
    _role(body)["name"] = name


def _set_spec(body: dict[str, Any], key: str, value: Any) -> None:
    body["spec"][key] = value


def _role(body: dict[str, Any], i: int = 0) -> dict[str, Any]:
    role: dict[str, Any] = body["spec"]["template"]["roles"][i]
    return role


def _refused(ms: ModelServings, body: dict[str, Any], what: str) -> Rejection:
    return ms.refused_create(body, f"{what} at admission")


def _accepted(ms: ModelServings, body: dict[str, Any], what: str) -> None:
    rejection = ms.try_create(body)
    assert rejection is None, f"expected {what} to be accepted (the spec allows it); rejected: {rejection}"


@behaviour(
    "core/admission/role-name-max-length",
    "A Role name longer than 12 characters MUST be refused at admission and not stored.",
    f"{API}#Role",
    Feature.ADMISSION,
)
def test_role_name_longer_than_12_is_rejected(ms: ModelServings, manifest: Any) -> None:
    base = manifest("core-small")
    too_long = _variant(base, "too-long", lambda b: _role(b).update(name="role-thirteen"))
    _refused(ms, too_long, "a 13-character Role name 'role-thirteen'")
    _accepted(ms, _variant(base, "twelve", lambda b: _role(b).update(name="role-twelve1")), "a 12-character Role name")


@behaviour(
    "core/admission/role-name-pattern",
    "A Role name that does not match ^[a-zA-Z0-9]([-a-zA-Z0-9]*[a-zA-Z0-9])?$ MUST be refused at admission and not "
    "stored.",
    f"{API}#Role",
    Feature.ADMISSION,
)
def test_role_name_outside_the_pattern_is_rejected(ms: ModelServings, manifest: Any) -> None:
    base = manifest("core-small")
    for i, bad in enumerate(["-server", "server-", "ser_ver", "ser.ver", ""]):
        body = _variant(base, f"pattern-{i}", functools.partial(_set_role_name, name=bad))
        _refused(ms, body, f"the Role name {bad!r}")


@behaviour(
    "core/admission/role-name-unique",
    "Two Roles with the same name in one ServingGroup template MUST be refused at admission and not stored.",
    f"{API}#Role",
    Feature.ADMISSION,
)
def test_duplicate_role_names_are_rejected(ms: ModelServings, manifest: Any) -> None:
    base = manifest("core-small")

    def duplicate(b: dict[str, Any]) -> None:
        b["spec"]["template"]["roles"].append(copy.deepcopy(_role(b)))

    _refused(ms, _variant(base, "duplicate", duplicate), "two Roles named 'server'")


@behaviour(
    "core/admission/roles-item-count",
    "A ServingGroup template with no Role or with more than 4 Roles MUST be refused at admission and not stored.",
    f"{API}#ServingGroup",
    Feature.ADMISSION,
)
def test_role_count_outside_1_to_4_is_rejected(ms: ModelServings, manifest: Any) -> None:
    base = manifest("core-small")
    _refused(ms, _variant(base, "no-roles", lambda b: b["spec"]["template"].update(roles=[])), "no Roles")

    def five(b: dict[str, Any]) -> None:
        template = _role(b)
        roles = []
        for name in ("r1", "r2", "r3", "r4", "r5"):
            role = copy.deepcopy(template)
            role["name"] = name
            roles.append(role)
        b["spec"]["template"]["roles"] = roles

    _refused(ms, _variant(base, "five-roles", five), "5 Roles")


@behaviour(
    "core/admission/recovery-policy-enum",
    "A recoveryPolicy other than ServingGroupRecreate, RoleRecreate or None MUST be refused at admission and not "
    "stored.",
    f"{API}#ModelServingSpec",
    Feature.ADMISSION,
)
def test_unknown_recovery_policy_is_rejected(ms: ModelServings, manifest: Any) -> None:
    base = manifest("core-small")
    for i, bad in enumerate(["Recreate", "rolerecreate", "Never"]):
        body = _variant(base, f"policy-{i}", functools.partial(_set_spec, key="recoveryPolicy", value=bad))
        _refused(ms, body, f"recoveryPolicy {bad!r}")


@behaviour(
    "core/admission/revision-history-limit-minimum",
    "A negative revisionHistoryLimit MUST be refused at admission and not stored, and 0 MUST be accepted.",
    f"{API}#ModelServingSpec",
    Feature.ADMISSION,
    requires=(Feature.REVISION_HISTORY_LIMIT,),  # a documented field an implementation may not have yet
)
def test_negative_revision_history_limit_is_rejected(ms: ModelServings, manifest: Any) -> None:
    base = manifest("core-small")
    body = _variant(base, "negative", lambda b: b["spec"].update(revisionHistoryLimit=-1))
    _refused(ms, body, "revisionHistoryLimit -1")
    _accepted(ms, _variant(base, "zero", lambda b: b["spec"].update(revisionHistoryLimit=0)), "revisionHistoryLimit 0")


@behaviour(
    "core/admission/max-unavailable-zero-needs-surge",
    "A literal maxUnavailable of 0 MUST be refused at admission and not stored when maxSurge is unset or 0.",
    f"{API}#RollingUpdateConfiguration",
    Feature.ADMISSION,
)
def test_max_unavailable_zero_without_surge_is_rejected(ms: ModelServings, manifest: Any) -> None:
    # The other half of the rule (maxUnavailable 0 accepted with maxSurge 1) needs maxSurge, a
    # documented field an implementation may not have yet: rollout/sg/max-surge (feature MaxSurge)
    # creates exactly that ModelServing, and a refusal of it is non-conformant there. A Role's
    # maxUnavailable belongs to RoleRollingUpdate, where rollout/role/admission refuses its 0.
    base = manifest("core-small")

    def group_budget(**budget: Any) -> Callable[[dict[str, Any]], None]:
        return lambda b: b["spec"].update(
            rolloutStrategy={"type": "ServingGroupRollingUpdate", "rollingUpdateConfiguration": budget}
        )

    cases = [
        ("group-unset", group_budget(maxUnavailable=0), "rollingUpdateConfiguration maxUnavailable 0, maxSurge unset"),
        ("group-zero", group_budget(maxUnavailable=0, maxSurge=0), "rollingUpdateConfiguration maxUnavailable 0, "
         "maxSurge 0"),
    ]  # fmt: skip
    for name, change, what in cases:
        _refused(ms, _variant(base, name, change), what)


@behaviour(
    "core/admission/message-names-field",
    "The message of an admission refusal SHOULD name the offending field's path, whether the OpenAPI schema, a CEL "
    "rule or a webhook refuses it.",
    f"{API}#Role",
    Feature.ADMISSION,
)
def test_refusal_messages_name_the_field(ms: ModelServings, manifest: Any) -> None:
    # One refusal of each kind an implementation may use: a pattern/length bound, an enum, and a rule
    # that needs arithmetic (an OpenAPI schema cannot say it; upstream makes it in its webhook).
    base = manifest("core-small")
    cases = [
        (_variant(base, "too-long", lambda b: _role(b).update(name="role-thirteen")), "roles[0].name",
         "a 13-character Role name"),
        (_variant(base, "policy", functools.partial(_set_spec, key="recoveryPolicy", value="Never")),
         "recoveryPolicy", "recoveryPolicy 'Never'"),
        (_variant(base, "zero", lambda b: b["spec"].update(rolloutStrategy={
            "type": "ServingGroupRollingUpdate", "rollingUpdateConfiguration": {"maxUnavailable": 0}})),
         "maxUnavailable", "maxUnavailable 0 without maxSurge"),
    ]  # fmt: skip
    unnamed = []
    for body, field, what in cases:
        rejection = _refused(ms, body, what)
        if not names_field(rejection, field):
            unnamed.append(f"{what}: the message does not name {field!r}: {rejection.message!r}")
    assert not unnamed, "expected every refusal to name the offending field; " + "; ".join(unnamed)
