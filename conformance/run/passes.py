"""The suite's pytest passes: the command line each pass runs with, the pass as a subprocess whose
progress file is printed while it runs, and its results file read back.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from ..cluster.provider import ClusterInfo, Progress
from . import signals
from .checkpoint import Checkpoint, results_from_progress
from .health import Watch
from .options import (
    PACKAGE_DIR,
    REFERENCE_SUPPORT,
    RunOptions,
)
from .progress import ProgressTail, RunProgress


def _in_pass(b: Any, pass_name: str) -> bool:
    from ..framework.selection import in_pass

    return in_pass(b, pass_name)


def _pytest_base(
    options: RunOptions,
    info: ClusterInfo,
    info_file: Path,
    run_id: str,
    report_dir: Path,
    controller_log: Path | None,
) -> list[str]:
    args = [
        sys.executable, "-m", "pytest",
        "-p", "conformance.framework.plugin", "-p", "no:cacheprovider",
        "-c", str(PACKAGE_DIR / "suites" / "pytest.ini"), "--rootdir", str(PACKAGE_DIR / "suites"),
        str(PACKAGE_DIR / "suites"),
        "--kubeconfig", str(info.kubeconfig),
        "--cluster-info", str(info_file),
        "--run-id", run_id,
        "--keep", options.keep,
        "--artifacts-dir", str(report_dir / "artifacts"),
        "--wait-scale", options.timeout_scale,
        "--alluredir", str(report_dir / "allure-results"),
        "-q", "-rN", "--durations=15",
    ]  # fmt: skip
    if info.context:
        args += ["--context", info.context]
    if options.support_file is not None:
        args += ["--support-file", str(options.support_file.resolve())]
    elif options.supported_features or options.all_features:
        args += ["--implementation-name", options.implementation_name or options.implementation]
        args += ["--implementation-version", options.implementation_version or "unknown"]
        args += [f"--supported-features={f}" for f in options.supported_features]
        args += ["--all-features"] if options.all_features else []
    else:
        args += ["--support-file", str(REFERENCE_SUPPORT)]
    for flag, values in (("--profile", options.profiles), ("--feature", options.features), ("--id", options.ids)):
        args += [f"{flag}={v}" for v in values]
    args += [f"--wait={w}" for w in options.timeouts]
    if options.skip_slow:
        args.append("--skip-slow")
    if options.shard is not None:
        args.append(f"--shard={options.shard}")
    if controller_log is not None:
        args += ["--controller-log", str(controller_log)]
    if options.runner_address:
        args += ["--runner-address", options.runner_address]
    args += [f"--capabilities={p.resolve()}" for p in options.capabilities]
    return [*args, *options.pytest_args]


PROGRESS_POLL_SECONDS = 0.5  # how often a running pass's progress file is read


LOST_GRACE = 10.0  # seconds a pass gets to end after what it depends on died, before it is killed


def _run_pass(
    base: list[str],
    pass_name: str,
    options: RunOptions,
    work: Path,
    progress: Progress,
    counter: RunProgress | None = None,
    watch: Watch | None = None,
    checkpoint: Checkpoint | None = None,
) -> dict[str, Any]:
    """Run one pass as a pytest subprocess (full output in ``<pass>.log``), printing one line per
    finished behaviour from its progress file while it runs, and what slow behaviours wait for
    whenever the terminal was silent for 15 s (:mod:`.progress`). ``checkpoint`` is told of every
    finished behaviour (the report is rewritten as results arrive, :mod:`.checkpoint`); when
    ``watch`` finds what the tests depend on gone (:mod:`.health`), the pass is stopped at once
    (``payload["lost"]``). A pass killed before it wrote its results file is read from its
    progress file. The suite's processes end with this one (:mod:`conformance.framework.lifetime`)."""
    from ..framework.lifetime import DIRECT_ENV, PARENT_ENV

    results = work / f"{pass_name}.json"
    results.unlink(missing_ok=True)
    events = work / f"{pass_name}.progress.jsonl"
    events.unlink(missing_ok=True)
    args = [*base, "--suite-pass", pass_name, "--results-file", str(results), "--progress-file", str(events)]
    if pass_name == "parallel" and options.workers > 1:
        args += ["-n", str(options.workers)]
    log = work / f"{pass_name}.log"
    tail, counter = ProgressTail(events), counter or RunProgress(0)
    counter.started()

    def forward(quiet_lines: bool = True) -> None:
        lines = counter.lines(tail.poll())
        for line in lines:
            progress(line)
        for line in counter.quiet_lines() if quiet_lines else []:
            progress(line)
        if checkpoint is not None:
            if lines:
                checkpoint.changed()
            checkpoint.maybe()

    def read(code: int) -> dict[str, Any]:
        forward(quiet_lines=False)  # what is still running is over: no running line
        payload = _read_pass(results, pass_name, code, log)
        return _with_progress(payload, counter, pass_name)

    env = {**os.environ, PARENT_ENV: str(os.getpid()), DIRECT_ENV: "1"}
    started = time.monotonic()
    with log.open("w") as out:
        proc = subprocess.Popen(
            args, stdout=out, stderr=subprocess.STDOUT, cwd=str(work), stdin=subprocess.DEVNULL, env=env
        )
        try:
            if checkpoint is not None:
                checkpoint.maybe(force=True)  # a report exists from the first moment a pass runs
            while True:
                try:
                    code = proc.wait(timeout=PROGRESS_POLL_SECONDS)
                    break
                except subprocess.TimeoutExpired:
                    forward()
                    if watch is not None and watch.lost is not None:
                        progress(f"stopping the {pass_name} pass: {watch.lost.cause}")
                        payload = read(_stop(proc, LOST_GRACE))
                        payload["lost"] = watch.lost
                        payload.pop("crashed", None)
                        return payload
        except KeyboardInterrupt as interruption:
            # Ctrl-C reached pytest too (same process group); SIGTERM reached only this process: pass it
            # on as Ctrl-C. Either way, let pytest finish its report.
            if isinstance(interruption, signals.Terminated):
                with contextlib.suppress(ProcessLookupError):
                    proc.send_signal(signal.SIGINT)
            payload = read(_stop(proc, 60.0, interrupt=False))
            payload["interrupted"] = True
            payload["signal"] = signals.name_of(interruption)
            payload.pop("crashed", None)  # a pass killed by the same signal has no other story
            progress(f"{pass_name} pass interrupted after {time.monotonic() - started:.0f}s")
            return payload
    payload = read(code)
    for line in counter.flush():
        progress(line)
    progress(f"{pass_name} pass finished in {time.monotonic() - started:.0f}s (pytest exit {code})")
    return payload


