"""The suite as a pytest plugin (``pytest -p conformance.framework.plugin conformance/suites``).

It connects to the cluster given (any kubeconfig and context), decides per test whether it runs
(selection, ``--shard``, pass) or is reported not-supported (the implementation's declared
features), gives every test a fresh namespace, a per-test User-Agent, documented waits and a
ModelServing handle, collects evidence on failure before cleanup, classifies every outcome
(passed, non-conformant, warning for a SHOULD or MAY behaviour that does not hold, error,
not-supported) in the process that ran it, and writes one results file per pass from the
controlling process (xdist workers included). :mod:`conformance.run` merges the passes into the
report; the plugin also works on its own with plain pytest.
"""

from __future__ import annotations

import json
import os
import secrets
import time
import traceback
from collections.abc import Generator, Iterator
from pathlib import Path
from typing import Any

import pytest

from . import lifetime, messages, waits
from .capabilities import Capabilities, CapabilityFileError, effective_support, load_all
from .catalog import Behaviour, register_markers
from .features import SelectionError
from .outcomes import Outcome, TestResult, classify, combine, not_supported
from .restart import RestartConfigError, restart_from_option
from .selection import Selection, in_pass
from .shard import Shard
from .support import ControllerRestart, Support, SupportFileError, load_support, support_from_flags
from .timeouts import TimeoutConfigError, Timeouts

CALL_REPORT = pytest.StashKey[pytest.TestReport]()
RUN_ENV = "KTHENA_CONFORMANCE_RUN_ID"


def pytest_addoption(parser: pytest.Parser) -> None:
    g = parser.getgroup("kthena-conformance", "Kthena ModelServing conformance")
    g.addoption("--kubeconfig", default=os.environ.get("KUBECONFIG"), help="kubeconfig of the cluster under test")
    g.addoption("--context", default=None, help="kubeconfig context (default: the current one)")
    g.addoption("--cluster-info", default=None, help="JSON file describing the cluster (written by the runner)")
    g.addoption("--support-file", default=None, help="the implementation's ImplementationSupport YAML")
    g.addoption("--supported-features", action="append", default=[], help="features supported (comma-separated)")
    g.addoption("--all-features", action="store_true", help="declare every feature supported")
    g.addoption("--implementation-name", default="unnamed", help="implementation name (with flags)")
    g.addoption("--implementation-version", default="unknown", help="implementation version (with flags)")
    g.addoption("--profile", action="append", default=[], help="run these profiles only")
    g.addoption("--feature", action="append", default=[], help="run these features only")
    g.addoption("--id", dest="behaviour_ids", action="append", default=[], help="run these behaviour ids (globs)")
    g.addoption("--skip-slow", action="store_true", help="skip tests marked slow")
    g.addoption("--shard", default=None, help="run only shard I of N of the selection (I/N, see framework/shard.py)")
    g.addoption("--wait-scale", default="1", help="multiply every documented wait by this factor")
    g.addoption("--wait", dest="waits", action="append", default=[], help="override one wait: NAME=SECONDS")
    g.addoption("--keep", choices=["never", "on-failure", "always"], default="never", help="keep test namespaces")
    g.addoption("--artifacts-dir", default="reports/artifacts", help="where failure evidence goes")
    g.addoption("--results-file", default=None, help="write this pass's results (JSON) here")
    g.addoption(
        "--progress-file", default=None, help="append one JSON line per finished behaviour here (the run tails it)"
    )
    g.addoption("--controller-log", default=None, help="the implementation's log file (evidence)")
    g.addoption(
        "--controller-restart",
        default=None,
        help="JSON argv that restarts the implementation's controller and returns once it is back (set by the "
        "runner when it runs the controller; overrides the support file's controllerRestart)",
    )
    g.addoption(
        "--runner-address",
        default=None,
        help="the address the cluster's workloads reach this machine at (the Autoscaling tests' Prometheus "
        "listens there); default: the cluster info's runnerAddress, else 127.0.0.1",
    )
    g.addoption("--run-id", default=None, help="label every test namespace with this run id")
    g.addoption("--suite-pass", choices=["all", "parallel", "serial"], default="all", help="which tests this pass runs")
    g.addoption(
        "--capabilities",
        action="append",
        default=[],
        help="an accelerator capability file (repeatable): the Accelerators profile certifies its DRA driver",
    )


