"""`Limits` as the pipeline uses it: replicas sharing Redis, 429 answers, Redis down, estimates."""

from __future__ import annotations

import asyncio
import logging
import select
import time
from collections.abc import Sequence
from typing import Any

import orjson
import pytest
import redis.asyncio as aioredis
import yaml
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import MaxConnectionsError, ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError

from gateway.api.schemas import CompletionRequest
from gateway.config.loader import parse_config
from gateway.pipeline.assembly import SharedState
from gateway.routing.attempts import Timing
from policies.limits import (
    BudgetSpec,
    Caller,
    Charge,
    Estimate,
    Limits,
    LimitSpec,
    LimitsSettings,
    LimitsUnavailable,
    MemoryBudgetStore,
    MemoryRateLimiter,
    PoolExhausted,
    RateDecision,
    RateLimited,
    Scope,
    bounded_client,
    estimate,
    is_outage,
    memory_limits,
    redis_limits,
)
from policies.redis_pool import BoundedPool
from tests.support.redis_helpers import closed_port_url, redis_client

TEAM = Caller(key="team-a", deployment="instruct", key_limits=LimitSpec(rpm=10), budget=BudgetSpec(tokens=10**6))


async def test_two_replicas_sharing_redis_enforce_one_requests_per_minute_limit(
    redis_url: str, redis_prefix: str
) -> None:
    async with redis_client(redis_url) as one, redis_client(redis_url) as two:
        replicas = [redis_limits(one, redis_prefix), redis_limits(two, redis_prefix)]

        async def call(i: int) -> bool:
            try:
                await replicas[i % 2].admit(TEAM, Estimate(1, 1))
            except RateLimited:
                return False
            return True

        started = time.monotonic()
        served = await asyncio.gather(*(call(i) for i in range(30)))
    assert_the_bucket(served.count(True), rpm=10, took_s=time.monotonic() - started)


def assert_the_bucket(admitted: int, rpm: int, took_s: float) -> None:
    """A full bucket admits `rpm` at once and refills one request every 60/rpm s: a burst admits
    all of it, and no more than what refilled while it lasted (nothing, unless the machine is slow)."""
    assert rpm <= admitted <= rpm + int(took_s * rpm / 60), (admitted, took_s)


async def test_a_rate_limited_answer_carries_openais_headers_and_envelope() -> None:
    limits = memory_limits()
    caller = Caller(key="team-a", deployment="instruct", key_limits=LimitSpec(rpm=2, tpm=1000))
    admission = await limits.admit(caller, Estimate(10, 90))
    assert admission.headers()["x-ratelimit-remaining-tokens"] == "900"
    await limits.admit(caller, Estimate(10, 90))
    with pytest.raises(RateLimited) as refused:
        await limits.admit(caller, Estimate(10, 90))
    error = refused.value
    assert error.status == 429
    assert error.headers["retry-after"] == "30"
    assert error.headers["x-ratelimit-limit-requests"] == "2"
    assert error.headers["x-ratelimit-remaining-requests"] == "0"
    assert error.headers["x-ratelimit-remaining-tokens"] == "800"
    body = orjson.loads(error.body())["error"]
    assert body["code"] == "rate_limit_exceeded"
    assert body["type"] == "rate_limit_error"
    assert "team-a" in body["message"]
    assert "2 requests per minute" in body["message"]


async def test_a_rate_refusal_gives_the_budget_reservation_back() -> None:
    limits = memory_limits()
    caller = Caller(key="team-a", deployment="d", key_limits=LimitSpec(rpm=1), budget=BudgetSpec(tokens=100))
    await limits.settle(await limits.admit(caller, Estimate(10, 10)), prompt_tokens=10, completion_tokens=10)
    with pytest.raises(RateLimited):
        await limits.admit(caller, Estimate(40, 40))
    usage = await limits.usage("team-a", caller.budget)
    assert (usage.spend.tokens, usage.spend.reserved_tokens) == (20, 0)


