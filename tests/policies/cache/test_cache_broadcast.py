"""A shared stream, without HTTP: late subscribers get it from the start, errors reach each
subscriber as its own copy, the answer is stored before anyone sees the end, and the last
subscriber's departure cancels the upstream call."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import orjson
import pytest

from gateway.api.errors import UpstreamError
from policies.cache import SharedStream, StreamAssembler, Subscription


def event(text: str, finish_reason: str | None = None) -> bytes:
    choice = {"text": text, "index": 0, "logprobs": None, "finish_reason": finish_reason}
    return orjson.dumps({"id": "c", "object": "text_completion", "created": 1, "model": "m", "choices": [choice]})


class Upstream:
    """Batches released one at a time by the test; records whether it was closed early."""

    def __init__(self, batches: list[list[bytes]]) -> None:
        self.batches = batches
        self.next = asyncio.Queue[None]()
        self.closed = False
        self.finished = False

    async def __aiter__(self) -> AsyncIterator[list[bytes]]:
        for batch in self.batches:
            await self.next.get()
            yield batch
        self.finished = True

    async def aclose(self) -> None:
        self.closed = True


class Flight:
    """A `SharedStream` wired to a store that records what it was given and when."""

    def __init__(self, upstream: Upstream | Exception) -> None:
        self.stored: list[bytes] = []
        self.seen_at_store: list[bool] = []
        self.forgotten = False

        async def open_() -> tuple[Upstream, str]:
            if isinstance(upstream, Exception):
                raise upstream
            return upstream, "meta"

        async def store(body: bytes) -> None:
            self.seen_at_store.append(self.stream.ended)
            self.stored.append(body)

        def forget(_flight: SharedStream[str]) -> None:
            self.forgotten = True

        self.stream: SharedStream[str] = SharedStream(open_, assembler=StreamAssembler(), store=store, on_end=forget)


async def read(subscription: Subscription[str]) -> list[bytes]:
    assert await subscription.opened() == "meta"
    return [payload async for batch in subscription for payload in batch]


async def test_a_late_subscriber_gets_the_whole_stream_and_the_answer_is_stored_before_the_end() -> None:
    upstream = Upstream([[event("one ")], [event("two ")], [event("", "stop")]])
    flight = Flight(upstream)
    first = flight.stream.subscribe(led=True)
    assert await first.opened() == "meta"
    events = aiter(first)
    upstream.next.put_nowait(None)
    upstream.next.put_nowait(None)
    seen = [*await anext(events)]
    if len(seen) < 2:
        seen += await anext(events)
    late = asyncio.create_task(read(flight.stream.subscribe(led=False)))  # joins after two events
    upstream.next.put_nowait(None)
    seen += [payload async for batch in events for payload in batch]
    got = [seen, await asyncio.wait_for(late, timeout=5)]

    assert got[0] == got[1] == [event("one "), event("two "), event("", "stop")]
    assert flight.seen_at_store == [False]  # stored while the subscribers still waited for the end
    assert orjson.loads(flight.stored[0])["choices"][0]["text"] == "one two "
    assert flight.forgotten
    assert upstream.closed


async def test_an_error_before_the_first_event_reaches_each_subscriber_as_its_own_copy() -> None:
    flight = Flight(UpstreamError("The upstream returned 503.", headers={"x-gateway-attempts": "2"}))
    subscriptions = [flight.stream.subscribe(led=index == 0) for index in range(3)]
    errors = []
    for subscription in subscriptions:
        with pytest.raises(UpstreamError) as caught:
            await subscription.opened()
        errors.append(caught.value)

    assert len({id(error) for error in errors}) == 3
    assert {(error.message, error.headers["x-gateway-attempts"]) for error in errors} == {
        ("The upstream returned 503.", "2")
    }
    assert flight.forgotten
    assert not flight.stored


async def test_the_last_subscriber_leaving_cancels_the_upstream_and_nothing_is_stored() -> None:
    upstream = Upstream([[event("one ")], [event("", "stop")]])
    flight = Flight(upstream)
    first, second = flight.stream.subscribe(led=True), flight.stream.subscribe(led=False)
    pump = flight.stream.task
    upstream.next.put_nowait(None)
    assert await first.opened() == "meta"
    first.leave()
    assert not flight.forgotten  # one subscriber is left: the stream goes on
    second.leave()
    await first.ended()

    assert flight.forgotten
    assert pump is not None
    assert pump.cancelled()
    assert flight.stream.task is None  # let go of: its CancelledError's frames hold the flight
    assert upstream.closed
    assert not upstream.finished
    assert not flight.stored
