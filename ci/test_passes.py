"""``make test`` and ``make test-all``: the project's test passes, each timed, with a summary.

The passes differ in what they share, so they cannot be one pytest invocation:

1. ``unit``: no cluster, no Go; on xdist workers.
2. ``shared-cluster``: integration tests sharing one embedded cluster and one reference
   controller, on xdist workers (and the headless-browser test of the HTML report).
3. ``serial``: tests that must run alone (their own clusters, Ctrl-C, killed parents, a restarted
   kube-apiserver).
4. ``own-controller``: tests that start and kill reference controllers of their own: the control
   run of the whole suite against the healthy reference, self-validation (the suite against each
   broken variant, narrowed to the behaviours the fault must break, on a kept cluster per
   worker), sharding, the installed wheel, interrupts, crashes. On several xdist workers: most of
   these tests wait (out deadlines, for clusters), so they overlap well even on two cores; the
   ones that start controllers on the shared cluster take turns (a file lock: see
   tests/integration/conftest.py). ``--maxschedchunk 1``: xdist's default hands each worker a
   run of about a quarter of its share of consecutive tests at once, which piled the long single
   tests (the control run, the docs recipe, the reliability tests; the ten Accelerators variants)
   onto one or two workers, one after another, while the others ran out of work; one test at a time
   (each worker one running and one queued) lets any idle worker take the next one. The order
   they are handed out in is tests/integration/conftest.py's.

``--all`` (``make test-all``) makes every variant run the whole suite instead of its targets
(``KTHENA_SELFVAL_EXHAUSTIVE=1``): faults x behaviours, for when the suite's judging changes.

Every pass runs even after one fails (CI learns everything in one go); the exit code is the
first failure's. Each pass prints its slowest tests (``--durations``), and the summary each pass's
wall time and the total.

The passes start some thousand Python processes (a suite run, a controller and a manifest
render per self-validation variant), so they keep compiled bytecode even where
``PYTHONDONTWRITEBYTECODE`` is set: outside the checkout, under the per-user cache
(``PYTHONPYCACHEPREFIX``), unless the caller chose a prefix. Without it every process compiles
this project's modules again (measured: 1.3 s of a suite run's 2.6 s start, 2 s of CPU per variant).
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SLOWEST_SHOWN = 25  # ``--durations``: where a pass's time went, in CI's log


@dataclass(frozen=True)
class Pass:
    name: str
    args: tuple[str, ...]


def passes(workers: int, own_workers: int) -> list[Pass]:
    """The passes in order (pure)."""
    return [
        Pass("unit", ("-n", str(workers), "tests/unit")),
        Pass("shared-cluster", ("-n", str(workers), "-m", "(cluster or browser) and not serial", "tests/integration")),
        Pass("serial", ("-m", "serial and not own_controller", "tests/integration")),
        Pass(
            "own-controller",
            ("-n", str(own_workers), "--maxschedchunk", "1", "-m", "own_controller", "tests/integration"),
        ),
    ]


def pass_environment(base: dict[str, str], cache_root: Path) -> dict[str, str]:
    """The passes' environment (pure): ``base`` with bytecode kept under ``cache_root/pycache``
    (the caller's own ``PYTHONPYCACHEPREFIX`` wins)."""
    env = {k: v for k, v in base.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env.setdefault("PYTHONPYCACHEPREFIX", str(cache_root / "pycache"))
    return env


def summary(results: list[tuple[str, int, float]], total: float) -> list[str]:
    """The closing table: one line per pass, then the total (pure)."""
    lines = ["", "test passes:"]
    for name, code, seconds in results:
        verdict = "passed" if code == 0 else f"FAILED (pytest exit {code})"
        lines.append(f"  {name:16} {seconds:7.1f} s  {verdict}")
    minutes, seconds = divmod(round(total), 60)
    lines.append(f"  {'total':16} {total:7.1f} s  ({minutes} m {seconds:02d} s)")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="test_passes", description=__doc__.splitlines()[0])
    parser.add_argument("--pytest", default=str(ROOT / ".venv" / "bin" / "pytest"))
    parser.add_argument("--workers", type=int, default=2, help="xdist workers for the unit and shared passes")
    parser.add_argument("--own-workers", type=int, default=6, help="xdist workers for the own-controller pass")
    parser.add_argument("--all", action="store_true", help="every variant runs the whole suite")
    parser.add_argument("--only", action="append", default=[], help="run only these passes (repeatable)")
    args = parser.parse_args(argv)
    # A shell that starts `make test` in the background without job control hands SIGINT down
    # ignored, and an ignored SIGINT survives exec: the tests that Ctrl-C their own children would
    # then see nothing happen. The passes (and Ctrl-C of this script) get the default back.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    from conformance.cluster.paths import cache_root

    env = pass_environment(dict(os.environ), cache_root())
    env["KTHENA_TEST_RUN_STARTED"] = str(time.time())  # the passes' self-validation records count together
    if args.all:
        env["KTHENA_SELFVAL_EXHAUSTIVE"] = "1"
    chosen = [p for p in passes(args.workers, args.own_workers) if not args.only or p.name in args.only]
    results: list[tuple[str, int, float]] = []
    started = time.monotonic()
    try:
        for p in chosen:
            print(f"\n=== {p.name} ===", flush=True)
            t0 = time.monotonic()
            argv = [args.pytest, "-p", "no:cacheprovider", "-q", f"--durations={SLOWEST_SHOWN}", *p.args]
            code = subprocess.call(argv, cwd=ROOT, env=env)
            results.append((p.name, code, time.monotonic() - t0))
    except KeyboardInterrupt:
        results.append(("(interrupted)", 130, 0.0))
    for line in summary(results, time.monotonic() - started):
        print(line, flush=True)
    failed = [code for _, code, _ in results if code != 0]
    return failed[0] if failed else 0


if __name__ == "__main__":
    sys.exit(main())
