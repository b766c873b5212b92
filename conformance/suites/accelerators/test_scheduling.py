"""Accelerators: ModelServing Pods claiming devices through ResourceClaimTemplates are scheduled by
the cluster's scheduler onto free devices, never sharing one, and give them back when they go.

Which part judges whom: that the implementation's Pods carry their templates' claims and run on
the devices allocated to them (one-device-per-pod) is implementation conformance (feature
Accelerators). How many devices a claim gets, that none is shared, that an unsatisfiable claim
stays Pending and that devices come free with their claims is what the DRA driver and the
scheduler do: driver certification (feature DriverCertification), never held against the
ModelServing implementation.

What a prepared claim gives a running container (the capability file's ``containerEnv``: the
driver's CDI spec) is driver certification too, observed inside a container on a real node
(:mod:`conformance.framework.realnodes`).

Every test consumes devices cluster-wide, so all of them run alone (``serial``). Each DeviceClass
of every capability file is exercised in turn; a problem with a SHOULD-level class is a warning.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from conformance.framework import realnodes
from conformance.framework.capabilities import (
    Capabilities,
    DeviceClassCapabilities,
    env_problems,
    inventory,
    render_env,
)
from conformance.framework.catalog import behaviour
from conformance.framework.features import Feature
from conformance.framework.modelserving import ModelServings, container_of, running_ready
from conformance.framework.outcomes import Inconclusive, not_supported
from conformance.framework.waits import holds_for

from .devices import (
    DRIVER_SPEC,
    ROLE_SPEC,
    ClassView,
    Verdicts,
    accel_modelserving,
    all_allocations,
    check_pod_devices,
    claim_template,
    claims,
    class_view,
    create_claim_template,
    device_class_names,
    device_nodes,
    double_allocations,
    every_class,
    evidence_dir,
    nodes,
    pod_devices,
    shown,
    slices,
    unschedulable_reason,
)

Scenario = Callable[[int, ClassView, Verdicts], None]


def _each_class(
    kube: Any,
    ms: ModelServings,
    capabilities: list[Capabilities],
    verdicts: Verdicts,
    scenario: Scenario,
    *,
    min_free: int = 1,
) -> None:
    """Run ``scenario`` for every declared DeviceClass; its failures count at the class's level.
    Whatever a scenario leaves is deleted (devices released) before the next class."""
    existing = device_class_names(kube)
    for i, (caps, cls) in enumerate(every_class(capabilities)):
        view = class_view(kube, caps, cls)
        skip = _cannot_run(view, existing, min_free)
        if skip is not None:
            if cls.level == "MUST":
                raise Inconclusive(f"{view.title}: {skip}")
            verdicts.should.append(f"{view.title}: not exercised: {skip}")
            continue
        try:
            scenario(i, view, verdicts)
        except AssertionError as exc:
            verdicts.add(cls.level, [f"{view.title}: {exc}"])
        except Inconclusive as exc:
            if cls.level == "MUST":
                raise
            verdicts.should.append(f"{view.title}: not exercised: {exc}")
        finally:
            _release(kube, ms)


def _release(kube: Any, ms: ModelServings) -> None:
    """Delete every ModelServing of the test still there and wait for their claims to go."""
    live = {o["metadata"]["name"] for o in ms.kube.custom.list_namespaced_custom_object(
        "workload.serving.volcano.sh", "v1alpha1", ms.ns, "modelservings")["items"]}  # fmt: skip
    for name in sorted(live):
        ms.delete(name)
    if live:
        ms.wait("deletion", f"the ResourceClaims in {ms.ns} deleted", lambda: claims(kube, ms.ns), lambda c: not c)


def _cannot_run(view: ClassView, existing: list[str], min_free: int) -> str | None:
    if view.cls.name not in existing:
        return "the DeviceClass does not exist (see accelerators/device-class/exists)"
    if view.total_free < min_free:
        return (
            f"needs {min_free} free device(s) on the selected nodes, {view.total_free} are free "
            "(run on a cluster where nothing else holds these devices)"
        )
    return None


def _template(kube: Any, ns: str, manifest: Any, name: str, cls: DeviceClassCapabilities, count: int) -> str:
    create_claim_template(kube, ns, claim_template(manifest, name, cls, count))
    return name


def _running(ms: ModelServings, name: str, count: int) -> list[Any]:
    return ms.wait_pods(name, count, wait="pods-running")


def _gone(ms: ModelServings, kube: Any, ns: str, name: str) -> None:
    """Delete the ModelServing and wait until its Pods' claims are gone (devices released)."""
    ms.delete(name)
    ms.wait("deletion", f"the ResourceClaims of {ns}/{name} deleted", lambda: claims(kube, ns), lambda c: not c)