def _stop(proc: subprocess.Popen[bytes], grace: float, *, interrupt: bool = True) -> int:
    """Ctrl-C to the pass (unless it had it already), SIGKILL after ``grace`` seconds; its exit code.
    Its xdist workers end with it (:mod:`conformance.framework.lifetime`)."""
    if interrupt:
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signal.SIGINT)
    try:
        return proc.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        proc.kill()
        return proc.wait()


def _with_progress(payload: dict[str, Any], counter: RunProgress, pass_name: str) -> dict[str, Any]:
    """The pass's results, with every case its progress file reported that its results file lacks
    (a pass killed before it wrote them), and when each case finished (``finishedAt``, by node id)."""
    from ..framework.catalog import REGISTRY, collect

    mine = {n: e for n, e in counter.finished.items() if e.get("pass", pass_name) == pass_name}
    have = {str(r.get("nodeid")) for r in payload.get("results", [])}
    missing = {n: e for n, e in mine.items() if n not in have}
    if missing:
        collect()
        payload["results"] = [*payload.get("results", []), *results_from_progress(missing, REGISTRY)]
        payload["fromProgress"] = len(missing)
    payload["finishedAt"] = {n: e["at"] for n, e in mine.items() if isinstance(e.get("at"), int | float)}
    return payload


def _read_pass(results: Path, pass_name: str, code: int, log: Path) -> dict[str, Any]:
    try:
        payload: dict[str, Any] = json.loads(results.read_text())
    except (OSError, ValueError):
        tail = log.read_text(errors="replace")[-3000:] if log.exists() else ""
        return {"pass": pass_name, "exitStatus": code, "interrupted": code == 2, "results": [], "crashed": tail}
    if code not in (0, 1, 2, 5):
        payload["crashed"] = log.read_text(errors="replace")[-3000:]
    return payload
