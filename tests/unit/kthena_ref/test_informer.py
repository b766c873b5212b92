"""The list-watch informer against a scripted fake API (no cluster, no network).

The fake stands in for a bound kubernetes_asyncio ``list_*`` function called with
``_preload_content=False``: it records the keyword arguments of every call and answers list calls
and watch calls, each from its own script, with aiohttp-like responses (``read()``, ``release()``,
``content.readline()``). When a script runs out the fake blocks (a watch that stays open and
silent; a list that never answers) so the informer idles until the test cancels it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from typing import Any

import pytest
from kubernetes_asyncio.client.exceptions import ApiException

from kthena_ref.runtime.informer import Informer, InformerConfig, Obj

# Fast backoff so the error paths run in milliseconds.
FAST = InformerConfig(page_size=2, watch_timeout=300, inactivity_timeout=150.0, backoff_initial=0.001, backoff_max=0.01)


# -- the fake API --------------------------------------------------------------------------------


class FakeContent:
    def __init__(self, lines: Iterable[bytes], hang: bool) -> None:
        self._lines = deque(lines)
        self._hang = hang

    async def readline(self) -> bytes:
        if self._lines:
            return self._lines.popleft()
        if self._hang:  # an open watch on which nothing happens
            await asyncio.Event().wait()
        return b""  # the server closed the stream


class FakeResponse:
    """What kubernetes_asyncio returns with ``_preload_content=False``: an aiohttp ClientResponse."""

    def __init__(self, *, body: bytes = b"", lines: Iterable[bytes] = (), hang: bool = False, status: int = 200):
        self.status = status
        self._body = body
        self.content = FakeContent(lines, hang)
        self.released = 0

    async def read(self) -> bytes:
        return self._body

    def release(self) -> None:
        self.released += 1


Answer = FakeResponse | BaseException


class FakeApi:
    """A scripted ``list_call``: list calls and watch calls are answered in order from two scripts."""

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []
        self.lists: deque[Answer] = deque()
        self.watches: deque[Answer] = deque()
        self.responses: list[FakeResponse] = []

    async def __call__(self, **kwargs: Any) -> FakeResponse:
        self.calls.append(kwargs)
        script = self.watches if kwargs.get("watch") else self.lists
        if not script:
            if kwargs.get("watch"):
                answer: Answer = FakeResponse(hang=True)
            else:
                await asyncio.Event().wait()  # an unexpected list: never answers (the test sees the call)
                raise AssertionError("unreachable")
        else:
            answer = script.popleft()
        if isinstance(answer, BaseException):
            raise answer
        self.responses.append(answer)
        return answer

    @property
    def list_calls(self) -> list[dict[str, Any]]:
        return [c for c in self.calls if not c.get("watch")]

    @property
    def watch_calls(self) -> list[dict[str, Any]]:
        return [c for c in self.calls if c.get("watch")]

    def all_released(self) -> bool:
        return all(r.released == 1 for r in self.responses)


def obj(name: str, rv: str, uid: str | None = None, **spec: Any) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "ns", "resourceVersion": rv, "uid": uid or f"uid-{name}"},
        "spec": spec,
    }


def page(items: list[Obj], rv: str, cont: str | None = None) -> FakeResponse:
    metadata: dict[str, Any] = {"resourceVersion": rv}
    if cont:
        metadata["continue"] = cont
    return FakeResponse(body=json.dumps({"kind": "PodList", "metadata": metadata, "items": items}).encode())


def event(kind: str, o: Obj) -> bytes:
    return json.dumps({"type": kind, "object": o}).encode() + b"\n"


def bookmark(rv: str) -> bytes:
    return event("BOOKMARK", {"kind": "Pod", "apiVersion": "v1", "metadata": {"resourceVersion": rv}})


def error_event(code: int, message: str = "too old resource version") -> bytes:
    status = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "message": message, "code": code}
    return event("ERROR", status)


def watch(*lines: bytes, hang: bool = False) -> FakeResponse:
    return FakeResponse(lines=lines, hang=hang)


def status_response(code: int, reason: str) -> FakeResponse:
    """An API error as kubernetes_asyncio hands it over with ``_preload_content=False``: not raised."""
    body = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "reason": reason, "code": code}
    return FakeResponse(body=json.dumps(body).encode(), lines=[json.dumps(body).encode()], status=code)


class Recorder:
    """A handler recording (kind, name, resourceVersion, old resourceVersion)."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, str, str | None, str | None]] = []

    def __call__(self, kind: str, obj: Obj, old: Obj | None) -> None:
        meta = obj["metadata"]
        old_rv = old["metadata"].get("resourceVersion") if old else None
        self.seen.append((kind, meta["name"], meta.get("resourceVersion"), old_rv))

    def kinds(self, kind: str) -> list[str]:
        return [name for k, name, _, _ in self.seen if k == kind]


