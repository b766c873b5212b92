"""DisaggregatedAutoscaling: a disaggregatedTarget scales Roles of one ModelServing, with a ratio.

The spec: DisaggregatedTarget "enables coordinated autoscaling of roles within a single
ModelServing"; its roles' keys are "roleName from ModelServing.spec.template.roles[].name"; a fixed
Role (minReplicas == maxReplicas) "the autoscaler keeps ... at that fixed size"; the ratio
constraint "enforces that replicas[numeratorRole] / replicas[denominatorRole] stays within
[minRatio, maxRatio] when denominator replica is non-zero"; ratioAdjusted "is true when the most
recent reconcile had to override the metric-derived replica counts to satisfy the ratio
constraint". Which side of a ratio moves is the implementation's choice (reading A12): only the
resulting ratio and the metric-driven Role's growth are asserted.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from conformance.framework.catalog import behaviour
from conformance.framework.features import Feature
from conformance.framework.modelserving import ModelServings
from conformance.framework.outcomes import Inconclusive
from conformance.framework.plugin import record_notes
from conformance.framework.waits import WaitTimeout

from . import (
    API,
    TARGET_VALUE,
    Policies,
    Signal,
    policy_object,
    replicas_of,
    role_replicas_of,
    settled_roles,
    signal,
    target,
)

__all__ = ["signal"]  # the fixture, used by name

DISAGGREGATED = f"{API}#DisaggregatedTarget"


def policy(name: str, roles: dict[str, Any], ratio: dict[str, Any] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"targetRef": {"kind": "ModelServing", "name": name}, "roles": roles}
    if ratio is not None:
        spec["ratioConstraint"] = ratio
    return policy_object(name, {"disaggregatedTarget": spec})


def scaled(signal: Signal, ms: ModelServings, series: str, low: int, high: int) -> dict[str, Any]:
    return {"minReplicas": low, "maxReplicas": high, "metricSources": {"load": signal.source(ms, series)}}


@behaviour(
    "autoscaling/disaggregated/role-replicas",
    "A disaggregatedTarget MUST scale each Role it names through that Role's replicas in the ModelServing's "
    "template, by the Role's own metric, and MUST leave spec.replicas and the other Roles alone.",
    DISAGGREGATED,
    Feature.DISAGGREGATED_AUTOSCALING,
)
def test_roles_scale_through_their_replicas(ms: ModelServings, signal: Signal) -> None:
    signal.set(ms, "decode", 30)
    ms.create(target("roles", replicas=1, roles={"prefill": 1, "decode": 1}))
    Policies(ms).create(policy("roles", {"decode": scaled(signal, ms, "decode", 1, 5)}))
    ms.wait("autoscale", "Role decode's replicas raised to 3 for a load of 30", role_replicas_of(ms, "roles"),
            until=lambda r: r.get("decode") == 3)  # fmt: skip
    ms.holds("spec.replicas 1 and Role prefill 1 untouched, decode at 3",
             lambda: (replicas_of(ms, "roles")(), role_replicas_of(ms, "roles")()),
             lambda seen: seen == (1, {"prefill": 1, "decode": 3}), wait="autoscale-steady",
             settled=settled_roles(ms, "roles", "roles", ("decode",)))  # fmt: skip


@behaviour(
    "autoscaling/disaggregated/role-metrics",
    "A Role of a disaggregatedTarget that lists its own metrics MUST be scaled on them instead of spec.metrics: a "
    "load of 30 on a Role whose own metric has targetValue 5 (spec.metrics: 10) MUST give 6 replicas, not 3.",
    f"{API}#RoleScalingParam",
    Feature.DISAGGREGATED_AUTOSCALING,
)
def test_role_metrics_override_spec_metrics(ms: ModelServings, signal: Signal) -> None:
    signal.set(ms, "own", 30)
    ms.create(target("own", replicas=1, roles={"prefill": 1, "decode": 1}))
    role = scaled(signal, ms, "own", 1, 8) | {"metrics": [{"name": "load", "targetValue": TARGET_VALUE // 2}]}
    Policies(ms).create(policy("own", {"decode": role}))
    ms.wait("autoscale", "Role decode raised to 6 for a load of 30 on its own targetValue 5",
            role_replicas_of(ms, "own"), until=lambda r: r.get("decode") == 6)  # fmt: skip
    ms.holds("Role decode stays at 6 (spec.metrics' targetValue 10 would ask for 3)",
             role_replicas_of(ms, "own"), lambda r: r.get("decode") == 6, wait="autoscale-steady",
             settled=settled_roles(ms, "own", "own", ("decode",)))  # fmt: skip


@behaviour(
    "autoscaling/disaggregated/fixed-role",
    "A Role of a disaggregatedTarget with minReplicas equal to maxReplicas and no metrics MUST be kept at that "
    "size: a Role of 1 replica fixed at 2 MUST come to 2.",
    f"{API}#RoleScalingParam",
    Feature.DISAGGREGATED_AUTOSCALING,
)
def test_fixed_role_kept_at_its_size(ms: ModelServings, signal: Signal) -> None:
    signal.set(ms, "decode", 10)
    ms.create(target("fixed", replicas=1, roles={"prefill": 1, "decode": 1}))
    Policies(ms).create(policy("fixed", {"prefill": {"minReplicas": 2, "maxReplicas": 2},
                                         "decode": scaled(signal, ms, "decode", 1, 5)}))  # fmt: skip
    ms.wait("autoscale", "the fixed Role prefill at its size 2", role_replicas_of(ms, "fixed"),
            until=lambda r: r.get("prefill") == 2)  # fmt: skip
    ms.holds("the fixed Role prefill stays at 2", role_replicas_of(ms, "fixed"), lambda r: r.get("prefill") == 2,
             wait="autoscale-steady", settled=settled_roles(ms, "fixed", "fixed", ("prefill",)))  # fmt: skip


RATIO = {"numeratorRole": "prefill", "denominatorRole": "decode", "minRatio": "1", "maxRatio": "2"}


def _ratio_policy(ms: ModelServings, signal: Signal, name: str) -> None:
    signal.set(ms, f"{name}-prefill", 20)  # asks for 2 prefills
    signal.set(ms, f"{name}-decode", 30)  # and 3 decodes: prefill/decode 2/3, below minRatio 1
    ms.create(target(name, replicas=1, roles={"prefill": 1, "decode": 1}))
    roles = {r: scaled(signal, ms, f"{name}-{r}", 1, 6) for r in ("prefill", "decode")}
    Policies(ms).create(policy(name, roles, RATIO))


def _within(r: dict[str, int]) -> bool:
    return r.get("decode", 0) > 0 and Fraction(1) <= Fraction(r.get("prefill", 0), r["decode"]) <= Fraction(2)


def _acted_within(r: dict[str, int]) -> bool:
    """The autoscaler acted (the Roles left their starting 1 and 1: every fair fix of 2/3 does) and the
    ratio is within [1, 2] (raising prefill to 3 and lowering decode to 2 are both fair)."""
    return (r.get("prefill"), r.get("decode")) != (1, 1) and _within(r)


@behaviour(
    "autoscaling/disaggregated/ratio-kept",
    "With a ratioConstraint, replicas[numeratorRole] / replicas[denominatorRole] MUST be kept within [minRatio, "
    "maxRatio] while the denominator is non-zero, also when the Roles' metrics ask for a ratio outside it: "
    "prefill asking for 2 and decode for 3 with a ratio of 1 to 2 MUST NOT be left at 2/3.",
    f"{API}#RoleRatioConstraint",
    Feature.DISAGGREGATED_AUTOSCALING,
)
def test_ratio_kept_against_the_metrics(ms: ModelServings, signal: Signal) -> None:
    _ratio_policy(ms, signal, "ratio")
    ms.wait("autoscale", "the Roles scaled from 1 and 1 and prefill/decode within [1, 2]",
            role_replicas_of(ms, "ratio"), until=_acted_within)  # fmt: skip
    ms.holds("prefill/decode stays within [1, 2]", role_replicas_of(ms, "ratio"), _within, wait="autoscale-steady")


@behaviour(
    "autoscaling/disaggregated/ratio-adjusted",
    "When the ratio constraint overrides the Roles' metric-derived replicas, status.disaggregatedStatus.ratioAdjusted "
    "MUST be true, ratioStatus MUST name the numerator and denominator Roles, and each Role's entry in roles MUST "
    "carry its name, its currentReplicas, the desiredReplicas its metrics ask for (before the ratio: prefill 2, decode "
    "3) and a mode of Stable or Panic.",
    f"{API}#DisaggregatedScalingStatus",
    Feature.DISAGGREGATED_AUTOSCALING,
)
def test_ratio_adjusted_reported(ms: ModelServings, signal: Signal) -> None:
    _ratio_policy(ms, signal, "adjusted")
    ms.wait("autoscale", "the Roles scaled from 1 and 1 and prefill/decode within [1, 2]",
            role_replicas_of(ms, "adjusted"), until=_acted_within)  # fmt: skip
    policies = Policies(ms)
    status = ms.wait(
        "status-updated", "disaggregatedStatus.ratioAdjusted true", lambda: policies.status("adjusted"),
        until=lambda s: (s.get("disaggregatedStatus") or {}).get("ratioAdjusted") is True,
    )  # fmt: skip
    ratio = status["disaggregatedStatus"].get("ratioStatus") or {}
    assert (ratio.get("numeratorRole"), ratio.get("denominatorRole")) == ("prefill", "decode"), (
        f"ratioStatus must name numeratorRole prefill and denominatorRole decode; seen {ratio}"
    )
    # Once settled, each Role's entry reports what its own metric asks for, whichever side the ratio moved.
    want = {"prefill": 2, "decode": 3}

    def entries() -> dict[Any, Any]:
        roles = (policies.status("adjusted").get("disaggregatedStatus") or {}).get("roles") or []
        return {r.get("name"): r for r in roles if isinstance(r, dict)}

    def reports(seen: dict[Any, Any]) -> bool:
        current = role_replicas_of(ms, "adjusted")()
        return set(seen) == set(want) and all(
            seen[n].get("desiredReplicas") == want[n] and seen[n].get("currentReplicas") == current[n]
            and seen[n].get("mode") in ("Stable", "Panic") for n in want
        )  # fmt: skip

    ms.wait("status-updated", f"disaggregatedStatus.roles naming prefill and decode with desiredReplicas {want}, "
            "currentReplicas as the Roles have them and mode Stable or Panic", entries, until=reports)  # fmt: skip


@behaviour(
    "autoscaling/disaggregated/missing-source-changes-nothing",
    "A Role of a disaggregatedTarget whose metricSources has no key for its metric ('Missing keys are treated as "
    "missing metrics for that reconcile loop') MUST keep its replicas: a Role at 2 in [1, 5] stays at 2.",
    f"{API}#RoleScalingParam",
    Feature.DISAGGREGATED_AUTOSCALING,
)
def test_role_without_a_source_keeps_its_replicas(ms: ModelServings, signal: Signal, request: Any) -> None:
    signal.set(ms, "nosrc", 50)  # readable, it asks for 5
    ms.create(target("nosrc", replicas=1, roles={"prefill": 1, "decode": 2}))
    policies = Policies(ms)
    refusal = policies.try_create(
        policy("nosrc", {"decode": {"minReplicas": 1, "maxReplicas": 5, "metricSources": {}}})
    )
    if refusal is not None:
        # A stricter admission (upstream's wants a source per scaled Role) is a fair reading: a refused policy
        # scales nothing, so the Role keeps its replicas. It passes, with a note (issue 31: never an error).
        record_notes(request.node, [f"a Role without a metric source was refused at admission (HTTP "
                                    f"{refusal.status}): the policy is never stored, so nothing scales"])  # fmt: skip
        return
    ms.holds("Role decode stays at 2 without a metric source", role_replicas_of(ms, "nosrc"),
             lambda r: r.get("decode") == 2, wait="autoscale-steady",
             settled=settled_roles(ms, "nosrc", "nosrc", ("decode",)))  # fmt: skip
    # The control: given the source, the same policy must scale, or the observation above proved nothing.
    policies.patch("nosrc", {"spec": {"disaggregatedTarget": {"roles": {"decode": {
        "metricSources": {"load": signal.source(ms, "nosrc")}}}}}})  # fmt: skip
    try:
        ms.wait("autoscale", "Role decode raised to 5 once its metric reads 50", role_replicas_of(ms, "nosrc"),
                until=lambda r: r.get("decode") == 5)  # fmt: skip
    except WaitTimeout as exc:
        raise Inconclusive(
            f"the policy never scaled even with a metric source, so 'nothing changed' shows nothing: {exc}"
        ) from None