async def test_redis_down_fails_open_counted_and_logged_once(caplog: pytest.LogCaptureFixture) -> None:
    async with redis_client(closed_port_url(), socket_connect_timeout=0.2) as dead:
        limits = redis_limits(dead, "test:", LimitsSettings(on_redis_error="open"))
        with caplog.at_level(logging.ERROR, logger="policies.limits"):
            for _ in range(5):
                admission = await limits.admit(TEAM, Estimate(1, 1))
                assert admission.headers() == {}  # served, without limit figures it cannot know
                await limits.settle(admission, prompt_tokens=1, completion_tokens=1)
    assert limits.failures.errors == 15  # five budget reservations, rate checks and settlements
    lines = [record.getMessage() for record in caplog.records if record.name.startswith("policies.limits")]
    assert len(lines) == 1
    assert "serving without limits" in lines[0]


async def test_redis_down_fails_closed_with_503_when_configured() -> None:
    async with redis_client(closed_port_url(), socket_connect_timeout=0.2) as dead:
        limits = redis_limits(dead, "test:", LimitsSettings(on_redis_error="closed"))
        with pytest.raises(LimitsUnavailable) as refused:
            await limits.admit(TEAM, Estimate(1, 1))
    assert refused.value.status == 503
    assert refused.value.headers == {"retry-after": "1"}
    assert limits.failures.errors == 1


async def test_an_open_gateway_has_only_deployment_limits() -> None:
    limits = memory_limits()
    anonymous = Caller(key=None, deployment="instruct", deployment_limits=LimitSpec(rpm=1))
    await limits.admit(anonymous, Estimate(1, 1))
    with pytest.raises(RateLimited) as refused:
        await limits.admit(anonymous, Estimate(1, 1))
    assert "deployment 'instruct'" in refused.value.message


@pytest.mark.parametrize(
    ("body", "prompt_tokens", "completion_tokens"),
    [
        ({"prompt": "x" * 40}, 10, 16),
        ({"prompt": "abc", "max_tokens": 100, "n": 2}, 1, 200),
        ({"prompt": ["aaaa", "bbbbbbbb"], "max_tokens": 5, "best_of": 3, "n": 2}, 3, 30),
        ({"prompt": [1, 2, 3, 4, 5], "max_tokens": 7}, 5, 7),
        ({"prompt": [[1, 2], [3, 4, 5]], "max_tokens": 1}, 5, 2),
        ({"prompt": "abcd", "suffix": "efgh", "max_tokens": 0}, 2, 0),
    ],
)
def test_estimates_count_the_prompt_and_every_possible_completion(
    body: dict[str, object], prompt_tokens: int, completion_tokens: int
) -> None:
    guess = estimate(CompletionRequest.model_validate({"model": "m", **body}))
    assert (guess.prompt_tokens, guess.completion_tokens) == (prompt_tokens, completion_tokens)


class BrokenRate:
    """A rate limiter whose every call fails the way given."""

    def __init__(self, error: Exception) -> None:
        self.error = error

    async def acquire(self, scopes: Sequence[Scope], tokens: int, lease_id: str) -> RateDecision:
        raise self.error

    async def finish(self, scopes: Sequence[Scope], lease_id: str, token_delta: int, estimated: int = 0) -> None:
        raise self.error


SLOTTED = Caller(key="team-a", deployment="d", key_limits=LimitSpec(concurrent=5), budget=BudgetSpec(tokens=10**6))
NOT_OUTAGES = [
    pytest.param(ResponseError("ERR increment or decrement would overflow"), id="script-error"),
    pytest.param(ResponseError("WRONGTYPE Operation against a key holding the wrong kind of value"), id="wrong-type"),
    pytest.param(PoolExhausted("no free Redis connection within 1.0s"), id="pool-exhausted"),
    pytest.param(MaxConnectionsError("Too many connections"), id="pool-full"),
    pytest.param(ValueError("invalid literal for int()"), id="nonsense-reply"),
]


