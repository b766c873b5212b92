"""AutoscalingPanic: a load far past the panic threshold puts the unit in Panic mode, and its status says so.

The spec: panicThresholdPercent "defines the threshold percentage that triggers panic mode when metrics exceed
this percentage of target values"; a TargetScalingStatus' mode "reports whether the unit is currently in
"Stable" or "Panic" mode". Where exactly the threshold lies is read two ways (reading A7: the metric against
what the current replicas serve, or the recommended replicas against the current ones), and how long panic
lasts is not documented (A8). The load used is ten times what one replica serves, against a threshold of
200%: past the boundary under both readings, so only the entry is asserted, not its exit or its steps (A9).
"""

from __future__ import annotations

from typing import Any

from conformance.framework.catalog import behaviour
from conformance.framework.features import Feature
from conformance.framework.modelserving import ModelServings

from . import API, TARGET_VALUE, Policies, Signal, homogeneous, signal, target

__all__ = ["signal"]  # the fixture, used by name


@behaviour(
    "autoscaling/panic/mode-reported",
    "When a unit's metric far exceeds panicThresholdPercent of its target values (ten times what its one replica "
    "serves, against 200%), the unit MUST enter Panic mode and status.homogeneousStatus.mode MUST report Panic.",
    f"{API}#AutoscalingPolicyPanicPolicy",
    Feature.AUTOSCALING_PANIC,
)
def test_a_surge_enters_panic_mode(ms: ModelServings, signal: Signal) -> None:
    signal.set(ms, "surge", 10 * TARGET_VALUE)
    ms.create(target("surge", replicas=1))
    body = homogeneous("surge", "surge", signal.source(ms, "surge"), 1, 10)
    body["spec"]["behavior"] = {"scaleUp": {"panicPolicy": {"panicThresholdPercent": 200, "percent": 1000}}}
    policies = Policies(ms)
    policies.create(body)

    def mode() -> Any:
        return (policies.status("surge").get("homogeneousStatus") or {}).get("mode")

    ms.wait("autoscale", "status.homogeneousStatus.mode Panic for a load 10x what one replica serves", mode,
            until=lambda m: m == "Panic")  # fmt: skip
