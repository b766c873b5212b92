"""Autoscaling: a homogeneousTarget scales the whole ModelServing on its metric, within its bounds.

The spec: HomogeneousTarget "enables traditional metric-based scaling for a single ModelServing
deployment"; minReplicas and maxReplicas are "the minimum number of replicas to maintain" and "the
maximum number of replicas allowed"; a Prometheus query "must evaluate to a single scalar or a
one-element vector; the resulting value drives the scaling decision". Every load used asks for an
exact replica count (a load of 30 with a target of 10 is 3 replicas under any rounding), and no
assertion depends on panic mode, the tolerance boundary or timing beyond the named waits.
"""

from __future__ import annotations

from typing import Any

import pytest

from conformance.framework.catalog import behaviour
from conformance.framework.features import Feature
from conformance.framework.modelserving import ModelServings
from conformance.framework.outcomes import Inconclusive
from conformance.framework.waits import WaitTimeout

from . import API, Policies, Signal, homogeneous, replicas_of, settled_homogeneous, signal, target

__all__ = ["signal"]  # the fixture, used by name

HOMOGENEOUS = f"{API}#HomogeneousTarget"


@behaviour(
    "autoscaling/homogeneous/scale-up",
    "When a homogeneousTarget's metric asks for more replicas than the ModelServing has, the autoscaler MUST raise "
    "spec.replicas to what the metric asks for within maxReplicas (a load of 30 for a targetValue of 10: 3 replicas).",
    HOMOGENEOUS,
    Feature.AUTOSCALING,
)
def test_scale_up_to_what_the_metric_asks(ms: ModelServings, signal: Signal) -> None:
    signal.set(ms, "up", 30)
    ms.create(target("up", replicas=1))
    Policies(ms).create(homogeneous("up", "up", signal.source(ms, "up"), 1, 5))
    ms.wait("autoscale", "spec.replicas raised to 3 for a load of 30 (targetValue 10, maxReplicas 5)",
            replicas_of(ms, "up"), until=lambda n: n == 3)  # fmt: skip
    ms.holds("spec.replicas stays at the 3 the load asks for", replicas_of(ms, "up"), lambda n: n == 3,
             wait="autoscale-steady", settled=settled_homogeneous(ms, "up", "up"))  # fmt: skip


@behaviour(
    "autoscaling/homogeneous/max-replicas",
    "However high a homogeneousTarget's metric, spec.replicas MUST NOT exceed maxReplicas: a load asking for 100 "
    "replicas with maxReplicas 3 MUST give 3 and no more.",
    HOMOGENEOUS,
    Feature.AUTOSCALING,
)
def test_max_replicas_bounds_any_load(ms: ModelServings, signal: Signal) -> None:
    signal.set(ms, "max", 1000)
    ms.create(target("max", replicas=1))
    Policies(ms).create(homogeneous("max", "max", signal.source(ms, "max"), 1, 3))
    ms.wait("autoscale", "spec.replicas raised to maxReplicas 3 for a load asking for 100",
            replicas_of(ms, "max"), until=lambda n: n >= 3)  # fmt: skip
    ms.holds("spec.replicas never above maxReplicas 3", replicas_of(ms, "max"), lambda n: n == 3,
             wait="autoscale-steady", settled=settled_homogeneous(ms, "max", "max"))  # fmt: skip


@behaviour(
    "autoscaling/homogeneous/scale-down",
    "When a homogeneousTarget's metric asks for fewer replicas than the ModelServing has, the autoscaler MUST lower "
    "spec.replicas, and never below minReplicas: 4 replicas with no load and minReplicas 2 MUST come to 2.",
    HOMOGENEOUS,
    Feature.AUTOSCALING,
)
def test_scale_down_to_min_replicas(ms: ModelServings, signal: Signal) -> None:
    signal.set(ms, "down", 0)
    ms.create(target("down", replicas=4))
    signal.seen(ms, "down", 0)
    Policies(ms).create(homogeneous("down", "down", signal.source(ms, "down"), 2, 6))
    ms.wait("autoscale-down", "spec.replicas lowered from 4 to minReplicas 2 without load",
            replicas_of(ms, "down"), until=lambda n: n <= 2)  # fmt: skip
    ms.holds("spec.replicas never below minReplicas 2", replicas_of(ms, "down"), lambda n: n == 2,
             wait="autoscale-steady", settled=settled_homogeneous(ms, "down", "down"))  # fmt: skip


@behaviour(
    "autoscaling/homogeneous/status",
    "Once the autoscaler has acted on a homogeneousTarget, status.observedGeneration MUST equal the policy's "
    "metadata.generation and status.homogeneousStatus.currentReplicas MUST report the ModelServing's replicas.",
    f"{API}#AutoscalingPolicyStatus",
    Feature.AUTOSCALING,
)
def test_status_reports_generation_and_replicas(ms: ModelServings, signal: Signal) -> None:
    signal.set(ms, "st", 20)
    ms.create(target("st", replicas=1))
    policies = Policies(ms)
    policies.create(homogeneous("st", "st", signal.source(ms, "st"), 1, 4))
    ms.wait("autoscale", "spec.replicas raised to 2 for a load of 20", replicas_of(ms, "st"), until=lambda n: n == 2)
    policies.patch("st", {"spec": {"tolerancePercent": 20}})  # a new generation, nothing else changes
    generation = policies.get("st")["metadata"]["generation"]

    def reported() -> dict[str, Any]:
        return policies.status("st")

    ms.wait(
        "status-updated",
        f"status.observedGeneration {generation} and homogeneousStatus.currentReplicas 2",
        reported,
        until=lambda s: (
            s.get("observedGeneration") == generation and (s.get("homogeneousStatus") or {}).get("currentReplicas") == 2
        ),
    )


