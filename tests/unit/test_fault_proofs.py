"""Every behaviour of the catalog is proven able to fail.

A behaviour is proven when a deliberate fault (of the reference controller, or of a fake DRA driver)
lists it as a target: self-validation then requires that fault's variant to make it come out
non-conformant (or ``warning`` for a SHOULD). The fault tables live beside the variants that run
them: ``CAUGHT_BY`` and ``REAL_NODE_CAUGHT_BY`` in ``tests/integration/test_self_validation.py``,
``CAUGHT_BY`` and ``REFERENCE_CAUGHT_BY`` in ``tests/integration/test_accelerators_profile.py`` (fake-driver
faults, and reference faults only an Accelerators run shows) and
``DEVICE_CAUGHT_BY`` in ``tests/integration/test_real_node_variants.py`` (driver faults only a real
kubelet shows).

:data:`NOT_YET_PROVEN` names, with the reason, every behaviour no variant targets yet. The test is a
ratchet both ways: a new behaviour without a fault fails it, and so does an entry that a new fault
has since proven (remove it). Every pattern in the tables must also name a behaviour, so a typo in
a target cannot pass for a proof.
"""

from __future__ import annotations

import fnmatch

from conformance.framework.catalog import collect
from tests.integration.test_accelerators_profile import CAUGHT_BY as DRIVER_CAUGHT_BY
from tests.integration.test_accelerators_profile import REFERENCE_CAUGHT_BY as ACCELERATOR_REFERENCE_CAUGHT_BY
from tests.integration.test_real_node_variants import DEVICE_CAUGHT_BY
from tests.integration.test_self_validation import CAUGHT_BY, REAL_NODE_CAUGHT_BY

TABLES: dict[str, dict[str, list[str]]] = {
    "test_self_validation.CAUGHT_BY": CAUGHT_BY,
    "test_self_validation.REAL_NODE_CAUGHT_BY": REAL_NODE_CAUGHT_BY,
    "test_accelerators_profile.CAUGHT_BY": DRIVER_CAUGHT_BY,
    "test_accelerators_profile.REFERENCE_CAUGHT_BY": ACCELERATOR_REFERENCE_CAUGHT_BY,
    "test_real_node_variants.DEVICE_CAUGHT_BY": DEVICE_CAUGHT_BY,
}

# behaviour id -> why no fault variant proves it can fail
NOT_YET_PROVEN: dict[str, str] = {}


def _targets() -> dict[str, str]:
    """pattern -> the table and fault naming it."""
    return {p: f"{table}[{fault!r}]" for table, rows in TABLES.items() for fault, ps in rows.items() for p in ps}


def test_every_behaviour_is_proven_able_to_fail() -> None:
    ids = {b.id for b in collect()}
    patterns = _targets()
    unproven = {i for i in ids if not any(fnmatch.fnmatchcase(i, p) for p in patterns)}
    new = sorted(unproven - NOT_YET_PROVEN.keys())
    assert not new, (
        f"{len(new)} behaviour(s) no fault variant targets: {new}. Add a fault that breaks each (kthena_ref/faults.py "
        "or the fake drivers) and list it in a CAUGHT_BY table, or, when none can, add it to NOT_YET_PROVEN with the reason"
    )
    now_proven = sorted(NOT_YET_PROVEN.keys() - unproven)
    assert not now_proven, f"proven now (a variant targets them): remove from NOT_YET_PROVEN: {now_proven}"
    unknown = sorted(NOT_YET_PROVEN.keys() - ids)
    assert not unknown, f"NOT_YET_PROVEN names behaviours the catalog does not have: {unknown}"


def test_every_target_names_a_behaviour() -> None:
    ids = {b.id for b in collect()}
    dangling = {p: where for p, where in _targets().items() if not any(fnmatch.fnmatchcase(i, p) for i in ids)}
    assert not dangling, f"fault targets that match no behaviour of the catalog (a typo, or a renamed id): {dangling}"