class SuiteState:
    """Options resolved once per process."""

    def __init__(self, config: pytest.Config) -> None:
        opt = config.getoption
        try:
            if opt("--support-file"):
                self.support: Support = load_support(Path(opt("--support-file")))
            else:
                self.support = support_from_flags(
                    opt("--implementation-name"),
                    opt("--implementation-version"),
                    opt("--supported-features") or None,
                    bool(opt("--all-features")),
                )
            self.timeouts = Timeouts.from_options(opt("--wait-scale"), list(opt("waits")))
            self.selection = Selection.parse(
                opt("--profile"), opt("--feature"), opt("behaviour_ids"), include_slow=not opt("--skip-slow")
            )
            self.shard: Shard | None = Shard.parse(opt("--shard")) if opt("--shard") else None
            self.capabilities: list[Capabilities] = load_all(Path(p) for p in opt("--capabilities"))
            self.support = effective_support(self.support, self.capabilities)
        except (SupportFileError, SelectionError, TimeoutConfigError, CapabilityFileError) as exc:
            raise pytest.UsageError(str(exc)) from None
        self.pass_name: str = opt("--suite-pass")
        self.keep: str = opt("--keep")
        self.artifacts = Path(opt("--artifacts-dir")).resolve()
        self.controller_log = Path(opt("--controller-log")).resolve() if opt("--controller-log") else None
        try:
            self.controller_restart: ControllerRestart | None = restart_from_option(
                opt("--controller-restart"), self.support
            )
        except RestartConfigError as exc:
            raise pytest.UsageError(str(exc)) from None
        self.run_id: str = opt("--run-id") or os.environ.setdefault(RUN_ENV, secrets.token_hex(4))
        self.kubeconfig: str | None = opt("--kubeconfig")
        self.context: str | None = opt("--context")
        self.cluster_info: str | None = opt("--cluster-info")
        self.runner_address_option: str | None = opt("--runner-address")
        if self.runner_address_option is not None:
            from ..cluster.runner_address import RunnerAddressError, parse

            try:
                parse(self.runner_address_option)
            except RunnerAddressError as exc:
                raise pytest.UsageError(str(exc)) from None
        self.results_file = Path(opt("--results-file")) if opt("--results-file") else None
        self.progress_file = Path(opt("--progress-file")) if opt("--progress-file") else None
        self.results: dict[str, dict[str, Any]] = {}  # nodeid -> phases, in the controlling process
        self.started = time.time()

    def runner_address(self) -> tuple[str, str]:
        """The address the cluster's workloads reach this machine at, and where it came from
        (``--runner-address``, the cluster info's, or the loopback default: runner_address.choose)."""
        from ..cluster.provider import ClusterInfo
        from ..cluster.runner_address import choose

        details = ClusterInfo.from_json(Path(self.cluster_info).read_text()).details if self.cluster_info else {}
        return choose(self.runner_address_option, details)


STATE = pytest.StashKey[SuiteState]()


def _state(config: pytest.Config) -> SuiteState:
    return config.stash[STATE]


def pytest_configure(config: pytest.Config) -> None:
    lifetime.die_with_parent()  # only under the runner, which names itself in the environment
    register_markers(config)
    config.stash[STATE] = SuiteState(config)


def behaviour_of(item: pytest.Item) -> Behaviour | None:
    marker = item.get_closest_marker("conformance")
    return marker.args[0] if marker and marker.args else None


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    state = _state(config)
    mine: set[str] | None = None
    if state.shard is not None:  # assigned over the whole catalog's selection, not what this session collected
        from .catalog import collect

        mine = set(state.shard.mine(b for b in collect() if state.selection.selects(b)))
    keep, drop = [], []
    for item in items:
        b = behaviour_of(item)
        if (
            b is None
            or not state.selection.selects(b)
            or not in_pass(b, state.pass_name)
            or (mine is not None and b.id not in mine)
        ):
            drop.append(item)
            continue
        item.user_properties.append(("behaviour", b.id))
        missing = next((f for f in b.features if not state.support.supports(f)), None)
        if missing is not None:
            item.add_marker(pytest.mark.skip(reason=not_supported(f"{missing}: {state.support.reason(missing)}")))
        keep.append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
    # Slow behaviours (each waits out a deadline of a minute or more) first, so that under xdist they
    # overlap with the rest instead of being what the last worker waits for alone; the sort is stable,
    # so every worker still collects one order.
    keep.sort(key=lambda item: not _slow(item))
    items[:] = keep
    cases: dict[str, int] = {}
    for item in keep:
        b = behaviour_of(item)
        if b is not None:
            cases[b.id] = cases.get(b.id, 0) + 1
    _append(state, {"event": "collected", "pass": state.pass_name, "cases": cases})