UNREADABLE = {
    "no-sample": "a query that returns no sample",
    "several-samples": "a query that returns two samples",
    "server-down": "a Prometheus server that does not answer",
    "no-source": "no metricSources entry for the metric",
}


@behaviour(
    "autoscaling/metrics/unreadable-changes-nothing",
    "A metric the autoscaler cannot read (a Prometheus query returning no sample or several, a server that does "
    "not answer, or no metricSources key for the metric: 'Missing keys are treated as missing metrics') MUST NOT "
    "change spec.replicas.",
    f"{API}#PrometheusMetricSource",
    Feature.AUTOSCALING,
)
@pytest.mark.parametrize("case", UNREADABLE, ids=UNREADABLE.keys())
def test_unreadable_metric_changes_nothing(ms: ModelServings, signal: Signal, case: str) -> None:
    # The readable form of the same signal asks for 5 replicas; unreadable, nothing may change.
    signal.set(ms, "unread", 50)
    series = signal.query(ms, "unread").removeprefix("sum(").removesuffix(")")
    broken = {
        "no-sample": signal.source(ms, "unread", query=f"sum({series.replace('unread', 'no-such-series')})"),
        "several-samples": signal.source(
            ms, "unread", query=f"{series} or label_replace({series}, 'copy', '1', '', '')"
        ),
        "server-down": signal.source(ms, "unread", url="http://127.0.0.1:9"),
        "no-source": {},
    }[case]
    ms.create(target("unread", replicas=2))
    policies = Policies(ms)
    body = homogeneous("unread", "unread", broken, 1, 6)
    if case == "no-source":
        body["spec"]["homogeneousTarget"]["target"]["metricSources"] = {}
        refusal = policies.try_create(body)
        if refusal is not None:  # a stricter admission: the runtime treatment cannot be observed
            raise Inconclusive(f"a target without a metric source was refused at admission (HTTP {refusal.status}), "
                               "so how a missing key is treated at runtime cannot be observed")  # fmt: skip
    else:
        policies.create(body)
    ms.holds(f"spec.replicas stays 2 with {UNREADABLE[case]}", replicas_of(ms, "unread"), lambda n: n == 2,
             wait="autoscale-steady", settled=settled_homogeneous(ms, "unread", "unread"))  # fmt: skip
    # The control: made readable, the same policy must scale, or the observation above proved nothing.
    policies.patch("unread", {"spec": {"homogeneousTarget": {"target": {"metricSources": {
        "load": signal.source(ms, "unread")}}}}})  # fmt: skip
    try:
        ms.wait("autoscale", "spec.replicas raised to 5 once the metric reads 50",
                replicas_of(ms, "unread"), until=lambda n: n == 5)  # fmt: skip
    except WaitTimeout as exc:
        raise Inconclusive(
            f"the policy never scaled even with a readable metric, so 'nothing changed' shows nothing: {exc}"
        ) from None


@behaviour(
    "autoscaling/target/other-kind-not-scaled",
    "An AutoscalingPolicy whose targetRef names a kind other than ModelServing (the only supported kind) MUST NOT "
    "scale the ModelServing of that name: it is refused at admission, or stored and that ModelServing keeps its "
    "replicas while a correct policy with the same signal scales another.",
    f"{API}#Target",
    Feature.AUTOSCALING,
)
def test_other_kind_not_scaled(ms: ModelServings, signal: Signal) -> None:
    # Reading W5 (docs/autoscaling-readings.md): the spec says which kinds are supported, not where an unsupported
    # one is turned away, so a refusal and an accepted policy that scales nothing are both conformant.
    signal.set(ms, "kind", 30)
    ms.create(target("kind", replicas=1))
    policies = Policies(ms)
    body = homogeneous("kind", "kind", signal.source(ms, "kind"), 1, 5)
    body["spec"]["homogeneousTarget"]["target"]["targetRef"] = {"kind": "Deployment", "name": "kind"}
    refusal = policies.try_create(body)
    if refusal is not None:
        assert refusal.status in (400, 403, 422), (
            f"a policy naming a Deployment was turned away with HTTP {refusal.status}, not an admission refusal "
            f"(400, 403 or 422): {refusal.body}"
        )
        return
    # Stored: a control ModelServing under a correct policy, created after, shows how long a scale takes here.
    ms.create(target("kind-control", replicas=1))
    policies.create(homogeneous("kind-control", "kind-control", signal.source(ms, "kind"), 1, 5))
    ms.wait("autoscale", "the control ModelServing raised to 3 for the same load of 30",
            replicas_of(ms, "kind-control"), until=lambda n: n == 3)  # fmt: skip
    ms.holds("the ModelServing named by the Deployment targetRef stays at 1", replicas_of(ms, "kind"),
             lambda n: n == 1, wait="autoscale-steady")  # fmt: skip
