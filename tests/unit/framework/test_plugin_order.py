"""The pytest plugin runs slow behaviours first (so under xdist they overlap with the rest rather than
being the tail of a pass), keeping the file order otherwise. A tiny suite, collected only, in a pytest
subprocess with the plugin."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

SUITE = """
from conformance.framework.catalog import behaviour

SPEC = "api-reference-workload-v1alpha1.txt#ModelServingSpec"


@behaviour("order/fast-a", "It MUST be a.", SPEC, "Core")
def test_fast_a() -> None: ...


@behaviour("order/slow-b", "It MUST be b.", SPEC, "Core", slow=True)
def test_slow_b() -> None: ...


@behaviour("order/fast-c", "It MUST be c.", SPEC, "Core")
def test_fast_c() -> None: ...


@behaviour("order/slow-d", "It MUST be d.", SPEC, "Core", slow=True)
def test_slow_d() -> None: ...
"""


def test_slow_behaviours_are_collected_first_in_file_order(tmp_path: Path) -> None:
    (tmp_path / "test_order.py").write_text(SUITE)
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    argv = [
        sys.executable, "-m", "pytest", "-p", "conformance.framework.plugin", "-p", "no:cacheprovider",
        "-c", str(tmp_path / "pytest.ini"), "--rootdir", str(tmp_path), str(tmp_path / "test_order.py"),
        "--all-features", "--collect-only", "-q",
    ]  # fmt: skip
    proc = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=300, check=False)
    collected = [line.split("::")[-1] for line in proc.stdout.splitlines() if "::" in line]
    assert collected == ["test_slow_b", "test_slow_d", "test_fast_a", "test_fast_c"], proc.stdout + proc.stderr
