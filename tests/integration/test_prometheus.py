"""The real Prometheus server of the binary cache, run by the harness: it scrapes the harness's
settable metrics endpoint, its instant-query API follows the values a test sets, and stopping it
leaves no process and no directory behind (issue 15, "Real metrics").

The binary is built when missing (``kthena-conformance binaries build --prometheus``; ``make test``
builds it before the tests: a first build took 88 s on two cores with empty Go caches). Every
observation is polled with a deadline, never slept for: with a 1 s scrape interval a new value
shows within about two seconds.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from conformance.cluster.errors import HarnessError
from conformance.cluster.local.processes import pid_alive
from conformance.cluster.local.prometheus import (
    DIR_PREFIX,
    MetricsEndpoint,
    Prometheus,
    ScrapeTarget,
    prometheus_binary,
)
from conformance.framework.waits import wait_for

# serial: a build (when the binary is missing) takes both cores for a minute or two; with the
# binary built the module takes a few seconds. slow: no `make test-fast`.
pytestmark = [pytest.mark.serial, pytest.mark.slow]

SEEN = 15.0  # from setting a value to seeing it in a query: ~1-2 s (1 s scrapes); generous for a loaded CI machine


@pytest.fixture(scope="module")
def binary() -> Path:
    return prometheus_binary(progress=lambda message: print(message, file=sys.stderr, flush=True))


def test_queries_follow_the_value_the_test_sets(binary: Path, tmp_path: Path) -> None:
    log = tmp_path / "prometheus.log"
    with MetricsEndpoint() as endpoint, Prometheus(binary, [endpoint.address], log_path=log) as prometheus:
        directory, pid = prometheus.directory, prometheus.pid
        assert directory is not None and directory.name.startswith(DIR_PREFIX) and (directory / "data").is_dir()
        assert pid is not None and pid_alive(pid)
        assert prometheus.ready_seconds is not None and prometheus.ready_seconds < 30
        print(f"Prometheus ready {prometheus.ready_seconds:.2f}s after start at {prometheus.url}")

        endpoint.set("load", 42)
        wait_for(
            "load = 42 in Prometheus", lambda: prometheus.query_value("load"), until=lambda v: v == 42, timeout=SEEN
        )
        endpoint.set("load", 7.5)
        wait_for("load = 7.5", lambda: prometheus.query_value("load"), until=lambda v: v == 7.5, timeout=SEEN)
        (sample,) = prometheus.query("load")
        assert sample["metric"] == {"__name__": "load", "instance": endpoint.address, "job": "kthena"}
        # PromQL works on what was scraped: the up series, arithmetic, aggregation.
        assert prometheus.query_value(f'up{{instance="{endpoint.address}"}}') == 1
        assert prometheus.query_value("sum(load) * 2") == 15

        # A series no longer served goes stale: the instant query no longer returns it.
        endpoint.remove("load")
        wait_for("load gone", lambda: prometheus.query("load"), until=lambda r: r == [], timeout=SEEN)
    assert not pid_alive(pid)
    assert not directory.exists()
    assert "Server is ready to receive web requests" in log.read_text()


def test_targets_change_while_it_runs(binary: Path) -> None:
    with (
        MetricsEndpoint() as first,
        MetricsEndpoint() as second,
        Prometheus(binary, [first.address]) as prometheus,
    ):
        first.set("queue_depth", 1)
        second.set("queue_depth", 2)
        wait_for(
            "the first target", lambda: prometheus.query_value("queue_depth"), until=lambda v: v == 1, timeout=SEEN
        )
        prometheus.set_targets([ScrapeTarget(second.address, {"pod": "web-1"})])
        wait_for(
            "only the second target, labelled",
            lambda: prometheus.query("queue_depth"),
            until=lambda r: [s["metric"].get("pod") for s in r] == ["web-1"],
            timeout=SEEN,
        )
        assert prometheus.query_value('queue_depth{pod="web-1"}') == 2
        assert [t["labels"]["instance"] for t in prometheus.active_targets()] == [second.address]
        directory = prometheus.directory
    assert directory is not None and not directory.exists()


def test_a_configuration_prometheus_rejects_fails_the_start_and_leaves_nothing(binary: Path, tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    prometheus = Prometheus(binary, ["127.0.0.1:9"], parent_dir=runs, job="")  # "job_name is empty"
    try:
        with pytest.raises(HarnessError, match="Prometheus exited with code 2 during start") as info:
            prometheus.start()
    finally:
        prometheus.stop()
    assert "job_name is empty" in info.value.message  # its log's tail names the cause
    assert prometheus.process is None
    assert not list(runs.iterdir())
