"""Defaults: every default the API reference documents, read back from the stored ModelServing.

Why a module of its own: each default belongs to the feature that owns its field (a rollout default
is judged under RollingUpdate, the history limit under RevisionHistoryLimit, ...), so an
implementation without that feature is reported not-supported for it instead of failing Core.

How a default is read (docs/spec-readings.md, "defaults"): a value in the API reference's Default
column is a schema default (the reference is generated from the CRD's defaulting markers), so the
API server stores it and a GET returns it; that is asserted here. A default the reference gives only
in prose (maxSurge and partition "0") may be applied by the controller instead: the stored object
may omit it, but must not store another value. Each test's ModelServing asks for no ServingGroup
(spec.replicas 0) unless spec.replicas is the default under test: only the stored object is read.
"""

from __future__ import annotations

import copy
from typing import Any

from conformance.framework.catalog import behaviour
from conformance.framework.features import Feature
from conformance.framework.modelserving import ModelServings
from conformance.framework.plugin import SuiteState
from conformance.suites.plugins.builtin import builtin_plugin

API = "api-reference-workload-v1alpha1.txt"
OMITTED = object()  # the stored object has no value at the path
ZERO_OR_OMITTED = object()  # a prose default of 0: the controller may apply it, so omitted is fair too


def _stored(obj: dict[str, Any], path: str) -> Any:
    """The value at a dotted ``path`` (``spec.template.roles[0].replicas``) of ``obj``, or OMITTED."""
    value: Any = obj
    for part in path.split("."):
        key, _, index = part.partition("[")
        if not isinstance(value, dict) or key not in value:
            return OMITTED
        value = value[key]
        if index:
            i = int(index.rstrip("]"))
            if not isinstance(value, list) or len(value) <= i:
                return OMITTED
            value = value[i]
    return value


def _expect_defaults(ms: ModelServings, body: dict[str, Any], expected: dict[str, Any], what: str) -> None:
    """Create ``body`` (which omits every field of ``expected``) and read each default back: every
    entry must hold on its own (one wrong default fails the whole table)."""
    for path in expected:
        assert _stored(body, path) is OMITTED, f"test bug: the manifest sets {path}, whose default is under test"
    ms.create(body)
    stored = ms.get(body["metadata"]["name"])
    wrong: dict[str, Any] = {}
    for path, want in expected.items():
        seen = _stored(stored, path)
        ok = seen in (0, OMITTED) if want is ZERO_OR_OMITTED else seen == want
        if not ok:
            wanted = "0 or omitted" if want is ZERO_OR_OMITTED else want
            wrong[path] = {"expected": wanted, "seen": "<omitted>" if seen is OMITTED else seen}
    assert not wrong, (
        f"{what}: the stored ModelServing lacks the defaults the API reference documents for the omitted fields "
        f"(a Default-column value is a schema default, read back on GET): {wrong}"
    )


def _no_groups(manifest: Any, name: str) -> dict[str, Any]:
    body: dict[str, Any] = copy.deepcopy(manifest("core-defaults"))
    body["metadata"]["name"] = name
    body["spec"]["replicas"] = 0
    return body


@behaviour(
    "core/defaults/revision-history-limit",
    "An omitted spec.revisionHistoryLimit MUST read back as its documented default 10.",
    f"{API}#ModelServingSpec",
    Feature.REVISION_HISTORY_LIMIT,
)
def test_revision_history_limit_defaults_to_10(ms: ModelServings, manifest: Any) -> None:
    body = _no_groups(manifest, "history")
    _expect_defaults(ms, body, {"spec.revisionHistoryLimit": 10}, "revisionHistoryLimit omitted")


@behaviour(
    "rollout/defaults/servinggroup-rolling-update",
    "In a rolloutStrategy that omits them, type MUST read back as ServingGroupRollingUpdate and "
    "rollingUpdateConfiguration.maxUnavailable as 1, and maxSurge and partition MUST be 0 or omitted.",
    f"{API}#RolloutStrategy",
    Feature.ROLLING_UPDATE,
)
def test_rollout_strategy_defaults(ms: ModelServings, manifest: Any) -> None:
    body = _no_groups(manifest, "strategy")
    body["spec"]["rolloutStrategy"] = {"rollingUpdateConfiguration": {}}
    at = "spec.rolloutStrategy"
    expected = {
        f"{at}.type": "ServingGroupRollingUpdate",
        f"{at}.rollingUpdateConfiguration.maxUnavailable": 1,
        f"{at}.rollingUpdateConfiguration.maxSurge": ZERO_OR_OMITTED,
        f"{at}.rollingUpdateConfiguration.partition": ZERO_OR_OMITTED,
    }
    _expect_defaults(ms, body, expected, "rolloutStrategy {rollingUpdateConfiguration: {}}")


@behaviour(
    "rollout/defaults/role-max-unavailable",
    "A Role that omits maxUnavailable MUST read back maxUnavailable 1, and its maxSurge and partition MUST be 0 or "
    "omitted.",
    f"{API}#Role",
    Feature.ROLE_ROLLING_UPDATE,
)
def test_role_rollout_defaults(ms: ModelServings, manifest: Any) -> None:
    body = _no_groups(manifest, "role-budget")
    body["spec"]["rolloutStrategy"] = {"type": "RoleRollingUpdate"}
    at = "spec.template.roles[0]"
    expected = {f"{at}.maxUnavailable": 1, f"{at}.maxSurge": ZERO_OR_OMITTED, f"{at}.partition": ZERO_OR_OMITTED}
    _expect_defaults(ms, body, expected, "RoleRollingUpdate with a Role that sets no budget")


@behaviour(
    "inplace/defaults/update-method",
    "A rolloutStrategy that omits updateMethod MUST read back updateMethod Recreate.",
    f"{API}#RolloutStrategy",
    Feature.IN_PLACE_UPDATE,
)
def test_update_method_defaults_to_recreate(ms: ModelServings, manifest: Any) -> None:
    body = _no_groups(manifest, "method")
    body["spec"]["rolloutStrategy"] = {}
    _expect_defaults(ms, body, {"spec.rolloutStrategy.updateMethod": "Recreate"}, "rolloutStrategy {}")


@behaviour(
    "eviction/defaults/protection-level",
    "An evictionStrategy that omits protectionLevel MUST read back protectionLevel ServingGroup.",
    f"{API}#EvictionStrategySpec",
    Feature.EVICTION_BUDGET,
)
def test_protection_level_defaults_to_servinggroup(ms: ModelServings, manifest: Any) -> None:
    body = _no_groups(manifest, "protection")
    body["spec"]["rolloutStrategy"] = {"evictionStrategy": {"minAvailable": 1}}
    expected = {"spec.rolloutStrategy.evictionStrategy.protectionLevel": "ServingGroup"}
    _expect_defaults(ms, body, expected, "evictionStrategy {minAvailable: 1}")


@behaviour(
    "plugins/defaults/type-built-in",
    "A plugin entry that omits type MUST read back type BuiltIn.",
    f"{API}#PluginSpec",
    Feature.PLUGIN_FRAMEWORK,
)
def test_plugin_type_defaults_to_built_in(ms: ModelServings, manifest: Any, suite: SuiteState) -> None:
    body = _no_groups(manifest, "plugin-type")
    plugin = {k: v for k, v in builtin_plugin(suite.support).items() if k != "type"}
    body["spec"]["plugins"] = [plugin]
    _expect_defaults(ms, body, {"spec.plugins[0].type": "BuiltIn"}, f"a {plugin['name']} plugin without type")
