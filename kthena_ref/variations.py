"""Conformant variations of the reference controller: other fair choices where the spec leaves one open.

Why this module exists: a conformance suite must judge only what the spec states. A fault
(:mod:`.faults`) proves a behaviour can fail; a *variation* proves the opposite: the reference
made differently in a way the spec allows must still pass. Each variation changes one choice the
spec leaves to the implementation, at the one place that makes it:

* ``sidecar-first``: every Pod gets a container of the implementation's own, placed first in
  ``spec.containers`` (before the template's), as a service mesh or a metrics agent would be. A
  Pod template is "the data a pod should have"; nothing says the Pod has no other container, or
  that the template's come first.
* ``intermediate-owner``: Pods are owned (controller ownerReference) by an intermediate object,
  a per-ModelServing Lease that the ModelServing owns, instead of by the ModelServing itself
  (as a Deployment owns Pods through ReplicaSets). The spec fixes no ownership; garbage collection
  still removes the Pods with the ModelServing. The Pods keep their labels.

Variations are off by default, switched on for a process with ``kthena-ref run --variation NAME``
(repeatable) or the environment variable ``KTHENA_REF_VARIATIONS`` (comma-separated), which a
``kthena-conformance run --implementation reference`` passes on to the controller it starts.
Unknown names are an error. As with faults, the switch is read-only once the process runs, so
every plan stays a function of its input.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from contextlib import contextmanager

ENV = "KTHENA_REF_VARIATIONS"

VARIATIONS: dict[str, str] = {
    "sidecar-first": "every Pod gets the implementation's own container first in spec.containers",
    "intermediate-owner": (
        "Pods are owned by a per-ModelServing Lease (owned by the ModelServing), not by the ModelServing itself"
    ),
}

SIDECAR_NAME = "kthena-ref-agent"
SIDECAR_IMAGE = "registry.example/kthena-ref-agent:v1"

_configured: list[frozenset[str] | None] = [None]


def _validated(names: Iterable[str]) -> frozenset[str]:
    out = frozenset(n.strip() for n in names if n.strip())
    unknown = sorted(out - VARIATIONS.keys())
    if unknown:
        raise ValueError(f"unknown variation(s) {', '.join(unknown)}; known: {', '.join(sorted(VARIATIONS))}")
    return out


def from_env() -> frozenset[str]:
    """The variations named in ``KTHENA_REF_VARIATIONS`` (ValueError for an unknown name)."""
    return _validated(os.environ.get(ENV, "").split(","))


def configure(names: Iterable[str] | None) -> frozenset[str]:
    """Switch on exactly ``names`` for this process (None: read the environment again)."""
    _configured[0] = None if names is None else _validated(names)
    return enabled()


def enabled() -> frozenset[str]:
    configured = _configured[0]
    return configured if configured is not None else from_env()


def active(name: str) -> bool:
    """Is variation ``name`` switched on? (Unknown names raise: a typo in a hook is a bug.)"""
    if name not in VARIATIONS:
        raise ValueError(f"unknown variation {name!r}")
    return name in enabled()


@contextmanager
def varied(*names: str) -> Iterator[frozenset[str]]:
    """For tests: exactly ``names`` are active inside the block; the previous state comes back after."""
    previous = _configured[0]
    try:
        yield configure(names)
    finally:
        _configured[0] = previous


def sidecar() -> dict[str, str]:
    """The container ``sidecar-first`` puts first in every Pod."""
    return {"name": SIDECAR_NAME, "image": SIDECAR_IMAGE}


def owner_lease_name(ms: str) -> str:
    """The Lease that owns a ModelServing's Pods under ``intermediate-owner``."""
    return f"{ms}-pods"[:253]
