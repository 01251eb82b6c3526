"""The rate limiter, in this process and in a real Redis: one suite, the same answers."""

from __future__ import annotations

import asyncio
import math
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest

from policies.limits import LimitSpec, MemoryRateLimiter, RateLimiter, RedisRateLimiter, Scope, format_duration
from tests.support.redis_helpers import redis_client

# A lease outlives any test here but the one that waits it out: a held slot (a request in flight)
# must not come back while a loaded machine takes its time between two calls.
LEASE_TTL_S = 600.0
SHORT_LEASE_TTL_S = 2.0  # a crashed worker's slot, waited out; two calls in a row take far less


@asynccontextmanager
async def limiter_of(kind: str, redis_url: str, redis_prefix: str, lease_ttl_s: float) -> AsyncIterator[RateLimiter]:
    if kind == "memory":
        yield MemoryRateLimiter(lease_ttl_s=lease_ttl_s)
        return
    async with redis_client(redis_url) as client:
        yield RedisRateLimiter(client, prefix=redis_prefix, lease_ttl_s=lease_ttl_s)


@pytest.fixture(params=["memory", "redis"])
async def limiter(request: pytest.FixtureRequest, redis_url: str, redis_prefix: str) -> AsyncIterator[RateLimiter]:
    async with limiter_of(request.param, redis_url, redis_prefix, LEASE_TTL_S) as made:
        yield made


@pytest.fixture(params=["memory", "redis"])
async def short_leased(request: pytest.FixtureRequest, redis_url: str, redis_prefix: str) -> AsyncIterator[RateLimiter]:
    async with limiter_of(request.param, redis_url, redis_prefix, SHORT_LEASE_TTL_S) as made:
        yield made


class Stopwatch:
    """Seconds since it was made, on this process's clock: how much a bucket may have refilled
    meanwhile (Redis refills by its own clock, which runs alongside)."""

    def __init__(self) -> None:
        self.started = time.monotonic()

    def elapsed(self) -> float:
        return time.monotonic() - self.started


def key(name: str = "team-a", **limits: int) -> Scope:
    return Scope("key", name, LimitSpec(**limits))


def lease() -> str:
    return uuid.uuid4().hex


async def test_requests_per_minute_admit_the_limit_then_refuse_with_headers(limiter: RateLimiter) -> None:
    scopes = [key(rpm=5)]
    watch = Stopwatch()
    first = await limiter.acquire(scopes, 0, lease())
    assert first.allowed
    assert first.headers()["x-ratelimit-limit-requests"] == "5"
    assert first.headers()["x-ratelimit-remaining-requests"] == "4"
    assert first.headers()["x-ratelimit-reset-requests"] in {"12s", "11.999s", "11.998s"}
    for _ in range(4):
        assert (await limiter.acquire(scopes, 0, lease())).allowed
    refused = await limiter.acquire(scopes, 0, lease())
    assert refused.refusal is not None
    assert (refused.refusal.dimension, refused.refusal.name, refused.refusal.limit) == ("requests", "team-a", 5)
    headers = refused.headers()
    assert headers["x-ratelimit-remaining-requests"] == "0"
    # One request refills in 60 s / 5, counted from the first (12 s on any machine that took under 1 s).
    assert math.ceil(12 - watch.elapsed()) <= int(headers["retry-after"]) <= 12


async def test_a_bucket_refills_continuously(limiter: RateLimiter) -> None:
    scopes = [key(rpm=60)]  # one request a second
    watch = Stopwatch()
    results = [await limiter.acquire(scopes, 0, lease()) for _ in range(61)]
    admitted = [r.allowed for r in results].count(True)
    assert 60 <= admitted <= 60 + int(watch.elapsed()), admitted  # the bucket, and what refilled meanwhile
    await asyncio.sleep(1.05)
    assert (await limiter.acquire(scopes, 0, lease())).allowed


