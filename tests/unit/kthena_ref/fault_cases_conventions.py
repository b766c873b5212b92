"""Probes of the faults that break a convention rather than a MUST (issue 13, section 3): the
label selector's other fair reading, an admission refusal whose message names no field, an
eviction refused with 403 instead of the PodDisruptionBudget convention 429.

Why this module exists: ``test_faults.py`` holds one probe per fault; these three read the answers
the reference gives (a status field, an AdmissionReview, an eviction refusal) rather than a plan.
Each row is ``(fault, probe, off, on, overlaps)`` as in :mod:`.fault_cases_plugins`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kthena_ref.admission.server import review_response
from kthena_ref.eviction import refused
from kthena_ref.planner.status import label_selector

from .builders import MS


def probe_label_selector() -> bool:
    """Does the selector single out entry Pods (one per ServingGroup)?"""
    return "entry" in label_selector(MS().replicas(2).role("r", 1, 1).build())


def probe_admission_message() -> bool:
    """Does the refusal of a negative revisionHistoryLimit (a check only negative-history-limit-accepted
    switches off) name the field?"""
    ms = MS().role("r", 1, 0).build().model_dump(by_alias=True, exclude_none=True, mode="json")
    ms["spec"]["revisionHistoryLimit"] = -1
    review = {"request": {"uid": "u", "operation": "CREATE", "object": ms}}
    message = review_response(review)["response"]["status"]["message"]
    return "spec.revisionHistoryLimit" in message


def probe_eviction_code() -> int:
    return int(refused("below the budget")["status"]["code"])


CASES: list[tuple[str, Callable[[], Any], Any, Any, tuple[str, ...]]] = [
    ("label-selector-selects-all", probe_label_selector, True, False, ()),
    # negative-history-limit-accepted: the webhook then refuses nothing, so there is no message to name the field
    ("admission-message-without-field", probe_admission_message, True, False, ("negative-history-limit-accepted",)),
    ("eviction-refused-forbidden", probe_eviction_code, 429, 403, ()),
]