# -- helpers to run a scenario -------------------------------------------------------------------


async def eventually(what: str, condition: Callable[[], bool], timeout: float = 3.0) -> None:
    """Poll ``condition`` (yielding to the informer between polls) until it holds."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"waited {timeout}s for {what}")
        await asyncio.sleep(0.001)


@contextlib.asynccontextmanager
async def running(informer: Informer) -> AsyncIterator[asyncio.Task[None]]:
    task = asyncio.create_task(informer.run())
    try:
        yield task
        assert not task.done(), f"the informer stopped: {task.exception() if not task.cancelled() else 'cancelled'}"
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


def run(scenario: Callable[[], Awaitable[None]]) -> None:
    async def bounded() -> None:
        await asyncio.wait_for(scenario(), timeout=20)

    asyncio.run(bounded())


def informer(api: FakeApi, config: InformerConfig = FAST) -> tuple[Informer, Recorder]:
    inf = Informer("pods", api, config, namespace="ns", label_selector="app")
    rec = Recorder()
    inf.add_handler(rec)
    return inf, rec


def names(cache: dict[str, Obj]) -> dict[str, str]:
    """key -> resourceVersion: enough to compare a cache with the server's state."""
    return {k: v["metadata"]["resourceVersion"] for k, v in cache.items()}


# -- list ------------------------------------------------------------------------------------------


def test_list_pages_with_limit_and_continue_then_watches_from_the_list_resource_version() -> None:
    api = FakeApi()
    api.lists += [
        page([obj("a", "10"), obj("b", "11")], "", cont="tok-1"),
        page([obj("c", "12"), obj("d", "13")], "", cont="tok-2"),
        page([obj("e", "14")], "100"),
    ]

    async def scenario() -> None:
        inf, rec = informer(api)
        assert not inf.synced.is_set()
        async with running(inf):
            await eventually("the first watch", lambda: len(api.watch_calls) == 1)
            assert inf.synced.is_set()
        lists = api.list_calls
        assert len(lists) == 3
        for call in lists:
            assert call["limit"] == 2 and call["_preload_content"] is False
            assert call["namespace"] == "ns" and call["label_selector"] == "app"
            assert not call.get("watch")
        assert "_continue" not in lists[0]
        assert [c["_continue"] for c in lists[1:]] == ["tok-1", "tok-2"]
        w = api.watch_calls[0]
        assert w["resource_version"] == "100", "the watch starts where the list ended"
        assert w["allow_watch_bookmarks"] is True and w["timeout_seconds"] == 300 and w["_preload_content"] is False
        assert w["namespace"] == "ns" and w["label_selector"] == "app"
        assert "_continue" not in w and "limit" not in w
        listed = list(zip("abcde", ["10", "11", "12", "13", "14"], strict=True))
        assert names(inf.cache) == {f"ns/{n}": rv for n, rv in listed}
        assert rec.seen == [("ADDED", n, rv, None) for n, rv in listed]
        assert inf.relists == 1 and inf.resource_version == "100"
        assert api.all_released()

    run(scenario)


