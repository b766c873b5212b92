"""``make bench``: wall time of the conformance suite on the embedded cluster.

Runs ``kthena-conformance run`` (every profile; Accelerators on the fake GPU and NPU drivers)
against the reference controller with ``-n 2``, the way ``make conformance`` does, and prints the whole run's wall time
(cluster up, controller deployment, preflight, both passes, report) next to the 5-minute target,
the two passes' times, the slowest tests, and the verdict. Nothing is asserted here.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

from conformance.runner import RunOptions, run

TARGET_SECONDS = 300.0


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="kthena-suite-bench-") as tmp:
        started = time.monotonic()
        result = run(RunOptions(report_dir=Path(tmp), workers=2))
        wall = time.monotonic() - started
        data = result.report
        tests = data.get("tests", [])
        ran = [t for t in tests if t["outcome"] not in ("not-supported", "skipped-by-user")]
        print("conformance suite (every profile, -n 2, embedded cluster, reference controller, fake DRA drivers)")
        met = "met" if wall <= TARGET_SECONDS else "MISSED"
        print(f"  wall time          {wall:7.1f} s   (target <= {TARGET_SECONDS:.0f} s: {met})")
        print(f"  tests run          {len(ran):7d}     of {len(tests)} in the catalog's selected profiles")
        print(f"  summed test time   {sum(t['durationSeconds'] for t in ran):7.1f} s")
        for t in sorted(ran, key=lambda t: -t["durationSeconds"])[:5]:
            print(f"    {t['durationSeconds']:6.1f} s  {t['id']}")
        for p in data.get("profiles", []):
            print(f"  profile {p['profile']:20} {p['verdict']}")
        print(f"  verdict            {data['verdict']}")


if __name__ == "__main__":
    main()
