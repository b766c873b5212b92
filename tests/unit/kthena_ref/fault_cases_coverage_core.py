"""Probes of the faults added so that every behaviour is proven able to fail (issue 13, third wave):
core, plugins and dns behaviours that had no fault variant.

Why this module exists: ``test_faults.py`` holds one probe per fault; these are kept apart so the
table there stays readable. Each row is ``(fault, probe, off, on, overlaps)`` as in
:mod:`.fault_cases_plugins`.
"""

from __future__ import annotations

from typing import Any

from kthena_ref.api.crd import crd
from kthena_ref.api.types import ModelServing

from .builders import MS, deleted, deleting, edit_spec, names, template, world
from .fault_cases_plugins import DEMO, HEADLESS, _fresh, _plugins, _running, _tweaked, _tweaks

FROM_TEMPLATE = "probe/from-template"


def probe_none_deleted_pod() -> tuple[list[str], list[str]]:
    """recoveryPolicy None, a Role instance of an entry and one worker: the worker was deleted behind the
    controller's back. (Pods deleted, Pods created.)"""
    w = world(MS().role("r", 1, 1).recovery("None").build())
    del w.pods["ms-0-r-0-1"]
    p = w.plan(lost=frozenset({"ms-0-r-0-1"}))
    return deleted(p), names(p.create_pods)


def probe_role_scale_down() -> list[str]:
    """One ServingGroup, a Role scaled from 2 instances to 1: the Pods deleted."""
    w = world(MS().role("r", 2, 0).build())
    w.ms = edit_spec(w.ms, lambda spec: spec["template"]["roles"][0].update(replicas=1))
    return deleted(w.plan())


def probe_scale_subresource() -> dict[str, str]:
    """The CRD's scale subresource."""
    scale: dict[str, str] = crd()["spec"]["versions"][0]["subresources"]["scale"]
    return scale


def probe_worker_template() -> dict[str, str]:
    """A Role of an entry and one worker, each template with its own image: each Pod's image."""
    pods = _fresh(MS().role("r", 1, 1, image="engine:v1", worker_image="worker:v1").build()).create_pods
    return {p["metadata"]["name"]: p["spec"]["containers"][0]["image"] for p in pods}


def probe_group_scale_down() -> list[str]:
    """2 ready ServingGroups of an entry and one worker, spec.replicas lowered to 1: the Pods deleted."""
    w = world(MS().replicas(2).role("r", 1, 1).build())
    w.ms = edit_spec(w.ms, lambda spec: spec.update(replicas=1))
    return deleted(w.plan())


def _demo(config: dict[str, Any]) -> ModelServing:
    ms = MS().role("r", 1, 0, entry=template(annotations={FROM_TEMPLATE: "kept"})).build()
    return _plugins(ms, {"name": DEMO, "config": config})


def probe_demo_annotations() -> dict[str, str]:
    """demo-pod-tweaks with config.annotations, the template with an annotation of its own: the Pod's annotations."""
    pod = _fresh(_demo({"annotations": {"probe/tweaked": "yes"}})).create_pods[0]
    return dict(pod["metadata"].get("annotations") or {})


def probe_demo_runtime_class() -> str | None:
    """demo-pod-tweaks with config.runtimeClassName: the Pod's runtimeClassName."""
    pod = _fresh(_demo({"runtimeClassName": "probe-class"})).create_pods[0]
    runtime_class: str | None = pod["spec"].get("runtimeClassName")
    return runtime_class


def probe_scope_target_entry() -> list[str]:
    """A plugin scoped to target Entry: the Pods it ran on."""
    return _tweaked(_plugins(MS().role("r", 1, 1).build(), _tweaks({"target": "Entry"})))


def probe_no_worker_template() -> tuple[list[str], list[Any]]:
    """headless-service, a Role without a workerTemplate: (Services created, the Pod's hostname and subdomain)."""
    result = _fresh(_plugins(MS().role("solo", 1, 0).build(), HEADLESS))
    pods = result.create_pods
    return names(result.create_services), [(p["spec"].get("hostname"), p["spec"].get("subdomain")) for p in pods]


def probe_terminating_service() -> list[str]:
    """headless-service, a running instance whose Entry Service is held terminating: the Pods deleted."""
    ms = _plugins(MS().role("r", 1, 1).build(), HEADLESS)
    pods, services = _running(ms)
    held = [deleting(s) if s["metadata"]["name"] == "ms-0-r-0-0" else s for s in services]
    return deleted(_fresh(ms, pods=pods, services=held))


CASES: list[tuple[Any, ...]] = [
    ("none-rebuilds-deleted-pod-instance", probe_none_deleted_pod, ([], ["ms-0-r-0-1"]), (["ms-0-r-0-0"], [])),
    (
        "role-scale-down-ignored",
        probe_role_scale_down,
        ["ms-0-r-1-0"],
        [],
        ("replicas-in-revision",),  # the Role's replicas change is then a rollout, which recreates the group
    ),
    (
        "scale-selector-unpublished",
        probe_scale_subresource,
        {
            "specReplicasPath": ".spec.replicas",
            "statusReplicasPath": ".status.replicas",
            "labelSelectorPath": ".status.labelSelector",
        },
        {"specReplicasPath": ".spec.replicas", "statusReplicasPath": ".status.replicas"},
    ),
    (
        "worker-template-ignored",
        probe_worker_template,
        {"ms-0-r-0-0": "engine:v1", "ms-0-r-0-1": "worker:v1"},
        {"ms-0-r-0-0": "engine:v1", "ms-0-r-0-1": "engine:v1"},
    ),
    (
        "scale-down-keeps-worker-pods",
        probe_group_scale_down,
        ["ms-1-r-0-0", "ms-1-r-0-1"],
        ["ms-1-r-0-0"],
        ("scale-down-lowest-ordinal",),  # it picks which ServingGroup goes: here the other one
    ),
    (
        "demo-annotations-replace",
        probe_demo_annotations,
        {FROM_TEMPLATE: "kept", "probe/tweaked": "yes"},
        {"probe/tweaked": "yes"},
    ),
    ("demo-runtime-class-ignored", probe_demo_runtime_class, "probe-class", None),
    ("scope-target-entry-ignored", probe_scope_target_entry, ["ms-0-r-0-0"], ["ms-0-r-0-0", "ms-0-r-0-1"]),
    (
        "headless-without-worker-template",
        probe_no_worker_template,
        ([], [(None, None)]),
        (["ms-0-solo-0", "ms-0-solo-0-0"], [("ms-0-solo-0-0", "ms-0-solo-0")]),
    ),
    ("terminating-service-rebuilds-instance", probe_terminating_service, [], ["ms-0-r-0-1"]),
]
