"""Probes of the faults added so that every behaviour is proven able to fail (issue 13, third wave):
the ModelServing side of accelerator Pods (resource claims).

Why this module exists: ``test_faults.py`` holds one probe per fault; these are kept apart so the
table there stays readable. Each row is ``(fault, probe, off, on, overlaps)`` as in
:mod:`.fault_cases_plugins`.
"""

from __future__ import annotations

from typing import Any

from .builders import MS, container, fresh_pods


def _claiming_template() -> dict[str, Any]:
    """A Pod template claiming one device through a ResourceClaimTemplate (as accel-modelserving.yaml does)."""
    main = container()
    main["resources"] = {"claims": [{"name": "gpu"}]}
    claim = {"name": "gpu", "resourceClaimTemplateName": "one-gpu"}
    return {"spec": {"containers": [main], "resourceClaims": [claim]}}


def probe_resource_claims() -> tuple[Any, Any]:
    """An entry and a worker Pod of a Role whose templates claim a device: (the entry Pod's
    spec.resourceClaims, the worker Pod's). Only the Pod-level claims: container-resources-dropped
    takes the containers' resources (and their claims with them) but leaves these."""
    ms = MS().role("r", 1, 1, entry=_claiming_template(), worker=_claiming_template()).build()
    entry, worker = fresh_pods(ms)
    return entry["spec"].get("resourceClaims"), worker["spec"].get("resourceClaims")


_CLAIMS = [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}]

CASES: list[tuple[Any, ...]] = [
    ("resource-claims-dropped", probe_resource_claims, (_CLAIMS, _CLAIMS), (None, None), ()),
]