@pytest.mark.parametrize("error", NOT_OUTAGES)
async def test_a_failure_that_is_not_an_outage_never_admits_even_when_failing_open(error: Exception) -> None:
    limits = Limits(BrokenRate(error), MemoryBudgetStore(), LimitsSettings(on_redis_error="open"))
    with pytest.raises(LimitsUnavailable) as refused:
        await limits.admit(SLOTTED, Estimate(1, 1))
    assert refused.value.status == 503
    assert (limits.faults.errors, limits.failures.errors) == (1, 0)
    usage = await limits.usage("team-a", SLOTTED.budget)
    assert usage.spend.reserved_tokens == 0  # the budget reservation was given back


@pytest.mark.parametrize(
    "error",
    [
        pytest.param(RedisConnectionError("Error 111 connecting to 127.0.0.1:1. Connection refused."), id="refused"),
        pytest.param(RedisTimeoutError("Timeout reading from 127.0.0.1:6379"), id="redis-timeout"),
        pytest.param(TimeoutError(), id="timeout"),
        pytest.param(ConnectionResetError(), id="reset"),
    ],
)
async def test_only_an_outage_is_served_without_limits_when_failing_open(error: Exception) -> None:
    assert is_outage(error)
    limits = Limits(BrokenRate(error), MemoryBudgetStore(), LimitsSettings(on_redis_error="open"))
    admission = await limits.admit(SLOTTED, Estimate(1, 1))
    assert admission.headers() == {}
    await limits.settle(admission, prompt_tokens=1, completion_tokens=1)  # the failing finish is only counted
    assert (limits.faults.errors, limits.failures.errors) == (0, 2)


@pytest.mark.parametrize("error", NOT_OUTAGES)
def test_what_is_not_an_outage(error: Exception) -> None:
    assert not is_outage(error)


async def test_a_failing_settlement_is_counted_never_raised() -> None:
    limits = Limits(MemoryRateLimiter(), MemoryBudgetStore(), LimitsSettings())
    admission = await limits.admit(SLOTTED, Estimate(1, 1))
    limits._rate = BrokenRate(ResponseError("ERR script failed"))
    await limits.settle(admission, prompt_tokens=1, completion_tokens=1)
    assert limits.faults.errors == 1


async def test_a_full_bounded_pool_waits_for_a_free_connection(redis_url: str, redis_prefix: str) -> None:
    # 300 calls on 4 connections queue for seconds on a loaded machine: the wait they are given is
    # long (the default 1 s turned a slow run into PoolExhausted); a pool that did not wait at all
    # would refuse the fifth at once, whatever the wait.
    client = bounded_client(redis_url, socket_timeout=5, socket_connect_timeout=5, max_connections=4, pool_wait_s=60)
    try:
        limits = redis_limits(client, redis_prefix)
        caller = Caller(
            key="team-a", deployment="instruct", key_limits=LimitSpec(rpm=50), budget=BudgetSpec(tokens=10**6)
        )

        async def call() -> bool:
            try:
                await limits.settle(await limits.admit(caller, Estimate(1, 1)), prompt_tokens=1, completion_tokens=1)
            except RateLimited:
                return False
            return True

        started = time.monotonic()
        served = await asyncio.gather(*(call() for _ in range(300)))
        took_s = time.monotonic() - started
        assert isinstance(client.connection_pool, BoundedPool)
        assert client.connection_pool.max_connections == 4
    finally:
        await client.aclose()
    assert_the_bucket(served.count(True), rpm=50, took_s=took_s)
    assert (limits.faults.errors, limits.failures.errors) == (0, 0)


async def test_a_pool_that_stays_full_past_its_wait_raises_pool_exhausted(redis_url: str, redis_prefix: str) -> None:
    client = bounded_client(
        redis_url, socket_timeout=None, socket_connect_timeout=5, max_connections=1, pool_wait_s=0.05
    )
    pool = client.connection_pool
    try:
        held = await pool.get_connection()  # type: ignore[no-untyped-call]  # the one connection, as a long command
        with pytest.raises(PoolExhausted) as exhausted:
            await client.ping()
        assert not is_outage(exhausted.value)
        await pool.release(held)
        assert await client.ping()  # a freed connection serves the next command
    finally:
        await client.aclose()


