"""While the suite runs, watch what every test depends on, and name the cause when it is gone.

Why this module exists: when the controller under test, the API server or another part of the
cluster dies, every test still running fails on its own, with the symptom it happened to meet
(an HTTP 500 from a webhook no one serves, a ``MaxRetryError``, a wait that expires minutes
later), and every test not yet run fails the same way. The run then reads as dozens of unrelated
failures and blames whatever feature was running. So a thread of the runner (:class:`Watch`)
checks, every :data:`INTERVAL` seconds, that:

- the controller the harness runs (the reference, or an implementation started from a command) is
  still running; a restart a test asked for (:mod:`.restarts`) is not a death;
- the API server answers (``GET /version``, a short timeout, no retries); it is lost after
  :data:`API_GRACE` seconds of failures in a row (a restart the harness makes takes a few), once it
  answered at least once (a probe that never worked says nothing about the server);
- on the embedded cluster, no component (etcd, kube-controller-manager, kube-scheduler, kwok, a
  real node's kubelet or containerd) exited: its supervisor says so in the cluster's state;
- every Node Ready when the watch started is still Ready, or was not Ready for less than
  :data:`NODE_GRACE` seconds (every :data:`NODE_EVERY` seconds; a node that dies or stops
  answering on any provider).

The first loss found is :attr:`Watch.lost`, a :class:`Lost` with one line saying what died and
when, a hint and the exit code (the API server or the cluster: 3, like a cluster that could not
be reached at the start; the controller under test: 1, since the implementation is what the run
judges and its behaviours that could no longer be decided make its profiles partial). The run
stops the pass at once, reports the behaviours left undecided under that one cause, and exits
with that code. The decisions (:func:`controller_lost`, :func:`api_lost`, :func:`component_lost`)
are pure and table-tested; the thread and the probes are the thin shell around them.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import signal
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from .options import EXIT_CLUSTER, EXIT_NONCONFORMANT

INTERVAL = 2.0  # seconds between checks
API_GRACE = 15.0  # seconds of failed API probes in a row before the API server counts as gone
API_TIMEOUT = 3.0  # one probe's timeout
NODE_GRACE = 60.0  # seconds a Node Ready at the start may be NotReady before it counts as gone (kubelet: 40 s)
NODE_EVERY = 10.0  # seconds between two looks at the Nodes


UNDECIDED = "the behaviours still running or not yet run could not be decided"


@dataclass(frozen=True)
class Lost:
    """What died and when, in words (``cause``); how to look into it; the run's exit code; when
    (wall clock)."""

    what: str  # "controller", "api-server" or "cluster"
    cause: str
    hint: str
    exit_code: int
    at: float

    @property
    def message(self) -> str:
        return f"{self.cause}: {UNDECIDED}"

    def as_error(self) -> dict[str, str]:
        return {"message": self.message, "hint": self.hint}


def exit_text(code: int) -> str:
    """``was killed by SIGKILL`` for a negative Popen code, else ``exited with code N``. Pure."""
    if code < 0:
        with contextlib.suppress(ValueError):
            return f"was killed by {signal.Signals(-code).name}"
        return f"was killed by signal {-code}"
    if code > 128:  # a shell or watchdog passing a signal on as 128+N
        with contextlib.suppress(ValueError):
            return f"exited with code {code} ({signal.Signals(code - 128).name})"
    return f"exited with code {code}"


def _clock(at: float) -> str:
    return dt.datetime.fromtimestamp(at, dt.UTC).strftime("%H:%M:%S UTC")


def controller_lost(code: int | None, restarting: bool, now: float, log: str | None) -> Lost | None:
    """The controller under test's process ended (``code``) outside a restart a test asked for. Pure."""
    if code is None or restarting:
        return None
    where = f"; its log: {log}" if log else ""
    return Lost(
        "controller",
        f"the controller under test {exit_text(code)} at {_clock(now)}",
        f"nothing restarts it during a run; find why it stopped (an out-of-memory kill, a crash){where}",
        EXIT_NONCONFORMANT,
        now,
    )


def api_lost(failing_since: float | None, now: float, detail: str, server: str) -> Lost | None:
    """The API server at ``server`` failed every probe since ``failing_since`` (None: it answers),
    for :data:`API_GRACE` seconds or more; ``detail`` is the last failure. Pure."""
    if failing_since is None or now - failing_since < API_GRACE:
        return None
    return Lost(
        "api-server",
        f"the API server {server} stopped answering at {_clock(failing_since)} ({detail})",
        "the cluster is unreachable; on the embedded cluster its components' logs are in its run directory "
        "(`kthena-conformance cluster status`)",
        EXIT_CLUSTER,
        failing_since,
    )


def component_lost(state: Mapping[str, Any] | None, now: float) -> Lost | None:
    """The embedded cluster's supervisor reported a component that exited (its state ``degraded``). Pure."""
    if not state or state.get("phase") != "degraded" or not state.get("failed_component"):
        return None
    name = str(state["failed_component"])
    code = state.get("exit_code")
    how = exit_text(int(code)) if isinstance(code, int) else "exited"
    what = "api-server" if name == "kube-apiserver" else "cluster"
    return Lost(
        what,
        f"the cluster's {name} {how} (seen at {_clock(now)})",
        "the cluster is broken; the component's log is in the cluster's run directory "
        "(`kthena-conformance cluster status`)",
        EXIT_CLUSTER,
        now,
    )


