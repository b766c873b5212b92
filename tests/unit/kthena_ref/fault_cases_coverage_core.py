"""Probes of the faults added so that every behaviour is proven able to fail (issue 13, third wave):
core, plugins and dns behaviours that had no fault variant.

Why this module exists: ``test_faults.py`` holds one probe per fault; these are kept apart so the
table there stays readable. Each row is ``(fault, probe, off, on, overlaps)`` as in
:mod:`.fault_cases_plugins`.
"""

from __future__ import annotations

from typing import Any

CASES: list[tuple[Any, ...]] = []