def _judge_pods(kube: Any, ns: str, view: ClassView, pods: list[Any], want: int) -> list[str]:
    where = device_nodes(view.caps.driver, slices(kube))
    problems: list[str] = []
    for pod in pods:
        problems += check_pod_devices(view, pod, pod_devices(kube, ns, pod), want, where)
    twice = double_allocations(all_allocations(kube))
    problems += [f"device {d} is allocated to {', '.join(c)}" for d, c in sorted(twice.items())]
    return problems


@behaviour(
    "accelerators/scheduling/one-device-per-pod",
    "Entry and worker Pods of a ModelServing that each claim one device through a ResourceClaimTemplate MUST be "
    "scheduled onto selected nodes and run, each allocated exactly one device of the class on its own node.",
    ROLE_SPEC,
    Feature.ACCELERATORS,
    serial=True,
    slow=True,
)
def test_one_device_per_pod(
    kube: Any, ns: str, ms: ModelServings, manifest: Any, capabilities: list[Capabilities], suite: Any,
    request: pytest.FixtureRequest,
) -> None:  # fmt: skip
    verdicts = Verdicts(request, evidence_dir(suite, "accelerators/scheduling/one-device-per-pod"))

    def scenario(i: int, view: ClassView, v: Verdicts) -> None:
        workers = 1 if view.total_free >= 2 else 0
        groups = max(1, min(2, view.total_free // (1 + workers)))
        pods = groups * (1 + workers)
        template = _template(kube, ns, manifest, f"one-{i}", view.cls, 1)
        name = f"one-{i}"
        ms.create(accel_modelserving(manifest, view.caps, view.cls, name=name, template=template,
                                     replicas=groups, worker_replicas=workers,
                                     also_tolerate=realnodes.tolerations(suite)))  # fmt: skip
        running = _running(ms, name, pods)
        problems = _judge_pods(kube, ns, view, running, 1)
        placed = ", ".join(f"{p.metadata.name} on {p.spec.node_name} got {shown(pod_devices(kube, ns, p))}"
                           for p in running)  # fmt: skip
        v.notes.append(f"{view.cls.name}: {placed}")
        assert not problems, "; ".join(problems)
        _gone(ms, kube, ns, name)

    _each_class(kube, ms, capabilities, verdicts, scenario, min_free=1)
    verdicts.finish()


@behaviour(
    "accelerators/scheduling/multi-device-claim",
    "A claim for maxDevicesPerClaim devices of a class MUST be allocated that many distinct devices, all on the "
    "node its Pod runs on.",
    ROLE_SPEC,
    Feature.DRIVER_CERTIFICATION,
    serial=True,
    slow=True,
)
def test_multi_device_claim(
    kube: Any, ns: str, ms: ModelServings, manifest: Any, capabilities: list[Capabilities], suite: Any,
    request: pytest.FixtureRequest,
) -> None:  # fmt: skip
    verdicts = Verdicts(request, evidence_dir(suite, "accelerators/scheduling/multi-device-claim"))

    def scenario(i: int, view: ClassView, v: Verdicts) -> None:
        count = view.cls.claims.max_devices_per_claim
        if view.most_free_on_a_node < count:
            raise Inconclusive(
                f"{view.title}: no selected node has {count} free devices (most free on one node: "
                f"{view.most_free_on_a_node})"
            )
        template = _template(kube, ns, manifest, f"multi-{i}", view.cls, count)
        name = f"multi-{i}"
        ms.create(accel_modelserving(manifest, view.caps, view.cls, name=name, template=template,
                                     replicas=1, worker_replicas=0,
                                     also_tolerate=realnodes.tolerations(suite)))  # fmt: skip
        (pod,) = _running(ms, name, 1)
        problems = _judge_pods(kube, ns, view, [pod], count)
        v.notes.append(
            f"{view.cls.name}: a {count}-device claim got {pod_devices(kube, ns, pod)} on {pod.spec.node_name}"
        )
        assert not problems, "; ".join(problems)
        _gone(ms, kube, ns, name)

    _each_class(kube, ms, capabilities, verdicts, scenario)
    verdicts.finish()


@behaviour(
    "accelerators/scheduling/exclusive-devices",
    "A device MUST NOT be allocated to two claims: a ModelServing asking for one device more than are free gets "
    "every free device exactly once, and its remaining Pod stays Pending with the scheduler's reason.",
    DRIVER_SPEC,
    Feature.DRIVER_CERTIFICATION,
    serial=True,
    slow=True,
)
def test_devices_are_never_allocated_twice(
    kube: Any, ns: str, ms: ModelServings, manifest: Any, capabilities: list[Capabilities], suite: Any,
    request: pytest.FixtureRequest,
) -> None:  # fmt: skip
    verdicts = Verdicts(request, evidence_dir(suite, "accelerators/scheduling/exclusive-devices"))

    def scenario(i: int, view: ClassView, v: Verdicts) -> None:
        free = view.total_free
        template = _template(kube, ns, manifest, f"all-{i}", view.cls, 1)
        name = f"all-{i}"
        ms.create(accel_modelserving(manifest, view.caps, view.cls, name=name, template=template,
                                     replicas=free + 1, worker_replicas=0,
                                     also_tolerate=realnodes.tolerations(suite)))  # fmt: skip

        def split(pods: list[Any]) -> tuple[list[Any], list[Any]]:
            return [p for p in pods if running_ready(p)], [p for p in pods if unschedulable_reason(p)]

        def settled(pods: list[Any]) -> bool:
            running, waiting = split(pods)
            return len(pods) == free + 1 and len(running) == free and len(waiting) == 1

        pods = ms.wait("pods-running", f"{free} of {free + 1} Pods of {ns}/{name} Running and 1 Unschedulable",
                       lambda: ms.pods(name), settled)  # fmt: skip
        pods = holds_for(f"{free} Pods Running and 1 Unschedulable", lambda: ms.pods(name), settled,
                         seconds=ms.timeouts.seconds("steady-state"))  # fmt: skip
        running, waiting = split(pods)
        problems = _judge_pods(kube, ns, view, running, 1)
        got = [d for p in running for d in pod_devices(kube, ns, p)]
        every = sorted(d for ds in view.free.values() for d in ds)
        if sorted(got) != every:
            problems.append(f"the {free} running Pods hold {sorted(got)}, expected every free device {every}")
        reason = unschedulable_reason(waiting[0])
        v.notes.append(f"{view.cls.name}: {free} devices allocated once each; Pod {waiting[0].metadata.name} "
                       f"Pending: {reason}")  # fmt: skip
        v.evidence(f"allocations-{i}.yaml", {"devices": [list(d) for d in got], "pending": {
            waiting[0].metadata.name: reason}})  # fmt: skip
        assert not problems, "; ".join(problems)
        _gone(ms, kube, ns, name)

    _each_class(kube, ms, capabilities, verdicts, scenario)
    verdicts.finish()


@behaviour(
    "accelerators/scheduling/unsatisfiable-claim-pending",
    "A Pod whose claim asks for more devices than any selected node has MUST stay Pending, reported Unschedulable "
    "by the scheduler, and the report MUST carry the scheduler's reason.",
    DRIVER_SPEC,
    Feature.DRIVER_CERTIFICATION,
    serial=True,
    slow=True,
)
def test_unsatisfiable_claim_stays_pending(
    kube: Any, ns: str, ms: ModelServings, manifest: Any, capabilities: list[Capabilities], suite: Any,
    request: pytest.FixtureRequest,
) -> None:  # fmt: skip
    verdicts = Verdicts(request, evidence_dir(suite, "accelerators/scheduling/unsatisfiable-claim-pending"))

    def scenario(i: int, view: ClassView, v: Verdicts) -> None:
        count = view.most_on_a_node + 1
        try:
            template = _template(kube, ns, manifest, f"toomany-{i}", view.cls, count)
        except Exception as exc:
            raise Inconclusive(f"{view.title}: a claim template for {count} devices was refused: {exc}") from None
        name = f"toomany-{i}"
        ms.create(accel_modelserving(manifest, view.caps, view.cls, name=name, template=template,
                                     replicas=1, worker_replicas=0,
                                     also_tolerate=realnodes.tolerations(suite)))  # fmt: skip

        def reported(pods: list[Any]) -> bool:
            return len(pods) == 1 and unschedulable_reason(pods[0]) is not None and not pods[0].spec.node_name

        (pod,) = ms.wait("pods-running", f"the Pod of {ns}/{name} ({count} devices) reported Unschedulable",
                         lambda: ms.pods(name), reported)  # fmt: skip
        holds_for("the Pod stays Pending and unscheduled", lambda: ms.pods(name), reported,
                  seconds=ms.timeouts.seconds("steady-state"))  # fmt: skip
        reason = unschedulable_reason(pod)
        v.notes.append(f"{view.cls.name}: a {count}-device claim: Pod {pod.metadata.name} Pending: {reason}")
        v.evidence(f"scheduler-reason-{i}.txt", f"{pod.metadata.name} ({count} x {view.cls.name}): {reason}\n")
        _gone(ms, kube, ns, name)

    _each_class(kube, ms, capabilities, verdicts, scenario, min_free=0)
    verdicts.finish()


@behaviour(
    "accelerators/scheduling/devices-freed",
    "When a ModelServing is deleted its ResourceClaims MUST be deleted and every device it held MUST become "
    "allocatable to a new ModelServing.",
    ROLE_SPEC,
    Feature.DRIVER_CERTIFICATION,
    serial=True,
    slow=True,
)
def test_devices_are_freed_with_the_modelserving(
    kube: Any, ns: str, ms: ModelServings, manifest: Any, capabilities: list[Capabilities], suite: Any,
    request: pytest.FixtureRequest,
) -> None:  # fmt: skip
    verdicts = Verdicts(request, evidence_dir(suite, "accelerators/scheduling/devices-freed"))

    def scenario(i: int, view: ClassView, v: Verdicts) -> None:
        free = view.total_free
        template = _template(kube, ns, manifest, f"reuse-{i}", view.cls, 1)
        held: list[list[Any]] = []
        for round_ in ("first", "second"):
            name = f"{round_}-{i}"
            ms.create(accel_modelserving(manifest, view.caps, view.cls, name=name, template=template,
                                         replicas=free, worker_replicas=0,
                                         also_tolerate=realnodes.tolerations(suite)))  # fmt: skip
            pods = _running(ms, name, free)
            problems = _judge_pods(kube, ns, view, pods, 1)
            assert not problems, f"{round_} ModelServing: " + "; ".join(problems)
            held.append(sorted(d for p in pods for d in pod_devices(kube, ns, p)))
            _gone(ms, kube, ns, name)
        after = class_view(kube, view.caps, view.cls)
        assert after.total_free == free, (
            f"after both ModelServings went, {after.total_free} of the {free} devices are free again"
        )
        assert held[0] == held[1], f"the second ModelServing got {held[1]}, not the freed {held[0]}"
        v.notes.append(f"{view.cls.name}: all {free} free devices held, freed and reused")

    _each_class(kube, ms, capabilities, verdicts, scenario)
    verdicts.finish()


def _environment(text: str) -> dict[str, str]:
    """``env``'s output as a mapping (lines without ``=`` are a previous value's continuation)."""
    return dict(line.split("=", 1) for line in text.splitlines() if "=" in line)


@behaviour(
    "accelerators/cdi/container-environment",
    "A running container whose Pod claims a device of a class MUST see, for that device, the environment the "
    "capability file's containerEnv declares (what the driver's prepared claim, its CDI spec, gives it).",
    DRIVER_SPEC,
    Feature.DRIVER_CERTIFICATION,
    serial=True,
    slow=True,
)
def test_a_claimed_device_s_environment_reaches_the_container(
    kube: Any, ns: str, ms: ModelServings, manifest: Any, capabilities: list[Capabilities], suite: Any,
    request: pytest.FixtureRequest,
) -> None:  # fmt: skip
    if not any(cls.container_env for _, cls in every_class(capabilities)):
        pytest.skip(
            not_supported("no capability file declares containerEnv: the container environment is not certified")
        )
    real = realnodes.require(suite, "the environment a driver's prepared claim gives a container")
    verdicts = Verdicts(request, evidence_dir(suite, "accelerators/cdi/container-environment"))
    labels = {str(n["metadata"]["name"]): n["metadata"].get("labels") or {} for n in nodes(kube)}

    def scenario(i: int, view: ClassView, v: Verdicts) -> None:
        if not view.cls.container_env:
            v.notes.append(f"{view.cls.name}: declares no containerEnv, not checked")
            return
        on_real = [n for n in view.nodes if view.free.get(n) and all(
            labels.get(n, {}).get(k) == val for k, val in real.selector.items())]  # fmt: skip
        if not on_real:
            raise Inconclusive(
                f"{view.title}: none of its selected nodes with a free device is a real node "
                f"({', '.join(f'{k}={val}' for k, val in real.selector.items()) or 'any'}): nothing prepares a "
                "claim for a running container"
            )
        name = f"env-{i}"
        template = _template(kube, ns, manifest, name, view.cls, 1)
        body = accel_modelserving(manifest, view.caps, view.cls, name=name, template=template, replicas=1,
                                  worker_replicas=0)  # fmt: skip
        (role,) = body["spec"]["template"]["roles"]
        selector = {**view.cls.nodes.selector, "kubernetes.io/hostname": on_real[0]}
        role["entryTemplate"]["spec"] = realnodes.place_on_real_nodes(role["entryTemplate"]["spec"], real,
                                                                      selector=selector)  # fmt: skip
        ms.create(body)
        (pod,) = _running(ms, name, 1)
        realnodes.observed_on_real_nodes(request, [pod.spec.node_name])
        seen = _environment(realnodes.run_in(kube.core, ns, pod.metadata.name, container_of(pod).name, "env"))
        published = inventory(view.caps.driver, slices(kube)).get(pod.spec.node_name)
        by_id = {(pool, str(d.get("name"))): d for pool, d in (published.devices if published else [])}
        problems: list[str] = []
        devices = pod_devices(kube, ns, pod)
        for _, pool, device in devices:
            published_device = by_id.get((pool, device))
            if published_device is None:
                problems.append(f"device {pool}/{device} is not published on {pod.spec.node_name}")
                continue
            want = render_env(view.cls, view.caps.driver, published_device)
            problems += env_problems(want, seen, f"{pool}/{device}")
        v.notes.append(f"{view.cls.name}: Pod {pod.metadata.name} on {pod.spec.node_name} with {shown(devices)}")
        v.evidence(f"environment-{i}.txt", "\n".join(f"{k}={val}" for k, val in sorted(seen.items())) + "\n")
        assert devices, f"Pod {pod.metadata.name} runs without an allocated device of {view.cls.name}"
        assert not problems, "; ".join(problems)
        _gone(ms, kube, ns, name)

    _each_class(kube, ms, capabilities, verdicts, scenario, min_free=1)
    verdicts.finish()
