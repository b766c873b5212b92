"""Converters: objects that make a ModelServing for the user (a ModelBooster, a LeaderWorkerSet).

Why this package exists: the spec documents two ways a ModelServing is made from another object
(``plugin-framework-and-headless-service.txt``, the converter paragraph; the ModelBooster types of
the API reference). Each converter is a pure function from the source object and the child that
already exists (or None) to a :class:`Conversion`; the shell (:mod:`kthena_ref.runtime.converters`)
only applies it. A conversion either has a child or has problems, never both: a source the
converter cannot express leaves no half-made ModelServing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

HEADLESS_SERVICE = "headless-service"


@dataclass(frozen=True)
class Problem:
    """Why a source object cannot be converted: the field (a dotted path from the object's root,
    e.g. ``spec.leaderWorkerTemplate.subGroupPolicy``) and the reason, in one sentence."""

    field: str
    reason: str

    def __str__(self) -> str:
        return f"{self.field}: {self.reason}"


@dataclass(frozen=True)
class Conversion:
    """What a source object asks for.

    ``child``: the complete ModelServing manifest (apiVersion, kind, metadata with name, namespace,
    labels and a controller ownerReference to the source, spec), or None when ``problems`` is set.
    ``ignored``: fields the source set that the converter does not honour (documented, reported
    as an Event, never fatal)."""

    child: dict[str, Any] | None
    problems: tuple[Problem, ...] = ()
    ignored: tuple[Problem, ...] = field(default=())

    def __post_init__(self) -> None:
        if (self.child is None) == (not self.problems):
            raise ValueError("a Conversion has a child or problems, not both and not neither")


def owner_reference(source: dict[str, Any]) -> dict[str, Any]:
    """The controller ownerReference a child carries to its source object."""
    meta = source["metadata"]
    return {
        "apiVersion": source["apiVersion"],
        "kind": source["kind"],
        "name": meta["name"],
        "uid": meta["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }


def plugins_for(existing: dict[str, Any] | None) -> list[dict[str, Any]] | None:
    """The child's ``spec.plugins``: a new child declares headless-service; an existing child keeps
    exactly what it has (plugins are immutable, so an existing child without the plugin is never
    migrated, and the declaration never changes as worker counts change). None: leave it unset."""
    if existing is None:
        return [{"name": HEADLESS_SERVICE}]
    plugins = (existing.get("spec") or {}).get("plugins")
    return None if plugins is None else [dict(p) for p in plugins]