def test_synced_is_set_only_once_the_whole_list_is_in() -> None:
    api = FakeApi()
    api.lists.append(page([obj("a", "1"), obj("b", "2")], "", cont="tok"))  # the second page never answers

    async def scenario() -> None:
        inf, rec = informer(api)
        async with running(inf):
            await eventually("the second page requested", lambda: len(api.list_calls) == 2)
            assert not inf.synced.is_set()
            assert inf.cache == {} and rec.seen == [], "a partial list is not published"

    run(scenario)


# -- watch -----------------------------------------------------------------------------------------


def test_cache_follows_watch_events_and_equals_the_server_state() -> None:
    api = FakeApi()
    api.lists.append(page([obj("a", "1"), obj("b", "2")], "2"))
    api.watches.append(
        watch(
            event("ADDED", obj("c", "3")),
            event("MODIFIED", obj("a", "4", image="v2")),
            b"\n",  # blank keep-alive lines are skipped
            event("DELETED", obj("b", "5")),
            event("ADDED", obj("d", "6")),
            event("MODIFIED", obj("d", "7")),
            event("DELETED", obj("d", "8")),
            event("MODIFIED", obj("c", "9")),
            hang=True,
        )
    )
    server = {"ns/a": "4", "ns/c": "9"}

    async def scenario() -> None:
        inf, rec = informer(api)
        async with running(inf):
            await eventually("every event handled", lambda: inf.resource_version == "9")
            assert names(inf.cache) == server
            assert inf.cache["ns/a"]["spec"] == {"image": "v2"}, "the cache holds the object as sent"
        assert rec.seen == [
            ("ADDED", "a", "1", None),
            ("ADDED", "b", "2", None),
            ("ADDED", "c", "3", None),
            ("MODIFIED", "a", "4", "1"),
            ("DELETED", "b", "5", "2"),
            ("ADDED", "d", "6", None),
            ("MODIFIED", "d", "7", "6"),
            ("DELETED", "d", "8", "7"),
            ("MODIFIED", "c", "9", "3"),
        ]
        assert inf.relists == 1 and len(api.watch_calls) == 1

    run(scenario)


def test_an_added_event_for_a_cached_object_is_a_modification() -> None:
    """After a resume the server may send ADDED for an object already cached: handlers see an update."""
    api = FakeApi()
    api.lists.append(page([obj("a", "1")], "1"))
    api.watches.append(watch(event("ADDED", obj("a", "2")), hang=True))

    async def scenario() -> None:
        inf, rec = informer(api)
        async with running(inf):
            await eventually("the event", lambda: inf.resource_version == "2")
        assert rec.seen == [("ADDED", "a", "1", None), ("MODIFIED", "a", "2", "1")]

    run(scenario)


def test_resource_version_comes_from_every_event_including_bookmarks_and_the_next_watch_resumes_from_it() -> None:
    api = FakeApi()
    api.lists.append(page([obj("a", "10")], "10"))
    api.watches += [
        watch(event("ADDED", obj("b", "11")), bookmark("15")),  # then the server closes the watch
        watch(event("MODIFIED", obj("a", "16")), event("DELETED", obj("b", "17"))),
        watch(bookmark("20"), bookmark("25")),
    ]

    async def scenario() -> None:
        inf, rec = informer(api)
        async with running(inf):
            await eventually("four watches", lambda: len(api.watch_calls) == 4)
            assert names(inf.cache) == {"ns/a": "16"}
        assert [c["resource_version"] for c in api.watch_calls] == ["10", "15", "17", "25"]
        assert len(api.list_calls) == 1 and inf.relists == 1, "a closed watch resumes, it does not re-list"
        assert all(kind != "BOOKMARK" for kind, *_ in rec.seen), "bookmarks are not delivered to handlers"
        assert rec.seen == [
            ("ADDED", "a", "10", None),
            ("ADDED", "b", "11", None),
            ("MODIFIED", "a", "16", "10"),
            ("DELETED", "b", "17", "11"),
        ]
        assert api.all_released()

    run(scenario)


