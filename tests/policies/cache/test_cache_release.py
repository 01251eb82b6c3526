"""What the cache path builds for one request is released by reference counting as soon as the
request is over, not left to the cyclic garbage collector: the gateway runs that collector rarely
(`workers.GC_THRESHOLDS`), so a reference cycle kept each shared stream (every event it relayed,
the request's prepared call) for minutes, and a soak's RSS climbed. The tests run with the
collector off and count what survives: nothing per key, however many keys went by."""

from __future__ import annotations

import asyncio
import gc
import weakref
from collections.abc import AsyncIterator, Iterator

import orjson
import pytest

from gateway.api.errors import UpstreamError
from policies.cache import CacheDirectives, CachePlan, MemoryCache, ResponseCache, TieredCache
from tests.support.fake_clock import FakeClock

KEYS = 200
TTL_S = 10.0


def event(text: str, finish_reason: str | None = None) -> bytes:
    choice = {"text": text, "index": 0, "logprobs": None, "finish_reason": finish_reason}
    return orjson.dumps({"id": "c", "object": "text_completion", "created": 1, "model": "m", "choices": [choice]})


class Upstream:
    """A complete stream, or one that breaks, or hangs, after its first event."""

    def __init__(self, outcome: str) -> None:
        self.outcome = outcome

    async def __aiter__(self) -> AsyncIterator[list[bytes]]:
        yield [event("some text ")]
        if self.outcome == "broken":
            raise UpstreamError("the upstream stream broke")
        if self.outcome == "abandoned":
            await asyncio.Event().wait()  # until its subscribers leave, which cancels the call
        yield [event("the end", "stop"), b"[DONE]"]

    async def aclose(self) -> None:
        pass


@pytest.fixture
def no_collector() -> Iterator[None]:
    """Only reference counting frees memory here: whatever a cycle holds stays, and is counted."""
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def plan(key: str) -> CachePlan:
    return CachePlan(key=key, directives=CacheDirectives(), ttl_s=TTL_S, max_entry_bytes=65_536, expected_choices=1)


@pytest.mark.usefixtures("no_collector")
@pytest.mark.parametrize("outcome", ["complete", "broken", "refused", "abandoned"])
async def test_shared_streams_of_many_keys_are_freed_when_they_end_and_their_entries_when_they_expire(
    outcome: str,
) -> None:
    clock = FakeClock()
    memory = MemoryCache(64 * 2**20, clock=clock)
    cache = ResponseCache(TieredCache(memory), clock=clock)
    flights: list[weakref.ref[object]] = []
    for number in range(KEYS):
        upstream = Upstream(outcome)

        async def open_(upstream: Upstream = upstream) -> tuple[Upstream, str]:
            if outcome == "refused":
                raise UpstreamError("the upstream refused the call")
            return upstream, "meta"

        # Two subscribers each: the one that started the flight and one that joined it.
        subscriptions = [cache.share_stream(plan(f"key-{number}"), open_) for _ in range(2)]
        flights.append(weakref.ref(subscriptions[0]._flight))
        for subscription in subscriptions:
            try:
                assert await subscription.opened() == "meta"
                async for _ in subscription:
                    if outcome == "abandoned":  # the client leaves after the first event
                        break
            except UpstreamError:
                assert outcome in {"broken", "refused"}
            await subscription.aclose()
        await subscriptions[0].ended()
        del subscriptions, subscription, upstream
    await asyncio.sleep(0)  # the pumps' done-callbacks run

    assert not cache.streams
    assert sum(flight() is not None for flight in flights) == 0  # none kept alive by a cycle
    assert len(memory) == (KEYS if outcome == "complete" else 0)
    clock.advance(TTL_S)  # every entry expired: the next write drops them all
    await cache.store(plan("one more"), orjson.dumps(complete_body()))
    assert len(memory) == 1


def complete_body() -> dict[str, object]:
    choice = {"text": "x", "index": 0, "logprobs": None, "finish_reason": "stop"}
    return {"id": "c", "object": "text_completion", "created": 1, "model": "m", "choices": [choice]}


class Call:
    """A plain upstream call, held until released, that answers or fails."""

    def __init__(self, fails: bool) -> None:
        self.fails = fails
        self.release = asyncio.Event()

    async def __call__(self) -> bytes:
        await self.release.wait()
        if self.fails:
            raise UpstreamError("the upstream failed")
        return orjson.dumps(complete_body())


@pytest.mark.usefixtures("no_collector")
@pytest.mark.parametrize("fails", [False, True], ids=["answers", "fails"])
async def test_coalesced_calls_of_many_keys_leave_nothing_behind(fails: bool) -> None:
    cache = ResponseCache(TieredCache(MemoryCache(64 * 2**20, clock=FakeClock())), clock=FakeClock())
    calls: list[weakref.ref[object]] = []
    for number in range(KEYS):
        call = Call(fails)
        fills = [asyncio.create_task(cache.fill(plan(f"key-{number}"), call)) for _ in range(3)]
        await asyncio.sleep(0)  # the leader's call and its two followers are in flight
        call.release.set()
        outcomes = await asyncio.gather(*fills, return_exceptions=True)
        assert all(isinstance(found, UpstreamError) for found in outcomes) == fails
        calls.append(weakref.ref(call))
        del fills, outcomes, call
    await asyncio.sleep(0)  # the last tasks' done-callbacks run

    assert len(cache.flights) == 0
    assert sum(call() is not None for call in calls) == 0  # nothing a failed call made is kept by a cycle
