"""Batched reads against a real Redis: a burst of reads shares round trips, failures and
cancellations reach exactly the readers they concern."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence

import pytest
from redis.asyncio import Redis
from redis.exceptions import ConnectionError as RedisConnectionError

from policies.limits.guard import STORE_FAILURES
from policies.redis_batch import BatchedReads
from policies.redis_pool import bounded_client


class CountedFetch:
    """MGET on a real client, recording each command's names; `gate`, when set, holds a fetch
    open until released (a slow Redis, without depending on time)."""

    def __init__(self, client: Redis) -> None:
        self.client = client
        self.batches: list[list[str]] = []
        self.in_flight = asyncio.Event()
        self.gate: asyncio.Event | None = None

    async def __call__(self, names: list[str]) -> Sequence[bytes | str | None]:
        self.batches.append(names)
        self.in_flight.set()
        if self.gate is not None:
            await self.gate.wait()
        return await self.client.mget(names)


@pytest.fixture
async def client(redis_url: str) -> AsyncIterator[Redis]:
    client = bounded_client(redis_url, socket_timeout=5, socket_connect_timeout=5, max_connections=1)
    yield client
    await client.aclose()


@pytest.fixture
async def stored(client: Redis, redis_prefix: str) -> dict[str, bytes]:
    values = {f"{redis_prefix}k{i}": f"value-{i}".encode() for i in range(150)}
    await client.mset(values)
    return values


async def test_300_concurrent_readers_of_150_names_are_answered_by_one_command(
    client: Redis, stored: dict[str, bytes], redis_prefix: str
) -> None:
    fetch = CountedFetch(client)
    reads = BatchedReads(fetch)
    names = [*stored, *stored]  # each name asked for twice
    missing = f"{redis_prefix}missing"

    answers = await asyncio.gather(*(reads.read(name) for name in [*names, missing]))

    assert answers == [*(stored[name] for name in names), None]
    assert [len(batch) for batch in fetch.batches] == [151]  # one connection of the pool, once


async def test_reads_asked_for_during_a_fetch_go_out_together_in_the_next(
    client: Redis, stored: dict[str, bytes]
) -> None:
    fetch = CountedFetch(client)
    fetch.gate = asyncio.Event()
    reads = BatchedReads(fetch)
    first, *later = list(stored)[:11]

    first_read = asyncio.ensure_future(reads.read(first))
    await fetch.in_flight.wait()
    later_reads = [asyncio.ensure_future(reads.read(name)) for name in later]
    fetch.gate.set()

    assert await first_read == stored[first]
    assert await asyncio.gather(*later_reads) == [stored[name] for name in later]
    assert fetch.batches == [[first], later]


async def test_a_failed_fetch_fails_its_batch_as_a_store_failure_and_the_next_is_fetched_afresh(
    client: Redis, stored: dict[str, bytes]
) -> None:
    down = bounded_client("redis://127.0.0.1:1/0", socket_timeout=5, socket_connect_timeout=5)
    target: list[Redis] = [down]
    reads = BatchedReads(lambda names: target[0].mget(names))
    names = list(stored)[:5]
    try:
        failures = await asyncio.gather(*(reads.read(name) for name in names), return_exceptions=True)
        target[0] = client  # Redis is back
        answers = await asyncio.gather(*(reads.read(name) for name in names))
    finally:
        await down.aclose()

    assert all(isinstance(failure, RedisConnectionError) for failure in failures), failures
    assert all(isinstance(failure, STORE_FAILURES) for failure in failures)
    assert answers == [stored[name] for name in names]


async def test_a_reader_that_hangs_up_leaves_the_fetch_to_the_others(client: Redis, stored: dict[str, bytes]) -> None:
    fetch = CountedFetch(client)
    fetch.gate = asyncio.Event()
    reads = BatchedReads(fetch)
    name = next(iter(stored))

    leaving, staying = asyncio.ensure_future(reads.read(name)), asyncio.ensure_future(reads.read(name))
    await fetch.in_flight.wait()
    leaving.cancel()
    fetch.gate.set()

    assert await staying == stored[name]
    assert leaving.cancelled()
    assert len(fetch.batches) == 1


async def test_readers_never_hang_when_the_fetch_itself_is_cancelled(client: Redis, stored: dict[str, bytes]) -> None:
    fetch = CountedFetch(client)
    fetch.gate = asyncio.Event()  # never released: only cancelling the fetch ends it
    reads = BatchedReads(fetch)
    names = list(stored)[:3]

    readers = [asyncio.ensure_future(reads.read(name)) for name in names]
    await fetch.in_flight.wait()
    drain = reads._drain
    assert drain is not None
    drain.cancel()  # as when the loop closes

    outcomes = await asyncio.gather(*readers, return_exceptions=True)
    assert all(isinstance(outcome, asyncio.CancelledError) for outcome in outcomes), outcomes
    assert reads._drain is None