def test_inactivity_timeout_reconnects_from_the_last_resource_version_without_relisting() -> None:
    api = FakeApi()
    api.lists.append(page([obj("a", "10")], "10"))
    api.watches += [
        watch(event("MODIFIED", obj("a", "11")), bookmark("12"), hang=True),  # then silence
        watch(event("ADDED", obj("b", "13")), hang=True),  # silence again
    ]
    config = InformerConfig(inactivity_timeout=0.05, backoff_initial=0.001, backoff_max=0.01)

    async def scenario() -> None:
        inf, rec = informer(api, config)
        async with running(inf):
            await eventually("three watches", lambda: len(api.watch_calls) == 3)
            assert names(inf.cache) == {"ns/a": "11", "ns/b": "13"}
        assert [c["resource_version"] for c in api.watch_calls] == ["10", "12", "13"]
        assert len(api.list_calls) == 1 and inf.relists == 1
        assert [r.released for r in api.responses[:3]] == [1, 1, 1], "an abandoned watch is released"
        assert rec.kinds("DELETED") == []

    run(scenario)


# -- 410 Gone: re-list, and deliver what disappeared meanwhile as deletions -------------------------


def test_watch_error_410_relists_and_delivers_objects_gone_meanwhile_as_deletions() -> None:
    api = FakeApi()
    api.lists += [
        page([obj("a", "1"), obj("b", "2"), obj("c", "3"), obj("e", "4")], "4"),
        # Meanwhile (no watch open): b and e deleted, c modified, d added; a untouched.
        page([obj("a", "5"), obj("c", "30")], "", cont="tok"),
        page([obj("d", "40")], "50"),
    ]
    api.watches.append(watch(event("MODIFIED", obj("a", "5")), error_event(410)))

    async def scenario() -> None:
        inf, rec = informer(api)
        async with running(inf):
            await eventually("the watch after the re-list", lambda: len(api.watch_calls) == 2)
            assert names(inf.cache) == {"ns/a": "5", "ns/c": "30", "ns/d": "40"}
        assert inf.relists == 2
        assert api.watch_calls[1]["resource_version"] == "50", "the new watch starts from the re-list"
        after = rec.seen[5:]  # 4 initial ADDED, the MODIFIED of a
        assert sorted(after) == sorted(
            [
                ("MODIFIED", "c", "30", "3"),
                ("ADDED", "d", "40", None),
                ("DELETED", "b", "2", "2"),  # the last state the informer knew
                ("DELETED", "e", "4", "4"),
            ]
        )
        assert not any(name == "a" for _, name, _, _ in after), "an unchanged object is not re-delivered"
        assert [c.get("_continue") for c in api.list_calls] == [None, None, "tok"]
        assert api.all_released()

    run(scenario)


@pytest.mark.parametrize("where", ["watch call", "first page of the re-list", "continue page of the re-list"])
def test_api_exception_410_relists_from_scratch_without_losing_deletions(where: str) -> None:
    gone = ApiException(status=410, reason="Gone")
    api = FakeApi()
    api.lists.append(page([obj("a", "1"), obj("b", "2"), obj("c", "3")], "3"))
    if where == "watch call":
        api.watches.append(gone)
    else:
        api.watches.append(watch(error_event(410)))
        if where == "first page of the re-list":
            api.lists.append(gone)
        else:
            api.lists += [page([obj("a", "1")], "", cont="expired"), gone]
    api.lists.append(page([obj("a", "1"), obj("c", "9")], "20"))  # b was deleted meanwhile

    async def scenario() -> None:
        inf, rec = informer(api)
        async with running(inf):
            await eventually(
                "a watch from the new list", lambda: [c["resource_version"] for c in api.watch_calls][-1:] == ["20"]
            )
            assert names(inf.cache) == {"ns/a": "1", "ns/c": "9"}
        assert rec.seen[3:] == [("MODIFIED", "c", "9", "3"), ("DELETED", "b", "2", "2")]
        assert "_continue" not in api.list_calls[-1], "an expired continue token is not reused"

    run(scenario)


def test_a_relist_without_changes_delivers_nothing() -> None:
    api = FakeApi()
    api.lists += [page([obj("a", "1"), obj("b", "2")], "2"), page([obj("a", "1"), obj("b", "2")], "7")]
    api.watches.append(watch(error_event(410)))

    async def scenario() -> None:
        inf, rec = informer(api)
        async with running(inf):
            await eventually("the second watch", lambda: len(api.watch_calls) == 2)
        assert inf.relists == 2 and len(rec.seen) == 2
        assert api.watch_calls[1]["resource_version"] == "7"

    run(scenario)


