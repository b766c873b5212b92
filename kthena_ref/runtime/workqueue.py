"""A rate-limited, keyed work queue with client-go's guarantees (asyncio).

- a key is queued at most once however often it is added (events coalesce);
- a key being processed is never handed to a second worker; adding it meanwhile marks it dirty
  and it is queued again when the first worker is done;
- failures back off per key exponentially (5 ms doubling to 1000 s, as client-go's default item
  limiter), successes ``forget`` the key; ``add_after`` schedules a key for later.

Written here because no well-kept asyncio library offers these semantics.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque


class WorkQueue:
    def __init__(self, base_delay: float = 0.005, max_delay: float = 1000.0) -> None:
        self._queue: deque[str] = deque()
        self._queued: set[str] = set()
        self._processing: set[str] = set()
        self._dirty: set[str] = set()
        self._failures: dict[str, int] = {}
        self._timers: dict[str, asyncio.TimerHandle] = {}
        self._ready = asyncio.Condition()
        self._shutdown = False
        self.base_delay = base_delay
        self.max_delay = max_delay

    def __len__(self) -> int:
        return len(self._queue)

    def add(self, key: str) -> None:
        if self._shutdown:
            return
        if key in self._processing:
            self._dirty.add(key)
            return
        if key in self._queued:
            return
        self._queued.add(key)
        self._queue.append(key)
        asyncio.get_event_loop().create_task(self._notify())

    async def _notify(self) -> None:
        async with self._ready:
            self._ready.notify()

    def add_after(self, key: str, delay: float) -> None:
        if delay <= 0:
            self.add(key)
            return
        loop = asyncio.get_event_loop()
        current = self._timers.get(key)
        due = loop.time() + delay
        if current is not None and current.when() <= due:
            return  # an earlier wake-up is already scheduled
        if current is not None:
            current.cancel()
        self._timers[key] = loop.call_at(due, self._fire, key)

    def _fire(self, key: str) -> None:
        self._timers.pop(key, None)
        self.add(key)

    def add_rate_limited(self, key: str) -> float:
        failures = self._failures.get(key, 0)
        self._failures[key] = failures + 1
        delay = float(min(self.base_delay * (2**failures), self.max_delay))
        self.add_after(key, delay)
        return delay

    def forget(self, key: str) -> None:
        self._failures.pop(key, None)

    def failures(self, key: str) -> int:
        return self._failures.get(key, 0)

    async def get(self) -> str | None:
        """The next key (now being processed), or None once shut down."""
        async with self._ready:
            while not self._queue and not self._shutdown:
                await self._ready.wait()
            if self._shutdown and not self._queue:
                return None
            key = self._queue.popleft()
        self._queued.discard(key)
        self._processing.add(key)
        return key

    def done(self, key: str) -> None:
        self._processing.discard(key)
        if key in self._dirty:
            self._dirty.discard(key)
            self.add(key)

    async def shutdown(self) -> None:
        self._shutdown = True
        for timer in self._timers.values():
            timer.cancel()
        self._timers.clear()
        with contextlib.suppress(RuntimeError):
            async with self._ready:
                self._ready.notify_all()