async def test_two_redis_clients_enforce_one_limit_together(redis_url: str, redis_prefix: str) -> None:
    async with redis_client(redis_url) as one, redis_client(redis_url) as two:
        replicas = [RedisRateLimiter(one, prefix=redis_prefix), RedisRateLimiter(two, prefix=redis_prefix)]
        scopes = [key(rpm=10)]
        watch = Stopwatch()
        decisions = await asyncio.gather(*(replicas[i % 2].acquire(scopes, 0, lease()) for i in range(40)))
    admitted = sum(d.allowed for d in decisions)
    assert 10 <= admitted <= 10 + int(watch.elapsed() / 6), admitted  # and one more each 6 s it took


async def test_concurrent_requests_hold_slots_until_they_finish(limiter: RateLimiter) -> None:
    scopes = [key(concurrent=3)]
    leases = [lease() for _ in range(20)]
    decisions = await asyncio.gather(*(limiter.acquire(scopes, 0, name) for name in leases))
    holders = [name for name, decision in zip(leases, decisions, strict=True) if decision.allowed]
    assert len(holders) == 3
    refused = next(d for d in decisions if not d.allowed)
    assert refused.refusal is not None
    assert refused.refusal.dimension == "concurrent"
    assert not (await limiter.acquire(scopes, 0, lease())).allowed
    await limiter.finish(scopes, holders[0], 0)
    assert (await limiter.acquire(scopes, 0, lease())).allowed


async def test_a_crashed_workers_slot_comes_back_after_the_lease_ttl(short_leased: RateLimiter) -> None:
    scopes = [key(concurrent=1)]
    assert (await short_leased.acquire(scopes, 0, lease())).allowed  # never finished
    assert not (await short_leased.acquire(scopes, 0, lease())).allowed
    await asyncio.sleep(SHORT_LEASE_TTL_S + 0.1)
    assert (await short_leased.acquire(scopes, 0, lease())).allowed


async def test_tokens_are_estimated_then_reconciled(limiter: RateLimiter) -> None:
    scopes = [key(tpm=1000)]
    watch = Stopwatch()
    first = lease()
    admitted = await limiter.acquire(scopes, 800, first)
    assert admitted.headers()["x-ratelimit-remaining-tokens"] == "200"
    refused = await limiter.acquire(scopes, 300, lease())
    assert refused.refusal is not None
    assert refused.refusal.dimension == "tokens"
    # 100 missing tokens at 1000/60 a second (less what refilled since the first call: nothing in 1 s)
    assert math.ceil(6 - watch.elapsed()) <= int(refused.headers()["retry-after"]) <= 6
    await limiter.finish(scopes, first, 200 - 800)  # it used 200: 600 come back
    after = await limiter.acquire(scopes, 300, lease())
    assert after.allowed
    assert after.tokens is not None
    assert 500 <= after.tokens.remaining <= 502 + watch.elapsed() * 1000 / 60  # plus what refilled meanwhile


async def test_usage_above_the_estimate_is_a_debt_later_requests_wait_out(limiter: RateLimiter) -> None:
    scopes = [key(tpm=1000)]
    watch = Stopwatch()
    first, second = lease(), lease()
    assert (await limiter.acquire(scopes, 100, first)).allowed
    assert (await limiter.acquire(scopes, 100, second)).allowed
    await limiter.finish(scopes, first, 700 - 100, 100)  # a call that used 700 tokens: 800 - 600 left
    await limiter.finish(scopes, second, 700 - 100, 100)  # and another: 200 - 600, a debt of 400
    refused = await limiter.acquire(scopes, 10, lease())
    assert refused.refusal is not None
    assert refused.tokens is not None
    took_s = watch.elapsed()  # refilling 1000/60 tokens a second meanwhile
    assert -400 <= refused.tokens.remaining <= -398 + took_s * 1000 / 60
    assert 24.5 - took_s <= refused.refusal.retry_after_s <= 24.7  # 410 tokens at 1000/60 a second


async def test_one_request_never_takes_more_than_the_whole_bucket(limiter: RateLimiter) -> None:
    """A stream that ran far past its estimate (e.g. max_tokens null) is charged the whole bucket,
    not a debt that would refuse every other caller of a shared bucket for minutes."""
    deployment = [Scope("deployment", "instruct", LimitSpec(tpm=1000))]
    watch = Stopwatch()
    first = lease()
    assert (await limiter.acquire(deployment, 100, first)).allowed
    await limiter.finish(deployment, first, 10**9 - 100, 100)
    refused = await limiter.acquire(deployment, 10, lease())
    assert refused.refusal is not None
    assert refused.tokens is not None
    assert 0 <= refused.tokens.remaining <= 2 + watch.elapsed() * 1000 / 60  # empty (plus what refilled), no debt
    assert refused.refusal.retry_after_s < 1  # 10 tokens at 1000/60 a second


