"""Recovery: a restarted container (or failed Pod) under each RecoveryPolicy, restartGracePeriodSeconds.

Why this module exists: :mod:`.test_recovery` restarts a container only under RoleRecreate, in a
ModelServing of one Role. The spec says what each policy does when "any containers/init-containers
in a pod is restarted": ServingGroupRecreate recreates every Pod of the ServingGroup, RoleRecreate
the Pods of the Role (the restarted Pod's Role instance, spec reading 13; another Role of the same
ServingGroup is untouched under either reading), and None "will follow the same behavior as the
default pod or deployment": the kubelet restarts the container and no Pod is recreated. And
``template.restartGracePeriodSeconds`` is "the grace time for the controller to rebuild ... when an
error occurs".

On a cluster with real nodes (:mod:`conformance.framework.realnodes`) the restart tests run their
Pods there and the container crashes for real: it exits (its PID 1 is sent SIGTERM), the kubelet
restarts it and reports the restart, and its readiness probe fails from then on (a marker in an
emptyDir volume, which outlives the restart), as a crashing engine's would; the result says so
(``observed``). Without real nodes a restart is
simulated as a crashing engine looks: the container's restartCount goes up and the Pod stays not
Ready (:mod:`conformance.cluster.faults`), and the result says it was simulated. Only a regular container is restarted
here; a restarted init container (a sidecar) is :mod:`.test_recovery_init_restarts`'s. A failed
Pod under ServingGroupRecreate (phase Failed, :attr:`Fault.FAIL`) is tested here too. As in
:mod:`.test_recovery`, the tests never ask which ServingGroup a Pod is in: they count which Pods
(by Role and entry/worker) were replaced, and require the count to hold for the steady-state window.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from conformance.cluster.declared import RealNodes
from conformance.cluster.faults import Fault
from conformance.framework import realnodes
from conformance.framework.catalog import behaviour
from conformance.framework.features import Feature
from conformance.framework.modelserving import (
    ModelServings,
    container_of,
    expected_pod_count,
    member,
    role_of,
    running_ready,
)
from conformance.framework.rollout_watch import Layout, RolloutWatch

API = "api-reference-workload-v1alpha1.txt"
NAME = "restarts"
Kind = tuple[str, str]  # (role, member)


SIMULATED = "the container restart was kwok's (restartCount raised, Pod held not Ready): no container ran"


def _start(
    ms: ModelServings, manifest: Any, policy: str, grace: int | None = None, real: RealNodes | None = None
) -> tuple[dict[str, Any], Any]:
    """Create the 6-Pod ModelServing with ``policy`` (on ``real`` nodes when given); (its body, the
    worker Pod of Role a to restart)."""
    body: dict[str, Any] = manifest("core-recovery-restarts")
    body["spec"]["recoveryPolicy"] = policy
    if grace is not None:
        body["spec"]["template"]["restartGracePeriodSeconds"] = grace
    if real is not None:
        realnodes.place_modelserving(body, real, crashable=True)
    ms.create(body)
    pods = ms.wait_pods(NAME, expected_pod_count(body))
    victim = next(p for p in pods if role_of(p) == "a" and member(p) == "worker")
    return body, victim


def _start_where_declared(
    ms: ModelServings, manifest: Any, policy: str, suite: Any, request: Any
) -> tuple[dict[str, Any], Any, RealNodes | None]:
    """:func:`_start` on the real nodes when the cluster declares them (recorded either way)."""
    real = realnodes.if_declared(suite, request, SIMULATED)
    body, victim = _start(ms, manifest, policy, real=real)
    if real is not None:
        realnodes.observed_on_real_nodes(request, [p.spec.node_name for p in ms.pods(NAME)])
    return body, victim, real


def _restart_where_declared(ms: ModelServings, faults: Any, pod: Any, real: RealNodes | None) -> None:
    """On real nodes the container crashes for real (exits, restarted by the kubelet, not Ready
    again; waited for: the restart reported, or the Pod already being replaced); else
    :func:`_restart`'s simulation."""
    if real is None:
        _restart(ms, faults, pod.metadata.name)
        return
    name = pod.metadata.name
    realnodes.crash_container(ms.kube.core, ms.ns, name, container_of(pod).name)

    def seen() -> Any:
        found = [p for p in ms.pods(NAME) if p.metadata.name == name and p.metadata.uid == pod.metadata.uid]
        return found[0] if found else None

    def restarted_or_replaced(p: Any) -> bool:
        return p is None or p.metadata.deletion_timestamp is not None or realnodes.restart_count(p) > 0

    ms.wait("recovery", f"the kubelet to restart the exited container of {name}", seen, restarted_or_replaced)


