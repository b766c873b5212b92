"""The reference autoscaler on the embedded cluster, driven by a real Prometheus.

The harness runs a metrics endpoint the test sets and a real Prometheus scraping it; each policy's
Prometheus source queries that server (the reference controller runs on this host, so it reaches
127.0.0.1). The tests change the signal and watch the ModelServing's replicas and the policy's
status move, or not move, within documented waits: a scale up is one loop (5 s) plus a scrape
(1 s); a scale down waits for the 60 s stable window and the 60 s panic hold (readings A4, A8).
Pod-sourced metrics need real nodes (kwok Pods serve nothing) and are not tested here.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from conformance.cluster.local.prometheus import MetricsEndpoint, Prometheus
from conformance.framework.waits import wait_for

from . import modelservings

pytestmark = pytest.mark.cluster

GROUP, VERSION = modelservings.GROUP, modelservings.VERSION
POLICIES = "autoscalingpolicies"
SCALE_UP_SECONDS = 60.0  # a few 2 s loops and 1 s scrapes, on a busy machine
SCALE_DOWN_SECONDS = 180.0  # the 60 s panic hold, the 60 s stable window, then one step


class World(modelservings.World):
    def policy(self, body: dict[str, Any]) -> dict[str, Any]:
        return dict(self.custom.create_namespaced_custom_object(GROUP, VERSION, self.ns, POLICIES, body))

    def policy_status(self, name: str) -> dict[str, Any]:
        got = self.custom.get_namespaced_custom_object(GROUP, VERSION, self.ns, POLICIES, name)
        return dict(got.get("status") or {})

    def replicas(self, name: str) -> int:
        return int(self.get(name)["spec"]["replicas"])

    def role_replicas(self, name: str) -> dict[str, int]:
        return {r["name"]: int(r.get("replicas", 1)) for r in self.get(name)["spec"]["template"]["roles"]}

    def warnings(self, name: str) -> list[str]:
        items = self.core.list_namespaced_event(self.ns, field_selector=f"involvedObject.name={name}").items
        return [f"{e.reason}: {e.message}" for e in items if e.type == "Warning"]


@pytest.fixture(scope="module")
def metrics() -> Iterator[tuple[MetricsEndpoint, Prometheus]]:
    with MetricsEndpoint() as endpoint, Prometheus(targets=[endpoint.address]) as prometheus:
        yield endpoint, prometheus


@pytest.fixture
def world(api_client: Any, namespace: str, reference_controller: dict[str, Any]) -> World:
    return World(api_client, namespace)


def modelserving(name: str, replicas: int = 1, roles: tuple[str, ...] = ("r",)) -> dict[str, Any]:
    pod = {"spec": {"containers": [{"name": "engine", "image": "engine:v1"}]}}
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "ModelServing",
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "template": {
                "roles": [{"name": r, "replicas": 1, "workerReplicas": 0, "entryTemplate": pod} for r in roles]
            },
        },
    }


def source(prometheus: Prometheus, query: str, url: str | None = None) -> dict[str, Any]:
    return {"prometheus": {"serverURL": url or prometheus.url, "query": query}}


def homogeneous(name: str, target: str, src: dict[str, Any], low: int, high: int) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "AutoscalingPolicy",
        "metadata": {"name": name},
        "spec": {
            "metrics": [{"name": "load", "targetValue": 10}],
            "homogeneousTarget": {
                "minReplicas": low,
                "maxReplicas": high,
                "target": {"targetRef": {"kind": "ModelServing", "name": target}, "metricSources": {"load": src}},
            },
        },
    }


def test_homogeneous_policy_scales_up_under_load_and_back_down_within_bounds(
    world: World, metrics: tuple[MetricsEndpoint, Prometheus]
) -> None:
    endpoint, prometheus = metrics
    endpoint.set("hom_load", 25)
    world.create(modelserving("hom"))
    world.policy(homogeneous("hom", "hom", source(prometheus, "sum(hom_load)"), 1, 3))
    wait_for("hom scaled to 3 for a load of 25 (target 10 each)", lambda: world.replicas("hom"),
             until=lambda n: n == 3, timeout=SCALE_UP_SECONDS)  # fmt: skip
    status = wait_for(
        "the policy's homogeneousStatus", lambda: world.policy_status("hom"),
        until=lambda s: (s.get("homogeneousStatus") or {}).get("currentReplicas") == 3, timeout=SCALE_UP_SECONDS,
    )  # fmt: skip
    assert status["homogeneousStatus"]["desiredReplicas"] == 3, status
    assert status["observedGeneration"] == 1, status
    endpoint.set("hom_load", 1000)
    wait_for("the policy saw a load of 1000 (panic)", lambda: world.policy_status("hom"),
             until=lambda s: s["homogeneousStatus"]["mode"] == "Panic", timeout=SCALE_UP_SECONDS)  # fmt: skip
    assert world.replicas("hom") == 3, "maxReplicas 3 bounds a load asking for 100"
    endpoint.set("hom_load", 0)
    wait_for("hom back down to minReplicas 1 without load", lambda: world.replicas("hom"),
             until=lambda n: n == 1, timeout=SCALE_DOWN_SECONDS)  # fmt: skip


PROBLEMS = {
    "empty-vector": ("sum(no_such_metric)", None, "0 samples"),
    "several-samples": ("multi_load", None, "2 samples"),
    "unreachable-server": ("sum(multi_load)", "http://127.0.0.1:9", "127.0.0.1:9"),
}


@pytest.mark.parametrize("query,url,said", PROBLEMS.values(), ids=PROBLEMS.keys())
def test_a_metric_that_cannot_be_read_changes_nothing_and_is_reported(
    world: World, metrics: tuple[MetricsEndpoint, Prometheus], query: str, url: str | None, said: str
) -> None:
    endpoint, prometheus = metrics
    endpoint.set("multi_load", 500, {"pod": "a"})  # read as it should be, it would scale to the maximum
    endpoint.set("multi_load", 500, {"pod": "b"})
    world.create(modelserving("steady", replicas=2))
    world.policy(homogeneous("steady", "steady", source(prometheus, query, url), 1, 6))
    warnings = wait_for(f"a Warning Event on the policy saying {said!r}", lambda: world.warnings("steady"),
                        until=lambda w: any(said in m for m in w), timeout=SCALE_UP_SECONDS)  # fmt: skip
    assert world.replicas("steady") == 2, f"replicas changed although the metric could not be read: {warnings}"
    status = world.policy_status("steady")
    assert (status.get("homogeneousStatus") or {}).get("currentReplicas") == 2, status


def test_disaggregated_policy_keeps_the_ratio_and_reports_ratio_adjusted(
    world: World, metrics: tuple[MetricsEndpoint, Prometheus]
) -> None:
    endpoint, prometheus = metrics
    endpoint.set("pd_prefill", 10)  # asks for 1 prefill
    endpoint.set("pd_decode", 30)  # asks for 3 decodes
    world.create(modelserving("pd", roles=("prefill", "decode")))

    def role(query: str) -> dict[str, Any]:
        return {"minReplicas": 1, "maxReplicas": 4, "metricSources": {"load": source(prometheus, query)}}

    world.policy({
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "AutoscalingPolicy",
        "metadata": {"name": "pd"},
        "spec": {
            "metrics": [{"name": "load", "targetValue": 10}],
            "disaggregatedTarget": {
                "targetRef": {"kind": "ModelServing", "name": "pd"},
                "roles": {"prefill": role("sum(pd_prefill)"), "decode": role("sum(pd_decode)")},
                "ratioConstraint": {"numeratorRole": "prefill", "denominatorRole": "decode",
                                    "minRatio": "1", "maxRatio": "2"},
            },
        },
    })  # fmt: skip
    wait_for("prefill raised with decode to keep prefill/decode >= 1", lambda: world.role_replicas("pd"),
             until=lambda r: r == {"prefill": 3, "decode": 3}, timeout=SCALE_UP_SECONDS)  # fmt: skip
    status = wait_for("the policy's disaggregatedStatus", lambda: world.policy_status("pd"),
                      until=lambda s: "disaggregatedStatus" in s, timeout=SCALE_UP_SECONDS)  # fmt: skip
    d = status["disaggregatedStatus"]
    assert d["ratioAdjusted"] is True, d
    assert d["ratioStatus"] == {"numeratorRole": "prefill", "denominatorRole": "decode", "currentRatio": "1"}, d
    desired = {r["name"]: r["desiredReplicas"] for r in d["roles"]}
    assert desired == {"prefill": 1, "decode": 3}, f"desiredReplicas is before ratio enforcement: {d}"
