"""The autoscaler's metric fetching: a Pod scrape or a Prometheus instant query, to one Decimal.

Why it exists: the decision (:mod:`.decision`) needs one value per metric per unit per loop, and
the spec says where it comes from but not what to do with what comes back. A PodMetricSource:
"For each matching Pod, metrics are scraped from the constructed access link and extracted from
Prometheus's text output for the metric family identified by Name" (``http://<podIP>:<port><uri>``,
``uri`` default ``/metrics``, ``port`` default 8100, ``name`` "Defaults to the policy metric key
when omitted"). A PrometheusMetricSource: "The Query is executed as an instant query and must
return a single scalar or a single-sample vector". ``auth``: "The runtime does not honor any of
these fields yet": it is ignored. The pure parts (:func:`value_from_exposition`,
:func:`value_from_query`, :func:`pod_selector_matches`) are table-tested; the fetchers
(:func:`scrape_pods`, :func:`query_prometheus`) only move bytes and turn every failure into a
:class:`MetricError`, which the loop treats as the metric missing this loop (A10). No retries here:
the loop tries again next period.

Readings (docs/autoscaling-readings.md):

- The exposition is parsed with prometheus_client's text parser. ``name`` matches a sample name
  (``vllm:num_requests_waiting``, ``http_requests_total``, a histogram's ``foo_sum``) or, when no
  sample has that name, the name of a counter, gauge or untyped family (``foo`` for the counter
  whose samples are ``foo_total``).
- Several series of the family in one Pod's output (other label values) are summed: the Pod's
  total, as the unit's value is the total over its Pods (A1).
- A counter's value is its raw cumulative value, not a rate (as upstream); a rate needs a
  Prometheus query.
- A histogram's buckets and a summary's quantiles have no single value: naming them, or naming
  the family of a histogram or a summary, is an error; its ``_sum`` and ``_count`` series work.
- A NaN or infinite sample, a family absent from the output, output that does not parse, a non-2xx
  answer, no answer within the timeout, more than :data:`MAX_BODY_BYTES`: the metric is missing,
  with a :class:`MetricError` naming the URL and the reason.
- A pod source with no Pods to scrape, or with any of its Pods failing, is missing this loop: a
  total over the Pods that answered would be too low, and could scale down by accident.
- An empty ``name`` is the same as an omitted one (the policy metric key).
- ``serverURL`` must be http or https; a path prefix is kept (``http://gw/prom/`` queries
  ``http://gw/prom/api/v1/query``); the query is a GET with the PromQL URL-encoded.
- A Prometheus answer of a vector with 0 or several samples, a matrix, a string, a native
  histogram sample, ``status: error`` or a NaN/infinite value is an error saying which.
- An absent ``labelSelector`` (or an empty one) matches every Pod; an unknown operator, or
  ``values`` given to Exists/DoesNotExist or missing from In/NotIn, is an error (as Kubernetes'
  LabelSelectorAsSelector), so the metric is missing rather than read from the wrong Pods.
"""

from __future__ import annotations

import asyncio
import json
import math
from collections.abc import Mapping, Sequence
from decimal import Decimal, InvalidOperation
from typing import Any

import aiohttp
from prometheus_client.parser import text_string_to_metric_families
from yarl import URL

from .. import faults
from ..api.autoscaling import LabelSelector, PodMetricSource, PrometheusMetricSource

DEFAULT_TIMEOUT_SECONDS = 3.0  # upstream's scrape and query timeout
MAX_BODY_BYTES = 8 * 1024 * 1024  # a vLLM /metrics is a few hundred KiB
ACCEPT_TEXT = "text/plain;version=0.0.4;q=1,*/*;q=0.1"  # not OpenMetrics: the classic text format
QUERY_PATH = "/api/v1/query"

# Family types whose samples are one quantity (their sum is meaningful).
_SINGLE_VALUED = frozenset({"counter", "gauge", "untyped", "unknown"})
# Family types whose samples partition a distribution by a label.
_DISTRIBUTIONS = {"histogram": "le", "gaugehistogram": "le", "summary": "quantile"}


