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
    since: float = 0.0


class Expectations:
    def __init__(self, clock: Callable[[], float] = time.monotonic, ttl: float = TTL) -> None:
        self._pending: dict[str, _Pending] = {}
        self._clock = clock
        self._ttl = ttl

    def expect(self, key: str, *, creates: Iterable[str] = (), deletes: Iterable[str] = ()) -> None:
        pending = self._pending.setdefault(key, _Pending(since=self._clock()))
        pending.creates.update(creates)
        pending.deletes.update(deletes)
        pending.since = self._clock()

    def created(self, key: str, name: str) -> None:
        """The informer saw Pod ``name`` (or its creation failed: nothing more will come)."""
        if key in self._pending:
            self._pending[key].creates.discard(name)

    def deleted(self, key: str, uid: str) -> None:
        """The informer saw the deletion (or deletionTimestamp) of the Pod with ``uid``."""
        if key in self._pending:
            self._pending[key].deletes.discard(uid)

    def expects_deletion(self, key: str, uid: str) -> bool:
        pending = self._pending.get(key)
        return pending is not None and uid in pending.deletes

    def satisfied(self, key: str) -> bool:
        pending = self._pending.get(key)
        if pending is None:
            return True
        if (not pending.creates and not pending.deletes) or self._clock() - pending.since > self._ttl:
            del self._pending[key]
            return True
        return False

    def forget(self, key: str) -> None:
        self._pending.pop(key, None)
