"""``make bench``: what self-validation costs per fault, in total, and at twice today's faults.

Runs the kwok-only self-validation (``pytest -m self_validation tests/integration/
test_self_validation.py`` on ``BENCH_SELFVAL_WORKERS`` xdist workers, default 4, as ``make test``'s
own-controller pass runs it beside the control run) and reads the records it writes
(``reports/self-validation/<fault>.json``: each fault's run, its seconds and its round). Prints:

- faults proven, controller starts (scoped rounds and faults run alone), the pass's wall time, the
  sum of the runs' durations, and both per fault;
- the slope: a per-run model fitted to the measured runs (seconds = a + b x behaviours per inner
  worker), applied to the rounds the planner makes for a synthetic table of twice today's faults
  (every row again, for a twin of each behaviour: as if every behaviour and its faults were
  written twice), and for today's table, at the parallelism the pass achieved.

``BENCH_SELFVAL_RECORDS=1`` skips the run and reads the records a ``make test`` left (only the ones
of its last self-validation). Nothing is asserted: the figures are for people to read.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.integration.selfval_rounds import Round
from tests.integration.selfval_runs import ROUND_WORKERS
from tests.integration.variant_records import VARIANTS_DIR

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Run:
    name: str
    faults: int
    behaviours: int
    workers: int
    seconds: float


def runs_of(records: list[dict[str, Any]]) -> list[Run]:
    """The controller starts the records came from (one per round; a fault alone is its own)."""
    found: dict[str, Run] = {}
    for r in records:
        name = str(r.get("round") or r["fault"])
        found[name] = Run(
            name,
            int(r.get("roundFaults") or 1),
            int(r.get("roundBehaviours") or len(r.get("outcomes") or {}) or 1),
            int(r.get("roundWorkers") or 1),
            float(r.get("roundSeconds") or r["seconds"]),
        )
    return list(found.values())


def fit(runs: list[Run]) -> tuple[float, float]:
    """Least squares of seconds = a + b x (behaviours / workers) over ``runs``."""
    xs = [r.behaviours / r.workers for r in runs]
    ys = [r.seconds for r in runs]
    n = len(runs)
    mean_x, mean_y = sum(xs) / n, sum(ys) / n
    spread = sum((x - mean_x) ** 2 for x in xs)
    b = sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys, strict=True)) / spread if spread else 0.0
    return mean_y - b * mean_x, b


def modelled(rounds: list[Round], a: float, b: float) -> float:
    """Sum of the runs' seconds the model gives ``rounds``."""
    return sum(a + b * len(r.ids()) / (ROUND_WORKERS if r.scoped else 1) for r in rounds)


def doubled(caught_by: dict[str, list[str]], ids: list[str]) -> tuple[dict[str, list[str]], list[str]]:
    """Twice the table: every row again as ``<fault>~twin`` targeting ``<id>~twin`` behaviours."""
    twins = {f"{f}~twin": [f"{p}~twin" for p in patterns] for f, patterns in caught_by.items()}
    return {**caught_by, **twins}, [*ids, *(f"{i}~twin" for i in ids)]


def main() -> None:
    started = time.time()
    wall = 0.0
    if os.environ.get("BENCH_SELFVAL_RECORDS") != "1":
        workers = os.environ.get("BENCH_SELFVAL_WORKERS", "4")
        argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", workers, "-m",
                "self_validation", "tests/integration/test_self_validation.py"]  # fmt: skip
        print(f"selfval bench: {' '.join(argv[1:])}", flush=True)
        subprocess.run(argv, cwd=ROOT, check=False, env={**os.environ, "KTHENA_TEST_RUN_STARTED": str(started)})
        wall = time.time() - started
    from conformance.framework.catalog import collect
    from tests.integration.test_self_validation import CAUGHT_BY, UNSCOPABLE, plan

    records = [json.loads(p.read_text()) for p in sorted(VARIANTS_DIR.glob("*.json"))]
    records = [r for r in records if r["fault"] in CAUGHT_BY and not r.get("realNodes")]
    if wall == 0.0 and records:  # from a make test: the last self-validation's records
        last = max((VARIANTS_DIR / f"{r['fault']}.json").stat().st_mtime for r in records)
        records = [r for r in records if (VARIANTS_DIR / f"{r['fault']}.json").stat().st_mtime >= last - 3600]
    if not records:
        print("selfval bench: no self-validation records (run `make test` or this bench without BENCH_SELFVAL_RECORDS)")
        return
    runs = runs_of(records)
    caught = sum(1 for r in records if r["caught"])
    run_seconds = sum(r.seconds for r in runs)
    shared, single = sum(r.faults > 1 for r in runs), sum(r.faults == 1 for r in runs)
    print(f"self-validation: {caught}/{len(CAUGHT_BY)} faults proven, {len(runs)} controller starts "
          f"({shared} scoped rounds, {single} faults alone)")  # fmt: skip
    if wall:
        print(f"  wall {wall:.0f} s for the pass: {wall / len(records):.1f} s per fault")
    print(f"  runs {run_seconds:.0f} s summed: {run_seconds / len(records):.1f} s per fault")
    a, b = fit(runs)
    ids = [x.id for x in collect()]
    today = plan(CAUGHT_BY)
    twice_table, twice_ids = doubled(CAUGHT_BY, ids)
    from tests.integration.selfval_rounds import plan_rounds
    from tests.integration.selfval_runs import label
    from tests.integration.test_self_validation import ROUND_TARGETS, SENTINELS

    twins = UNSCOPABLE | {f"{f}~twin" for f in UNSCOPABLE}
    twice = plan_rounds(twice_table, twice_ids, unscopable=twins, sentinels=SENTINELS, key=label,
                        max_targets=ROUND_TARGETS)  # fmt: skip
    parallel = run_seconds / wall if wall else 1.0
    for name, rounds, faults in (("today", today, len(CAUGHT_BY)), ("twice the faults", twice, len(twice_table))):
        total = modelled(rounds, a, b)
        print(f"  model ({a:.1f} s + {b:.1f} s per behaviour per inner worker), {name}: {faults} faults, "
              f"{len(rounds)} controller starts, {total:.0f} s of runs"
              + (f", ~{total / parallel:.0f} s wall at the measured parallelism {parallel:.1f}" if wall else "")
              + f"; {total / faults:.1f} s per fault")  # fmt: skip


if __name__ == "__main__":
    main()
