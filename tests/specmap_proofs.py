"""The spec map's proofs: for every behaviour claiming a statement, its test and a fault that breaks it.

``conformance/specmap.yaml`` names, under each asserted statement's ``proofs``, the test that asserts
it (``<file>::<function>``, from the behaviour's declaration) and a fault whose self-validation
variant that test catches (a ``CAUGHT_BY`` table names the behaviour under the fault). The suite
itself never imports the reference or the project's tests, so the map carries them as data and
``tests/unit/framework/test_specmap_proofs.py`` checks that data against the live tables.

``python -m tests.specmap_proofs --write`` rewrites every ``proofs`` block of the map from the
catalog and the tables (a behaviour's first fault, in table order), leaving the rest of the file
as it is; run it after adding a behaviour to a statement or a fault to a table.
"""

from __future__ import annotations

import fnmatch
import re
import sys
from pathlib import Path

from conformance.framework.catalog import Behaviour, collect
from conformance.framework.specmap import SPECMAP_PATH
from fake_devices.drivers import FAULTS as DRIVER_FAULTS
from kthena_ref.faults import FAULTS
from tests.integration.test_accelerators_profile import CAUGHT_BY as DRIVER_CAUGHT_BY
from tests.integration.test_accelerators_profile import REFERENCE_CAUGHT_BY as ACCELERATOR_REFERENCE_CAUGHT_BY
from tests.integration.test_real_node_variants import DEVICE_CAUGHT_BY
from tests.integration.test_self_validation import CAUGHT_BY, REAL_NODE_CAUGHT_BY

ROOT = Path(__file__).resolve().parent.parent

# (table, the faults it may name): reference faults first, so a behaviour's proof is a reference fault
# whenever one catches it.
TABLES: tuple[tuple[dict[str, list[str]], dict[str, str]], ...] = (
    (CAUGHT_BY, FAULTS),
    (REAL_NODE_CAUGHT_BY, FAULTS),
    (ACCELERATOR_REFERENCE_CAUGHT_BY, FAULTS),
    (DRIVER_CAUGHT_BY, DRIVER_FAULTS),
    (DEVICE_CAUGHT_BY, DRIVER_FAULTS),
)


def declaring_test(b: Behaviour) -> str:
    """``conformance/suites/<...>.py::<function>`` of the test declaring ``b``."""
    module, _, function = b.origin.rpartition(".")
    return f"{module.replace('.', '/')}.py::{function}"


def faults_catching(behaviour_id: str) -> list[str]:
    """Every fault (in table order) whose table entry names ``behaviour_id`` (patterns allowed)."""
    out: list[str] = []
    for table, known in TABLES:
        for fault, patterns in table.items():
            if fault in known and fault not in out and any(fnmatch.fnmatchcase(behaviour_id, p) for p in patterns):
                out.append(fault)
    return out


def is_defined(test: str) -> bool:
    """Whether ``<file>::<function>`` names a function defined in that file of the repository."""
    path, _, function = test.partition("::")
    file = ROOT / path
    return file.is_file() and re.search(rf"^def {re.escape(function)}\(", file.read_text(), re.M) is not None


_STATEMENT = re.compile(r"^- id: (?P<id>\S+)$")
_BEHAVIOURS = re.compile(r"^  behaviours: \[(?P<ids>[^\]]*)\]$")


def rewrite(text: str, catalog: dict[str, Behaviour]) -> str:
    """``text`` (the spec map) with each statement's ``proofs`` block regenerated after its
    ``behaviours`` line; the statements' other lines untouched."""
    out: list[str] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        i += 1
        if line == "  proofs:":  # an old block: drop it and its entries
            while i < len(lines) and lines[i].startswith("  - {behaviour:"):
                i += 1
            continue
        out.append(line)
        match = _BEHAVIOURS.match(line)
        if match and match["ids"].strip():
            ids = [s.strip() for s in match["ids"].split(",")]
            out.append("  proofs:")
            for b in ids:
                faults = faults_catching(b)
                fault = faults[0] if faults else "NONE"
                out.append(f"  - {{behaviour: {b}, test: '{declaring_test(catalog[b])}', fault: {fault}}}")
    return "\n".join(out) + "\n"


def main(argv: list[str]) -> int:
    if argv != ["--write"]:
        print("usage: python -m tests.specmap_proofs --write", file=sys.stderr)
        return 2
    catalog = {b.id: b for b in collect()}
    SPECMAP_PATH.write_text(rewrite(SPECMAP_PATH.read_text(), catalog))
    print(f"wrote the proofs of {SPECMAP_PATH}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
