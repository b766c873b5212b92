"""PodMetricSource: the autoscaler scrapes the target's Pods for their metrics.

The spec: "For each matching Pod, metrics are scraped from the constructed access link and
extracted from Prometheus's text output for the metric family identified by Name"; the link is
``http://<podIP>:<port><uri>`` (uri default ``/metrics``, port default 8100), and name "Defaults to
the policy metric key when omitted".

A Pod that serves metrics is a running container, so the ModelServing's Pods run on the cluster's
real nodes (:mod:`conformance.framework.realnodes`; without them the test is inconclusive, never a
pass). Each Pod serves a fixed exposition with busybox ``httpd`` from the real nodes' workload image:
the family the source names at 20 (twice the target of 10), and a decoy family at 0 listed first.

Whether a unit's value is the sum or the average of its Pods' values is not stated (reading A1):
one Pod at 20 asks for 2 replicas either way, and two Pods ask for 4 (sum, bounded to maxReplicas
3) or 2 (average), so the assertion is "raised from 1 to 2 or 3, never above maxReplicas 3". A source
read at the wrong port, uri or family reads nothing (or the decoy's 0), and the ModelServing stays at
1 replica.
"""

from __future__ import annotations

import shlex
from typing import Any

import pytest

from conformance.framework.catalog import behaviour
from conformance.framework.features import Feature
from conformance.framework.modelserving import ModelServings
from conformance.framework.realnodes import SLEEP, observed_on_real_nodes, place_modelserving, require

from . import API, Policies, homogeneous, replicas_of, settled_homogeneous, target

ROOT = "/var/www/conformance"  # httpd's document root inside the container
TWICE_THE_TARGET = 20  # the load each Pod reports: twice the policies' targetValue of 10

# case -> (the pod metric source, the port httpd listens on, the path it serves, the exposition there)
CASES: dict[str, tuple[dict[str, Any], int, str, list[str]]] = {
    # name, uri and port omitted: family "load" (the metric key) at :8100/metrics
    "defaults": (
        {},
        8100,
        "/metrics",
        ["# TYPE other gauge", "other 0", "# TYPE load gauge", f"load {TWICE_THE_TARGET}"],
    ),
    # all three given: family engine_queue at :8101/stats; a "load" family at 0 beside it (the key is not the name)
    "explicit": (
        {"name": "engine_queue", "uri": "/stats", "port": 8101},
        8101,
        "/stats",
        ["# TYPE load gauge", "load 0", "# TYPE engine_queue gauge", f"engine_queue {TWICE_THE_TARGET}"],
    ),
}


def serving(port: int, path: str, lines: list[str]) -> list[str]:
    """The container command: write the exposition at ``path`` under :data:`ROOT`, start httpd on ``port`` in the
    background, then sleep until SIGTERM (the shell, PID 1, stops at once)."""
    file = f"{ROOT}{path}"
    script = (
        f"mkdir -p {shlex.quote(file.rsplit('/', 1)[0])} && printf '%s\\n' {' '.join(map(shlex.quote, lines))} "
        f"> {shlex.quote(file)} && httpd -p {port} -h {ROOT} && {SLEEP}"
    )
    return ["sh", "-c", script]


@behaviour(
    "autoscaling/pod-metric/scrape",
    "A pod metric source MUST be read from http://<podIP>:<port><uri> of the target's Pods (uri /metrics and port "
    "8100 when omitted) as the family its name identifies (the policy metric key when omitted): Pods reporting "
    "twice the targetValue there MUST raise spec.replicas from 1, within maxReplicas.",
    f"{API}#PodMetricSource",
    Feature.POD_METRIC_SOURCE,
)
@pytest.mark.parametrize("case", CASES, ids=CASES.keys())
def test_pods_are_scraped_for_the_named_family(ms: ModelServings, suite: Any, request: Any, case: str) -> None:
    real = require(suite, "a Pod serving its metrics")
    source, port, path, lines = CASES[case]
    name = f"pod-{case}"
    body = target(name, replicas=1)
    place_modelserving(body, real)
    for role in body["spec"]["template"]["roles"]:
        role["entryTemplate"]["spec"]["containers"][0]["command"] = serving(port, path, lines)
    ms.create(body)
    pods = ms.wait_pods(name, 1)
    observed_on_real_nodes(request, [p.spec.node_name for p in pods])
    Policies(ms).create(homogeneous(name, name, {"pod": source}, 1, 3))
    ms.wait("autoscale", f"spec.replicas raised from 1: the Pod reports {TWICE_THE_TARGET} at :{port}{path}",
            replicas_of(ms, name), until=lambda n: n >= 2)  # fmt: skip
    ms.holds("spec.replicas stays within 2..3 (maxReplicas 3)", replicas_of(ms, name), lambda n: 2 <= n <= 3,
             wait="autoscale-steady", settled=settled_homogeneous(ms, name, name))  # fmt: skip
