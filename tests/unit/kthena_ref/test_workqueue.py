"""The keyed, rate-limited work queue: client-go's guarantees, on asyncio."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import pytest

from kthena_ref.runtime.workqueue import WorkQueue


def run(scenario: Callable[[], Awaitable[None]]) -> None:
    async def bounded() -> None:
        await asyncio.wait_for(scenario(), timeout=10)

    asyncio.run(bounded())


async def get_now(q: WorkQueue, timeout: float = 1.0) -> str | None:
    return await asyncio.wait_for(q.get(), timeout)


async def nothing_ready(q: WorkQueue) -> bool:
    """No key can be taken: a get() does not complete while the loop runs everything ready to run."""
    task = asyncio.create_task(q.get())
    for _ in range(20):
        await asyncio.sleep(0)
    done = task.done()
    task.cancel()
    if done:
        raise AssertionError(f"a key was ready: {task.result()!r}")
    return True


def test_adding_a_queued_key_again_coalesces() -> None:
    async def scenario() -> None:
        q = WorkQueue()
        for key in ("a", "b", "a", "c", "b", "a"):
            q.add(key)
        assert len(q) == 3
        assert [await get_now(q) for _ in range(3)] == ["a", "b", "c"], "first-added order"
        assert await nothing_ready(q)

    run(scenario)


def test_a_key_in_processing_is_not_handed_out_twice_and_is_requeued_once_when_done() -> None:
    async def scenario() -> None:
        q = WorkQueue()
        q.add("a")
        assert await get_now(q) == "a"
        q.add("a")
        q.add("a")
        assert len(q) == 0, "added while processing: remembered, not queued"
        second = asyncio.create_task(q.get())  # another worker waiting
        assert await nothing_ready(q)
        assert not second.done()
        q.done("a")
        assert await asyncio.wait_for(second, 1) == "a", "queued again once the first worker is done"
        assert len(q) == 0, "and only once"
        q.done("a")
        assert await nothing_ready(q), "done without a new add does not re-queue"

    run(scenario)


def test_other_keys_flow_while_one_is_processed() -> None:
    async def scenario() -> None:
        q = WorkQueue()
        q.add("a")
        q.add("b")
        first = await get_now(q)
        q.add(first or "")
        assert await get_now(q) == "b"
        assert await nothing_ready(q)

    run(scenario)


def test_waiting_workers_each_get_a_different_key() -> None:
    async def scenario() -> None:
        q = WorkQueue()
        workers = [asyncio.create_task(q.get()) for _ in range(3)]
        await asyncio.sleep(0)
        q.add("a")
        q.add("b")
        for _ in range(1000):
            if sum(t.done() for t in workers) >= 2:
                break
            await asyncio.sleep(0)
        assert await nothing_ready(q)
        done = [t for t in workers if t.done()]
        assert sorted(t.result() or "" for t in done) == ["a", "b"], "two keys, two workers, no key twice"
        for t in workers:
            t.cancel()

    run(scenario)


def test_add_after_delivers_the_key_only_once_the_delay_has_passed() -> None:
    async def scenario() -> None:
        loop = asyncio.get_running_loop()
        q = WorkQueue()
        start = loop.time()
        q.add_after("a", 0.05)
        assert len(q) == 0 and await nothing_ready(q)
        assert await get_now(q) == "a"
        assert loop.time() - start >= 0.05

    run(scenario)


def test_add_after_keeps_the_earliest_wake_up() -> None:
    async def scenario() -> None:
        loop = asyncio.get_running_loop()
        q = WorkQueue()
        start = loop.time()
        q.add_after("late-then-early", 30)
        q.add_after("late-then-early", 0.02)  # sooner: replaces the later timer
        q.add_after("early-then-late", 0.03)
        q.add_after("early-then-late", 30)  # later: the earlier timer stands
        got = {await get_now(q), await get_now(q)}
        assert got == {"late-then-early", "early-then-late"}
        assert loop.time() - start < 5
        for key in got:
            q.done(key or "")
        assert await nothing_ready(q), "a replaced timer does not fire too"

    run(scenario)


def test_add_after_zero_adds_now_and_a_timer_firing_during_processing_requeues_after_done() -> None:
    async def scenario() -> None:
        q = WorkQueue()
        q.add_after("a", 0)
        assert len(q) == 1
        assert await get_now(q) == "a"
        q.add_after("a", 0.01)
        second = asyncio.create_task(q.get())
        await asyncio.sleep(0.05)  # the experiment: let the timer fire while "a" is processed
        assert not second.done(), "the timer does not hand out a key in processing"
        q.done("a")
        assert await asyncio.wait_for(second, 1) == "a"

    run(scenario)


def test_rate_limited_backoff_doubles_per_key_is_capped_and_forget_resets_it() -> None:
    async def scenario() -> None:
        q = WorkQueue(base_delay=0.005, max_delay=0.1)
        delays = [q.add_rate_limited("a") for _ in range(7)]
        assert delays == pytest.approx([0.005, 0.01, 0.02, 0.04, 0.08, 0.1, 0.1])
        assert q.failures("a") == 7
        assert q.add_rate_limited("b") == pytest.approx(0.005), "backoff is per key"
        q.forget("a")
        assert q.failures("a") == 0
        assert q.add_rate_limited("a") == pytest.approx(0.005)
        assert {await get_now(q), await get_now(q)} == {"a", "b"}

    run(scenario)


def test_default_backoff_is_client_gos() -> None:
    async def scenario() -> None:
        q = WorkQueue()
        delays = [q.add_rate_limited("a") for _ in range(20)]
        assert delays[:3] == pytest.approx([0.005, 0.01, 0.02])
        assert delays[-1] == 1000.0
        await q.shutdown()

    run(scenario)


def test_shutdown_wakes_waiting_workers_with_none_and_stops_taking_keys() -> None:
    async def scenario() -> None:
        q = WorkQueue()
        waiting = [asyncio.create_task(q.get()) for _ in range(2)]
        await asyncio.sleep(0)
        q.add_after("later", 0.01)
        await q.shutdown()
        assert await asyncio.wait_for(asyncio.gather(*waiting), 1) == [None, None]
        q.add("a")
        assert len(q) == 0
        assert await get_now(q) is None
        await asyncio.sleep(0.03)  # the experiment: the timer would have fired by now
        assert len(q) == 0, "pending timers are cancelled"

    run(scenario)


def test_shutdown_lets_workers_drain_what_is_queued() -> None:
    async def scenario() -> None:
        q = WorkQueue()
        q.add("a")
        q.add("b")
        await q.shutdown()
        assert [await get_now(q), await get_now(q), await get_now(q)] == ["a", "b", None]

    run(scenario)
