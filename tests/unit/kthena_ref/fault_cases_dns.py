"""Probes of the headless-service faults helper dns added in issue 13's second wave (one per fault).

Why this module exists: ``test_faults.py`` holds one probe per fault; these cover Service cleanup
(ownership released by a user, a Service recreated with a new UID during a pending deletion),
adding headless-service on update, an instance left with only its Entry Service, the entry Pod's
ENTRY_ADDRESS, and Services an earlier controller process made (the restart fault). Rows are
``(fault, probe, off, on, overlaps)`` as in ``fault_cases_plugins``.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from kthena_ref.api.types import ModelServing
from kthena_ref.planner.services import FAULT_INCARNATION

from .builders import MS, deleting, env_of
from .fault_cases_plugins import HEADLESS, IMMUTABLE, _change, _fresh, _plugins, _running


def _headless(replicas: int) -> ModelServing:
    return _plugins(MS().replicas(replicas).role("r", 1, 1).build(), HEADLESS)


def probe_orphaned_services() -> list[str]:
    """Scale 2 -> 1 ServingGroups after a user removed every Service's ownerReferences: deleted Services."""
    pods, services = _running(_headless(2))
    for svc in services:
        svc["metadata"]["ownerReferences"] = []
    return sorted(n for n, _ in _fresh(_headless(1), pods=pods, services=services).delete_services)


def probe_replacement_service() -> list[str]:
    """Scale 2 -> 1 while the removed group's Pods stay terminating; its Services go, then one is
    recreated by someone else (same name, labels and ownerReferences, a new UID): deleted again?"""
    pods, services = _running(_headless(2))
    one = _headless(1)
    first = _fresh(one, pods=pods, services=services)
    going = {d.name for d in first.delete_pods}
    gone = {n for n, _ in first.delete_services}
    held = [deleting(p) if p["metadata"]["name"] in going else p for p in pods]
    left = [s for s in services if s["metadata"]["name"] not in gone]
    second = _fresh(one, pods=held, services=left, pending=first.pending, pending_services=first.pending_services)
    replacements = []
    for svc in services:
        if svc["metadata"]["name"] in gone:
            again = copy.deepcopy(svc)
            again["metadata"]["uid"] = f"uid-somebody-else-{svc['metadata']['name']}"
            replacements.append(again)
    third = _fresh(
        one, pods=held, services=[*left, *replacements], pending=second.pending,
        pending_services=second.pending_services,
    )  # fmt: skip
    return sorted(n for n, _ in third.delete_services if n in gone)


def probe_add_headless() -> list[str]:
    base = MS().role("r", 1, 1).build()
    return _change(base, _plugins(base, HEADLESS))


def probe_entry_only_instance() -> list[str]:
    """The instance runs with its Entry Service only (its Discovery Service is missing): deleted Services."""
    ms = _headless(1)
    pods, services = _running(ms)
    entry_only = [s for s in services if s["metadata"]["name"] != "ms-0-r-0"]
    return sorted(n for n, _ in _fresh(ms, pods=pods, services=entry_only).delete_services)


def probe_services_of_an_earlier_process() -> list[str]:
    """A running instance whose Services an earlier controller process made: deleted Services."""
    ms = _headless(1)
    pods, services = _running(ms)
    for svc in services:
        svc["metadata"]["annotations"] = {FAULT_INCARNATION: "an-earlier-process"}
    return sorted(n for n, _ in _fresh(ms, pods=pods, services=services).delete_services)


def probe_entry_pod_address() -> dict[str, str]:
    pods = _fresh(_headless(1)).create_pods
    return {p["metadata"]["name"]: env_of(p["spec"]["containers"][0])["ENTRY_ADDRESS"] for p in pods}


Row = tuple[str, Callable[[], Any], Any, Any, tuple[str, ...]]

OWNERSHIP = "service-ownership-unchecked"
RIGHT_ADDRESSES = {"ms-0-r-0-0": "ms-0-r-0-0.default", "ms-0-r-0-1": "ms-0-r-0-0.default"}

CASES: list[Row] = [
    ("instance-cleanup-unowned", probe_orphaned_services, [], ["ms-1-r-0", "ms-1-r-0-0"], (OWNERSHIP,)),
    ("service-replacement-unprotected", probe_replacement_service, [], ["ms-1-r-0", "ms-1-r-0-0"], ()),
    ("headless-addable", probe_add_headless, ["spec.plugins"], [], (IMMUTABLE,)),
    ("entry-only-service-replaced", probe_entry_only_instance, [], ["ms-0-r-0-0"], ()),
    (
        "services-recreated-after-restart",
        probe_services_of_an_earlier_process,
        [],
        ["ms-0-r-0", "ms-0-r-0-0"],
        ("services-recreated-on-resync",),
    ),
    (
        "entry-pod-own-address",
        probe_entry_pod_address,
        RIGHT_ADDRESSES,
        {**RIGHT_ADDRESSES, "ms-0-r-0-0": "ms-0-r-0-0.ms-0-r-0.default"},
        ("wrong-entry-address",),
    ),
]
