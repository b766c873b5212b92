"""Probes of the plugin and headless-service faults added for issue 13 (one per fault).

Why this module exists: ``test_faults.py`` holds one probe per fault; these are the plugin chain's
(absent chain, scope forms, config errors, recreated Pods, chain changes) and headless-service's
(scope, selectors, Service lifecycle) ones, kept apart so the table there stays readable. Each row
is ``(fault, probe, off, on, overlaps)``: ``overlaps`` names the other faults that break the same
observable on purpose (a fault that switches a whole check off, such as
``chain-immutability-not-enforced``, changes every probe of that check).
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable
from typing import Any

from kthena_ref.admission.rules import validate
from kthena_ref.api.types import ModelServing
from kthena_ref.planner.plan import Observed, plan
from kthena_ref.plugins.base import PluginConfigError

from .builders import MS, T0, edit_spec, names, ready, ts

ANNOTATION = "probe/tweaked"
DEMO = "demo-pod-tweaks"
HEADLESS = {"name": "headless-service"}
IMMUTABLE = "chain-immutability-not-enforced"


def _plugins(ms: ModelServing, *plugins: dict[str, Any]) -> ModelServing:
    return edit_spec(ms, lambda spec: spec.update(plugins=[copy.deepcopy(p) for p in plugins]))


def _tweaks(scope: dict[str, Any] | None = None) -> dict[str, Any]:
    plugin: dict[str, Any] = {"name": DEMO, "config": {"annotations": {ANNOTATION: "yes"}}}
    if scope is not None:
        plugin["scope"] = scope
    return plugin


def _fresh(ms: ModelServing, **observed: Any) -> Any:
    return plan(Observed(ms=ms, pods=observed.pop("pods", []), services=observed.pop("services", []), now=T0,
                         **observed))  # fmt: skip


def _tweaked(ms: ModelServing) -> list[str]:
    """The Pods of a fresh plan that demo-pod-tweaks annotated."""
    pods = _fresh(ms).create_pods
    return sorted(p["metadata"]["name"] for p in pods if ANNOTATION in (p["metadata"].get("annotations") or {}))


def _two_roles() -> MS:
    return MS().role("a", 1, 1).role("b", 1, 1)


def _api(ms: ModelServing, **meta: Any) -> dict[str, Any]:
    data = ms.to_api()
    data["metadata"].update(meta)
    return data


def _fields(new: dict[str, Any], old: dict[str, Any] | None = None) -> list[str]:
    return [e.field for e in validate(new, old)]


def _running(ms: ModelServing) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The Pods (Ready) and Services (with UIDs) a fresh plan makes for ``ms``."""
    first = _fresh(ms)
    services = copy.deepcopy(first.create_services)
    for svc in services:
        svc["metadata"]["uid"] = f"uid-{svc['metadata']['name']}"
    return [ready(p) for p in first.create_pods], services


def _deleted_entry_services(ms: ModelServing, before: ModelServing, **observed: Any) -> int:
    """How many Entry Services a plan of ``ms`` deletes, with the Pods and Services ``before`` made
    (a count: which instance a scale-down removes is another fault's business)."""
    pods, services = _running(before)
    deleted = _fresh(ms, pods=pods, services=services, **observed).delete_services
    return sum(1 for name, _ in deleted if re.fullmatch(r"ms-\d+-r-\d+-0", name))


# -- the plugin chain ---------------------------------------------------------------------------------


def probe_omitted_plugins() -> list[str]:
    return names(_fresh(MS().role("r", 1, 1).build()).create_services)


def probe_empty_plugins() -> list[str]:
    return names(_fresh(_plugins(MS().role("r", 1, 1).build())).create_services)


def probe_scope_target_worker() -> list[str]:
    return _tweaked(_plugins(MS().role("r", 1, 1).build(), _tweaks({"target": "Worker"})))


def probe_scope_roles_with_target() -> list[str]:
    return _tweaked(_plugins(_two_roles().build(), _tweaks({"roles": ["a"], "target": "Entry"})))


