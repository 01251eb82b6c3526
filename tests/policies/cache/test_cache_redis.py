"""The Redis tier against a real Redis: shared between replicas, expiring, and never in the way
when Redis is down, slow or holds garbage."""

from __future__ import annotations

import asyncio
import logging
import select
import time
import uuid
from collections.abc import AsyncIterator, Callable

import pytest
import redis.asyncio as aioredis
import uvloop

from gateway.api.schemas import CompletionRequest
from policies.cache import (
    CacheBackend,
    CacheEntry,
    CachePolicy,
    CacheStatus,
    MemoryCache,
    RedisCache,
    ResponseCache,
    TieredCache,
    encode_entry,
    make_entry,
)
from tests.support.cache_samples import completion, raw
from tests.support.fake_clock import FakeClock
from tests.support.redis_helpers import closed_port_url

TEST_TIMEOUT_S = 5.0  # no test here waits for it: the timeout itself is tested on a silent server


@pytest.fixture
async def redis_client(redis_url: str) -> AsyncIterator[aioredis.Redis]:
    client = aioredis.from_url(redis_url)
    yield client
    await client.aclose()


@pytest.fixture
async def prefix(redis_client: aioredis.Redis) -> AsyncIterator[str]:
    """A key prefix of this test's own; only its keys are deleted afterwards."""
    prefix = f"test:gateway-cache:{uuid.uuid4().hex}:"
    yield prefix
    keys = [key async for key in redis_client.scan_iter(match=prefix + "*")]
    if keys:
        await redis_client.delete(*keys)


@pytest.fixture
async def tier(redis_url: str, prefix: str) -> AsyncIterator[RedisCache]:
    cache = RedisCache.from_url(redis_url, prefix=prefix, timeout_s=TEST_TIMEOUT_S)
    yield cache
    await cache.aclose()


@pytest.fixture
async def silent_redis_url() -> AsyncIterator[str]:
    """A server that accepts connections and never answers: a hung Redis."""
    writers: list[asyncio.StreamWriter] = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writers.append(writer)
        await reader.read()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    yield f"redis://127.0.0.1:{port}/0"
    for writer in writers:
        writer.close()
    server.close()
    await server.wait_closed()


def fresh_entry(text: str = "Hello there.", ttl_s: float = 60.0) -> CacheEntry:
    return make_entry(raw(completion(text)), now=time.time(), ttl_s=ttl_s)


async def test_an_entry_stored_by_one_replica_is_read_by_another(redis_url: str, prefix: str, tier: RedisCache) -> None:
    other = RedisCache.from_url(redis_url, prefix=prefix, timeout_s=TEST_TIMEOUT_S)
    try:
        entry = fresh_entry()
        assert await tier.put("k1", entry)
        assert await other.get("k1") == entry
        assert await other.get("k2") is None
    finally:
        await other.aclose()


async def test_entries_expire_with_their_ttl(tier: RedisCache, redis_client: aioredis.Redis, prefix: str) -> None:
    assert await tier.put("kept", fresh_entry(ttl_s=60))
    ttl_ms = await redis_client.pttl(prefix + "kept")
    assert 30_000 < ttl_ms <= 60_000  # the entry's TTL, in ms (a wide margin for a loaded machine)
    assert await tier.put("k", fresh_entry(ttl_s=0.3))
    await asyncio.sleep(0.4)  # at least this long: Redis has expired it whatever the load
    assert await tier.get("k") is None
    assert await redis_client.exists(prefix + "k") == 0


@pytest.mark.parametrize(
    "blob",
    [b"garbage", encode_entry(fresh_entry())[:40], b'{"v": 999, "created_at": 1, "expires_at": 2}\n{}'],
)
async def test_a_corrupt_entry_is_ignored_and_deleted(
    tier: RedisCache, redis_client: aioredis.Redis, prefix: str, blob: bytes
) -> None:
    await redis_client.set(prefix + "k", blob, px=60_000)
    assert await tier.get("k") is None
    assert tier.corrupt == 1
    assert tier.errors == 0
    assert await redis_client.exists(prefix + "k") == 0


async def test_deleting_a_corrupt_entry_spares_a_fresh_one_written_meanwhile(
    tier: RedisCache, redis_client: aioredis.Redis, prefix: str
) -> None:
    entry = fresh_entry()
    assert await tier.put("k", entry)  # another replica replaced the garbage just before our delete
    await tier._delete_corrupt("k", b"garbage")
    assert await tier.get("k") == entry


