"""Expectations: do not plan from a cache that has not yet seen our own writes.

After creating or deleting Pods for a ModelServing, the controller records what it expects the
informer to show next; until every expectation is observed (or times out after five minutes, as
in kube-controller-manager) the ModelServing is not planned again, so a stale cache can never
make it create a ServingGroup twice or delete one more than it meant to. Pod names are
deterministic, so a duplicate create would fail anyway; deletions are what this really guards.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

TTL = 300.0


@dataclass
class _Pending:
    creates: set[str] = field(default_factory=set)  # pod names
    deletes: set[str] = field(default_factory=set)  # pod uids
    patches: dict[str, str] = field(default_factory=dict)  # pod uid -> resourceVersion before the patch
    since: float = 0.0


class Expectations:
    def __init__(self, clock: Callable[[], float] = time.monotonic, ttl: float = TTL) -> None:
        self._pending: dict[str, _Pending] = {}
        self._clock = clock
        self._ttl = ttl

    def expect(
        self,
        key: str,
        *,
        creates: Iterable[str] = (),
        deletes: Iterable[str] = (),
        patches: Iterable[tuple[str, str]] = (),
    ) -> None:
        pending = self._pending.setdefault(key, _Pending(since=self._clock()))
        pending.creates.update(creates)
        pending.deletes.update(deletes)
        pending.patches.update(patches)
        pending.since = self._clock()

    def seen(self, key: str, uid: str, resource_version: str) -> None:
        """The informer shows the Pod ``uid`` at ``resource_version``: a patch planned from an
        older version has landed (or failed: then pass ``resource_version=""``)."""
        pending = self._pending.get(key)
        if pending is not None and uid in pending.patches and pending.patches[uid] != resource_version:
            del pending.patches[uid]

    def created(self, key: str, name: str) -> None:
        """The informer saw Pod ``name`` (or its creation failed: nothing more will come)."""
        if key in self._pending:
            self._pending[key].creates.discard(name)

    def deleted(self, key: str, uid: str) -> None:
        """The informer saw the deletion (or deletionTimestamp) of the Pod with ``uid``."""
        if key in self._pending:
            self._pending[key].deletes.discard(uid)
            self._pending[key].patches.pop(uid, None)

    def expects_deletion(self, key: str, uid: str) -> bool:
        pending = self._pending.get(key)
        return pending is not None and uid in pending.deletes

    def satisfied(self, key: str) -> bool:
        pending = self._pending.get(key)
        if pending is None:
            return True
        if (
            not pending.creates and not pending.deletes and not pending.patches
        ) or self._clock() - pending.since > self._ttl:
            del self._pending[key]
            return True
        return False

    def forget(self, key: str) -> None:
        self._pending.pop(key, None)