class MetricError(Exception):
    """A metric that has no value this loop: ``source`` (a URL, or what was read) and ``reason``."""

    def __init__(self, source: str, reason: str) -> None:
        super().__init__(f"{source}: {reason}")
        self.source = source
        self.reason = reason


def _decimal(value: float) -> Decimal:
    # The shortest decimal that reads back as the float (0.1, not 0.1000000000000000055...).
    return Decimal(value) if isinstance(value, int) else Decimal(repr(value))


def _series(name: str, labels: Mapping[str, str]) -> str:
    inner = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    return f"{name}{{{inner}}}" if inner else name


def value_from_exposition(text: str, family: str, *, source: str = "the scraped output") -> Decimal:
    """The value of ``family`` in Prometheus text output: the sum of its samples.

    ``source`` (the scrape URL) names where ``text`` came from in every error.
    """
    try:
        families = list(text_string_to_metric_families(text))
    except Exception as exc:  # a lax third-party parser on untrusted input: any failure is bad data
        detail = str(exc) or "a line is not in the Prometheus text format"
        raise MetricError(source, f"cannot parse the Prometheus text output: {detail}") from None
    by_sample = [(f, s) for f in families for s in f.samples if s.name == family]
    if by_sample:
        for fam, sample in by_sample:
            label = _DISTRIBUTIONS.get(fam.type)
            if label is not None and label in sample.labels:
                raise MetricError(
                    source,
                    f"{family} is the {'buckets' if label == 'le' else 'quantiles'} of {fam.type} {fam.name}, "
                    f"which have no single value; name {fam.name}_sum or {fam.name}_count",
                )
        samples = [s for _, s in by_sample]
    else:
        named = [f for f in families if f.name == family]
        if not named:
            raise MetricError(source, f"metric {family} is not in the output")
        for fam in named:
            if fam.type not in _SINGLE_VALUED:
                raise MetricError(
                    source,
                    f"metric {family} is a {fam.type}, which has no single value; "
                    f"name one of its series, e.g. {family}_sum or {family}_count",
                )
        samples = [s for f in named for s in f.samples]
        if not samples:
            raise MetricError(source, f"metric {family} has no samples in the output")
    total = Decimal(0)
    for sample in samples:
        if isinstance(sample.value, float) and not math.isfinite(sample.value):
            raise MetricError(
                source, f"sample {_series(sample.name, sample.labels)} is {sample.value}; it must be finite"
            )
        total += _decimal(sample.value)
    return total


def value_from_query(body: Any, *, source: str = "the Prometheus query") -> Decimal:
    """The value of a Prometheus ``/api/v1/query`` answer (parsed JSON): a scalar or one sample.

    ``source`` (the query URL) names where ``body`` came from in every error.
    """
    if not isinstance(body, Mapping):
        raise MetricError(source, "the answer is not a JSON object")
    status = body.get("status")
    if status == "error":
        kind, error = body.get("errorType") or "error", body.get("error") or "no detail"
        raise MetricError(source, f"Prometheus returned an error ({kind}): {error}")
    if status != "success":
        raise MetricError(source, f"the answer's status is {status!r}, not 'success'")
    data = body.get("data")
    if not isinstance(data, Mapping):
        raise MetricError(source, "the answer has no data object")
    kind, result = data.get("resultType"), data.get("result")
    if kind == "scalar":
        return _sample_value(result, "the scalar", source)
    if kind == "vector":
        if not isinstance(result, list):
            raise MetricError(source, "the vector's result is not a list")
        if len(result) != 1:
            raise MetricError(source, f"query returned {len(result)} samples; it must return one")
        sample = result[0]
        if not isinstance(sample, Mapping):
            raise MetricError(source, "the vector's sample is not an object")
        if "value" not in sample and "histogram" in sample:
            raise MetricError(source, "query returned a native histogram sample; it must return a number")
        return _sample_value(sample.get("value"), "the sample", source)
    if kind in ("matrix", "string"):
        raise MetricError(source, f"query returned a {kind}; it must return a scalar or a single-sample vector")
    raise MetricError(source, f"unknown resultType {kind!r}; it must be a scalar or a single-sample vector")