def probe_scope_empty_roles() -> list[str]:
    return _tweaked(_plugins(MS().role("r", 1, 1).build(), _tweaks({"roles": [], "target": "Entry"})))


def probe_scope_target_all() -> list[str]:
    return _tweaked(_plugins(MS().role("r", 1, 1).build(), _tweaks({"target": "All"})))


def probe_recreated_pods() -> str | None:
    """Role b's Pod is missing from a ServingGroup whose Role a still runs: is the new one tweaked?"""
    ms = _plugins(MS().role("a", 1, 0).role("b", 1, 0).build(), _tweaks())
    pods = [ready(p) for p in _fresh(ms).create_pods if p["metadata"]["name"] == "ms-0-a-0-0"]
    created = _fresh(ms, pods=pods).create_pods
    return str((created[0]["metadata"].get("annotations") or {}).get(ANNOTATION)) if created else None


def probe_config_error() -> tuple[list[str], str]:
    """Admission's answer to a demo-pod-tweaks env that is not a list, then what the controller makes of it."""
    ms = _plugins(MS().role("r", 1, 0).build(), {"name": DEMO, "config": {"env": "CUSTOM_VAR=x"}})
    try:
        made = ",".join(names(_fresh(ms).create_pods))
    except PluginConfigError as exc:
        made = f"PluginConfigError: {exc.field}"
    return _fields(ms.to_api()), made


def probe_unknown_plugin_logged() -> tuple[list[str], str]:
    ms = _plugins(MS().role("r", 1, 0).build(), {"name": "not-registered"})
    try:
        made = ",".join(names(_fresh(ms).create_pods))
    except PluginConfigError as exc:
        made = f"PluginConfigError: {exc.field}"
    return _fields(ms.to_api()), made


# -- chain changes on update ----------------------------------------------------------------------------


def _change(before: ModelServing, after: ModelServing, **old_meta: Any) -> list[str]:
    old = _api(before, **old_meta)
    if "status" in old_meta:
        old["status"] = old["metadata"].pop("status")
    return _fields(after.to_api(), old)


def probe_chain_append() -> list[str]:
    base = MS().role("r", 1, 1).build()
    return _change(_plugins(base, _tweaks()), _plugins(base, _tweaks(), HEADLESS))


def probe_chain_after_rollout() -> list[str]:
    base = MS().role("r", 1, 1).build()
    changed = _tweaks()
    changed["config"]["annotations"][ANNOTATION] = "v2"
    return _change(_plugins(base, _tweaks()), _plugins(base, changed), generation=2, status={"observedGeneration": 2})


def probe_scope_roles_change() -> list[str]:
    base = MS().role("r", 1, 1).build()
    return _change(_plugins(base, _tweaks({"roles": ["r"]})), _plugins(base, _tweaks({"roles": ["r", "s"]})))


def probe_chain_at_zero() -> list[str]:
    base = MS().replicas(0).role("r", 1, 1).build()
    return _change(base, _plugins(base, HEADLESS))


# -- headless-service ------------------------------------------------------------------------------------


def probe_headless_scope_roles() -> list[str]:
    ms = _plugins(_two_roles().build(), {**HEADLESS, "scope": {"roles": ["a"]}})
    return [n for n in names(_fresh(ms).create_services) if "-b-" in n]


def probe_headless_scope_all() -> list[str]:
    return _fields(_plugins(MS().role("r", 1, 1).build(), {**HEADLESS, "scope": {"target": "All"}}).to_api())


def probe_discovery_selector() -> list[str]:
    made = _fresh(_plugins(MS().role("r", 1, 1).build(), HEADLESS)).create_services
    discovery = next((s for s in made if s["metadata"]["name"] == "ms-0-r-0"), None)
    return sorted(discovery["spec"]["selector"]) if discovery else []


def probe_third_service() -> list[str]:
    made = names(_fresh(_plugins(MS().role("r", 1, 1).build(), HEADLESS)).create_services)
    return [n for n in made if n not in ("ms-0-r-0", "ms-0-r-0-0")]


