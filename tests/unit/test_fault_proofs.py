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
# TODO(lead): the converter behaviours (issue 16, part 3). The faults named "caught by" made these behaviours fail
# (non-conformant, or warning for a SHOULD) in local runs with --reference-fault: list them in CAUGHT_BY
# (tests/integration/test_self_validation.py) and drop the entries; the others need the new fault named.
NOT_YET_PROVEN: dict[str, str] = {
    "modelbooster/convert/worker-image": "caught by booster-worker-image-ignored, not yet in CAUGHT_BY",
    "modelbooster/convert/backend-env": "caught by booster-env-dropped, not yet in CAUGHT_BY",
    "modelbooster/convert/downloader-model-uri": "caught by booster-downloader-without-uri, not yet in CAUGHT_BY",
    "modelbooster/convert/cache-hostpath": "caught by booster-cache-entry-only, not yet in CAUGHT_BY",
    "modelbooster/convert/cache-empty": "caught by booster-cache-entry-only, not yet in CAUGHT_BY",
    "modelbooster/convert/cache-pvc": "caught by booster-cache-entry-only, not yet in CAUGHT_BY",
    "modelbooster/convert/scheduler-name": "caught by booster-scheduler-name-dropped, not yet in CAUGHT_BY",
    "modelbooster/convert/runtime-class": "caught by booster-runtime-class-dropped, not yet in CAUGHT_BY",
    "modelbooster/convert/single-pod-no-worker-template": "caught by booster-worker-template-always, not yet in CAUGHT_BY",
    "modelbooster/convert/multi-pod-worker-template": "caught by booster-no-worker-template, not yet in CAUGHT_BY",
    "modelbooster/convert/headless-service-declared": "caught by booster-child-without-headless, not yet in CAUGHT_BY",
    "modelbooster/convert/plugins-stable-on-pods-change": "caught by booster-plugins-rederived, not yet in CAUGHT_BY",
    "modelbooster/convert/backend-rename-replaces-child": "caught by booster-rename-keeps-old-child, not yet in CAUGHT_BY",
    "modelbooster/convert/disaggregated-roles": "caught by booster-disaggregated-one-role, not yet in CAUGHT_BY",
    "modelbooster/status/observed-generation": "caught by booster-no-observed-generation, not yet in CAUGHT_BY",
    "modelbooster/admission/deprecation-warning": "caught by booster-crd-not-deprecated, not yet in CAUGHT_BY",
    "lws/convert/headless-service-declared": "caught by lws-child-without-headless, not yet in CAUGHT_BY",
    "lws/convert/size-one-keeps-worker-template": "caught by lws-size-one-without-worker-template, not yet in CAUGHT_BY",
    "lws/convert/size-one-dns": "caught by lws-size-one-without-worker-template, not yet in CAUGHT_BY",
    "lws/convert/size-three-layout": "caught by lws-worker-replicas-equal-size, not yet in CAUGHT_BY",
    "lws/convert/plugins-stable-on-size-change": "caught by lws-plugins-rederived, not yet in CAUGHT_BY",
    "modelbooster/convert/one-child": "needs a new fault: a second ModelServing controlled by the booster (e.g. converter-two-children)",
    "modelbooster/admission/documented-bounds": "needs a new fault: the ModelBooster CRD served without its validations (e.g. booster-crd-no-validation)",
    "modelbooster/admission/names-field": "needs a new fault: refusals of the documented validations without field paths (booster-admission-message-without-field only changes webhook messages, and every case here is refused by the schema first)",
    "modelbooster/admission/worker-type-default": "needs a new fault: the ModelBooster CRD without its defaults (e.g. booster-crd-no-defaults)",
}


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