def _sample_value(pair: Any, what: str, source: str) -> Decimal:
    # The API's [<unix time>, "<value>"]: the value is a string ("1.5", "NaN", "+Inf").
    if not isinstance(pair, list) or len(pair) != 2 or not isinstance(pair[1], str):
        raise MetricError(source, f'{what} is not a [time, "value"] pair: {json.dumps(pair)[:200]}')
    text = pair[1]
    try:
        if "_" in text:  # Decimal reads "1_000"; Prometheus never writes it
            raise InvalidOperation
        value = Decimal(text)
    except InvalidOperation:
        raise MetricError(source, f"{what}'s value {text!r} is not a number") from None
    if not value.is_finite():
        raise MetricError(source, f"{what}'s value is {text}; it must be a finite number")
    return value


def pod_selector_matches(labels: Mapping[str, str], selector: LabelSelector | None) -> bool:
    """Whether a Pod's labels match a LabelSelector (all of matchLabels and matchExpressions).

    ``None`` or an empty selector matches every Pod. An invalid requirement raises MetricError.
    """
    if selector is None:
        return True
    for key, value in (selector.match_labels or {}).items():
        if labels.get(key) != value:
            return False
    for req in selector.match_expressions or []:
        values = req.values or []
        where = f"labelSelector {req.key} {req.operator}"
        if req.operator in ("In", "NotIn"):
            if not values:
                raise MetricError(where, "values must be given for In and NotIn")
            present = req.key in labels and labels[req.key] in values
            if present != (req.operator == "In"):
                return False
        elif req.operator in ("Exists", "DoesNotExist"):
            if values:
                raise MetricError(where, "values must be empty for Exists and DoesNotExist")
            if (req.key in labels) != (req.operator == "Exists"):
                return False
        else:
            raise MetricError(where, "the operator must be In, NotIn, Exists or DoesNotExist")
    return True


selector_matches = pod_selector_matches


def metric_name(source: PodMetricSource, key: str) -> str:
    """The family a pod source reads: its ``name``, or the policy metric key when omitted (or empty)."""
    if faults.active("autoscaler-pod-name-ignored"):
        return key  # the fault: the policy metric key, whatever name says
    if faults.active("autoscaler-pod-name-not-defaulted") and not source.name:
        return ""  # the fault: no family is named, so none is found (the metric is missing)
    return source.name or key


def scrape_url(pod_ip: str, source: PodMetricSource) -> str:
    """``http://<podIP>:<port><uri>`` (an IPv6 address in brackets)."""
    host = f"[{pod_ip}]" if ":" in pod_ip and not pod_ip.startswith("[") else pod_ip
    if faults.active("autoscaler-pod-fixed-endpoint"):
        return f"http://{host}:8100/metrics"  # the fault: the defaults, whatever uri and port say
    return f"http://{host}:{source.port}{source.uri}"


def query_url(source: PrometheusMetricSource) -> URL:
    """``<serverURL>/api/v1/query?query=<query>`` (a path prefix kept, a trailing slash not doubled)."""
    try:
        base = URL(source.server_url)
    except (ValueError, TypeError) as exc:
        raise MetricError(source.server_url, f"serverURL is not a URL: {exc}") from None
    if base.scheme not in ("http", "https") or not base.host:
        raise MetricError(source.server_url, "serverURL must be an http:// or https:// URL with a host")
    return base.with_path(base.path.rstrip("/") + QUERY_PATH).with_query(query=source.query)


def _transport_reason(exc: BaseException, timeout: float) -> str:
    if isinstance(exc, TimeoutError):  # asyncio.TimeoutError and aiohttp's ServerTimeoutError
        return f"no answer within {timeout:g} s"
    if isinstance(exc, aiohttp.ClientConnectorError):
        return f"cannot connect: {exc.os_error.strerror or exc.os_error}"
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


