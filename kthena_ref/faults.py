"""Deliberate faults in the reference controller, for the conformance suite's self-validation.

A conformance suite is only worth something if it notices when an implementation is wrong. To
prove that, self-validation runs the suite against deliberately broken variants of this
controller and requires the conformance test that covers the broken behaviour to come out
non-conformant. Each fault here is such a mutation: it breaks exactly one documented behaviour
(and nothing else on purpose), at the one place in the code that implements that behaviour, as a
one-to-three line ``if faults.active("..."):`` branch.

Faults are never on by default. They are switched on for a process with
``kthena-ref run --fault NAME`` (repeatable), or with the environment variable
``KTHENA_REF_FAULTS`` (comma-separated names) when no ``--fault`` is given; ``run`` logs a WARNING
naming every active fault when it starts. Unknown names are an error, never silently ignored.

Purity. The planner, the plugins and the admission rules are pure functions of their arguments,
with one deliberate exception: :func:`active` reads this module's process-wide switch (the names
given to :func:`configure`, else the environment variable). That state is set once when the
process starts and never changes while it runs, so every plan is still a function of its input
for the whole life of a controller; unit tests switch faults with :func:`injected`, which
restores the previous state when it exits.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

ENV = "KTHENA_REF_FAULTS"

FAULTS: dict[str, str] = {
    # Core
    "scale-down-lowest-ordinal": (
        "scale-down removes the lowest ordinals (ServingGroup <ms>-0 first) regardless of readiness and "
        "pod-deletion-cost, instead of not-ready first, then the lowest summed cost, then the highest ordinal"
    ),
    "wrong-worker-index": "worker Pods get WORKER_INDEX=k+1 (off by one); the entry Pod keeps WORKER_INDEX=0",
    "wrong-group-size": "every Pod gets GROUP_SIZE=workerReplicas instead of workerReplicas+1",
    "no-recovery": (
        "recoveryPolicy is ignored and recovery behaves like None: a Pod deleted behind the controller's back "
        "(or a failed Pod) is recreated alone, the rest of its Role instance / ServingGroup keeps running"
    ),
    "stale-available-replicas": "status.availableReplicas is always 0 (conditions are still computed correctly)",
    "admission-allows-missing-worker-template": (
        "admission accepts a Role with workerReplicas > 0 and no workerTemplate (workers then run the entry template)"
    ),
    "no-entry-label": 'entry Pods lack the label modelserving.volcano.sh/entry: "true"',
    # Plugins
    "plugin-order-reversed": "the plugin chain runs in reverse list order (the first plugin's mutations win)",
    "chain-immutability-not-enforced": "admission accepts changes to spec.plugins on update",
    "unknown-plugin-accepted": (
        "admission accepts plugin names that are not registered; the controller then skips that plugin"
    ),
    "demo-env-replaces": (
        "demo-pod-tweaks with config.env replaces every container's env with its own entries instead of appending"
    ),
    # HeadlessServiceDNS
    "no-discovery-service": (
        "headless-service never creates the Discovery Service; Pods' spec.subdomain still names it"
    ),
    "entry-service-selects-all": (
        "the Entry Service selects the entry and all worker Pods (no entry label in its selector)"
    ),
    "wrong-entry-address": (
        "ENTRY_ADDRESS is <discovery-service>.<namespace> (the all-member Service) instead of "
        "<entry-service>.<namespace>"
    ),
    "services-not-published-before-ready": "headless-service Services have publishNotReadyAddresses: false",
    "services-not-recreated": (
        "a plugin Service deleted while its Role instance has Pods is not recreated (new instances still get theirs)"
    ),
    "deletion-identity-ignored": (
        "a Pod that reused an instance identity while its deletion is pending is treated like an original: "
        "adopted (or deleted with its group), no DeletionIdentityChanged Event or condition"
    ),
    "migration-layout-changed": (
        "an instance whose Pods use the entry-named all-member Service as subdomain gets the new layout: "
        "the Discovery Service is created, recreated Pods use it, no MigrationRequired Event or condition"
    ),
    # Rollout
    "unavailable-rounds-up": (
        "a percentage maxUnavailable (ServingGroupRollingUpdate) is rounded up instead of down (off by one)"
    ),
    "surge-ignored": "maxSurge is ignored (resolves to 0): no ServingGroup is created above spec.replicas",
    "partition-ignored": "rollingUpdateConfiguration.partition is ignored: protected ServingGroups are updated too",
    "role-unchanged-recreated": (
        "RoleRollingUpdate recreates every Role instance of a new revision, also those of Roles whose template "
        "did not change (instead of keeping their Pods)"
    ),
    "coordination-ignored": "roleCoordination is ignored: every Role rolls at its own pace",
    # InPlaceUpdate
    "in-place-ineligible-patched": (
        "updateMethod InPlace patches images even when the change is not image-only (the other changes are lost)"
    ),
    "no-fallback-event": "the in-place fallback to recreate emits no InPlaceUpdateFallback Event",
    "no-progress-deadline": "progressDeadlineSeconds never passes: a stuck in-place update is never recovered",
    # EvictionBudget
    "eviction-budget-off-by-one": (
        "the eviction budget allows an Eviction that leaves minAvailable - 1 ready ServingGroups "
        "(or roleMinAvailable - 1 ready Role instances)"
    ),
    "eviction-percent-rounds-down": (
        "a percentage minAvailable / roleMinAvailable is rounded down instead of up (as PodDisruptionBudgets do)"
    ),
    "role-eviction-budget-ignored": "protectionLevel Role allows every Eviction (roleMinAvailable is not checked)",
}


@dataclass
class _Switch:
    configured: frozenset[str] | None = None  # set by configure(); None: read the environment
    env: tuple[str, frozenset[str]] = ("", frozenset())  # (raw value, parsed): parsed once per value


_SWITCH = _Switch()


def _validated(names: Iterable[str], source: str) -> frozenset[str]:
    chosen = frozenset(names)
    unknown = sorted(chosen - FAULTS.keys())
    if unknown:
        raise ValueError(f"unknown fault(s) in {source}: {', '.join(unknown)} (known: {', '.join(sorted(FAULTS))})")
    return chosen


def parse(value: str, source: str = ENV) -> frozenset[str]:
    """The fault names in a comma-separated ``value`` (blanks ignored); ValueError for unknown ones."""
    return _validated((part.strip() for part in value.split(",") if part.strip()), source)


def from_env() -> frozenset[str]:
    """The faults ``KTHENA_REF_FAULTS`` names (empty when it is unset); ValueError for unknown ones."""
    raw = os.environ.get(ENV, "")
    if raw != _SWITCH.env[0]:
        _SWITCH.env = (raw, parse(raw))
    return _SWITCH.env[1]


def configure(names: Iterable[str] | None) -> frozenset[str]:
    """Make exactly ``names`` the active faults of this process (None: follow the environment
    variable again); ValueError naming the known faults if any name is unknown."""
    if isinstance(names, str):
        names = [names]  # one name, not its characters
    _SWITCH.configured = None if names is None else _validated(names, "the fault list")
    return enabled()


def enabled() -> frozenset[str]:
    """The active faults: those given to :func:`configure`, else those in ``KTHENA_REF_FAULTS``."""
    return _SWITCH.configured if _SWITCH.configured is not None else from_env()


def active(name: str) -> bool:
    """Is fault ``name`` switched on? (A typo in a hook is a bug: unknown names raise.)"""
    if name not in FAULTS:
        raise ValueError(f"unknown fault {name!r}")
    return name in enabled()


@contextmanager
def injected(*names: str) -> Iterator[frozenset[str]]:
    """For tests: exactly ``names`` are active inside the block; the previous state comes back after."""
    previous = _SWITCH.configured
    try:
        yield configure(names)
    finally:
        _SWITCH.configured = previous
