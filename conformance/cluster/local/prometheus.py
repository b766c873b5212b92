"""A real Prometheus server run by the harness, and a metrics endpoint whose values a test sets.

The autoscaling tests' metrics source runs instant queries against a real Prometheus HTTP API. Its
embedded default is the Prometheus server built from the Go module proxy into the binary cache
(``kthena-conformance binaries build --prometheus``; ``make test`` builds it), started here:

- :class:`MetricsEndpoint` is an HTTP server in a thread on 127.0.0.1 (a free port) that serves the
  Prometheus text format with the values a test sets: ``endpoint.set("load", 42)``, optionally
  with labels. Its :attr:`~MetricsEndpoint.address` is a scrape target.
- :class:`Prometheus` starts the server on 127.0.0.1 (a free port; ``advertise`` another address
  the cluster's workloads reach it at, :mod:`..runner_address`) with a temporary data
  directory and a generated configuration that scrapes the given targets every second (the
  targets can be changed while it runs: :meth:`~Prometheus.set_targets`), waits until
  ``/-/ready``, and answers instant queries (:meth:`~Prometheus.query`,
  :meth:`~Prometheus.query_value`). It stops with SIGTERM, then SIGKILL, and removes its
  directory.

Both are context managers::

    with MetricsEndpoint() as endpoint, Prometheus(targets=[endpoint.address]) as prometheus:
        endpoint.set("load", 42)
        wait_for("load = 42", lambda: prometheus.query_value("load"), until=lambda v: v == 42)
        source_url = prometheus.url  # http://127.0.0.1:PORT, the metrics source's base URL

Nothing is left behind: the Prometheus process is started like the embedded cluster's components
(:func:`.processes.spawn`: it gets SIGKILL when the thread that started it dies, even by
SIGKILL, so start it from a thread that outlives it, as the main thread does), a failed start
stops it and removes its directory before raising, and a directory left by a process that was
killed is removed by the next start (its owner's pid is written in it).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import subprocess
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from http.server import ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from typing import Any

import yaml
from prometheus_client import CollectorRegistry
from prometheus_client.exposition import MetricsHandler
from prometheus_client.metrics_core import Metric

from ..binaries import PROMETHEUS_BINARY, BinaryCache
from ..errors import HarnessError
from ..runner_address import LOOPBACK, listen_host, local_host, url_host
from .processes import free_ports, log_tail, pid_alive, spawn, stop_all

READY_TIMEOUT = 60.0  # start to /-/ready: ~0.1 s measured; generous for a loaded CI machine
STOP_GRACE = 10.0  # SIGTERM to SIGKILL: Prometheus closes its TSDB in milliseconds when idle
SCRAPE_INTERVAL = 1.0
EVALUATION_INTERVAL = 1.0
DIR_PREFIX = "kthena-prometheus-"
OWNER_FILE = "owner.pid"
TARGETS_FILE = "targets.json"
_NAME = re.compile(r"^[a-zA-Z_:][a-zA-Z0-9_:]*$")
_LABEL = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")


def _quiet(_: str) -> None:
    pass


def prometheus_binary(cache: BinaryCache | None = None, *, progress: Callable[[str], None] = _quiet) -> Path:
    """The Prometheus server of the binary cache, built when missing (minutes, once; it joins the
    control-plane set's directory, which is built first if absent). ``KTHENA_BIN_DIR`` may hold a
    prebuilt ``prometheus``."""
    found = (cache or BinaryCache()).ensure(prometheus=True, progress=progress)
    path = found.optional(PROMETHEUS_BINARY)
    if path is None:
        failed = found.manifest.get("extras_failed")
        why = failed.get("prometheus", {}).get("error") if isinstance(failed, dict) else None
        raise HarnessError(
            "the Prometheus server is not built" + (f": {why}" if why else ""),
            f"see the build log in {found.directory.parent}, then run "
            "`kthena-conformance binaries build --prometheus` (KTHENA_BIN_DIR: put a prometheus binary there)",
        )
    return path


# -- the metrics endpoint ------------------------------------------------------------------------


def _labels_key(labels: Mapping[str, str] | None) -> tuple[tuple[str, str], ...]:
    items = tuple(sorted((labels or {}).items()))
    for name, _ in items:
        if not _LABEL.match(name) or name.startswith("__"):
            raise ValueError(f"{name!r} is not a valid label name")
    return items


class _Values:
    """The gauges a test set, by metric name and label set; a prometheus_client collector."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._values: dict[str, dict[tuple[tuple[str, str], ...], float]] = {}
        self.scrapes = 0

    def set(self, name: str, value: float, labels: Mapping[str, str] | None) -> None:
        if not _NAME.match(name):
            raise ValueError(f"{name!r} is not a valid metric name")
        key = _labels_key(labels)
        with self._lock:
            self._values.setdefault(name, {})[key] = float(value)

    def remove(self, name: str, labels: Mapping[str, str] | None) -> None:
        key = _labels_key(labels)
        with self._lock:
            series = self._values.get(name, {})
            series.pop(key, None)
            if not series:
                self._values.pop(name, None)

    def clear(self) -> None:
        with self._lock:
            self._values.clear()

    def get(self, name: str, labels: Mapping[str, str] | None) -> float | None:
        with self._lock:
            return self._values.get(name, {}).get(_labels_key(labels))

    def collect(self) -> Iterable[Metric]:
        with self._lock:
            self.scrapes += 1
            snapshot = {name: dict(series) for name, series in self._values.items()}
        for name, series in sorted(snapshot.items()):
            metric = Metric(name, f"{name}, set by the test", "gauge")
            for key, value in sorted(series.items()):
                metric.add_sample(name, dict(key), value)
            yield metric


class MetricsEndpoint:
    """An HTTP server in a thread on ``host`` (a free port) serving ``/metrics`` in the Prometheus
    text format: one gauge per name a test set, with the label sets it set.

    ``set("load", 42)``, ``set("load", 3, {"pod": "a"})``, ``remove``, ``clear``. A value set is
    served from the next scrape on. :attr:`scrapes` counts the scrapes served.
    """

    def __init__(self, host: str = "127.0.0.1") -> None:
        self.host = host
        self._values = _Values()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> MetricsEndpoint:
        if self._server is not None:
            raise RuntimeError("the metrics endpoint is already started")
        registry = CollectorRegistry(auto_describe=False)
        registry.register(self._values)
        handler: Any = MetricsHandler.factory(registry)
        server = ThreadingHTTPServer((self.host, 0), handler)  # port 0: no race for a "free" port
        server.daemon_threads = True
        thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.1}, name="kthena-metrics-endpoint", daemon=True
        )
        thread.start()
        self._server, self._thread = server, thread
        return self

    def stop(self) -> None:
        server, thread = self._server, self._thread
        self._server = self._thread = None
        if server is not None:
            server.shutdown()
            server.server_close()
        if thread is not None:
            thread.join(timeout=5)

    def __enter__(self) -> MetricsEndpoint:
        return self.start()

    def __exit__(self, *_: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError("the metrics endpoint is not started")
        return int(self._server.server_address[1])

    @property
    def address(self) -> str:
        """``host:port``, a scrape target."""
        return f"{self.host}:{self.port}"

    @property
    def url(self) -> str:
        return f"http://{self.address}/metrics"

    @property
    def scrapes(self) -> int:
        return self._values.scrapes

    def set(self, name: str, value: float, labels: Mapping[str, str] | None = None) -> None:
        self._values.set(name, value, labels)

    def get(self, name: str, labels: Mapping[str, str] | None = None) -> float | None:
        return self._values.get(name, labels)

    def remove(self, name: str, labels: Mapping[str, str] | None = None) -> None:
        """Stop serving one series (Prometheus marks it stale at the next scrape)."""
        self._values.remove(name, labels)

    def clear(self) -> None:
        self._values.clear()


# -- the Prometheus server ------------------------------------------------------------------------


@dataclass(frozen=True)
class ScrapeTarget:
    """A ``host:port`` to scrape, with labels added to its series (e.g. ``{"pod": "web-0"}``)."""

    address: str
    labels: Mapping[str, str] = field(default_factory=dict)


def _duration(seconds: float) -> str:
    millis = round(seconds * 1000)
    if millis <= 0:
        raise ValueError(f"an interval must be positive, not {seconds}")
    return f"{millis}ms"


def target_groups(targets: Iterable[str | ScrapeTarget]) -> list[dict[str, Any]]:
    """The file-based service discovery's target groups for ``targets`` (pure)."""
    groups: list[dict[str, Any]] = []
    for target in targets:
        t = target if isinstance(target, ScrapeTarget) else ScrapeTarget(target)
        _labels_key(t.labels)
        groups.append({"targets": [t.address], "labels": dict(t.labels)})
    return groups


def prometheus_config(
    targets_file: Path,
    *,
    job: str = "kthena",
    metrics_path: str = "/metrics",
    scrape_interval: float = SCRAPE_INTERVAL,
    evaluation_interval: float = EVALUATION_INTERVAL,
) -> dict[str, Any]:
    """Prometheus's configuration (pure): one job that scrapes the targets listed in
    ``targets_file`` (file-based discovery, re-read when the file changes) every
    ``scrape_interval`` seconds, with a scrape timeout of the same length."""
    interval = _duration(scrape_interval)
    return {
        "global": {
            "scrape_interval": interval,
            "scrape_timeout": interval,
            "evaluation_interval": _duration(evaluation_interval),
        },
        "scrape_configs": [
            {
                "job_name": job,
                "metrics_path": metrics_path,
                "file_sd_configs": [{"files": [str(targets_file)], "refresh_interval": interval}],
            }
        ],
    }


def sweep_stale_dirs(parent: Path | None = None) -> list[Path]:
    """Remove the directories of Prometheus servers whose owner process is gone (killed before it
    could stop them; the server itself died with it). Returns what was removed."""
    removed = []
    for directory in Path(parent or tempfile.gettempdir()).glob(f"{DIR_PREFIX}*"):
        try:
            owner = int((directory / OWNER_FILE).read_text().strip())
        except (OSError, ValueError):
            continue  # not ours, or being created right now
        if owner != os.getpid() and not pid_alive(owner):
            shutil.rmtree(directory, ignore_errors=True)
            removed.append(directory)
    return removed


class Prometheus:
    """A Prometheus server on 127.0.0.1 scraping ``targets``; see the module's description.

    ``advertise``: the address the metrics source's URL names (:attr:`url`), one the cluster's
    workloads reach this machine at; the server then listens there (an IP literal) or on every
    address (a name), and the runner's own queries use :attr:`local_url`.

    ``binary`` defaults to the binary cache's build (:func:`prometheus_binary`, built if
    missing). ``log_path`` keeps the server's log somewhere that outlives it (by default it is in
    the temporary directory, removed at stop; a failed start quotes its tail).
    """

    def __init__(
        self,
        binary: Path | None = None,
        targets: Iterable[str | ScrapeTarget] = (),
        *,
        job: str = "kthena",
        metrics_path: str = "/metrics",
        scrape_interval: float = SCRAPE_INTERVAL,
        evaluation_interval: float = EVALUATION_INTERVAL,
        ready_timeout: float = READY_TIMEOUT,
        log_path: Path | None = None,
        parent_dir: Path | None = None,
        advertise: str = LOOPBACK,
    ) -> None:
        self.binary = binary
        self.advertise = advertise
        self.job = job
        self.metrics_path = metrics_path
        self.scrape_interval = scrape_interval
        self.evaluation_interval = evaluation_interval
        self.ready_timeout = ready_timeout
        self._targets = list(targets)
        target_groups(self._targets)  # invalid labels fail here, not in Prometheus's log
        self._log_path = log_path
        self._parent_dir = parent_dir
        self.directory: Path | None = None
        self.process: subprocess.Popen[bytes] | None = None
        self.port: int | None = None
        self.ready_seconds: float | None = None  # start to /-/ready, once started

    # -- lifecycle --------------------------------------------------------------------------------

    def start(self) -> Prometheus:
        if self.process is not None:
            raise RuntimeError("this Prometheus is already started")
        binary = self.binary or prometheus_binary()
        sweep_stale_dirs(self._parent_dir)
        if self._parent_dir is not None:
            self._parent_dir.mkdir(parents=True, exist_ok=True)
        self.directory = Path(tempfile.mkdtemp(prefix=DIR_PREFIX, dir=self._parent_dir))
        try:
            (self.directory / OWNER_FILE).write_text(f"{os.getpid()}\n")
            self._write_targets()
            config = self.directory / "prometheus.yml"
            config.write_text(
                yaml.safe_dump(
                    prometheus_config(
                        self.directory / TARGETS_FILE,
                        job=self.job,
                        metrics_path=self.metrics_path,
                        scrape_interval=self.scrape_interval,
                        evaluation_interval=self.evaluation_interval,
                    ),
                    sort_keys=False,
                )
            )
            self._launch(binary, config)
        except BaseException:
            self.stop()
            raise
        return self

    def _launch(self, binary: Path, config: Path) -> None:
        assert self.directory is not None
        started = time.monotonic()
        # Port 0 is not an option (Prometheus does not say which port it got): pick, and pick
        # again when another process took it meanwhile.
        for attempt in range(3):
            (self.port,) = free_ports(1)
            argv = [
                str(binary),
                f"--config.file={config}",
                f"--storage.tsdb.path={self.directory / 'data'}",
                f"--web.listen-address={url_host(listen_host(self.advertise))}:{self.port}",
                # How long target changes wait before scrape pools follow (hidden flag, 5 s).
                "--scrape.discovery-reload-interval=100ms",
                "--no-auto-gomemlimit",
                "--log.level=info",
            ]
            self.process = spawn(argv, self.log_path)
            deadline = started + self.ready_timeout
            while True:
                code = self.process.poll()
                if code is not None:
                    tail = log_tail(self.log_path)
                    if attempt < 2 and any("address already in use" in line for line in tail):
                        break
                    shown = "\n      ".join(tail[-8:]) or "(no output)"
                    raise HarnessError(
                        f"Prometheus exited with code {code} during start; its last output:\n      {shown}",
                        f"check the binary ({binary}) and the generated configuration",
                    )
                if self._ready():
                    self.ready_seconds = time.monotonic() - started
                    return
                if time.monotonic() > deadline:
                    shown = "\n      ".join(log_tail(self.log_path)[-8:]) or "(no output)"
                    raise HarnessError(
                        f"Prometheus was not ready within {self.ready_timeout:g}s; its last output:\n      {shown}",
                        "a loaded machine may need a longer ready_timeout",
                    )
                time.sleep(0.02)

    def stop(self) -> None:
        """SIGTERM, then SIGKILL after a grace period; the temporary directory is removed."""
        process, self.process = self.process, None
        if process is not None:
            stop_all([process], grace=STOP_GRACE)
        if self.directory is not None:
            shutil.rmtree(self.directory, ignore_errors=True)

    def __enter__(self) -> Prometheus:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    # -- where it is ------------------------------------------------------------------------------

    @property
    def url(self) -> str:
        """The HTTP API's base URL at the advertised address, ``http://127.0.0.1:PORT`` by default (the
        metrics source's URL)."""
        if self.port is None:
            raise RuntimeError("Prometheus is not started")
        return f"http://{url_host(self.advertise)}:{self.port}"

    @property
    def local_url(self) -> str:
        """The HTTP API's base URL as this machine reaches it (the runner's own queries)."""
        if self.port is None:
            raise RuntimeError("Prometheus is not started")
        return f"http://{url_host(local_host(self.advertise))}:{self.port}"

    @property
    def log_path(self) -> Path:
        if self._log_path is not None:
            return self._log_path
        if self.directory is None:
            raise RuntimeError("Prometheus is not started")
        return self.directory / "prometheus.log"

    @property
    def pid(self) -> int | None:
        return None if self.process is None else int(self.process.pid)

    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    # -- targets ----------------------------------------------------------------------------------

    @property
    def targets(self) -> list[str | ScrapeTarget]:
        return list(self._targets)

    def set_targets(self, targets: Iterable[str | ScrapeTarget]) -> None:
        """Scrape ``targets`` instead (file-based discovery follows within about a second);
        series of a target no longer scraped go stale at once."""
        self._targets = list(targets)
        target_groups(self._targets)
        if self.directory is not None:
            self._write_targets()

    def _write_targets(self) -> None:
        assert self.directory is not None
        path = self.directory / TARGETS_FILE
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(target_groups(self._targets), indent=2) + "\n")
        tmp.replace(path)  # atomic: discovery never reads half a file

    # -- the HTTP API -----------------------------------------------------------------------------

    def _ready(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.local_url}/-/ready", timeout=1) as resp:
                return int(resp.status) == 200
        except (OSError, urllib.error.URLError):
            return False

    def api(self, path: str, params: Mapping[str, str] | None = None, *, timeout: float = 5.0) -> Any:
        """``GET /api/v1/<path>``: the response's ``data``; a HarnessError when it failed."""
        query = f"?{urllib.parse.urlencode(params)}" if params else ""
        url = f"{self.local_url}/api/v1/{path.lstrip('/')}{query}"
        try:
            with urllib.request.urlopen(url, timeout=timeout) as resp:
                body = json.loads(resp.read())
        except urllib.error.HTTPError as exc:
            try:
                body = json.loads(exc.read())
            except ValueError:
                raise HarnessError(f"GET {url}: HTTP {exc.code}", f"see {self.log_path}") from exc
        if not isinstance(body, dict) or body.get("status") != "success":
            error = body.get("error") if isinstance(body, dict) else body
            raise HarnessError(f"GET {url} failed: {error}", "check the query")
        return body.get("data")

    def query(self, expr: str) -> list[dict[str, Any]]:
        """An instant query's vector: ``[{"metric": {labels}, "value": [time, "value"]}, ...]``."""
        data = self.api("query", {"query": expr})
        kind = data.get("resultType") if isinstance(data, dict) else None
        result = data.get("result") if isinstance(data, dict) else None
        if kind != "vector" or not isinstance(result, list):
            raise HarnessError(f"{expr!r} is not an instant vector query (its result is a {kind})", "query a vector")
        return result

    def query_value(self, expr: str) -> float | None:
        """The one sample's value of an instant query, None when there is none (not scraped yet,
        or stale); a HarnessError when there are several."""
        result = self.query(expr)
        if not result:
            return None
        if len(result) > 1:
            series = ", ".join(json.dumps(r.get("metric", {}), sort_keys=True) for r in result)
            raise HarnessError(f"{expr!r} has {len(result)} series: {series}", "narrow it down with labels")
        return float(result[0]["value"][1])

    def active_targets(self) -> list[dict[str, Any]]:
        """The scrape targets Prometheus has now, with their health and last error."""
        data = self.api("targets", {"state": "active"})
        targets = data.get("activeTargets") if isinstance(data, dict) else None
        return targets if isinstance(targets, list) else []


@contextlib.contextmanager
def prometheus_with_endpoint(
    binary: Path | None = None, **options: Any
) -> Iterator[tuple[Prometheus, MetricsEndpoint]]:
    """A :class:`MetricsEndpoint` and a :class:`Prometheus` scraping it, both stopped at the end."""
    with MetricsEndpoint() as endpoint, Prometheus(binary, [endpoint.address], **options) as prometheus:
        yield prometheus, endpoint