async def _get(
    session: aiohttp.ClientSession, url: str | URL, timeout: float, accept: str, *, any_status: bool = False
) -> tuple[int, bytes]:
    """GET ``url``: the status and at most MAX_BODY_BYTES of body, within ``timeout`` seconds in all."""
    where = str(url)
    try:
        async with asyncio.timeout(timeout):
            async with session.get(
                url, headers={"Accept": accept}, timeout=aiohttp.ClientTimeout(total=timeout)
            ) as resp:
                if resp.status // 100 != 2 and not any_status:
                    raise MetricError(where, f"HTTP {resp.status} {resp.reason or ''}".rstrip())
                body = bytearray()
                async for chunk in resp.content.iter_chunked(64 * 1024):
                    body += chunk
                    if len(body) > MAX_BODY_BYTES:
                        raise MetricError(where, f"the answer is larger than {MAX_BODY_BYTES} bytes")
                return resp.status, bytes(body)
    except MetricError:
        raise
    except (aiohttp.ClientError, TimeoutError, OSError, ValueError) as exc:
        raise MetricError(where, _transport_reason(exc, timeout)) from None


async def fetch_exposition(session: aiohttp.ClientSession, url: str, timeout: float = DEFAULT_TIMEOUT_SECONDS) -> str:
    """One scrape: the text a 2xx answer carries (MetricError otherwise)."""
    _, body = await _get(session, url, timeout, ACCEPT_TEXT)
    try:
        return body.decode("utf-8")
    except UnicodeDecodeError:
        raise MetricError(url, "the answer is not UTF-8 text") from None


async def _scrape_one(
    session: aiohttp.ClientSession, name: str, ip: str, source: PodMetricSource, family: str, timeout: float
) -> Decimal:
    if not ip:
        raise MetricError(f"Pod {name}", "has no IP")
    url = scrape_url(ip, source)
    try:
        text = await fetch_exposition(session, url, timeout)
        # Parsing is CPU work (about 0.3 s per MB): off the event loop, which the controller shares.
        return await asyncio.to_thread(value_from_exposition, text, family, source=url)
    except MetricError as exc:
        raise MetricError(f"Pod {name} ({exc.source})", exc.reason) from None


async def scrape_pods(
    session: aiohttp.ClientSession,
    pods: Sequence[tuple[str, str]],
    source: PodMetricSource,
    key: str,
    timeout: float = DEFAULT_TIMEOUT_SECONDS,
) -> Decimal:
    """A pod source's value: the sum over ``pods`` (``(name, podIP)``, chosen by the caller).

    Every Pod is scraped concurrently, each within ``timeout``. No Pods, or any Pod failing, is a
    MetricError (the first failure by Pod name; how many others failed is added).
    """
    family = metric_name(source, key)
    if not pods:
        raise MetricError(f"metric {family}", "no Pods to scrape")
    ordered = sorted(pods)
    results = await asyncio.gather(
        *(_scrape_one(session, name, ip, source, family, timeout) for name, ip in ordered), return_exceptions=True
    )
    failures = [r for r in results if isinstance(r, BaseException)]
    if failures:
        first = failures[0]
        if not isinstance(first, MetricError):
            raise first
        more = f" (and {len(failures) - 1} more of {len(ordered)} Pods failed)" if len(failures) > 1 else ""
        raise MetricError(first.source, first.reason + more)
    return sum((r for r in results if isinstance(r, Decimal)), Decimal(0))


async def query_prometheus(
    session: aiohttp.ClientSession, source: PrometheusMetricSource, timeout: float = DEFAULT_TIMEOUT_SECONDS
) -> Decimal:
    """A Prometheus source's value: one instant query (GET ``<serverURL>/api/v1/query``), ``auth`` ignored."""
    url = query_url(source)
    where = str(url)
    status, body = await _get(session, url, timeout, "application/json", any_status=True)
    try:
        parsed = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        parsed = None
    if status // 100 != 2:
        # Prometheus answers 400/422/503 with an error object: its text says what is wrong.
        if isinstance(parsed, Mapping) and parsed.get("status") == "error":
            kind, error = parsed.get("errorType") or "error", parsed.get("error") or "no detail"
            raise MetricError(where, f"HTTP {status}: Prometheus returned an error ({kind}): {error}")
        raise MetricError(where, f"HTTP {status}")
    if parsed is None:
        raise MetricError(where, "the answer is not JSON")
    return value_from_query(parsed, source=where)
