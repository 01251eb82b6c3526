"""Identical streamed misses at once share one upstream stream as it flows: one upstream call,
every client gets the same complete stream, a client that joins late still gets it from the
start, and the upstream goes on while any client stays. Real HTTP on loopback, real Redis."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from aiohttp import ClientSession
from aiohttp.test_utils import TestServer

from gateway.http.app_keys import SERVING
from policies.cache import SharedStream
from tests.conftest import GatewayFactory
from tests.support.cache_e2e_helpers import STATUS, body, cache_config, post
from tests.support.fake_upstream import FakeUpstream
from tests.support.routing_helpers import eventually
from tests.support.stream_helpers import DONE, Gate, hang_up_after

Json = dict[str, Any]


@pytest.fixture
async def cached(make_gateway: GatewayFactory, upstream: FakeUpstream, redis_url: str, redis_prefix: str) -> TestServer:
    return await make_gateway(cache_config(upstream, redis_url=redis_url, prefix=redis_prefix))


class Reader:
    """One streamed request whose first event and rest are read separately."""

    def __init__(self, http: ClientSession, gateway: TestServer, payload: Json) -> None:
        self._http, self._gateway, self._payload = http, gateway, payload
        self.first_event = asyncio.Event()
        self.status: int | None = None
        self.headers: dict[str, str] = {}
        self.raw = b""

    async def run(self) -> bytes:
        async with self._http.post(self._gateway.make_url("/v1/completions"), json=self._payload) as response:
            self.status, self.headers = response.status, dict(response.headers)
            self.raw = await response.content.readuntil(b"\n\n")
            self.first_event.set()
            self.raw += await response.content.read()
        return self.raw


async def stream_status(http: ClientSession, gateway: TestServer) -> str | None:
    """The cache status of one more identical streamed request (read to its end)."""
    seen = await post(http, gateway, body(stream=True))
    assert seen.raw.endswith(DONE + b"\n\n")
    return seen.cache


def in_flight(gateway: TestServer) -> dict[str, SharedStream[Any]]:
    app = gateway.app
    assert app is not None
    return app[SERVING].shared.cache.streams


async def test_six_identical_streamed_misses_make_one_upstream_call_and_get_the_same_stream(
    cached: TestServer, upstream: FakeUpstream, http: ClientSession
) -> None:
    gate = Gate()
    upstream.script(gate.stream(upstream))
    readers = [Reader(http, cached, body(stream=True)) for _ in range(6)]
    tasks = [asyncio.create_task(reader.run()) for reader in readers]
    # Every client has its first event while the upstream is still held: they joined one live stream.
    await asyncio.wait_for(asyncio.gather(*(reader.first_event.wait() for reader in readers)), timeout=10)
    assert not gate.finished
    gate.release.set()
    streams = await asyncio.wait_for(asyncio.gather(*tasks), timeout=10)

    assert len(upstream.received) == 1
    assert len(set(streams)) == 1  # byte for byte the same stream
    assert streams[0].endswith(DONE + b"\n\n")
    assert b'"finish_reason":"stop"' in streams[0]
    assert {reader.status for reader in readers} == {200}
    assert {reader.headers[STATUS] for reader in readers} == {"MISS"}
    assert sorted(reader.headers["x-gateway-attempts"] for reader in readers) == ["0"] * 5 + ["1"]
    assert {reader.headers["x-gateway-deployment"] for reader in readers} == {"fake"}
    assert await stream_status(http, cached) == "HIT"  # stored once it ended
    assert not in_flight(cached)


async def test_the_stream_goes_on_for_the_clients_that_stay_when_the_first_one_leaves(
    cached: TestServer, upstream: FakeUpstream, http: ClientSession
) -> None:
    gate, hang_up = Gate(), asyncio.Event()
    upstream.script(gate.stream(upstream))
    leader = asyncio.create_task(hang_up_after(cached, body(stream=True), {}, b"data: {", hold=hang_up))
    await asyncio.wait_for(gate.opened.wait(), timeout=10)
    followers = [Reader(http, cached, body(stream=True)) for _ in range(2)]
    tasks = [asyncio.create_task(reader.run()) for reader in followers]
    await asyncio.wait_for(asyncio.gather(*(reader.first_event.wait() for reader in followers)), timeout=10)
    (flight,) = in_flight(cached).values()
    assert flight.subscribers == 3
    hang_up.set()
    await leader
    await eventually(lambda: flight.subscribers == 2)  # the gateway saw the first client go
    gate.release.set()
    streams = await asyncio.wait_for(asyncio.gather(*tasks), timeout=10)

    assert gate.finished
    assert upstream.streams_closed_early == 0
    assert len(set(streams)) == 1
    assert streams[0].endswith(DONE + b"\n\n")
    assert len(upstream.received) == 1
    assert await stream_status(http, cached) == "HIT"


async def test_when_every_client_leaves_the_upstream_call_is_closed_and_nothing_is_stored(
    cached: TestServer, upstream: FakeUpstream, http: ClientSession
) -> None:
    gate, hang_up = Gate(), asyncio.Event()
    upstream.script(gate.stream(upstream))
    clients = [
        asyncio.create_task(hang_up_after(cached, body(stream=True), {}, b"data: {", hold=hang_up)) for _ in range(2)
    ]
    await eventually(lambda: [flight.subscribers for flight in in_flight(cached).values()] == [2])
    hang_up.set()
    await asyncio.gather(*clients)
    await asyncio.wait_for(upstream.closed_early.wait(), timeout=5)

    assert not in_flight(cached)
    assert await stream_status(http, cached) == "MISS"  # the call everyone left was not stored
    assert len(upstream.received) == 2
    assert not gate.finished


async def test_a_cut_shared_stream_ends_every_client_with_the_error_and_is_not_stored(
    cached: TestServer, upstream: FakeUpstream, http: ClientSession
) -> None:
    gate = Gate()
    upstream.script(gate.stream(upstream, done=False))
    readers = [Reader(http, cached, body(stream=True)) for _ in range(3)]
    tasks = [asyncio.create_task(reader.run()) for reader in readers]
    await asyncio.wait_for(asyncio.gather(*(reader.first_event.wait() for reader in readers)), timeout=10)
    gate.release.set()
    streams = await asyncio.wait_for(asyncio.gather(*tasks), timeout=10)

    assert len(set(streams)) == 1  # the same events, then the same error frame
    assert b'"error"' in streams[0].rsplit(b"data: ", 1)[-1]
    assert DONE not in streams[0]
    assert await stream_status(http, cached) == "MISS"  # nothing was stored: the next one calls again
    assert len(upstream.received) == 2


async def test_streams_that_differ_in_asking_for_usage_are_not_shared(
    cached: TestServer, upstream: FakeUpstream, http: ClientSession
) -> None:
    gate = Gate()
    upstream.script(gate.stream(upstream))
    plain = Reader(http, cached, body(stream=True))
    with_usage = Reader(http, cached, body(stream=True, stream_options={"include_usage": True}))
    tasks = [asyncio.create_task(plain.run())]
    await asyncio.wait_for(plain.first_event.wait(), timeout=10)
    tasks.append(asyncio.create_task(with_usage.run()))
    await asyncio.wait_for(with_usage.first_event.wait(), timeout=10)
    gate.release.set()
    plain_stream, usage_stream = await asyncio.wait_for(asyncio.gather(*tasks), timeout=10)

    assert len(upstream.received) == 2
    assert b'"usage"' not in plain_stream
    assert b'"usage":{' in usage_stream