async def test_unreachable_redis_is_a_quick_miss_and_a_skipped_store(prefix: str) -> None:
    tier = RedisCache.from_url(closed_port_url(), prefix=prefix, timeout_s=0.05, backoff_s=0)
    try:
        async with asyncio.timeout(5):  # a refusal is immediate; only a wait of the tier's own would take long
            assert await tier.get("k") is None
            assert await tier.put("k", fresh_entry()) is False
            await tier.delete("k")
        assert tier.errors == 3
    finally:
        await tier.aclose()


async def test_hung_redis_costs_at_most_the_timeout(silent_redis_url: str, prefix: str) -> None:
    tier = RedisCache.from_url(silent_redis_url, prefix=prefix, timeout_s=0.03, backoff_s=0)
    try:
        async with asyncio.timeout(5):  # the 0.03 s timeout, against a Redis that would keep them forever
            assert await tier.get("k") is None
            assert await tier.put("k", fresh_entry()) is False
        assert tier.errors == 2
    finally:
        await tier.aclose()


async def test_a_hung_redis_is_skipped_for_the_backoff_after_a_few_timeouts(silent_redis_url: str, prefix: str) -> None:
    clock = FakeClock()  # the backoff's: it ends when the test says, not when a loaded machine gets there
    tier = RedisCache.from_url(silent_redis_url, prefix=prefix, timeout_s=0.03, backoff_s=0.2, monotonic=clock)
    try:
        for _ in range(tier.timeouts_before_backoff):
            assert await tier.get("k") is None
        for _ in range(20):
            assert await tier.get("k") is None
        assert (tier.errors, tier.skipped) == (tier.timeouts_before_backoff, 20)  # no request tried Redis again
        clock.advance(0.19)
        assert await tier.get("k") is None
        assert (tier.errors, tier.skipped) == (tier.timeouts_before_backoff, 21)  # still backing off
        clock.advance(0.02)
        assert await tier.get("k") is None  # tried again after the backoff
        assert (tier.errors, tier.skipped) == (tier.timeouts_before_backoff + 1, 21)
    finally:
        await tier.aclose()


async def test_after_a_refused_connection_redis_is_skipped_for_the_backoff(prefix: str) -> None:
    tier = RedisCache.from_url(closed_port_url(), prefix=prefix, timeout_s=0.05, backoff_s=60)
    try:
        for _ in range(10):
            assert await tier.get("k") is None
        assert (tier.errors, tier.skipped) == (1, 9)
    finally:
        await tier.aclose()


async def test_an_occasional_slow_reply_costs_only_its_own_request(tier: RedisCache) -> None:
    entry = fresh_entry()
    assert await tier.put("k", entry)
    for _ in range(5):
        tier._failed("GET", TimeoutError())  # a reply later than the timeout, now and then…
        assert await tier.get("k") == entry  # …does not switch Redis off for the others
    assert (tier.errors, tier.skipped) == (5, 0)


@pytest.mark.parametrize("loop_factory", [asyncio.new_event_loop, uvloop.new_event_loop], ids=["asyncio", "uvloop"])
def test_a_reply_that_arrived_while_the_loop_was_busy_is_a_hit(
    redis_url: str, loop_factory: Callable[[], asyncio.AbstractEventLoop]
) -> None:
    """Under load the loop may run late past a lookup's deadline although Redis answered in time:
    that lookup is still a hit, not a timeout that would send the request upstream. The loop is held
    busy, right after the lookup sent its GET, until Redis's reply is in the socket and the deadline
    has passed: both seen, never assumed from durations."""
    timeout_s = 0.02

    def busy_until_answered_and_late(reply: int) -> None:  # the rest of the gateway holds the loop
        started = time.monotonic()  # after the lookup's first step: its deadline is at most timeout_s from here
        readable, _, _ = select.select([reply], [], [], 30)
        assert readable, "Redis did not answer the GET within 30 s"
        time.sleep(max(0.0, started + timeout_s + 0.002 - time.monotonic()))

    async def lookups_while_busy() -> None:
        tier = RedisCache.from_url(redis_url, prefix=f"test:gateway-cache:{uuid.uuid4().hex}:", timeout_s=30)
        try:
            assert await tier.put("k", fresh_entry())  # connects (no deadline of the test's to meet)
            tier.timeout_s = timeout_s
            for _ in range(10):
                reply = _idle_connection_socket(tier)  # the one the GET takes
                lookup = asyncio.ensure_future(tier.get("k"))
                # Its first step sends the GET; this runs in the same turn of the loop, just after it.
                asyncio.get_running_loop().call_soon(busy_until_answered_and_late, reply)
                entry = await lookup
                assert tier.errors == 0, "a reply in the socket by the deadline was taken for a timeout"
                assert entry is not None
                assert entry.body == fresh_entry().body
            tier.timeout_s = 30
            await tier.delete("k")
        finally:
            await tier.aclose()

    with asyncio.Runner(loop_factory=loop_factory) as runner:
        runner.run(lookups_while_busy())