def _slow(item: pytest.Item) -> bool:
    b = behaviour_of(item)
    return bool(b is not None and b.slow)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """Tell the run this test started, and make its waits say what they wait for (in the process
    that runs it: an xdist worker or the only one)."""
    state = _state(item.config)
    if state.progress_file is None:
        return
    b = behaviour_of(item)
    bid = b.id if b else item.nodeid
    _append(state, {"event": "started", "id": bid, "nodeid": item.nodeid, "at": round(time.time(), 3)})

    def told(what: str | None, seconds: float | None) -> None:
        event: dict[str, Any] = {"event": "waiting" if what else "waited", "id": bid, "nodeid": item.nodeid}
        if what:
            event.update(what=what[:300], seconds=seconds)
        _append(state, {**event, "at": round(time.time(), 3)})

    waits.observe(told)


@pytest.hookimpl(trylast=True)  # after the fixtures' cleanup, whose waits are the test's too
def pytest_runtest_teardown(item: pytest.Item) -> None:
    waits.observe(None)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    if report.when == "call":
        item.stash[CALL_REPORT] = report
    skip_reason = ""
    if report.skipped and isinstance(report.longrepr, tuple):
        skip_reason = str(report.longrepr[2])
    exc = call.excinfo.value if call.excinfo is not None else None
    b = behaviour_of(item)
    outcome = classify(report.when, report.failed, report.skipped, exc, skip_reason, b.level if b else "MUST")
    report.user_properties.append((f"outcome:{report.when}", outcome.value))
    if report.failed and exc is not None:
        report.user_properties.append((f"message:{report.when}", _message(exc)))
    elif report.skipped:
        report.user_properties.append((f"message:{report.when}", skip_reason.removeprefix("Skipped: ")))
    return report


