"""kthena_ref.autoscaler.metrics: the pure parts table-driven, the fetchers against a real HTTP server.

The pure parts: the value of a family in Prometheus text output (:func:`value_from_exposition`),
of a Prometheus ``/api/v1/query`` answer (:func:`value_from_query`), and LabelSelector matching.
Every row gives the input and either the exact Decimal or words the MetricError must contain.

The fetchers run against an aiohttp web server started in the test on loopback addresses with one
ephemeral port: each address ``127.0.0.N`` is a "Pod" (the handler answers by the address it was
reached on), and ``127.0.0.9`` has nothing listening (a closed port). Nothing of the fetch code is
replaced.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from hypothesis import given, settings
from hypothesis import strategies as st

from kthena_ref.api.autoscaling import LabelSelector, PodMetricSource, PrometheusMetricSource
from kthena_ref.autoscaler import metrics
from kthena_ref.autoscaler.metrics import (
    MetricError,
    metric_name,
    pod_selector_matches,
    query_prometheus,
    query_url,
    scrape_pods,
    scrape_url,
    value_from_exposition,
    value_from_query,
)

D = Decimal
URL_ = "http://10.1.2.3:8000/metrics"

VLLM = """\
# HELP vllm:num_requests_waiting Number of requests waiting to be processed.
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{engine="0",model_name="qwen"} 2.0
vllm:num_requests_waiting{engine="1",model_name="qwen"} 5.0
# HELP vllm:num_requests_running Number of requests running.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="qwen"} 7.0
# HELP vllm:kv_cache_usage_perc KV-cache usage.
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{engine="0",model_name="qwen"} 0.1
vllm:kv_cache_usage_perc{engine="1",model_name="qwen"} 0.2
"""
COUNTER = """\
# HELP http_requests_total Requests.
# TYPE http_requests_total counter
http_requests_total{code="200"} 1027
http_requests_total{code="500"} 3
"""
OLD_COUNTER = "# TYPE foo counter\nfoo 3\n"
HISTOGRAM = """\
# TYPE latency_seconds histogram
latency_seconds_bucket{le="0.1"} 4
latency_seconds_bucket{le="+Inf"} 6
latency_seconds_sum 1.5
latency_seconds_count 6
"""
SUMMARY = """\
# TYPE rpc_seconds summary
rpc_seconds{quantile="0.5"} 0.2
rpc_seconds{quantile="0.9"} 0.7
rpc_seconds_sum 12
rpc_seconds_count 40
"""


@dataclass(frozen=True)
class Expo:
    text: str
    family: str
    value: Decimal | None = None
    error: tuple[str, ...] = ()  # words the MetricError must contain (the URL is always checked)


EXPOSITION = {
    # gauges, names with colons, several series summed (the Pod's total)
    "gauge-two-series-summed": Expo(VLLM, "vllm:num_requests_waiting", D(7)),
    "gauge-one-series": Expo(VLLM, "vllm:num_requests_running", D(7)),
    "float-sum-is-exact-decimal": Expo(VLLM, "vllm:kv_cache_usage_perc", D("0.3")),
    "untyped-series-summed": Expo('q{a="1"} 1\nq{a="2"} 2\nq{a="3"} 4\n', "q", D(7)),
    "untyped-no-labels": Expo("queue_depth 12\n", "queue_depth", D(12)),
    "timestamp-ignored": Expo("queue_depth 12 1700000000000\n", "queue_depth", D(12)),
    "scientific-notation": Expo("x 1.5e3\n", "x", D(1500)),
    "negative": Expo("x -2.5\n", "x", D("-2.5")),
    "large-integer-exact": Expo("x 12345678901234567890\n", "x", D(12345678901234567890)),
    "zero": Expo("x 0\n", "x", D(0)),
    "utf8-quoted-name": Expo('{"my.metric",a="b"} 4\n', "my.metric", D(4)),
    "other-families-ignored": Expo(VLLM + COUNTER + "x 100\n", "vllm:num_requests_running", D(7)),
    "prefix-of-another-name-is-not-it": Expo("vllm:num_requests_waiting_total 9\nvllm:num_requests 1\n", "vllm:num_requests", D(1)),
    "label-value-is-not-a-name": Expo('other{name="x"} 9\nx 1\n', "x", D(1)),
    # counters: the sample name or the family name the parser gives (raw cumulative values)
    "counter-by-sample-name": Expo(COUNTER, "http_requests_total", D(1030)),
    "counter-by-family-name": Expo(COUNTER, "http_requests", D(1030)),
    "counter-without-total-by-its-name": Expo(OLD_COUNTER, "foo", D(3)),
    "counter-without-total-by-sample-name": Expo(OLD_COUNTER, "foo_total", D(3)),
    "gauge-and-counter-sharing-a-stem": Expo("# TYPE foo gauge\nfoo 5\n# TYPE foo_total counter\nfoo_total 100\n", "foo", D(5)),
    "counter-sharing-a-stem-with-a-gauge": Expo("# TYPE foo gauge\nfoo 5\n# TYPE foo_total counter\nfoo_total 100\n", "foo_total", D(100)),
    # histograms and summaries: their _sum and _count series, nothing else
    "histogram-sum": Expo(HISTOGRAM, "latency_seconds_sum", D("1.5")),
    "histogram-count": Expo(HISTOGRAM, "latency_seconds_count", D(6)),
    "histogram-family-is-an-error": Expo(HISTOGRAM, "latency_seconds", error=("histogram", "no single value", "latency_seconds_sum")),
    "histogram-buckets-are-an-error": Expo(HISTOGRAM, "latency_seconds_bucket", error=("buckets", "histogram latency_seconds")),
    "summary-count": Expo(SUMMARY, "rpc_seconds_count", D(40)),
    "summary-quantiles-are-an-error": Expo(SUMMARY, "rpc_seconds", error=("quantiles", "summary rpc_seconds")),
    # not finite
    "nan-is-an-error": Expo("x NaN\n", "x", error=("x is nan", "finite")),
    "inf-is-an-error": Expo('x{a="1"} 1\nx{a="2"} +Inf\n', "x", error=('x{a="2"} is inf', "finite")),
    "minus-inf-is-an-error": Expo("x -Inf\n", "x", error=("-inf", "finite")),
    # absent
    "absent-family": Expo(VLLM, "vllm:gpu_cache_usage_perc", error=("vllm:gpu_cache_usage_perc", "not in the output")),
    "empty-output": Expo("", "x", error=("x", "not in the output")),
    "comments-only": Expo("# just a comment\n\n", "x", error=("not in the output",)),
    "declared-without-samples": Expo("# HELP x help\n# TYPE x gauge\n", "x", error=("x", "no samples")),
    "case-matters": Expo("X 1\n", "x", error=("not in the output",)),
    # does not parse
    "garbage-line": Expo("this is not prometheus\n", "x", error=("cannot parse",)),
    "bad-value": Expo("x abc\n", "x", error=("cannot parse", "abc")),
    "unquoted-label": Expo("x{a=b} 1\n", "x", error=("cannot parse", "labels")),
    "unclosed-labels": Expo('x{a="1" 1\n', "x", error=("cannot parse",)),
    "type-without-type": Expo("# TYPE x\nx 1\n", "x", error=("cannot parse", "not in the Prometheus text format")),
    "html-page": Expo("<html><body>Not Found</body></html>\n", "x", error=("cannot parse",)),
    "bad-line-after-good-ones": Expo("x 1\ny oops\n", "x", error=("cannot parse",)),
}  # fmt: skip


@pytest.mark.parametrize("case", EXPOSITION.values(), ids=EXPOSITION.keys())
def test_value_from_exposition(case: Expo) -> None:
    if case.value is not None:
        got = value_from_exposition(case.text, case.family, source=URL_)
        assert got == case.value  # exact: 0.1 + 0.2 is 0.3, no float residue
        return
    with pytest.raises(MetricError) as info:
        value_from_exposition(case.text, case.family, source=URL_)
    assert info.value.source == URL_
    assert str(info.value).startswith(URL_ + ": ")
    for word in case.error:
        assert word in info.value.reason, (word, info.value.reason)


def test_float_values_keep_their_shortest_decimal() -> None:
    assert str(value_from_exposition("x 0.1\n", "x")) == "0.1"


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.sampled_from(list('abx_:{}=",# \n\t\\01.e+-NaInf')), max_size=60))
def test_any_output_is_a_value_or_a_metric_error(text: str) -> None:
    try:
        value = value_from_exposition(text, "x", source=URL_)
    except MetricError as exc:
        assert exc.source == URL_ and exc.reason
    else:
        assert value.is_finite()


def vector(*values: str) -> dict[str, Any]:
    result = [{"metric": {"pod": f"p{i}"}, "value": [1700000000.5, v]} for i, v in enumerate(values)]
    return {"status": "success", "data": {"resultType": "vector", "result": result}}


def scalar(value: Any) -> dict[str, Any]:
    return {"status": "success", "data": {"resultType": "scalar", "result": [1700000000.5, value]}}


@dataclass(frozen=True)
class Query:
    body: Any
    value: Decimal | None = None
    error: tuple[str, ...] = ()


QUERY = {
    "scalar": Query(scalar("42"), D(42)),
    "scalar-fraction": Query(scalar("0.25"), D("0.25")),
    "scalar-exponent": Query(scalar("1e3"), D(1000)),
    "scalar-negative": Query(scalar("-0.5"), D("-0.5")),
    "vector-one-sample": Query(vector("17.5"), D("17.5")),
    "vector-one-sample-no-labels": Query({"status": "success", "data": {"resultType": "vector", "result": [{"metric": {}, "value": [1, "3"]}]}}, D(3)),
    "warnings-ignored": Query({**vector("2"), "warnings": ["something"]}, D(2)),
    "vector-empty": Query(vector(), error=("query returned 0 samples; it must return one",)),
    "vector-three": Query(vector("1", "2", "3"), error=("query returned 3 samples; it must return one",)),
    "matrix": Query({"status": "success", "data": {"resultType": "matrix", "result": [{"metric": {}, "values": [[1, "1"]]}]}}, error=("returned a matrix", "single-sample vector")),
    "string": Query({"status": "success", "data": {"resultType": "string", "result": [1, "hello"]}}, error=("returned a string",)),
    "unknown-result-type": Query({"status": "success", "data": {"resultType": "table", "result": []}}, error=("unknown resultType 'table'",)),
    "status-error": Query({"status": "error", "errorType": "bad_data", "error": "1:5: parse error: unexpected"}, error=("bad_data", "1:5: parse error")),
    "status-missing": Query({"data": {"resultType": "scalar", "result": [1, "1"]}}, error=("status is None",)),
    "no-data": Query({"status": "success"}, error=("no data",)),
    "not-an-object": Query([1, 2], error=("not a JSON object",)),
    "nan-scalar": Query(scalar("NaN"), error=("NaN", "finite")),
    "inf-sample": Query(vector("+Inf"), error=("+Inf", "finite")),
    "minus-inf-sample": Query(vector("-Inf"), error=("-Inf", "finite")),
    "value-not-a-number": Query(scalar("abc"), error=("'abc' is not a number",)),
    "value-with-underscore": Query(scalar("1_000"), error=("is not a number",)),
    "value-not-a-string": Query(scalar(1.5), error=("not a [time, \"value\"] pair",)),
    "sample-without-value": Query({"status": "success", "data": {"resultType": "vector", "result": [{"metric": {}}]}}, error=("not a [time",)),
    "native-histogram": Query({"status": "success", "data": {"resultType": "vector", "result": [{"metric": {}, "histogram": [1, {"count": "2"}]}]}}, error=("native histogram",)),
    "vector-result-not-a-list": Query({"status": "success", "data": {"resultType": "vector", "result": {}}}, error=("not a list",)),
}  # fmt: skip


@pytest.mark.parametrize("case", QUERY.values(), ids=QUERY.keys())
def test_value_from_query(case: Query) -> None:
    source = "http://prom:9090/api/v1/query?query=x"
    if case.value is not None:
        assert value_from_query(case.body, source=source) == case.value
        return
    with pytest.raises(MetricError) as info:
        value_from_query(case.body, source=source)
    assert info.value.source == source
    for word in case.error:
        assert word in info.value.reason, (word, info.value.reason)


def sel(labels: dict[str, str] | None = None, *exprs: tuple[str, str, list[str] | None]) -> LabelSelector:
    return LabelSelector.model_validate(
        {
            "matchLabels": labels,
            "matchExpressions": [{"key": k, "operator": op, "values": v} for k, op, v in exprs] or None,
        }
    )


POD = {"role": "decode", "tier": "gpu", "modelserving.volcano.sh/entry": "true"}
SELECTOR: dict[str, tuple[LabelSelector | None, bool]] = {
    "none-matches-all": (None, True),
    "empty-matches-all": (sel(), True),
    "match-labels": (sel({"role": "decode"}), True),
    "match-labels-all-must-match": (sel({"role": "decode", "tier": "cpu"}), False),
    "match-labels-missing-key": (sel({"zone": "a"}), False),
    "in": (sel(None, ("role", "In", ["prefill", "decode"])), True),
    "in-other-values": (sel(None, ("role", "In", ["prefill"])), False),
    "in-missing-key": (sel(None, ("zone", "In", ["a"])), False),
    "notin": (sel(None, ("role", "NotIn", ["prefill"])), True),
    "notin-listed": (sel(None, ("role", "NotIn", ["decode"])), False),
    "notin-missing-key-matches": (sel(None, ("zone", "NotIn", ["a"])), True),
    "exists": (sel(None, ("tier", "Exists", None)), True),
    "exists-missing": (sel(None, ("zone", "Exists", None)), False),
    "exists-empty-values-list": (sel(None, ("tier", "Exists", [])), True),
    "doesnotexist": (sel(None, ("zone", "DoesNotExist", None)), True),
    "doesnotexist-present": (sel(None, ("tier", "DoesNotExist", None)), False),
    "labels-and-expressions-both-needed": (sel({"role": "decode"}, ("tier", "In", ["cpu"])), False),
    "several-expressions": (sel(None, ("role", "In", ["decode"]), ("tier", "Exists", None), ("zone", "DoesNotExist", None)), True),
}  # fmt: skip


@pytest.mark.parametrize(("selector", "matches"), SELECTOR.values(), ids=SELECTOR.keys())
def test_pod_selector_matches(selector: LabelSelector | None, matches: bool) -> None:
    assert pod_selector_matches(POD, selector) is matches


INVALID_SELECTOR = {
    "unknown-operator": (sel(None, ("role", "Equals", ["decode"])), "In, NotIn, Exists or DoesNotExist"),
    "in-without-values": (sel(None, ("role", "In", None)), "values must be given"),
    "notin-empty-values": (sel(None, ("role", "NotIn", [])), "values must be given"),
    "exists-with-values": (sel(None, ("role", "Exists", ["decode"])), "values must be empty"),
}


@pytest.mark.parametrize(("selector", "reason"), INVALID_SELECTOR.values(), ids=INVALID_SELECTOR.keys())
def test_invalid_selector_is_a_metric_error(selector: LabelSelector, reason: str) -> None:
    with pytest.raises(MetricError, match=reason) as info:
        pod_selector_matches(POD, selector)
    assert info.value.source.startswith("labelSelector role ")


def test_names_and_urls() -> None:
    assert metric_name(PodMetricSource(), "rps") == "rps"
    assert metric_name(PodMetricSource(name=""), "rps") == "rps"
    assert metric_name(PodMetricSource(name="vllm:num_requests_waiting"), "rps") == "vllm:num_requests_waiting"
    assert scrape_url("10.1.2.3", PodMetricSource()) == "http://10.1.2.3:8100/metrics"
    assert scrape_url("10.1.2.3", PodMetricSource(port=8000, uri="/stats/prom")) == "http://10.1.2.3:8000/stats/prom"
    assert scrape_url("fd00::1", PodMetricSource()) == "http://[fd00::1]:8100/metrics"
    q = "sum(rate(x[2m]))"
    for server, path in [
        ("http://prom:9090", "/api/v1/query"),
        ("http://prom:9090/", "/api/v1/query"),
        ("https://gw.example/prometheus/", "/prometheus/api/v1/query"),
        ("http://prom:9090/a/b", "/a/b/api/v1/query"),
    ]:
        url = query_url(PrometheusMetricSource(serverURL=server, query=q))
        assert (url.path, url.query["query"]) == (path, q), server
    for bad in ["ftp://prom:21", "prom:9090", "/api"]:
        with pytest.raises(MetricError, match="http:// or https://"):
            query_url(PrometheusMetricSource(serverURL=bad, query=q))


# ---------------------------------------------------------------------------------------------------
# The fetchers against a real server.

SLOW = 0.5  # the timeout of the slow cases (seconds); the others have 5 s
PODS_TEXT = {
    "127.0.0.1": VLLM,  # waiting 7
    "127.0.0.2": 'vllm:num_requests_waiting{model_name="qwen"} 3\n',
}
QUERIES: dict[str, tuple[int, str]] = {
    "one": (200, json.dumps(vector("12.5"))),
    "scalar": (200, json.dumps(scalar("4"))),
    "three": (200, json.dumps(vector("1", "2", "3"))),
    "bad": (400, json.dumps({"status": "error", "errorType": "bad_data", "error": 'parse error: unexpected "}"'})),
    "boom": (500, "internal error"),
    "html": (200, "<html>proxy login</html>"),
}


@dataclass
class Server:
    port: int
    release: asyncio.Event
    seen: list[tuple[str, str, str]] = field(default_factory=list)  # (path, raw query string, query)


SERVER = web.AppKey("server", Server)


async def _pod_metrics(request: web.Request) -> web.StreamResponse:
    server: Server = request.app[SERVER]
    ip = request.transport.get_extra_info("sockname")[0] if request.transport else ""
    server.seen.append((request.path, request.query_string, ip))
    if ip == "127.0.0.3":
        return web.Response(status=500, text="engine crashed")
    if ip == "127.0.0.4":
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(server.release.wait(), 10)
        return web.Response(text="vllm:num_requests_waiting 1\n")
    if ip == "127.0.0.5":
        return web.Response(text="<html>not metrics</html>\n")
    if ip == "127.0.0.6":
        return web.Response(body=b"x \xff\xfe\n", content_type="text/plain")
    return web.Response(text=PODS_TEXT[ip], content_type="text/plain")


async def _big(request: web.Request) -> web.StreamResponse:
    return web.Response(text="x 1\n" * 1000)


async def _query(request: web.Request) -> web.StreamResponse:
    server: Server = request.app[SERVER]
    query = request.query.get("query", "")
    server.seen.append((request.path, request.query_string, query))
    if query == "slow":
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(server.release.wait(), 10)
        return web.json_response(scalar("1"))
    if query.startswith("echo "):
        return web.json_response(scalar("9"))
    status, body = QUERIES[query]
    return web.Response(status=status, text=body, content_type="application/json" if status != 500 else "text/plain")


@contextlib.asynccontextmanager
async def serving() -> AsyncIterator[Server]:
    first = socket.socket()
    first.bind(("127.0.0.1", 0))
    port = first.getsockname()[1]
    socks = [first]
    for last in range(2, 7):
        sock = socket.socket()
        try:
            sock.bind((f"127.0.0.{last}", port))
        except OSError as exc:
            for s in [*socks, sock]:
                s.close()
            pytest.skip(f"cannot bind loopback address 127.0.0.{last}: {exc}")
        socks.append(sock)
    server = Server(port, asyncio.Event())
    app = web.Application()
    app[SERVER] = server
    app.router.add_get("/metrics", _pod_metrics)
    app.router.add_get("/big", _big)
    app.router.add_get("/api/v1/query", _query)
    app.router.add_get("/prom/api/v1/query", _query)
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.5)
    await runner.setup()
    for sock in socks:
        await web.SockSite(runner, sock).start()
    try:
        yield server
    finally:
        server.release.set()
        await runner.cleanup()
        for sock in socks:
            sock.close()


def run(test: Callable[[aiohttp.ClientSession, Server], Awaitable[None]]) -> None:
    async def main() -> None:
        async with serving() as server, aiohttp.ClientSession() as session:
            await asyncio.wait_for(test(session, server), 20)

    asyncio.run(main())


def pod_source(port: int, **fields: Any) -> PodMetricSource:
    return PodMetricSource(port=port, **fields)


def test_scrape_sums_over_the_pods_and_defaults_the_name_to_the_key() -> None:
    async def test(session: aiohttp.ClientSession, server: Server) -> None:
        pods = [("pod-b", "127.0.0.2"), ("pod-a", "127.0.0.1")]
        source = pod_source(server.port)
        assert await scrape_pods(session, pods, source, "vllm:num_requests_waiting", 5) == D(10)
        named = pod_source(server.port, name="vllm:kv_cache_usage_perc")
        assert await scrape_pods(session, pods[1:], named, "gpu_cache_usage", 5) == D("0.3")
        assert {(path, ip) for path, _, ip in server.seen} == {("/metrics", "127.0.0.1"), ("/metrics", "127.0.0.2")}

    run(test)


def scrape_error(pods: list[tuple[str, str]], *, timeout: float = 5, **fields: Any) -> MetricError:
    errors: list[MetricError] = []

    async def test(session: aiohttp.ClientSession, server: Server) -> None:
        with pytest.raises(MetricError) as info:
            await scrape_pods(session, pods, pod_source(server.port, **fields), "vllm:num_requests_waiting", timeout)
        errors.append(info.value)

    run(test)
    return errors[0]


def test_a_pod_answering_500_makes_the_metric_missing() -> None:
    error = scrape_error([("pod-a", "127.0.0.1"), ("pod-c", "127.0.0.3")])
    assert error.source.startswith("Pod pod-c (http://127.0.0.3:") and error.source.endswith("/metrics)")
    assert error.reason == "HTTP 500 Internal Server Error"


def test_a_pod_that_does_not_answer_in_time_makes_the_metric_missing() -> None:
    start = time.monotonic()
    error = scrape_error([("pod-slow", "127.0.0.4"), ("pod-ok", "127.0.0.1")], timeout=SLOW)
    assert time.monotonic() - start < 5  # the server's shutdown included
    assert error.source.startswith("Pod pod-slow (http://127.0.0.4:")  # first by name
    assert error.reason.startswith(f"no answer within {SLOW:g} s")


def test_a_closed_port_makes_the_metric_missing() -> None:
    error = scrape_error([("pod-a", "127.0.0.1"), ("pod-z", "127.0.0.9")])
    assert error.source.startswith("Pod pod-z (http://127.0.0.9:")
    assert error.reason.startswith("cannot connect")


def test_output_that_does_not_parse_names_the_url() -> None:
    error = scrape_error([("pod-e", "127.0.0.5")])
    assert error.source.startswith("Pod pod-e (http://127.0.0.5:")
    assert "cannot parse the Prometheus text output" in error.reason


def test_output_that_is_not_utf8() -> None:
    assert scrape_error([("pod-f", "127.0.0.6")]).reason == "the answer is not UTF-8 text"


def test_an_absent_family_names_the_pod_and_the_family() -> None:
    error = scrape_error([("pod-a", "127.0.0.1")], name="vllm:gpu_cache_usage_perc")
    assert error.source.startswith("Pod pod-a (http://127.0.0.1:")
    assert error.reason == "metric vllm:gpu_cache_usage_perc is not in the output"


def test_several_failures_report_the_first_and_count_the_others() -> None:
    error = scrape_error([("pod-z", "127.0.0.9"), ("pod-c", "127.0.0.3"), ("pod-a", "127.0.0.1")])
    assert error.source.startswith("Pod pod-c ")  # by Pod name
    assert error.reason == "HTTP 500 Internal Server Error (and 1 more of 3 Pods failed)"


def test_no_pods_or_a_pod_without_ip() -> None:
    assert str(scrape_error([])) == "metric vllm:num_requests_waiting: no Pods to scrape"
    assert str(scrape_error([("pod-a", "127.0.0.1"), ("pod-new", "")])) == "Pod pod-new: has no IP"


def test_a_body_larger_than_the_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(metrics, "MAX_BODY_BYTES", 1024)
    error = scrape_error([("pod-a", "127.0.0.1")], uri="/big")
    assert error.reason == "the answer is larger than 1024 bytes"


def prom(server: Server, query: str, prefix: str = "") -> PrometheusMetricSource:
    return PrometheusMetricSource(serverURL=f"http://127.0.0.1:{server.port}{prefix}", query=query, auth={"x": 1})


def test_query_single_sample_and_scalar_with_and_without_a_path_prefix() -> None:
    async def test(session: aiohttp.ClientSession, server: Server) -> None:
        assert await query_prometheus(session, prom(server, "one", "/prom/"), 5) == D("12.5")
        assert await query_prometheus(session, prom(server, "scalar", "/prom"), 5) == D(4)
        assert await query_prometheus(session, prom(server, "scalar"), 5) == D(4)
        assert [path for path, _, _ in server.seen] == ["/prom/api/v1/query", "/prom/api/v1/query", "/api/v1/query"]

    run(test)


def test_the_query_reaches_prometheus_unchanged() -> None:
    promql = 'echo sum(rate(http_requests_total{code=~"5..",job="a b"}[2m])) + 1 / 2 & x=%'

    async def test(session: aiohttp.ClientSession, server: Server) -> None:
        assert await query_prometheus(session, prom(server, promql), 5) == D(9)
        _, raw, query = server.seen[-1]
        assert query == promql
        assert "%2B" in raw and "%26" in raw  # a plus is not a space, an ampersand not a new parameter

    run(test)


def query_error(query: str, *, timeout: float = 5, server_url: str | None = None) -> tuple[str, MetricError]:
    out: list[tuple[str, MetricError]] = []

    async def test(session: aiohttp.ClientSession, server: Server) -> None:
        source = prom(server, query)
        if server_url is not None:
            source = PrometheusMetricSource(serverURL=server_url.format(port=server.port), query=query)
        with pytest.raises(MetricError) as info:
            await query_prometheus(session, source, timeout)
        out.append((str(query_url(source)), info.value))

    run(test)
    return out[0]


@pytest.mark.parametrize(
    ("query", "reason"),
    [
        ("three", "query returned 3 samples; it must return one"),
        ("bad", 'HTTP 400: Prometheus returned an error (bad_data): parse error: unexpected "}"'),
        ("boom", "HTTP 500"),
        ("html", "the answer is not JSON"),
        ("slow", f"no answer within {SLOW:g} s"),
    ],
)
def test_query_errors_name_the_url_and_the_reason(query: str, reason: str) -> None:
    url, error = query_error(query, timeout=SLOW if query == "slow" else 5)
    assert error.source == url
    assert error.reason == reason


def test_query_to_a_closed_port() -> None:
    url, error = query_error("one", server_url="http://127.0.0.9:{port}/")
    assert error.source == url and url.startswith("http://127.0.0.9:")
    assert error.reason.startswith("cannot connect")