def nodes_lost(not_ready_since: Mapping[str, float], now: float) -> Lost | None:
    """A Node Ready at the start and NotReady since ``not_ready_since[name]`` for :data:`NODE_GRACE`
    seconds or more (the longest gone first). Pure."""
    gone = sorted((since, name) for name, since in not_ready_since.items() if now - since >= NODE_GRACE)
    if not gone:
        return None
    since, name = gone[0]
    more = f" (and {len(gone) - 1} more)" if len(gone) > 1 else ""
    return Lost(
        "cluster",
        f"node {name}{more} stopped being Ready at {_clock(since)}",
        "the cluster lost a node the tests were using; `kubectl describe node` says why",
        EXIT_CLUSTER,
        since,
    )


def track_nodes(
    ready_at_start: set[str], ready_now: Mapping[str, bool], not_ready_since: Mapping[str, float], now: float
) -> dict[str, float]:
    """Since when each Node Ready at the start has not been Ready (a Node deleted counts as not
    Ready). Pure."""
    out: dict[str, float] = {}
    for name in ready_at_start:
        if not ready_now.get(name, False):
            out[name] = not_ready_since.get(name, now)
    return out


def describe_failure(exc: BaseException) -> str:
    """A probe's failure in a few words (no HTTP headers, no retry chains). Pure."""
    text = str(exc)
    for words in ("connection refused", "timed out", "name or service not known", "no route to host"):
        if words in text.lower():
            return words
    status = getattr(exc, "status", None)
    if isinstance(status, int) and status:
        return f"HTTP {status} {getattr(exc, 'reason', '') or ''}".strip()
    return type(exc).__name__


class Watch:
    """The runner's watch thread (see the module docstring). ``controller`` has a ``process``
    (a ``Popen``) or is None; ``probe_api`` raises when the API server does not answer;
    ``cluster_state`` returns the embedded cluster's state (or None elsewhere)."""

    def __init__(
        self,
        controller: Any,
        probe_api: Callable[[], None] | None,
        cluster_state: Callable[[], Mapping[str, Any] | None] | None,
        server: str = "",
        interval: float = INTERVAL,
        nodes: Callable[[], Mapping[str, bool]] | None = None,
    ) -> None:
        self.controller = controller
        self.probe_api = probe_api
        self.cluster_state = cluster_state
        self.server = server
        self.interval = interval
        self.lost: Lost | None = None
        self._restarting = threading.Lock()
        self._stop = threading.Event()
        self._failing_since: float | None = None
        self._answered = False
        self.nodes = nodes
        self._ready_at_start: set[str] | None = None
        self._not_ready: dict[str, float] = {}
        self._nodes_seen = 0.0
        self._thread = threading.Thread(target=self._loop, name="run-health", daemon=True)

    def restart_wrapper(self, restart: Callable[[], None]) -> Callable[[], None]:
        """``restart`` marked as a restart, so the controller's exit during it is not a death."""

        def wrapped() -> None:
            with self._restarting:
                restart()

        return wrapped

    def __enter__(self) -> Watch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=API_TIMEOUT + 2)

    def _loop(self) -> None:
        while not self._stop.wait(self.interval) and self.lost is None:
            with contextlib.suppress(Exception):  # a watch that cannot look is no verdict
                self.lost = self.check(time.time())

    def check(self, now: float) -> Lost | None:
        """One round of checks; the first loss found."""
        for found in self._checks(now):
            if found is not None:
                return found
        return None

    def _checks(self, now: float) -> Iterator[Lost | None]:
        process = getattr(self.controller, "process", None)
        if process is not None and self._restarting.acquire(blocking=False):
            try:
                code = self.controller.process.poll()
                yield controller_lost(code, False, now, str(getattr(self.controller, "log", "") or "") or None)
            finally:
                self._restarting.release()
        if self.cluster_state is not None:
            yield component_lost(self.cluster_state(), now)
        if self.probe_api is not None:
            try:
                self.probe_api()
            except Exception as exc:
                if self._answered:  # a probe that never worked is a broken probe, not a dead server
                    self._failing_since = self._failing_since or now
                    yield api_lost(self._failing_since, now, describe_failure(exc), self.server)
            else:
                self._answered, self._failing_since = True, None
        if self.nodes is not None and self._failing_since is None and now - self._nodes_seen >= NODE_EVERY:
            self._nodes_seen = now
            ready = self.nodes()
            if self._ready_at_start is None:
                self._ready_at_start = {name for name, ok in ready.items() if ok}
            self._not_ready = track_nodes(self._ready_at_start, ready, self._not_ready, now)
            yield nodes_lost(self._not_ready, now)


def node_readiness(kubeconfig: Any, context: str | None) -> Callable[[], dict[str, bool]]:
    """Each Node's name and whether its Ready condition is True (one list, :data:`API_TIMEOUT`)."""
    from kubernetes import client

    from ..cluster.kube import api_client

    core = client.CoreV1Api(api_client(kubeconfig, context))

    def ready() -> dict[str, bool]:
        items: list[Any] = core.list_node(_request_timeout=API_TIMEOUT).items
        return {
            n.metadata.name: any(c.type == "Ready" and c.status == "True" for c in (n.status.conditions or []))
            for n in items
        }

    return ready


def api_probe(kubeconfig: Any, context: str | None) -> tuple[Callable[[], None], str]:
    """A probe of the API server (``GET /version``: one try, no retries, :data:`API_TIMEOUT`) and
    its address."""
    from kubernetes import client, config

    configuration = client.Configuration()
    config.load_kube_config(config_file=str(kubeconfig), context=context, client_configuration=configuration)  # type: ignore[no-untyped-call]
    configuration.retries = False
    version = client.VersionApi(client.ApiClient(configuration))

    def probe() -> None:
        version.get_code(_request_timeout=API_TIMEOUT)

    return probe, str(configuration.host)
