"""Rollout: rolloutStrategy.roleCoordination (maxSkew, dependencies, immutability).

A Role's target-version Ready ratio is its instances available on the target image divided by
its replicas (partition-protected capacity included, so the denominator is the Role's replicas).
"A graph root waits for target-version Ready capacity throughout its dependency closure before
its first target start": the spec does not say how much capacity, so the suite asserts what every
reading shares: no target-version Pod of the dependent Role exists before at least one instance
of the Role it depends on is Ready on its target.
"""

from __future__ import annotations

import copy
from fractions import Fraction
from typing import Any

from conformance.framework.catalog import behaviour
from conformance.framework.features import Feature
from conformance.framework.modelserving import ModelServings
from conformance.framework.rollout_watch import Layout, RolloutWatch, Snapshot, Timeline

from . import API, expect_status_updated, patch_roles, role, start, with_image

NAME = "roles"
A2, B2 = "registry.example/role-a:v2", "registry.example/role-b:v2"
COORDINATION = f"{API}#RoleCoordination"


def _body(manifest: Any, coordination: dict[str, Any], replicas: int = 1) -> dict[str, Any]:
    body: dict[str, Any] = manifest("rollout-roles")
    body["spec"]["replicas"] = replicas
    body["spec"]["rolloutStrategy"]["roleCoordination"] = coordination
    return body


def _roll_both(ms: ModelServings, body: dict[str, Any], what: str) -> tuple[Layout, Timeline]:
    layout = start(ms, body)
    with RolloutWatch(ms, NAME, layout) as watch:
        with_image(body, A2, "a")
        patch_roles(ms, body, with_image(body, B2, "b"))
        watch.wait_settled({"a": A2, "b": B2}, what)
        timeline = watch.snapshot_timeline()
    return layout, timeline


@behaviour(
    "rollout/coordination/max-skew",
    "With roleCoordination maxSkew 25% over all Roles, the target-version Ready ratios of the Roles (instances "
    "Ready on the target over the Role's replicas) MUST NOT differ by more than 25 percentage points at any moment "
    "of the update, and the update MUST finish.",
    COORDINATION,
    Feature.ROLE_COORDINATION,
)
def test_max_skew_bounds_the_ratio_difference(ms: ModelServings, manifest: Any) -> None:
    body = _body(manifest, {"roles": [], "maxSkew": "25%"})
    role(body, "a").update(replicas=4, maxUnavailable=4)
    role(body, "b").update(replicas=4, maxUnavailable=1)
    what = "roleCoordination maxSkew 25%: Role a (4, maxUnavailable 4) and b (4, maxUnavailable 1)"
    layout, timeline = _roll_both(ms, body, what)

    def skew(s: Snapshot) -> Fraction:
        """The difference between the Roles' target-version Ready ratios (exact)."""
        a = Fraction(len(s.ready_instances(layout, "a", A2)), layout.role_replicas("a"))
        b = Fraction(len(s.ready_instances(layout, "b", B2)), layout.role_replicas("b"))
        return abs(a - b)

    worst = max(timeline.snapshots, key=skew)
    assert skew(worst) <= Fraction(25, 100), (
        f"{what}: the target-version Ready ratios of a and b differed by {float(skew(worst)) * 100:g} percentage "
        f"points at {worst.describe()}"
    )
    expect_status_updated(ms, NAME, what)


@behaviour(
    "rollout/coordination/dependencies",
    "With roleCoordination dependencies [{role: a, dependsOn: [b]}], a Pod of Role a on its target template MUST "
    "NOT exist before an instance of Role b is Ready on its target, and the update MUST finish.",
    COORDINATION,
    Feature.ROLE_COORDINATION,
)
def test_dependent_role_starts_after_its_dependency(ms: ModelServings, manifest: Any) -> None:
    body = _body(manifest, {"dependencies": [{"role": "a", "dependsOn": ["b"]}]})
    role(body, "a").update(replicas=2, maxUnavailable=2)
    role(body, "b").update(replicas=2, maxUnavailable=1)
    what = "roleCoordination: a depends on b"
    layout, timeline = _roll_both(ms, body, what)
    a_started = timeline.first_pod(lambda p: p.role == "a" and p.image == A2)
    b_ready = timeline.first(lambda s: bool(s.ready_instances(layout, "b", B2)))
    assert a_started is not None and b_ready is not None, f"{what}: the update finished without Pods on the targets?"
    assert b_ready.seq < a_started.seq, (
        f"{what}: a Pod of Role a on its target existed ({a_started.describe()}) before any instance of Role b was "
        f"Ready on its target ({b_ready.describe()})"
    )
    expect_status_updated(ms, NAME, what)


@behaviour(
    "rollout/coordination/immutable",
    "Adding, removing or changing rolloutStrategy.roleCoordination after creation MUST be refused, leaving the "
    "stored spec unchanged, while other changes to such a ModelServing MUST be accepted.",
    COORDINATION,
    Feature.ROLE_COORDINATION,
)
def test_role_coordination_is_immutable(ms: ModelServings, manifest: Any) -> None:
    coordinated = _body(manifest, {"roles": [], "maxSkew": "50%"}, replicas=0)
    coordinated["metadata"]["name"] = "coordinated"
    ms.create(coordinated)
    plain = copy.deepcopy(coordinated)
    plain["metadata"]["name"] = "plain"
    del plain["spec"]["rolloutStrategy"]["roleCoordination"]
    ms.create(plain)
    changes = [
        ("coordinated", {"roleCoordination": {"roles": [], "maxSkew": "25%"}}, "changing roleCoordination.maxSkew"),
        ("coordinated", {"roleCoordination": {"roles": ["a"], "maxSkew": "50%"}}, "changing roleCoordination.roles"),
        ("coordinated", {"roleCoordination": None}, "removing roleCoordination"),
        ("plain", {"roleCoordination": {"maxSkew": "50%"}}, "adding roleCoordination"),
    ]
    for name, strategy, what in changes:
        ms.refused_patch(name, {"spec": {"rolloutStrategy": strategy}}, f"{what} on {name}")
    rejection = ms.try_patch("coordinated", {"spec": {"recoveryPolicy": "None"}})
    assert rejection is None, (
        f"expected a change of recoveryPolicy on a ModelServing with roleCoordination to be accepted; "
        f"rejected: {rejection}"
    )
