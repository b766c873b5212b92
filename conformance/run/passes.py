"""The suite's pytest passes: the command line each pass runs with, the pass as a subprocess whose
progress file is printed while it runs, and its results file read back.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from ..cluster.provider import ClusterInfo, Progress
from . import signals
from .options import (
    PACKAGE_DIR,
    REFERENCE_SUPPORT,
    RunOptions,
)
from .progress import BehaviourCounter, ProgressTail


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


def _run_pass(
    base: list[str],
    pass_name: str,
    options: RunOptions,
    work: Path,
    progress: Progress,
    counter: BehaviourCounter | None = None,
) -> dict[str, Any]:
    """Run one pass as a pytest subprocess (full output in ``<pass>.log``), printing one line per
    finished behaviour from its progress file while it runs."""
    results = work / f"{pass_name}.json"
    results.unlink(missing_ok=True)
    events = work / f"{pass_name}.progress.jsonl"
    events.unlink(missing_ok=True)
    args = [*base, "--suite-pass", pass_name, "--results-file", str(results), "--progress-file", str(events)]
    if pass_name == "parallel" and options.workers > 1:
        args += ["-n", str(options.workers)]
    log = work / f"{pass_name}.log"
    tail, counter = ProgressTail(events), counter or BehaviourCounter(0)

    def forward() -> None:
        for line in counter.lines(tail.poll()):
            progress(line)

    started = time.monotonic()
    with log.open("w") as out:
        proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, cwd=str(work), stdin=subprocess.DEVNULL)
        try:
            while True:
                try:
                    code = proc.wait(timeout=PROGRESS_POLL_SECONDS)
                    break
                except subprocess.TimeoutExpired:
                    forward()
            forward()
        except KeyboardInterrupt as interruption:
            # Ctrl-C reached pytest too (same process group); SIGTERM reached only this process: pass it
            # on as Ctrl-C. Either way, let pytest finish its report.
            if isinstance(interruption, signals.Terminated):
                proc.send_signal(signal.SIGINT)
            try:
                code = proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                code = proc.wait()
            payload = _read_pass(results, pass_name, code, log)
            payload["interrupted"] = True
            payload["signal"] = signals.name_of(interruption)
            progress(f"{pass_name} pass interrupted after {time.monotonic() - started:.0f}s")
            return payload
    progress(f"{pass_name} pass finished in {time.monotonic() - started:.0f}s (pytest exit {code})")
    return _read_pass(results, pass_name, code, log)


def _read_pass(results: Path, pass_name: str, code: int, log: Path) -> dict[str, Any]:
    try:
        payload: dict[str, Any] = json.loads(results.read_text())
    except (OSError, ValueError):
        tail = log.read_text(errors="replace")[-3000:] if log.exists() else ""
        return {"pass": pass_name, "exitStatus": code, "interrupted": code == 2, "results": [], "crashed": tail}
    if code not in (0, 1, 2, 5):
        payload["crashed"] = log.read_text(errors="replace")[-3000:]
    return payload
