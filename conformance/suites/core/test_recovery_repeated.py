"""Recovery, repeated: every Pod of a ServingGroup deleted at once, again and again.

Why it exists: another implementation wedged here. Under ServingGroupRecreate, deleting every Pod
of a ServingGroup at once (as a node loss or ``kubectl delete pods --all`` does) left the group
half-known to the controller after a few rounds: a Service left behind, Pods never recreated. The
spec's promise is plain (ServingGroupRecreate "will recreate all the pods in the ServingGroup"), so
each round must end as it began: every Pod back and Ready, no Pod or Service more or less than
before (none left terminating), status settled. The manifest's ModelServing is one ServingGroup, so
all its Pods are that group's Pods without any name or label the spec leaves open. The same rounds
run once more with the headless-service plugin, whose Entry and Discovery Services of each Role
instance are what was left behind; Services are counted, not named (their names are the
implementation's).
"""

from __future__ import annotations

from typing import Any

from conformance.framework.catalog import behaviour
from conformance.framework.features import Feature
from conformance.framework.modelserving import ModelServings, expected_pod_count, running_ready

API = "api-reference-workload-v1alpha1.txt"
NAME = "repeated"
ROUNDS = 3
COUNTERS = ("replicas", "availableReplicas", "updatedReplicas")


def _owned_services(ms: ModelServings, kube: Any) -> list[str]:
    """The Services in the test's namespace (name, marked when terminating): only the
    implementation makes Services there, whichever object it makes them owned by (the spec fixes
    no ownership), so the set is compared round by round, not filtered by ownerReference."""
    items = kube.core.list_namespaced_service(ms.ns).items
    return sorted(s.metadata.name + (" (terminating)" if s.metadata.deletion_timestamp else "") for s in items)


def _settled_services(names: list[str], count: int) -> bool:
    return len(names) == count and not any(n.endswith("(terminating)") for n in names)


def _delete_all(kube: Any, ms: ModelServings, names: list[str]) -> None:
    """Delete every named Pod, one request right after the other (a Pod already gone is fine)."""
    from kubernetes.client.exceptions import ApiException

    for name in names:
        try:
            kube.core.delete_namespaced_pod(name, ms.ns)
        except ApiException as exc:
            if exc.status != 404:
                raise


def _delete_whole_group_repeatedly(ms: ModelServings, kube: Any, body: dict[str, Any]) -> None:
    """Create ``body`` (one ServingGroup), then :data:`ROUNDS` times delete all its Pods at once and
    wait until it is back as it was; after the last round nothing more may change."""
    ms.create(body)
    total = expected_pod_count(body)
    pods = ms.wait_pods(NAME, total)
    ms.wait_settled(NAME)
    if body["spec"].get("plugins"):
        ms.wait("services", f"the Services of {NAME} (headless-service)", lambda: _owned_services(ms, kube), bool)
    services = _owned_services(ms, kube)
    count = len(services)
    for round_ in range(1, ROUNDS + 1):
        gone = {p.metadata.uid for p in pods}
        _delete_all(kube, ms, [p.metadata.name for p in pods])

        def observe(gone: set[str] = gone) -> dict[str, Any]:
            now = ms.pods(NAME)
            status = ms.status_summary(NAME)
            return {
                "pods": len(now),
                "running-ready": sum(1 for p in now if running_ready(p)),
                "deleted still present": sorted(p.metadata.name for p in now if p.metadata.uid in gone),
                "services": _owned_services(ms, kube),
                "status": {k: status.get(k) for k in ("observedGeneration", *COUNTERS)},
                "metadata.generation": status["metadata.generation"],
            }

        def converged(seen: dict[str, Any]) -> bool:
            status = seen["status"]
            return bool(
                seen["pods"] == total
                and seen["running-ready"] == total
                and not seen["deleted still present"]
                and _settled_services(seen["services"], count)
                and status["observedGeneration"] == seen["metadata.generation"]
                and status["replicas"] == status["availableReplicas"] == status["updatedReplicas"] == 1
            )

        ms.wait(
            "recovery",
            f"round {round_} of {ROUNDS}: all {total} Pods of the ServingGroup deleted at once, to be recreated "
            f"(exactly {total} Pods, all Ready, none of the deleted), {count} Services in the namespace as "
            f"before ({services}), none terminating, and status settled (replicas = availableReplicas = "
            "updatedReplicas = 1)",
            observe,
            converged,
        )
        pods = ms.pods(NAME)
    uids = sorted(p.metadata.uid for p in pods)

    def steady() -> dict[str, Any]:
        live = sorted(p.metadata.uid for p in ms.pods(NAME) if not p.metadata.deletion_timestamp)
        return {"pod uids": live, "services": _owned_services(ms, kube)}

    ms.holds(
        f"after {ROUNDS} rounds: the {total} Pods stay (no further Pod recreated or added) and {count} Services",
        steady,
        lambda seen: seen["pod uids"] == uids and _settled_services(seen["services"], count),
    )


@behaviour(
    "core/recovery/servinggroup-recreate-delete-all-repeated",
    "With recoveryPolicy ServingGroupRecreate, deleting every Pod of a ServingGroup at once MUST, each of 3 times "
    "in a row, end with every Pod recreated and Ready, no more Pods or Services than before and status settled.",
    f"{API}#RecoveryPolicy",
    Feature.RECOVERY,
)
def test_deleting_a_whole_servinggroup_repeatedly_converges(ms: ModelServings, manifest: Any, kube: Any) -> None:
    _delete_whole_group_repeatedly(ms, kube, manifest("core-recovery-repeated"))


@behaviour(
    "dns/recovery/servinggroup-recreate-delete-all-repeated",
    "With the headless-service plugin and recoveryPolicy ServingGroupRecreate, deleting every Pod of a ServingGroup "
    "at once MUST, each of 3 times in a row, end with every Pod recreated and Ready, as many Services as before and "
    "none left terminating, and status settled.",
    f"{API}#RecoveryPolicy",
    Feature.HEADLESS_SERVICE,
    requires=(Feature.RECOVERY,),
)
def test_deleting_a_whole_servinggroup_repeatedly_keeps_its_services(
    ms: ModelServings, manifest: Any, kube: Any
) -> None:
    body = manifest("core-recovery-repeated")
    body["spec"]["plugins"] = [{"name": "headless-service"}]
    _delete_whole_group_repeatedly(ms, kube, body)
