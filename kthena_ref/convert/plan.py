"""What a converter's shell must do for one source object: the pure part of the reconcile.

Why this module exists: a converter (:mod:`.modelbooster`, :mod:`.lws`) says what the child
ModelServing should be; this decides what to write given the children that exist (those with a
controller ownerReference to the source): create the child, update it, delete children of another
name (a ModelBooster backend rename: "update name will cause the old ModelServing deletion and a
new ModelServing creation"), or, when the source cannot be converted, nothing at all (no half-made
ModelServing; an existing child is left as it is) and a report.

An update is planned only when the desired object is not already contained in the existing one:
the API server fills defaults the converter does not write, so an exact comparison would rewrite
the child on every reconcile.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from .. import faults
from . import Conversion, Problem

Obj = dict[str, Any]
Converter = Callable[[Obj, Obj | None], Conversion]


@dataclass(frozen=True)
class Actions:
    """The writes for one source: at most one of create/update, deletions by name, and what to report."""

    create: Obj | None = None
    update: Obj | None = None  # the existing child with the desired spec, labels and owner
    delete: tuple[str, ...] = ()
    problems: tuple[Problem, ...] = ()
    ignored: tuple[Problem, ...] = field(default=())

    @property
    def converted(self) -> bool:
        return not self.problems


def controlled_by(child: Obj, uid: str) -> bool:
    """Whether ``child`` has a controller ownerReference to the object with ``uid``."""
    refs = (child.get("metadata") or {}).get("ownerReferences") or []
    return any(r.get("uid") == uid and r.get("controller") for r in refs if isinstance(r, dict))


def contains(have: Any, want: Any) -> bool:
    """Whether ``have`` holds everything ``want`` says (dicts by key, recursively; lists element-wise
    with the same length; other values equal)."""
    if isinstance(want, dict):
        return isinstance(have, dict) and all(k in have and contains(have[k], v) for k, v in want.items())
    if isinstance(want, list):
        return isinstance(have, list) and len(have) == len(want) and all(map(contains, have, want))
    return bool(have == want)


def _updated(existing: Obj, desired: Obj) -> Obj:
    body = copy.deepcopy(existing)
    meta, want = body.setdefault("metadata", {}), desired["metadata"]
    meta["labels"] = {**(meta.get("labels") or {}), **(want.get("labels") or {})}
    refs = [r for r in meta.get("ownerReferences") or [] if not r.get("controller")]
    meta["ownerReferences"] = [*refs, *[r for r in want.get("ownerReferences") or [] if r.get("controller")]]
    body["spec"] = copy.deepcopy(desired["spec"])
    body.pop("status", None)
    return body


def plan(source: Obj, owned: Iterable[Obj], convert: Converter) -> Actions:
    """The actions for ``source`` given the children it controls (``owned``). Pure."""
    children = {c["metadata"]["name"]: c for c in owned}
    first = convert(source, None)
    if first.child is None:
        return Actions(problems=first.problems, ignored=first.ignored)
    name = first.child["metadata"]["name"]
    existing = children.get(name)
    conversion = first if existing is None else convert(source, existing)
    if conversion.child is None:
        return Actions(problems=conversion.problems, ignored=conversion.ignored)
    desired = conversion.child
    stale = tuple(sorted(n for n, c in children.items() if n != name and not c["metadata"].get("deletionTimestamp")))
    if faults.active("booster-rename-keeps-old-child"):
        stale = ()
    twin = f"{name}-twin"
    if faults.active("booster-child-twice") and desired["metadata"]["ownerReferences"][0]["kind"] == "ModelBooster":
        stale = tuple(n for n in stale if n != twin)
        if existing is not None and twin not in children:
            copy_ = copy.deepcopy(desired)
            copy_["metadata"]["name"] = twin
            return Actions(create=copy_, delete=stale, ignored=conversion.ignored)
    if existing is None:
        return Actions(create=desired, delete=stale, ignored=conversion.ignored)
    update = None if contains(existing, {k: desired[k] for k in ("metadata", "spec")}) else _updated(existing, desired)
    return Actions(update=update, delete=stale, ignored=conversion.ignored)