def test_a_relist_hands_a_same_name_replacement_to_handlers_with_the_old_object() -> None:
    """A Pod deleted and recreated under the same name while no watch was open comes back from the
    re-list as a MODIFIED whose ``old`` carries the previous UID (keys are names, as in client-go),
    so a handler that tracks UIDs can tell a replacement from an update."""
    api = FakeApi()
    api.lists += [page([obj("a", "1", uid="u1")], "1"), page([obj("a", "9", uid="u2")], "9")]
    api.watches.append(watch(error_event(410)))
    seen: list[tuple[str, str, str | None]] = []

    def uids(kind: str, obj: Obj, old: Obj | None) -> None:
        seen.append((kind, obj["metadata"]["uid"], old["metadata"]["uid"] if old else None))

    async def scenario() -> None:
        inf, _ = informer(api)
        inf.add_handler(uids)
        async with running(inf):
            await eventually("the second watch", lambda: len(api.watch_calls) == 2)
        assert seen == [("ADDED", "u1", None), ("MODIFIED", "u2", "u1")]

    run(scenario)


# -- errors other than 410 ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "failure",
    [
        pytest.param(ApiException(status=500, reason="Internal Server Error"), id="500-raised"),
        pytest.param(ApiException(status=429, reason="Too Many Requests"), id="429-raised"),
        pytest.param(ConnectionResetError("reset by peer"), id="connection-reset"),
        pytest.param(watch(error_event(500, "internal error")), id="watch-error-event-500"),
        pytest.param(watch(b'{"type": "MODIFIED", "object": {"metadata": '), id="truncated-line"),
    ],
)
def test_transient_watch_failures_resume_from_the_last_resource_version_without_relisting(
    failure: Answer,
) -> None:
    api = FakeApi()
    api.lists.append(page([obj("a", "1")], "1"))
    api.watches += [watch(event("MODIFIED", obj("a", "5"))), failure, watch(event("ADDED", obj("b", "6")), hang=True)]

    async def scenario() -> None:
        inf, rec = informer(api)
        async with running(inf):
            await eventually("b added", lambda: "ns/b" in inf.cache)
            assert names(inf.cache) == {"ns/a": "5", "ns/b": "6"}
        assert [c["resource_version"] for c in api.watch_calls] == ["1", "5", "5"]
        assert len(api.list_calls) == 1 and inf.relists == 1
        assert rec.kinds("DELETED") == []
        assert api.all_released()

    run(scenario)


def test_a_failed_relist_leaves_the_cache_alone_and_is_retried() -> None:
    api = FakeApi()
    api.lists += [
        page([obj("a", "1"), obj("b", "2"), obj("c", "3")], "3"),
        page([obj("a", "1")], "", cont="tok"),
        ApiException(status=500, reason="Internal Server Error"),  # the re-list fails half way
        page([obj("a", "1"), obj("b", "2")], "8"),
    ]
    api.watches.append(watch(error_event(410)))

    async def scenario() -> None:
        inf, rec = informer(api)
        async with running(inf):
            await eventually("the second watch", lambda: len(api.watch_calls) == 2)
        assert rec.seen[3:] == [("DELETED", "c", "3", "3")], "only the completed re-list is diffed"
        assert names(inf.cache) == {"ns/a": "1", "ns/b": "2"}
        assert api.watch_calls[1]["resource_version"] == "8"

    run(scenario)


