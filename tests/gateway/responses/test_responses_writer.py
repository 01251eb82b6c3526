"""The stored responses' own Redis connection (`RedisWriter`): on the real Redis, a write lands
with its expiry, in the URL's database, and concurrent writes (pipelined on one connection) each
land with their own value; against a scripted loopback Redis, the handshake (AUTH, SELECT) comes
first, a connection Redis closes is replaced and the write sent once more, an unanswered write
times out and the next one opens a new connection, an error reply is an error (not repeated),
and a write whose request was cancelled has its reply dropped, never given to the next."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field

import pytest
import redis.asyncio as aioredis
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError

from gateway.pipeline.responses.writer import RedisWriter
from policies.redis_pool import RedisTarget

# (connection number, command) -> the reply to send, b"" to send none, None to close the connection
Script = Callable[[int, list[bytes]], bytes | None]


def ok(connection: int, args: list[bytes]) -> bytes | None:
    return b"+OK\r\n"


@dataclass
class FakeRedis:
    """A loopback server speaking RESP, answering as `script` says, recording what it received."""

    script: Script = ok
    received: list[tuple[int, list[bytes]]] = field(default_factory=list)
    connections: int = 0
    port: int = 0

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        number = self.connections
        try:
            while True:
                count = int((await reader.readline())[1:])
                args = []
                for _ in range(count):
                    size = int((await reader.readline())[1:])
                    args.append((await reader.readexactly(size + 2))[:-2])
                self.received.append((number, args))
                reply = self.script(number, args)
                if reply is None:
                    break
                writer.write(reply)
        except (ValueError, asyncio.IncompleteReadError, ConnectionError):
            pass
        writer.close()


@pytest.fixture
async def fake_redis() -> AsyncIterator[FakeRedis]:
    fake = FakeRedis()
    server = await asyncio.start_server(fake.serve, "127.0.0.1", 0)
    fake.port = server.sockets[0].getsockname()[1]
    try:
        yield fake
    finally:
        server.close()


def writer_for(fake: FakeRedis, path: str = "/0", timeout_s: float = 5.0) -> RedisWriter:
    found = RedisWriter.of(RedisTarget(url=f"redis://127.0.0.1:{fake.port}{path}"), timeout_s)
    assert found is not None
    return found


async def test_a_write_lands_with_its_expiry_in_the_urls_database(redis_url: str, redis_prefix: str) -> None:
    other_db = redis_url.rsplit("/", 1)[0] + "/1"
    writer = RedisWriter.of(RedisTarget(url=other_db), 1.0)
    assert writer is not None
    client, db0 = aioredis.from_url(other_db), aioredis.from_url(redis_url)
    key = f"{redis_prefix}written".encode()
    try:
        await writer.set(key, b'{"id":"resp_1"}', 120)
        assert await client.get(key) == b'{"id":"resp_1"}'
        assert 110 < await client.ttl(key) <= 120
        assert await db0.get(key) is None
    finally:
        writer.close()
        await client.delete(key)
        await client.aclose()
        await db0.aclose()


async def test_concurrent_writes_share_the_connection_and_each_lands(redis_url: str, redis_prefix: str) -> None:
    writer = RedisWriter.of(RedisTarget(url=redis_url), 1.0)
    assert writer is not None
    client = aioredis.from_url(redis_url)
    keys = [f"{redis_prefix}many:{n}".encode() for n in range(200)]
    try:
        await asyncio.gather(*(writer.set(key, b"value-%d" % n, 60) for n, key in enumerate(keys)))
        assert await client.mget(keys) == [b"value-%d" % n for n in range(200)]
    finally:
        writer.close()
        await client.delete(*keys)
        await client.aclose()


def test_a_cluster_or_sentinel_is_written_through_redis_py() -> None:
    assert RedisWriter.of(RedisTarget(url="redis://10.0.0.1:6379", mode="cluster"), 1.0) is None
    sentinel = RedisTarget(mode="sentinel", sentinels=(("10.0.0.5", 26379),), service_name="m")
    assert RedisWriter.of(sentinel, 1.0) is None


async def test_the_handshake_authenticates_and_selects_the_database_first(fake_redis: FakeRedis) -> None:
    found = RedisWriter.of(RedisTarget(url=f"redis://ops:s3cret@127.0.0.1:{fake_redis.port}/2"), 5.0)
    assert found is not None
    await found.set(b"k", b"v", 30)
    found.close()
    assert [args for _, args in fake_redis.received] == [
        [b"AUTH", b"ops", b"s3cret"],
        [b"SELECT", b"2"],
        [b"SET", b"k", b"v", b"EX", b"30"],
    ]


async def test_a_connection_redis_closed_is_replaced_and_the_write_sent_once_more(fake_redis: FakeRedis) -> None:
    fake_redis.script = lambda connection, args: None if connection == 1 else b"+OK\r\n"
    writer = writer_for(fake_redis)
    await writer.set(b"k", b"v", 30)
    writer.close()
    assert fake_redis.received == [(1, [b"SET", b"k", b"v", b"EX", b"30"]), (2, [b"SET", b"k", b"v", b"EX", b"30"])]


async def test_an_unanswered_write_times_out_and_the_next_opens_a_new_connection(fake_redis: FakeRedis) -> None:
    fake_redis.script = lambda connection, args: b"" if connection == 1 else b"+OK\r\n"
    # A reply timeout of 0.05 s for the first connection, which never answers; its connect, and the
    # second connection, get seconds (what answers must not be cut by a loaded machine's slowness).
    writer = writer_for(fake_redis, "/0?socket_connect_timeout=30", timeout_s=0.05)
    with pytest.raises(RedisTimeoutError):
        await writer.set(b"first", b"v", 30)
    writer._timeout_s = 30  # the connections it opens from now on
    await writer.set(b"second", b"v", 30)
    writer.close()
    assert [(connection, args[1]) for connection, args in fake_redis.received] == [(1, b"first"), (2, b"second")]


async def test_an_error_reply_is_an_error_and_not_sent_again(fake_redis: FakeRedis) -> None:
    fake_redis.script = lambda connection, args: b"-READONLY You can't write against a read only replica.\r\n"
    writer = writer_for(fake_redis)
    with pytest.raises(ResponseError, match="READONLY"):
        await writer.set(b"k", b"v", 30)
    writer.close()
    assert len(fake_redis.received) == 1


async def test_a_cancelled_writes_reply_is_dropped_not_given_to_the_next(fake_redis: FakeRedis) -> None:
    def script(connection: int, args: list[bytes]) -> bytes:
        return b"-ERR refused\r\n" if args[1] == b"refused" else b"+OK\r\n"

    fake_redis.script = script
    writer = writer_for(fake_redis)
    await writer.set(b"opening", b"v", 30)  # the connection is open
    first = asyncio.ensure_future(writer.set(b"refused", b"v", 30))
    await asyncio.sleep(0)  # sent, not yet answered
    first.cancel()
    await writer.set(b"accepted", b"v", 30)  # its own reply, not the cancelled one's error
    writer.close()
    assert first.cancelled()
    assert [args[1] for _, args in fake_redis.received] == [b"opening", b"refused", b"accepted"]


async def test_an_unreachable_redis_is_a_connection_error() -> None:
    found = RedisWriter.of(RedisTarget(url="redis://127.0.0.1:1/0"), 1.0)
    assert found is not None
    with pytest.raises(RedisConnectionError):
        await found.set(b"k", b"v", 30)