def _idle_connection_socket(tier: RedisCache) -> int:
    """The file descriptor of the tier's one idle connection (redis-py's own attributes)."""
    client = tier._client
    assert isinstance(client, aioredis.Redis)
    [connection] = client.connection_pool._available_connections
    assert connection._writer is not None
    return int(connection._writer.get_extra_info("socket").fileno())


async def test_failures_are_logged_once_per_interval_not_per_request(
    prefix: str, caplog: pytest.LogCaptureFixture
) -> None:
    tier = RedisCache.from_url(closed_port_url(), prefix=prefix, timeout_s=0.05, backoff_s=0, log_interval_s=60)
    caplog.set_level(logging.WARNING, logger="policies.cache.redis_tier")
    try:
        for _ in range(10):
            await tier.get("k")
        assert tier.errors == 10
        assert len(caplog.records) == 1
        assert "serving without it" in caplog.records[0].getMessage()
    finally:
        await tier.aclose()


async def test_a_redis_hit_fills_the_memory_tier(tier: RedisCache, redis_client: aioredis.Redis, prefix: str) -> None:
    entry = fresh_entry()
    await tier.put("k", entry)  # stored by another replica
    tiers = TieredCache(MemoryCache(1_000_000), tier)
    assert await tiers.get("k") == entry
    await redis_client.delete(prefix + "k")
    assert await tiers.get("k") == entry  # now served from this process's memory


async def test_unshared_entries_stay_in_process(tier: RedisCache, redis_client: aioredis.Redis, prefix: str) -> None:
    tiers = TieredCache(MemoryCache(1_000_000), tier)
    assert await tiers.put("k", fresh_entry(), shared=False)
    assert await redis_client.exists(prefix + "k") == 0
    assert await tiers.get("k", shared=False) is not None


@pytest.fixture(params=["memory", "redis", "tiered"])
def backend(request: pytest.FixtureRequest, tier: RedisCache) -> CacheBackend:
    """Every tier, for the contract they all keep."""
    memory = MemoryCache(1_000_000)
    backends: dict[str, CacheBackend] = {"memory": memory, "redis": tier, "tiered": TieredCache(memory, tier)}
    return backends[request.param]


async def test_every_backend_stores_reads_and_deletes(backend: CacheBackend) -> None:
    entry = fresh_entry()
    assert await backend.get("k") is None
    assert await backend.put("k", entry)
    assert await backend.get("k") == entry
    await backend.delete("k")
    assert await backend.get("k") is None


async def test_no_backend_stores_an_expired_entry(backend: CacheBackend) -> None:
    expired = make_entry(raw(completion()), now=time.time() - 120, ttl_s=60)
    assert not await backend.put("k", expired)
    assert await backend.get("k") is None


REQUEST = CompletionRequest.model_validate({"model": "instruct", "prompt": "Say hello", "temperature": 0})


async def answer() -> bytes:
    return raw(completion("Hello!"))


def replica(redis_url: str, prefix: str) -> ResponseCache:
    redis = RedisCache.from_url(redis_url, prefix=prefix, timeout_s=TEST_TIMEOUT_S)
    return ResponseCache(TieredCache(MemoryCache(1_000_000), redis))


async def test_a_miss_on_one_replica_is_a_hit_on_another(redis_url: str, prefix: str) -> None:
    first, second = replica(redis_url, prefix), replica(redis_url, prefix)
    try:
        plans = [
            cache.plan(policy=CachePolicy(), headers={}, deployment="instruct", scope="team-a", request=REQUEST)
            for cache in (first, second)
        ]
        assert (await first.lookup(plans[0])).status == CacheStatus.MISS
        await first.fill(plans[0], answer)
        found = await second.lookup(plans[1])
        assert found.status == CacheStatus.HIT
        assert found.entry is not None
        assert found.entry.body == await answer()
    finally:
        await first.aclose()
        await second.aclose()


async def test_with_redis_down_the_gateway_still_answers_and_caches_in_process(prefix: str) -> None:
    redis = RedisCache.from_url(closed_port_url(), prefix=prefix, timeout_s=0.05)
    cache = ResponseCache(TieredCache(MemoryCache(1_000_000), redis))
    try:
        plan = cache.plan(policy=CachePolicy(), headers={}, deployment="instruct", scope="team-a", request=REQUEST)
        assert (await cache.lookup(plan)).status == CacheStatus.MISS
        filled = await cache.fill(plan, answer)
        assert filled.entry is not None
        assert filled.led
        assert (await cache.lookup(plan)).status == CacheStatus.HIT
        assert redis.errors >= 1
    finally:
        await cache.aclose()
