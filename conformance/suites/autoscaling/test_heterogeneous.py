"""HeterogeneousAutoscaling: a heterogeneousTarget splits replicas across ModelServings by cost.

The spec: HeterogeneousTarget "distributes replicas across several ModelServing groups with
different hardware (and therefore different Cost) to satisfy the overall demand at the lowest
cost"; each param has its own minReplicas and maxReplicas; heterogeneousStatus "reports the
per-target observed state", and a TargetScalingStatus' name "is required for HeterogeneousStatus
entries".

How the cost expands (reading A15) is not asserted: the split tested is the one every reading of
"the lowest cost" gives. Two groups start at their minReplicas of 1, and a demand of 3 leaves one
replica to place; it costs less on the cheaper group, whatever the expansion rate. The demand is
the sum of the params' values (reading A17, the reference's and upstream's for a metric that is not
a utilisation): the expensive group's source reads the whole load, the cheaper one's reads 0.
"""

from __future__ import annotations

from typing import Any

from conformance.framework.catalog import behaviour
from conformance.framework.features import Feature
from conformance.framework.modelserving import ModelServings

from . import API, Policies, Signal, policy_object, replicas_of, settled_groups, signal, target

__all__ = ["signal"]  # the fixture, used by name

HETEROGENEOUS = f"{API}#HeterogeneousTarget"
EXPENSIVE, CHEAP = "h100", "a100"  # costs 100 and 60, as in the spec's example


def policy(ms: ModelServings, signal: Signal, name: str, high: int = 4) -> dict[str, Any]:
    """Groups ``<name>-h100`` (cost 100) and ``<name>-a100`` (cost 60), each in [1, high]; the load is read from
    series ``<name>-h100`` and ``<name>-a100``."""

    def param(group: str, cost: int) -> dict[str, Any]:
        ref = {"kind": "ModelServing", "name": f"{name}-{group}"}
        source = {"load": signal.source(ms, f"{name}-{group}")}
        return {
            "cost": cost,
            "minReplicas": 1,
            "maxReplicas": high,
            "target": {"targetRef": ref, "metricSources": source},
        }

    return policy_object(name, {"heterogeneousTarget": {"params": [param(EXPENSIVE, 100), param(CHEAP, 60)]}})


def start(ms: ModelServings, signal: Signal, name: str, load: float) -> Policies:
    """Both groups at 1 replica, the load ``load`` (all on the expensive group's series), the policy created."""
    signal.set(ms, f"{name}-{EXPENSIVE}", load)
    signal.set(ms, f"{name}-{CHEAP}", 0)
    for group in (EXPENSIVE, CHEAP):
        ms.create(target(f"{name}-{group}", replicas=1))
    policies = Policies(ms)
    policies.create(policy(ms, signal, name))
    return policies


def groups(name: str) -> tuple[str, str]:
    """The two groups' ModelServings: (the expensive one, the cheaper one)."""
    return f"{name}-{EXPENSIVE}", f"{name}-{CHEAP}"


def split(ms: ModelServings, name: str) -> tuple[int, int]:
    """(replicas of the expensive group, of the cheaper group)."""
    return replicas_of(ms, f"{name}-{EXPENSIVE}")(), replicas_of(ms, f"{name}-{CHEAP}")()


@behaviour(
    "autoscaling/heterogeneous/cheaper-first",
    "A heterogeneousTarget MUST place the replicas its metrics ask for at the lowest cost: with two groups at their "
    "minReplicas 1 (costs 100 and 60) and a demand of 3 replicas, the third MUST go to the cheaper group (1 and 2).",
    HETEROGENEOUS,
    Feature.HETEROGENEOUS_AUTOSCALING,
)
def test_the_cheaper_group_is_scaled_first(ms: ModelServings, signal: Signal) -> None:
    start(ms, signal, "cheap", 30)
    ms.wait("autoscale", "the demand of 3 split 1 (cost 100) and 2 (cost 60)", lambda: split(ms, "cheap"),
            until=lambda s: sum(s) == 3)  # fmt: skip
    ms.holds("the split stays 1 (cost 100) and 2 (cost 60)", lambda: split(ms, "cheap"), lambda s: s == (1, 2),
             wait="autoscale-steady", settled=settled_groups(ms, "cheap", groups("cheap")))  # fmt: skip


@behaviour(
    "autoscaling/heterogeneous/params-bounded",
    "Each param of a heterogeneousTarget MUST stay within its own minReplicas and maxReplicas: a demand of 100 "
    "replicas on two groups of at most 4 MUST give 4 and 4, and the status MUST report each group by name with its "
    "currentReplicas in heterogeneousStatus.",
    f"{API}#HeterogeneousTargetParam",
    Feature.HETEROGENEOUS_AUTOSCALING,
)
def test_every_param_within_its_bounds(ms: ModelServings, signal: Signal) -> None:
    policies = start(ms, signal, "bound", 1000)
    ms.wait("autoscale", "both groups raised to their maxReplicas 4 for a demand of 100", lambda: split(ms, "bound"),
            until=lambda s: s == (4, 4))  # fmt: skip
    ms.holds("both groups stay at their maxReplicas 4", lambda: split(ms, "bound"), lambda s: s == (4, 4),
             wait="autoscale-steady", settled=settled_groups(ms, "bound", groups("bound")))  # fmt: skip
    want = {f"bound-{EXPENSIVE}": 4, f"bound-{CHEAP}": 4}

    def reported() -> dict[Any, Any]:
        entries = policies.status("bound").get("heterogeneousStatus") or []
        return {e.get("name"): e.get("currentReplicas") for e in entries if isinstance(e, dict)}

    ms.wait("status-updated", f"heterogeneousStatus naming each group with its currentReplicas {want}", reported,
            until=lambda seen: seen == want)  # fmt: skip