@pytest.mark.parametrize(("code", "relist"), [(500, False), (429, False), (403, True), (410, True)])
def test_an_http_error_answer_to_a_watch_invents_no_event(code: int, relist: bool) -> None:
    """kubernetes_asyncio hands a non-2xx watch answer over as a response: it is an error, not a
    stream. As client-go's reflector: 5xx and 429 retry the watch from the same point; 410 and
    other client errors re-list."""
    api = FakeApi()
    api.lists.append(page([obj("a", "1")], "5"))
    if relist:
        api.lists.append(page([obj("a", "1")], "5"))
    api.watches += [status_response(code, "Failure"), watch(event("MODIFIED", obj("a", "6")), hang=True)]

    async def scenario() -> None:
        inf, rec = informer(api)
        async with running(inf):
            await eventually("a modified", lambda: inf.resource_version == "6")
            assert names(inf.cache) == {"ns/a": "6"}
        assert rec.seen == [("ADDED", "a", "1", None), ("MODIFIED", "a", "6", "1")]
        assert [c["resource_version"] for c in api.watch_calls] == ["5", "5"]
        assert len(api.list_calls) == (2 if relist else 1)
        assert api.all_released()

    run(scenario)


@pytest.mark.parametrize(
    ("code", "reason"),
    [(410, "Expired"), (500, "InternalError"), (429, "TooManyRequests"), (403, "Forbidden")],
)
def test_an_http_error_answer_to_a_relist_is_not_an_empty_list(code: int, reason: str) -> None:
    """With ``_preload_content=False`` kubernetes_asyncio returns a non-2xx answer instead of raising:
    read as a list, its Status body was an empty final page that deleted every cached object."""
    api = FakeApi()
    api.lists += [
        page([obj("a", "1"), obj("b", "2")], "2"),
        status_response(code, reason),  # the re-list after a 410 is answered with an error
        page([obj("a", "1"), obj("b", "2")], "9"),
    ]
    api.watches.append(watch(error_event(410)))

    async def scenario() -> None:
        inf, rec = informer(api)
        async with running(inf):
            await eventually("a watch after the re-list", lambda: len(api.watch_calls) == 2)
            assert rec.kinds("DELETED") == [], f"an HTTP {code} answer deleted {rec.kinds('DELETED')}"
            assert names(inf.cache) == {"ns/a": "1", "ns/b": "2"}
            assert api.watch_calls[1]["resource_version"] == "9"

    run(scenario)


def test_an_http_error_answer_to_the_first_list_does_not_sync_the_informer() -> None:
    api = FakeApi()
    api.lists += [status_response(403, "Forbidden"), page([obj("a", "1")], "1")]

    async def scenario() -> None:
        inf, _ = informer(api)
        async with running(inf):
            await eventually("synced", inf.synced.is_set)
            assert names(inf.cache) == {"ns/a": "1"}, "synced before the cache holds the server's objects"

    run(scenario)


# -- handlers --------------------------------------------------------------------------------------


def test_a_handler_that_raises_does_not_stop_the_informer_nor_the_other_handlers() -> None:
    api = FakeApi()
    api.lists.append(page([obj("a", "1")], "1"))
    api.watches.append(
        watch(
            event("ADDED", obj("b", "2")), event("DELETED", obj("a", "3")), event("MODIFIED", obj("b", "4")), hang=True
        )
    )
    calls = 0

    def broken(kind: str, obj: Obj, old: Obj | None) -> None:
        nonlocal calls
        calls += 1
        raise RuntimeError("handler bug")

    async def scenario() -> None:
        inf = Informer("pods", api, FAST, namespace="ns", label_selector="app")
        rec = Recorder()
        inf.add_handler(broken)
        inf.add_handler(rec)
        async with running(inf):
            await eventually("every event", lambda: inf.resource_version == "4")
            assert names(inf.cache) == {"ns/b": "4"}
        assert calls == 4
        assert [k for k, *_ in rec.seen] == ["ADDED", "ADDED", "DELETED", "MODIFIED"]
        assert inf.relists == 1 and len(api.watch_calls) == 1, "a handler error is not a watch error"

    run(scenario)


def test_cancelling_the_informer_releases_the_open_watch() -> None:
    api = FakeApi()
    api.lists.append(page([], "1"))

    async def scenario() -> None:
        inf, _ = informer(api)
        async with running(inf):
            await eventually("the watch", lambda: len(api.watch_calls) == 1)
        assert api.responses[-1].released == 1

    run(scenario)