async def test_the_gateway_builds_every_redis_client_on_a_bounded_pool(redis_settings: dict[str, str]) -> None:
    config = {
        "redis": redis_settings,
        "deployments": [{"name": "d", "provider": {"type": "openai", "base_url": "http://127.0.0.1:9/v1"}}],
    }
    shared = SharedState.create(parse_config(yaml.safe_dump(config), {}, source="test.yaml"), Timing())
    try:
        assert isinstance(shared.redis, aioredis.Redis)  # one server (redis.mode: single)
        assert isinstance(shared.redis.connection_pool, BoundedPool)  # keys, virtual keys, breakers, limits
        tier = shared.cache.tiers.redis
        assert tier is not None
        assert isinstance(tier._client, aioredis.Redis)
        assert isinstance(tier._client.connection_pool, BoundedPool)
    finally:
        await shared.aclose()


async def test_a_reply_that_arrived_while_the_loop_was_busy_is_in_time(redis_url: str, redis_prefix: str) -> None:
    """The socket timeout is measured on the event loop: a loop busy past it (a burst of requests)
    must not turn a healthy Redis's reply into a timeout, which the limits would read as an outage."""
    client = bounded_client(redis_url, socket_timeout=0.15, socket_connect_timeout=5)
    try:
        assert await client.ping()  # connected
        connection = next(iter(client.connection_pool._available_connections))

        async def blpop() -> object:
            return await client.blpop([f"{redis_prefix}empty"], timeout=0.1)  # Redis answers in 0.1 s

        pending = asyncio.create_task(blpop())
        while connection._reader is None or connection._reader._waiter is None:  # type: ignore[attr-defined]  # noqa: ASYNC110
            await asyncio.sleep(0)  # until it sent BLPOP and waits for the reply
        busy_until_replied_and_past(connection, client.connection_pool.connection_kwargs["socket_timeout"])
        assert await pending is None
    finally:
        await client.aclose()


def busy_until_replied_and_past(connection: Any, deadline_s: float) -> None:
    """Keep the event loop busy (as a burst of requests does) until Redis's reply is in the
    connection's socket and the read's deadline has passed, however long Redis takes on a loaded
    machine: what the loop finds when it runs again is a reply that arrived in time, read late."""
    started = time.monotonic()
    sock = connection._writer.get_extra_info("socket")
    readable, _, _ = select.select([sock], [], [], 30)  # the reply (or a hang, failed below)
    assert readable, "Redis sent no reply within 30 s"
    time.sleep(max(0.0, started + 2 * deadline_s - time.monotonic()))


async def test_a_hung_redis_still_times_out_and_is_an_outage() -> None:
    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read()
        writer.close()

    server = await asyncio.start_server(silent, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    client = bounded_client(f"redis://127.0.0.1:{port}/0", socket_timeout=0.05, socket_connect_timeout=0.05)
    try:
        with pytest.raises(RedisTimeoutError) as timed_out:
            await client.ping()
        assert is_outage(timed_out.value)
    finally:
        await client.aclose()
        server.close()
        await server.wait_closed()


class LostReply(MemoryBudgetStore):
    """Reserves, then the answer is lost on the way back: what a timed-out script looks like."""

    async def reserve(self, key: str, budget: BudgetSpec, window: int, charge: Charge, reservation: str) -> Any:
        await super().reserve(key, budget, window, charge, reservation)
        raise RedisTimeoutError("Timeout reading from Redis")


async def test_a_reservation_whose_answer_was_lost_is_dropped_at_settlement() -> None:
    limits = Limits(MemoryRateLimiter(), LostReply(), LimitsSettings(on_redis_error="open"))
    admission = await limits.admit(SLOTTED, Estimate(100, 100))  # served without limits: an outage
    assert (await limits.usage("team-a", SLOTTED.budget)).spend.reserved_tokens == 200
    await limits.settle(admission, prompt_tokens=100, completion_tokens=50)
    usage = await limits.usage("team-a", SLOTTED.budget)
    assert (usage.spend.tokens, usage.spend.reserved_tokens) == (150, 0)
