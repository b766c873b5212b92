"""Every spec-map claim of coverage names its assertion and the fault that proves it, and both exist.

For each statement a behaviour claims (``behaviours``), ``proofs`` gives that behaviour's test
(``<file>::<function>``) and a fault: the test must exist in the suite and be the one declaring the
behaviour, the fault must be one of the reference's (``kthena_ref.faults.FAULTS``) or of the fake
drivers, and a self-validation table must name the behaviour under that fault (so its variant is
required to fail the test). ``python -m tests.specmap_proofs --write`` regenerates the blocks.
"""

from __future__ import annotations

import fnmatch

from conformance.framework.catalog import collect
from conformance.framework.specmap import SPECMAP_PATH, load
from tests.specmap_proofs import TABLES, declaring_test, is_defined, rewrite


def test_every_claim_has_a_proof_whose_test_and_fault_exist() -> None:
    catalog = {b.id: b for b in collect()}
    loaded = load(catalog=catalog.values())  # load refuses a claim without a proof
    problems: list[str] = []
    for s in loaded.statements:
        for p in s.proofs:
            where = f"{s.id}: proof of {p.behaviour}"
            if not is_defined(p.test):
                problems.append(f"{where}: test {p.test} does not exist")
            elif p.test != declaring_test(catalog[p.behaviour]):
                problems.append(
                    f"{where}: test {p.test} is not the one declaring it ({declaring_test(catalog[p.behaviour])})"
                )
            tables = [table for table, known in TABLES if p.fault in known and p.fault in table]
            if not tables:
                problems.append(f"{where}: fault {p.fault} is in no fault list with a self-validation entry")
            elif not any(fnmatch.fnmatchcase(p.behaviour, pattern) for t in tables for pattern in t[p.fault]):
                problems.append(f"{where}: the self-validation entry of fault {p.fault} does not name {p.behaviour}")
    assert not problems, "\n".join(problems)


def test_the_checked_in_proofs_are_current() -> None:
    catalog = {b.id: b for b in collect()}
    text = SPECMAP_PATH.read_text()
    assert rewrite(text, catalog) == text, (
        "conformance/specmap.yaml's proofs are out of date: run `python -m tests.specmap_proofs --write`"
    )


def test_rewrite_replaces_an_old_block_and_skips_unasserted_statements() -> None:
    catalog = {b.id: b for b in collect()}
    some = next(iter(catalog.values()))
    text = (
        f"- id: a/b\n  behaviours: [{some.id}]\n  proofs:\n  - {{behaviour: x, test: 'y', fault: z}}\n"
        "- id: a/c\n  behaviours: []\n"
    )
    written = rewrite(text, catalog)
    assert f"test: '{declaring_test(some)}'" in written
    assert "behaviour: x," not in written
    assert written.count("proofs:") == 1