def probe_services_resync() -> list[str]:
    """The instance runs with its Services; the ModelServing's spec changed since (generation 2)."""
    pods, services = _running(_plugins(MS().role("r", 1, 1).build(), HEADLESS))
    changed = _plugins(MS().generation(2).role("r", 1, 1).build(), HEADLESS)
    return sorted(n for n, _ in _fresh(changed, pods=pods, services=services).delete_services)


def probe_group_removal() -> int:
    before = _plugins(MS().replicas(2).role("r", 1, 1).build(), HEADLESS)
    return _deleted_entry_services(_plugins(MS().replicas(1).role("r", 1, 1).build(), HEADLESS), before)


def probe_role_scale_down() -> int:
    before = _plugins(MS().role("r", 2, 1).build(), HEADLESS)
    return _deleted_entry_services(_plugins(MS().role("r", 1, 1).build(), HEADLESS), before)


def probe_terminating_service() -> list[str]:
    """The worker is missing while the Entry Service is terminating: is the worker created?"""
    ms = _plugins(MS().role("r", 1, 1).build(), HEADLESS)
    pods, services = _running(ms)
    for svc in services:
        if svc["metadata"]["name"] == "ms-0-r-0-0":
            svc["metadata"]["deletionTimestamp"] = ts(T0)
    entry = [p for p in pods if p["metadata"]["name"] == "ms-0-r-0-0"]
    return names(_fresh(ms, pods=entry, services=services).create_pods)


def probe_foreign_service() -> list[str]:
    """A Service labelled like the plugin's (an Entry Service of a gone instance) that is not ours."""
    ms = _plugins(MS().role("r", 1, 1).build(), HEADLESS)
    pods, services = _running(ms)
    foreign = copy.deepcopy(next(s for s in services if s["metadata"]["name"] == "ms-0-r-0-0"))
    foreign["metadata"].update(name="ms-0-r-1-0", uid="uid-foreign", ownerReferences=[])
    return sorted(n for n, _ in _fresh(ms, pods=pods, services=[*services, foreign]).delete_services)


def probe_legacy_dns() -> str | None:
    """No plugins; instance 0 of a ServingGroup whose instance 1 runs is created: its worker's subdomain."""
    ms = MS().role("r", 2, 1).build()
    pods = [ready(p) for p in _fresh(ms).create_pods if p["metadata"]["name"].startswith("ms-0-r-1-")]
    made = {p["metadata"]["name"]: p for p in _fresh(ms, pods=pods).create_pods}
    return made["ms-0-r-0-1"]["spec"].get("subdomain") if "ms-0-r-0-1" in made else "not created"


def probe_failed_delete() -> int:
    """Scale 2 -> 1 ServingGroups; the Services of group 1 were asked to go before: asked again?"""
    before = _plugins(MS().replicas(2).role("r", 1, 1).build(), HEADLESS)
    ms = _plugins(MS().replicas(1).role("r", 1, 1).build(), HEADLESS)
    pending = {n: f"uid-{n}" for n in ("ms-1-r-0", "ms-1-r-0-0")}
    return _deleted_entry_services(ms, before, pending_services=pending)


def probe_role_deletion_waits() -> int:
    """Scale 2 -> 1 ServingGroups while the Services exist: how many Pods are deleted?"""
    before = _plugins(MS().replicas(2).role("r", 1, 1).build(), HEADLESS)
    pods, services = _running(before)
    ms = _plugins(MS().replicas(1).role("r", 1, 1).build(), HEADLESS)
    return len(_fresh(ms, pods=pods, services=services).delete_pods)


Row = tuple[str, Callable[[], Any], Any, Any, tuple[str, ...]]