async def test_a_request_larger_than_the_whole_limit_is_refused_at_once_and_takes_nothing(
    limiter: RateLimiter,
) -> None:
    team, deployment = key(rpm=10, tpm=100), Scope("deployment", "instruct", LimitSpec(rpm=5))
    refused = await limiter.acquire([team, deployment], 101, lease())
    assert refused.refusal is not None
    assert (refused.refusal.fits, refused.refusal.dimension, refused.refusal.limit) == (False, "tokens", 100)
    assert "retry-after" not in refused.headers()  # waiting would not help
    fits = await limiter.acquire([team, deployment], 100, lease())  # the whole bucket, untouched by the refusal
    assert fits.allowed
    assert fits.requests is not None
    assert fits.tokens is not None
    assert (fits.requests.remaining, fits.tokens.remaining) == (4, 0)  # the deployment's 5 rpm is the tighter


async def test_a_request_that_can_never_fit_is_named_before_one_that_must_wait(limiter: RateLimiter) -> None:
    team, deployment = key(rpm=1), Scope("deployment", "instruct", LimitSpec(tpm=50))
    assert (await limiter.acquire([team], 0, lease())).allowed  # the key's one request this minute
    refused = await limiter.acquire([team, deployment], 60, lease())
    assert refused.refusal is not None
    assert (refused.refusal.scope, refused.refusal.fits) == ("deployment", False)


async def test_a_refusal_by_one_scope_takes_nothing_from_the_others(limiter: RateLimiter) -> None:
    team, deployment = key(rpm=10, tpm=1000), Scope("deployment", "instruct", LimitSpec(rpm=1))
    watch = Stopwatch()
    assert (await limiter.acquire([team, deployment], 100, lease())).allowed
    refused = await limiter.acquire([team, deployment], 100, lease())
    assert refused.refusal is not None
    assert (refused.refusal.scope, refused.refusal.name) == ("deployment", "instruct")
    alone = await limiter.acquire([team], 100, lease())
    assert alone.requests is not None
    assert alone.tokens is not None
    assert 8 <= alone.requests.remaining <= 8 + int(watch.elapsed() / 6)  # 10 a minute: one each 6 s
    assert 800 <= alone.tokens.remaining <= 802 + watch.elapsed() * 1000 / 60  # plus what refilled meanwhile


async def test_headers_report_the_tightest_scope(limiter: RateLimiter) -> None:
    team, deployment = key(rpm=100), Scope("deployment", "instruct", LimitSpec(rpm=3, tpm=50))
    headers = (await limiter.acquire([team, deployment], 10, lease())).headers()
    assert headers["x-ratelimit-limit-requests"] == "3"
    assert headers["x-ratelimit-remaining-requests"] == "2"
    assert headers["x-ratelimit-limit-tokens"] == "50"
    assert headers["x-ratelimit-remaining-tokens"] == "40"


async def test_scopes_of_different_keys_are_independent(limiter: RateLimiter) -> None:
    assert (await limiter.acquire([key("a", rpm=1)], 0, lease())).allowed
    assert not (await limiter.acquire([key("a", rpm=1)], 0, lease())).allowed
    assert (await limiter.acquire([key("b", rpm=1)], 0, lease())).allowed


@pytest.mark.parametrize(
    ("seconds", "shown"),
    [(0, "0s"), (0.0201, "20ms"), (1, "1s"), (2.5, "2.5s"), (8.6401, "8.64s"), (360, "6m0s"), (90.2, "1m31s")],
)
def test_reset_times_read_like_openais(seconds: float, shown: str) -> None:
    assert format_duration(seconds) == shown


def test_hours_are_spelled_out() -> None:
    assert format_duration(3723) == "1h2m3s"