def _kinds(pods: list[Any]) -> dict[str, Kind]:
    return {p.metadata.uid: (role_of(p), member(p)) for p in pods}


def _restart(ms: ModelServings, faults: Any, pod: str) -> None:
    """The container restarts and does not come back Ready, as a crashing engine would."""
    faults.inject(ms.ns, pod, Fault.NOT_READY)
    faults.inject(ms.ns, pod, Fault.RESTART)


def expect_replaced(
    ms: ModelServings,
    total: int,
    before: dict[str, Kind],
    victim: str,
    replaced: Counter[Kind],
    what: str,
    name: str = NAME,
) -> None:
    """Wait until ``total`` Pods run again with exactly the original Pods of the kinds in ``replaced``
    gone (the victim's among them), then require that to hold for the steady-state window."""

    def observe() -> dict[str, Any]:
        pods = ms.pods(name)
        uids = {p.metadata.uid for p in pods}
        return {
            "pods": len(pods),
            "running-ready": sum(1 for p in pods if running_ready(p)),
            "uids": sorted(uids),
            "replaced": Counter(kind for uid, kind in before.items() if uid not in uids),
            "victim-present": victim in uids,
        }

    def done(seen: dict[str, Any]) -> bool:
        return bool(
            seen["pods"] == total
            and seen["running-ready"] == total
            and not seen["victim-present"]
            and seen["replaced"] == replaced
        )

    shown = ", ".join(f"{n} {m} of Role {r}" for (r, m), n in sorted(replaced.items()))
    seen = ms.wait("recovery", f"{what}: {total} Pods Running and Ready with exactly these replaced: {shown}",
                   observe, done)  # fmt: skip
    ms.holds(
        f"{what}: the {total} Pods after recovery keep their UIDs (no further Pod is recreated)",
        lambda: sorted(p.metadata.uid for p in ms.pods(name)),
        lambda uids: uids == seen["uids"],
    )


A_INSTANCE: Counter[Kind] = Counter({("a", "entry"): 1, ("a", "worker"): 1})


@behaviour(
    "core/recovery/servinggroup-recreate-restarted-container",
    "With recoveryPolicy ServingGroupRecreate, a restarted container MUST cause every Pod of its ServingGroup (the "
    "Pods of its other Roles included) to be recreated, and Pods of other ServingGroups MUST NOT be recreated.",
    f"{API}#RecoveryPolicy",
    Feature.RECOVERY,
)
def test_servinggroup_recreate_rebuilds_the_group_of_a_restarted_container(
    ms: ModelServings, manifest: Any, faults: Any, suite: Any, request: Any
) -> None:
    body, victim, real = _start_where_declared(ms, manifest, "ServingGroupRecreate", suite, request)
    before = _kinds(ms.pods(NAME))
    _restart_where_declared(ms, faults, victim, real)
    group = A_INSTANCE + Counter({("b", "entry"): 1})
    expect_replaced(ms, expected_pod_count(body), before, victim.metadata.uid, group,
                     "ServingGroupRecreate after a worker container of Role a restarted")  # fmt: skip


@behaviour(
    "core/recovery/servinggroup-recreate-failed-pod",
    "With recoveryPolicy ServingGroupRecreate, a Pod that fails MUST cause every Pod of its ServingGroup (the Pods "
    "of its other Roles included) to be recreated, and Pods of other ServingGroups MUST NOT be recreated.",
    f"{API}#RecoveryPolicy",
    Feature.RECOVERY,
)
def test_servinggroup_recreate_rebuilds_the_group_of_a_failed_pod(
    ms: ModelServings, manifest: Any, faults: Any
) -> None:
    body, victim = _start(ms, manifest, "ServingGroupRecreate")
    before = _kinds(ms.pods(NAME))
    faults.inject(ms.ns, victim.metadata.name, Fault.FAIL)
    group = A_INSTANCE + Counter({("b", "entry"): 1})
    expect_replaced(ms, expected_pod_count(body), before, victim.metadata.uid, group,
                     "ServingGroupRecreate after a worker Pod of Role a failed")  # fmt: skip


