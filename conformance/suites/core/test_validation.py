"""Validation: the enums and required fields the API reference documents, refused at admission.

Why a module of its own: test_admission.py holds the Core admission rules; the enums here belong to
the features that own their fields (rolloutStrategy.type to RollingUpdate, protectionLevel to
EvictionBudget, a plugin's scope.target to PluginFramework), so an implementation without a feature
is not judged on its enum. A refusal is judged as the refusal alone (an HTTP 400/403/422 and nothing
stored): the wording of the message differs between CEL, the OpenAPI schema and a webhook, and is
asserted separately. Each rule is also fed a value the spec allows, which must be accepted, so an
implementation cannot pass by refusing everything. No ServingGroup is asked for (spec.replicas 0).
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from conformance.framework.catalog import behaviour
from conformance.framework.features import Feature
from conformance.framework.modelserving import ModelServings

API = "api-reference-workload-v1alpha1.txt"


def _variant(base: dict[str, Any], name: str, change: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    body = copy.deepcopy(base)
    body["metadata"]["name"] = name
    body["spec"]["replicas"] = 0
    change(body)
    return body


def _accepted(ms: ModelServings, body: dict[str, Any], what: str) -> None:
    rejection = ms.try_create(body)
    assert rejection is None, f"expected {what} to be accepted (the spec allows it); refused: {rejection}"


def _setting(set_value: Callable[[dict[str, Any], str], None], value: str) -> Callable[[dict[str, Any]], None]:
    return lambda body: set_value(body, value)


def _refuses_values(
    ms: ModelServings, base: dict[str, Any], field: str, set_value: Callable[[dict[str, Any], str], None],
    refused: list[str], allowed: str,
) -> None:  # fmt: skip
    for i, bad in enumerate(refused):
        body = _variant(base, f"bad-{i}", _setting(set_value, bad))
        ms.refused_create(body, f"{field} {bad!r}")
    _accepted(ms, _variant(base, "allowed", _setting(set_value, allowed)), f"{field} {allowed!r}")


def _strategy(body: dict[str, Any]) -> dict[str, Any]:
    strategy: dict[str, Any] = body["spec"].setdefault("rolloutStrategy", {})
    return strategy


@behaviour(
    "rollout/admission/type-enum",
    "A rolloutStrategy.type other than ServingGroupRollingUpdate or RoleRollingUpdate MUST be refused at "
    "admission and not stored.",
    f"{API}#RolloutStrategy",
    Feature.ROLLING_UPDATE,
)
def test_unknown_rollout_strategy_type_is_refused(ms: ModelServings, manifest: Any) -> None:
    def set_type(b: dict[str, Any], value: str) -> None:
        _strategy(b)["type"] = value

    _refuses_values(
        ms, manifest("core-small"), "rolloutStrategy.type", set_type,
        ["RollingUpdate", "Recreate", "servinggrouprollingupdate"], "ServingGroupRollingUpdate",
    )  # fmt: skip


@behaviour(
    "eviction/admission/protection-level-enum",
    "An evictionStrategy.protectionLevel other than ServingGroup or Role MUST be refused at admission and not stored.",
    f"{API}#EvictionStrategySpec",
    Feature.EVICTION_BUDGET,
)
def test_unknown_protection_level_is_refused(ms: ModelServings, manifest: Any) -> None:
    def set_level(b: dict[str, Any], value: str) -> None:
        _strategy(b)["evictionStrategy"] = {"protectionLevel": value, "minAvailable": 1}

    _refuses_values(
        ms, manifest("core-small"), "evictionStrategy.protectionLevel", set_level,
        ["Pod", "Roles", "servinggroup"], "ServingGroup",
    )  # fmt: skip


@behaviour(
    "plugins/framework/scope-target-enum",
    "A plugin scope.target other than All, Entry or Worker SHOULD be refused at admission and not stored.",
    f"{API}#PluginScope",
    Feature.PLUGIN_FRAMEWORK,
    requires=(Feature.DEMO_POD_TWEAKS,),
)
def test_unknown_plugin_scope_target_is_refused(ms: ModelServings, manifest: Any) -> None:
    # Spec reading 5: PluginScope's enum {All, Entry, Worker} is given in the field's prose only (the
    # marker lost its '+', so it is not in the generated Validation column): a SHOULD.
    def set_target(b: dict[str, Any], value: str) -> None:
        b["spec"]["plugins"] = [
            {
                "name": "demo-pod-tweaks",
                "config": {"annotations": {"conformance.kthena.io/scope": "yes"}},
                "scope": {"target": value},
            }
        ]

    _refuses_values(
        ms, manifest("core-small"), "plugins[0].scope.target", set_target, ["Leader", "Workers", "entry"], "Entry"
    )


@behaviour(
    "core/admission/entry-template-required",
    "A Role without entryTemplate MUST be refused at admission and not stored, also when it has a workerTemplate.",
    f"{API}#Role",
    Feature.ADMISSION,
)
def test_role_without_entry_template_is_refused(ms: ModelServings, manifest: Any) -> None:
    base = manifest("core-small")

    def without_entry(b: dict[str, Any]) -> None:
        role = b["spec"]["template"]["roles"][0]
        role.pop("entryTemplate")
        role["workerReplicas"] = 0
        role.pop("workerTemplate")

    def worker_only(b: dict[str, Any]) -> None:
        b["spec"]["template"]["roles"][0].pop("entryTemplate")

    ms.refused_create(_variant(base, "no-templates", without_entry), "a Role with neither entryTemplate nor "
                      "workerTemplate (workerReplicas 0)")  # fmt: skip
    ms.refused_create(_variant(base, "worker-only", worker_only), "a Role with a workerTemplate and no entryTemplate")
    _accepted(ms, _variant(base, "with-entry", lambda b: None), "a Role with an entryTemplate")