CASES: list[Row] = [
    # Plugins
    ("omitted-plugins-implicit-headless", probe_omitted_plugins, [], ["ms-0-r-0", "ms-0-r-0-0"], ()),
    ("empty-plugins-implicit-headless", probe_empty_plugins, [], ["ms-0-r-0", "ms-0-r-0-0"], ()),
    ("scope-target-worker-ignored", probe_scope_target_worker, ["ms-0-r-0-1"], ["ms-0-r-0-0", "ms-0-r-0-1"], ()),
    (
        "scope-roles-ignored-with-target",
        probe_scope_roles_with_target,
        ["ms-0-a-0-0"],
        ["ms-0-a-0-0", "ms-0-b-0-0"],
        ("scope-target-entry-ignored",),  # the Entry target also reaches a's worker
    ),
    (  # scope-target-entry-ignored: the Entry target also reaches the worker
        "scope-empty-roles-match-none",
        probe_scope_empty_roles,
        ["ms-0-r-0-0"],
        [],
        ("scope-target-entry-ignored",),
    ),
    ("scope-target-all-entry-only", probe_scope_target_all, ["ms-0-r-0-0", "ms-0-r-0-1"], ["ms-0-r-0-0"], ()),
    ("recreated-pods-skip-plugins", probe_recreated_pods, "yes", "None", ()),
    (
        "plugin-config-error-skips-plugin",
        probe_config_error,
        (["spec.plugins[0].config.env"], "PluginConfigError: spec.plugins[0].config.env"),
        ([], "ms-0-r-0-0"),
        ("plugin-config-error-logged-only",),  # it accepts the config too (and the controller then fails)
    ),
    (
        "unknown-plugin-logged-only",
        probe_unknown_plugin_logged,
        (["spec.plugins[0].name"], "PluginConfigError: spec.plugins[0].name"),
        ([], "PluginConfigError: spec.plugins[0].name"),
        ("unknown-plugin-accepted",),
    ),
    ("chain-append-allowed", probe_chain_append, ["spec.plugins"], [], (IMMUTABLE,)),
    ("chain-unlocked-after-rollout", probe_chain_after_rollout, ["spec.plugins"], [], (IMMUTABLE,)),
    ("scope-roles-change-allowed", probe_scope_roles_change, ["spec.plugins"], [], (IMMUTABLE,)),
    ("chain-unlocked-at-zero", probe_chain_at_zero, ["spec.plugins"], [], (IMMUTABLE, "headless-addable")),
    # HeadlessServiceDNS
    ("headless-scope-refused", probe_headless_scope_all, [], ["spec.plugins[0].scope"], ()),
    (
        "headless-scope-roles-ignored",
        probe_headless_scope_roles,
        [],
        ["ms-0-b-0", "ms-0-b-0-0"],
        ("headless-scope-refused",),
    ),
    (
        "discovery-selects-across-groups",
        probe_discovery_selector,
        ["modelserving.volcano.sh/group-name", "modelserving.volcano.sh/name", "modelserving.volcano.sh/role-id"],
        ["modelserving.volcano.sh/name", "modelserving.volcano.sh/role-id"],
        ("no-discovery-service",),
    ),
    ("third-service-per-instance", probe_third_service, [], ["ms-0-r-0-all"], ()),
    ("services-recreated-on-resync", probe_services_resync, [], ["ms-0-r-0", "ms-0-r-0-0"], ()),
    ("services-kept-on-group-removal", probe_group_removal, 1, 0, ()),
    ("services-kept-on-role-scale-down", probe_role_scale_down, 1, 0, ()),
    (  # terminating-service-rebuilds-instance: the instance is rebuilt, so its worker waits for its entry to go
        "terminating-service-blocks-role",
        probe_terminating_service,
        ["ms-0-r-0-1"],
        [],
        ("terminating-service-rebuilds-instance",),
    ),
    ("service-ownership-unchecked", probe_foreign_service, [], ["ms-0-r-1-0"], ()),
    ("legacy-dns-on-recreated-pods", probe_legacy_dns, None, "ms-0-r-0", ("omitted-plugins-implicit-headless",)),
    ("failed-service-delete-not-retried", probe_failed_delete, 1, 0, ("services-kept-on-group-removal",)),
    (  # scale-down-keeps-worker-pods: the removed group's worker is not deleted either
        "role-deletion-waits-for-services",
        probe_role_deletion_waits,
        2,
        0,
        ("services-kept-on-group-removal", "scale-down-keeps-worker-pods"),
    ),
]
