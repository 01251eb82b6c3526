"""Budgets through `Limits`, in this process and in a real Redis: reserve, settle, refuse, renew."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest

from policies.limits import (
    BudgetExceeded,
    BudgetSpec,
    Caller,
    Estimate,
    Limits,
    LimitsSettings,
    MemoryBudgetStore,
    MemoryRateLimiter,
    Price,
    RedisBudgetStore,
    RedisRateLimiter,
)
from tests.support.fake_clock import FakeClock
from tests.support.redis_helpers import redis_client

PERIOD_S = 3600


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(PERIOD_S * 1000 + 10)  # 10 s into a period


# A reservation outlives any test here but the one that waits it out: one held by a request in
# flight must not lapse while a loaded machine takes its time (40 concurrent requests, say).
LEASE_TTL_S = 600.0
SHORT_LEASE_TTL_S = 2.0  # a crashed worker's reservation, waited out; two calls in a row take far less


@asynccontextmanager
async def limits_of(
    kind: str, redis_url: str, redis_prefix: str, clock: FakeClock, lease_ttl_s: float
) -> AsyncIterator[Limits]:
    settings = LimitsSettings(lease_ttl_s=lease_ttl_s)
    if kind == "memory":
        yield Limits(MemoryRateLimiter(), MemoryBudgetStore(lease_ttl_s=lease_ttl_s), settings, clock=clock)
        return
    async with redis_client(redis_url) as client:
        budgets = RedisBudgetStore(client, prefix=redis_prefix, lease_ttl_s=lease_ttl_s)
        yield Limits(RedisRateLimiter(client, prefix=redis_prefix), budgets, settings, clock=clock)


@pytest.fixture(params=["memory", "redis"])
async def limits(
    request: pytest.FixtureRequest, redis_url: str, redis_prefix: str, clock: FakeClock
) -> AsyncIterator[Limits]:
    async with limits_of(request.param, redis_url, redis_prefix, clock, LEASE_TTL_S) as made:
        yield made


@pytest.fixture(params=["memory", "redis"])
async def short_leased(
    request: pytest.FixtureRequest, redis_url: str, redis_prefix: str, clock: FakeClock
) -> AsyncIterator[Limits]:
    async with limits_of(request.param, redis_url, redis_prefix, clock, SHORT_LEASE_TTL_S) as made:
        yield made


def caller(budget: BudgetSpec | None, key: str = "team-a", price: Price | None = None) -> Caller:
    return Caller(key=key, deployment="instruct", budget=budget, price=price or Price())


async def test_concurrent_requests_cannot_overshoot_a_token_budget(limits: Limits) -> None:
    team = caller(BudgetSpec(tokens=1000, period="1h"))

    async def one() -> bool:
        try:
            admission = await limits.admit(team, Estimate(20, 80))
        except BudgetExceeded:
            return False
        await asyncio.sleep(0.01)  # all of them are in flight together
        await limits.settle(admission, prompt_tokens=20, completion_tokens=80)
        return True

    served = await asyncio.gather(*(one() for _ in range(40)))
    assert served.count(True) == 10
    usage = await limits.usage("team-a", team.budget)
    assert usage.spend.tokens == 1000
    assert usage.spend.reserved_tokens == 0


async def test_a_request_is_admitted_only_if_its_estimate_fits_in_what_remains(limits: Limits) -> None:
    team = caller(BudgetSpec(tokens=100, period="1h"))
    held = await limits.admit(team, Estimate(10, 50))  # 60 reserved, 40 left
    with pytest.raises(BudgetExceeded) as refused:
        await limits.admit(team, Estimate(1, 40))  # 41 does not fit
    assert "41 tokens, more than the 40 tokens left" in refused.value.message
    last = await limits.admit(team, Estimate(0, 40))  # exactly what is left
    await limits.settle(held, prompt_tokens=10, completion_tokens=50)
    await limits.settle(last, prompt_tokens=0, completion_tokens=40)
    usage = await limits.usage("team-a", team.budget)
    assert (usage.spend.tokens, usage.spend.reserved_tokens) == (100, 0)
    with pytest.raises(BudgetExceeded) as spent:
        await limits.admit(team, Estimate(0, 0))  # nothing is left: even a request estimated at nothing
    assert "is spent" in spent.value.message


async def test_a_request_estimated_above_the_whole_budget_never_runs(limits: Limits) -> None:
    team = caller(BudgetSpec(tokens=100, period="1h"))
    with pytest.raises(BudgetExceeded):
        await limits.admit(team, Estimate(1, 100))
    usage = await limits.usage("team-a", team.budget)
    assert (usage.spend.tokens, usage.spend.reserved_tokens) == (0, 0)


async def test_a_call_that_uses_more_than_its_estimate_is_charged_in_full(limits: Limits) -> None:
    """The prompt's estimate (~4 characters a token) can fall short of the real count: the real
    usage is what is charged, and once it is spent nothing more is admitted."""
    team = caller(BudgetSpec(tokens=1000, period="1h"))
    in_flight = [await limits.admit(team, Estimate(10, 40)) for _ in range(20)]  # 20 x 50 reserved = 1000
    with pytest.raises(BudgetExceeded):
        await limits.admit(team, Estimate(10, 40))
    for admission in in_flight:
        await limits.settle(admission, prompt_tokens=60, completion_tokens=40)  # 100 each
    assert (await limits.usage("team-a", team.budget)).spend.tokens == 2000
    with pytest.raises(BudgetExceeded):
        await limits.admit(team, Estimate(1, 1))


async def test_huge_usage_reports_are_clamped_and_totals_saturate_instead_of_overflowing(limits: Limits) -> None:
    """An upstream may report any number: the charge is clamped, totals stop at 2^62, and the key's
    budget is simply spent (no store error, nothing admitted after)."""
    price = Price(prompt_per_1m=1_000_000.0, completion_per_1m=1_000_000.0)
    unbudgeted = caller(None, key="counted", price=price)  # usage still counted, with no budget to stop it
    for _ in range(3):
        admission = await limits.admit(unbudgeted, Estimate(1, 1))
        await limits.settle(admission, prompt_tokens=2**80, completion_tokens=2**70)
    usage = await limits.usage("counted", None)
    assert (usage.spend.tokens, usage.spend.cost_pico) == (2**62, 2**62)

    team = caller(BudgetSpec(tokens=10**15, cost_usd=10**6, period="1h"), price=price)
    admission = await limits.admit(team, Estimate(1, 1))
    await limits.settle(admission, prompt_tokens=2**80, completion_tokens=2**70)
    assert (await limits.usage("team-a", team.budget)).spend.tokens == 2**61
    with pytest.raises(BudgetExceeded):
        await limits.admit(team, Estimate(1, 1))
    assert limits.faults.errors == 0


async def test_a_stream_that_ends_past_the_budget_is_charged_its_real_usage(limits: Limits) -> None:
    team = caller(BudgetSpec(tokens=150, period="1h"))
    admission = await limits.admit(team, Estimate(20, 80))
    await limits.settle(admission, prompt_tokens=20, completion_tokens=380)
    usage = await limits.usage("team-a", team.budget)
    assert usage.spend.tokens == 400
    with pytest.raises(BudgetExceeded) as refused:
        await limits.admit(team, Estimate(1, 1))
    assert refused.value.status == 429
    assert refused.value.code == "budget_exceeded"


async def test_a_cost_budget_follows_the_deployments_price(limits: Limits) -> None:
    price = Price(prompt_per_1m=1000.0, completion_per_1m=3000.0)  # $0.001 and $0.003 a token
    team = caller(BudgetSpec(cost_usd=0.5, period="1h"), price=price)
    admission = await limits.admit(team, Estimate(100, 100))
    await limits.settle(admission, prompt_tokens=100, completion_tokens=100)  # $0.10 + $0.30
    usage = await limits.usage("team-a", team.budget)
    assert usage.spend.cost_usd == pytest.approx(0.4)
    admission = await limits.admit(team, Estimate(100, 0))  # $0.40 spent, $0.10 reserved: now full
    with pytest.raises(BudgetExceeded) as refused:
        await limits.admit(team, Estimate(1, 0))
    assert "cost budget" in refused.value.message
    await limits.settle(admission, prompt_tokens=0, completion_tokens=0)  # the call failed: charged nothing
    assert (await limits.admit(team, Estimate(1, 0))) is not None


async def test_the_refusal_names_only_the_callers_own_key(limits: Limits) -> None:
    budget = BudgetSpec(tokens=100, period="1h")
    other = await limits.admit(caller(budget, key="other-team"), Estimate(10, 10))
    await limits.settle(other, prompt_tokens=10, completion_tokens=40)
    spent = await limits.admit(caller(budget), Estimate(50, 50))
    await limits.settle(spent, prompt_tokens=50, completion_tokens=50)
    with pytest.raises(BudgetExceeded) as refused:
        await limits.admit(caller(budget), Estimate(1, 1))
    body = refused.value.body().decode()
    assert "team-a" in body
    assert "other-team" not in body
    assert "150" not in body  # the two keys' total
    assert refused.value.headers["retry-after"] == str(PERIOD_S - 10)


async def test_a_budget_renews_with_the_next_period(limits: Limits, clock: FakeClock) -> None:
    team = caller(BudgetSpec(tokens=100, period="1h"))
    admission = await limits.admit(team, Estimate(50, 50))
    await limits.settle(admission, prompt_tokens=50, completion_tokens=50)
    with pytest.raises(BudgetExceeded):
        await limits.admit(team, Estimate(1, 1))
    clock.advance(PERIOD_S)
    assert (await limits.usage("team-a", team.budget)).spend.tokens == 0
    assert (await limits.admit(team, Estimate(1, 1))) is not None


async def test_a_crashed_workers_reservation_expires(short_leased: Limits) -> None:
    team = caller(BudgetSpec(tokens=100, period="1h"))
    await short_leased.admit(team, Estimate(50, 50))  # never settled
    with pytest.raises(BudgetExceeded):
        await short_leased.admit(team, Estimate(1, 1))
    await asyncio.sleep(SHORT_LEASE_TTL_S + 0.1)
    assert (await short_leased.admit(team, Estimate(1, 1))) is not None


async def test_usage_is_counted_for_keys_without_a_budget(limits: Limits) -> None:
    team = caller(None)
    for _ in range(3):
        admission = await limits.admit(team, Estimate(5, 5))
        await limits.settle(admission, prompt_tokens=5, completion_tokens=7)
    usage = await limits.usage("team-a", None)
    assert usage.spend.tokens == 36
    assert usage.period == "30d"


async def test_settling_twice_charges_once(limits: Limits) -> None:
    team = caller(BudgetSpec(tokens=1000, period="1h"))
    admission = await limits.admit(team, Estimate(5, 5))
    await limits.settle(admission, prompt_tokens=5, completion_tokens=5)
    await limits.settle(admission, prompt_tokens=5, completion_tokens=5)
    assert (await limits.usage("team-a", team.budget)).spend.tokens == 10