@behaviour(
    "core/recovery/role-recreate-other-roles-untouched",
    "With recoveryPolicy RoleRecreate, a restarted container MUST cause the Pods of its Role instance to be "
    "recreated and MUST NOT cause any Pod of another Role of the same ServingGroup, or of another ServingGroup, to "
    "be recreated.",
    f"{API}#RecoveryPolicy",
    Feature.RECOVERY,
)
def test_role_recreate_leaves_the_other_roles_alone(
    ms: ModelServings, manifest: Any, faults: Any, suite: Any, request: Any
) -> None:
    body, victim, real = _start_where_declared(ms, manifest, "RoleRecreate", suite, request)
    before = _kinds(ms.pods(NAME))
    _restart_where_declared(ms, faults, victim, real)
    expect_replaced(ms, expected_pod_count(body), before, victim.metadata.uid, A_INSTANCE,
                     "RoleRecreate after a worker container of Role a restarted")  # fmt: skip


@behaviour(
    "core/recovery/none-restarted-container",
    "With recoveryPolicy None, a restarted container MUST NOT cause the controller to delete or recreate any Pod "
    "(the restart is the kubelet's, as for a Pod of a Deployment): every Pod MUST keep its UID.",
    f"{API}#RecoveryPolicy",
    Feature.RECOVERY,
)
def test_none_recreates_nothing_for_a_restarted_container(
    ms: ModelServings, manifest: Any, faults: Any, suite: Any, request: Any
) -> None:
    _, victim, real = _start_where_declared(ms, manifest, "None", suite, request)
    before = sorted(p.metadata.uid for p in ms.pods(NAME))
    what = "recoveryPolicy None after a worker container of Role a restarted"
    _restart_where_declared(ms, faults, victim, real)

    def restarted() -> int:
        return realnodes.restart_count(ms.kube.core.read_namespaced_pod(victim.metadata.name, ms.ns))

    ms.wait("recovery", f"{what}: the restart of {victim.metadata.name} reported in its status", restarted, bool)
    ms.holds(f"{what}: every Pod keeps its UID", lambda: sorted(p.metadata.uid for p in ms.pods(NAME)),
             lambda uids: uids == before)  # fmt: skip


@behaviour(
    "core/recovery/restart-grace-period",
    "With template.restartGracePeriodSeconds 8 and recoveryPolicy RoleRecreate, a container that restarted and "
    "stays not ready MUST NOT cause any Pod to be recreated within 8 seconds of the restart, and MUST cause its "
    "Role instance to be recreated after them.",
    f"{API}#ServingGroup",
    Feature.RECOVERY,
)
def test_restart_grace_period_delays_the_rebuild(ms: ModelServings, manifest: Any, faults: Any) -> None:
    grace = 8
    body, victim = _start(ms, manifest, "RoleRecreate", grace)
    ms.wait_settled(NAME)
    before = _kinds(ms.pods(NAME))
    what = f"restartGracePeriodSeconds {grace}, RoleRecreate, a worker container of Role a restarted"
    with RolloutWatch(ms, NAME, Layout.of(body)) as watch:
        mark = watch.seq
        injected_at = watch.elapsed()  # before the first sign of the error: the rebuild cannot be due earlier
        _restart(ms, faults, victim.metadata.name)
        expect_replaced(ms, expected_pod_count(body), before, victim.metadata.uid, A_INSTANCE, what)
        timeline = watch.snapshot_timeline()
    first = timeline.first(lambda s: not set(before) <= set(s.uids().values()), since=mark)
    assert first is not None, f"{what}: the rebuild was never seen on the Pod timeline"
    waited = first.at - injected_at
    assert waited >= grace - 2, (
        f"{what}: the first Pod was deleted {waited:.1f}s after the restart, before restartGracePeriodSeconds "
        f"({grace}s) passed: {first.describe()}"
    )