def _message(exc: BaseException) -> str:
    """The failure in words: an API error as one sentence (:mod:`.messages`), never a header dump."""
    plain = messages.readable(exc)
    text = plain or str(exc).strip() or type(exc).__name__
    if not isinstance(exc, AssertionError):
        text = text if plain else f"{type(exc).__name__}: {text}"
        frames = traceback.extract_tb(exc.__traceback__)[-1:]
        if frames:
            text += f" (at {Path(frames[0].filename).name}:{frames[0].lineno})"
    return messages.sentence(text)[:2000]


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Record every phase in the controlling process (xdist forwards its workers' reports)."""
    config = _CONFIG.get("config")
    if config is None or hasattr(config, "workerinput"):
        return
    entry = _state(config).results.setdefault(report.nodeid, {"phases": [], "messages": [], "duration": 0.0})
    props = dict(report.user_properties)
    outcome = props.get(f"outcome:{report.when}")
    if outcome is None:  # no classification: a crashed worker's synthetic report
        outcome = Outcome.ERROR.value if report.failed else Outcome.PASSED.value
        if report.failed:
            entry["messages"].append(f"{report.when}: {str(report.longrepr)[-600:]}")
    entry["phases"].append(outcome)
    if props.get(f"message:{report.when}"):
        entry["messages"].append(f"{report.when}: {props[f'message:{report.when}']}")
    entry["duration"] += float(report.duration)
    for key in ("behaviour", "evidence", WARNINGS, NOTES, OBSERVED):
        if props.get(key):
            entry[key] = props[key]
    if report.when not in ("setup", "call"):  # teardown, or a crashed worker's "???": the test is over
        _progress(_state(config), report.nodeid, entry)


def _progress(state: SuiteState, nodeid: str, entry: dict[str, Any]) -> None:
    """Append this finished test's line to ``--progress-file`` (read by the run while the pass runs)."""
    if state.progress_file is None:
        return
    event = {
        "event": "finished",
        "id": entry.get("behaviour") or nodeid,
        "nodeid": nodeid,
        "pass": state.pass_name,
        "outcome": combine([Outcome(o) for o in entry["phases"]]).value,
        "duration": round(entry["duration"], 3),
        "message": "; ".join(_messages(entry))[:4000],
        "evidence": entry.get("evidence"),
        "observed": entry.get(OBSERVED),
        "at": round(time.time(), 3),
    }
    _append(state, event)


def _messages(entry: dict[str, Any]) -> list[str]:
    """A finished test's messages, then its warnings, observations and where it ran."""
    out = list(entry["messages"])
    if entry.get(WARNINGS):
        out.append(f"warnings: {entry[WARNINGS]}")
    if entry.get(NOTES):
        out.append(f"observed: {entry[NOTES]}")
    if entry.get(OBSERVED):
        out.append(f"ran: {entry[OBSERVED]}")
    return out


def _append(state: SuiteState, event: dict[str, Any]) -> None:
    """One line on ``--progress-file`` (several processes append: one write each, O_APPEND)."""
    if state.progress_file is None:
        return
    try:
        with state.progress_file.open("a") as f:
            f.write(json.dumps(event) + "\n")
    except OSError:
        pass  # progress is a convenience: the results file is the record


_CONFIG: dict[str, pytest.Config] = {}
# A user property a test sets to report SHOULD-level findings (warnings) without failing: carried
# into its result's message and the pass's results file (the runner puts them in the report).
WARNINGS = "warnings"
NOTES = "notes"  # what a test observed and the report should show (e.g. the scheduler's reason)
OBSERVED = "observed"  # where a Pod-level condition was observed: real nodes, or simulated (framework.realnodes)


def record_warnings(item: pytest.Item, warnings: list[str]) -> None:
    """Report ``warnings`` (SHOULD-level findings) for the test ``item`` without failing it."""
    if warnings:
        item.user_properties.append((WARNINGS, "; ".join(warnings)))


def record_observed(item: pytest.Item, where: str) -> None:
    """Say where the test's Pod-level condition was observed (in running containers on real
    nodes, or simulated): kept apart in its result (``observed``) and shown in its message."""
    item.user_properties.append((OBSERVED, where))


def record_notes(item: pytest.Item, notes: list[str]) -> None:
    """Put ``notes`` (observations, never a verdict) in the test's report message."""
    if notes:
        item.user_properties.append((NOTES, "; ".join(notes)))


@pytest.hookimpl(tryfirst=True)
def pytest_sessionstart(session: pytest.Session) -> None:
    _CONFIG["config"] = session.config


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    config = session.config
    if hasattr(config, "workerinput"):
        return
    state = _state(config)
    if state.results_file is None:
        return
    from .catalog import REGISTRY, collect

    collect()  # the controlling process of an xdist run never imported the test modules
    results = []
    warnings: dict[str, str] = {}
    for nodeid, entry in state.results.items():
        bid = entry.get("behaviour")
        b = REGISTRY.get(bid) if bid else None
        if b is None:
            continue
        if entry.get(WARNINGS):
            warnings[b.id] = str(entry[WARNINGS])
        results.append(
            TestResult(
                id=b.id,
                nodeid=nodeid,
                feature=b.feature,
                outcome=combine([Outcome(o) for o in entry["phases"]]),
                duration=round(entry["duration"], 3),
                message="; ".join(_messages(entry))[:4000],
                statement=b.statement,
                spec=b.spec,
                evidence=entry.get("evidence"),
                level=b.level,
                observed=entry.get(OBSERVED),
            ).as_dict()
        )
    state.results_file.parent.mkdir(parents=True, exist_ok=True)
    payload = {
        "pass": state.pass_name,
        "runId": state.run_id,
        "exitStatus": int(exitstatus),
        "interrupted": int(exitstatus) == int(pytest.ExitCode.INTERRUPTED),
        "startedAt": state.started,
        "finishedAt": time.time(),
        "results": results,
        "warnings": warnings,
    }
    tmp = state.results_file.with_suffix(".tmp")
    tmp.write_text(json.dumps(payload, indent=1))
    tmp.replace(state.results_file)


# -- fixtures -------------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def suite(request: pytest.FixtureRequest) -> SuiteState:
    return _state(request.config)


@pytest.fixture(autouse=True)
def _allure_labels(request: pytest.FixtureRequest) -> None:
    """Behaviour id, feature, profile, statement and spec reference on the allure result."""
    b = behaviour_of(request.node)
    if b is None:
        return
    import allure

    dynamic: Any = allure.dynamic  # allure-pytest ships no type hints
    dynamic.epic(b.profile.name)
    dynamic.feature(str(b.feature))
    dynamic.story(b.id)
    dynamic.description(f"{b.statement}\n\nSpec: {b.spec}")
    dynamic.label("behaviour", b.id)


@pytest.fixture(scope="session")
def timeouts(suite: SuiteState) -> Timeouts:
    return suite.timeouts


@pytest.fixture(scope="session")
def _kube_session(suite: SuiteState) -> Any:
    from .kube import Kube

    if not suite.kubeconfig:
        raise pytest.UsageError("no cluster: pass --kubeconfig (or set KUBECONFIG)")
    return Kube.connect(suite.kubeconfig, suite.context)


@pytest.fixture
def kube(_kube_session: Any, request: pytest.FixtureRequest) -> Any:
    b = behaviour_of(request.node)
    return _kube_session.for_behaviour(b.id if b else None)


@pytest.fixture
def ns(kube: Any, suite: SuiteState, request: pytest.FixtureRequest) -> Iterator[str]:
    """A fresh namespace for this test; evidence on failure, then cleanup per ``--keep``."""
    from . import evidence, namespaces

    b = behaviour_of(request.node)
    bid = b.id if b else request.node.name
    space = namespaces.create(kube, suite.run_id, bid, timeout=suite.timeouts.seconds("admission"))
    history = evidence.PodHistory(kube, space.name).start()
    created: list[str] = []
    request.node.stash[_CREATED] = created
    try:
        yield space.name
    finally:
        report: pytest.TestReport | None = request.node.stash.get(CALL_REPORT, None)
        failed = report is None or report.failed
        history.stop(wait=failed and report is not None)
        if failed and report is not None:
            where = suite.artifacts / evidence.directory_name(bid)
            path = evidence.collect(kube, space.name, where, history=history, controller_log=suite.controller_log)
            request.node.user_properties.append(("evidence", str(path)))
        if suite.keep == "always" or (suite.keep == "on-failure" and failed):
            request.node.user_properties.append(("kept-namespace", space.name))
        else:
            namespaces.cleanup(kube, space, created, timeout=suite.timeouts.seconds("namespace-cleanup"))


_CREATED = pytest.StashKey[list[str]]()


@pytest.fixture
def ms(kube: Any, ns: str, suite: SuiteState, request: pytest.FixtureRequest) -> Any:
    """The test's handle on ModelServings in its namespace (see :mod:`.modelserving`)."""
    from .modelserving import ModelServings

    handle = ModelServings(kube, ns, suite.timeouts, suite.run_id, suite.support.pod_labels, suite.controller_log)
    handle.created = request.node.stash[_CREATED]  # the namespace fixture cleans up what is created
    return handle


@pytest.fixture(scope="session")
def faults(suite: SuiteState) -> Any:
    """Fault injection on the cluster (hold a Pod NotReady, fail it). A cluster that cannot
    inject faults makes the test inconclusive (error), never a pass."""
    from ..cluster.errors import HarnessError
    from ..cluster.provider import ClusterInfo
    from ..cluster.registry import get_provider
    from .outcomes import Inconclusive

    if not suite.cluster_info:
        raise Inconclusive("fault injection needs --cluster-info (the cluster's provider); none was given")
    info = ClusterInfo.from_json(Path(suite.cluster_info).read_text())
    try:
        injector = get_provider(info.provider).fault_injector(info)
    except HarnessError as exc:
        raise Inconclusive(f"the {info.provider} provider cannot inject faults: {exc.message}") from None
    if not injector.supported_faults():
        raise Inconclusive(f"the {info.provider} provider cannot inject faults")
    return injector


@pytest.fixture
def manifest() -> Any:
    """``manifest("name")``: a fresh copy of ``conformance/suites/manifests/<name>.yaml`` (a
    :class:`~.modelserving.Manifest`: a dict that remembers its file for failure messages)."""
    import copy

    import yaml

    from .modelserving import Manifest

    root = Path(__file__).resolve().parent.parent / "suites" / "manifests"
    cache: dict[str, Any] = {}

    def load(name: str) -> dict[str, Any]:
        if name not in cache:
            cache[name] = yaml.safe_load((root / f"{name}.yaml").read_text())
        return Manifest(copy.deepcopy(cache[name]), source=f"conformance/suites/manifests/{name}.yaml")

    return load


@pytest.fixture(scope="session")
def capabilities(suite: SuiteState) -> list[Capabilities]:
    """The accelerator capability files given with ``--capabilities`` (validated). Accelerators
    tests never run without one: they are reported not-supported at collection."""
    return list(suite.capabilities)
