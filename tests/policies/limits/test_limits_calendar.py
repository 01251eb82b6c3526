"""Calendar budget periods (`day`, `week`, `month` in a time zone), as finance teams count them:
the boundary is local midnight to the second, across DST changes and months of every length, in
this process and in a real Redis, on the project's fake clock."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from gateway import cli
from gateway.config.loader import ConfigError, parse_config
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

NEW_YORK = "America/New_York"
# Zones with odd rules: half-hour DST (Lord Howe), a midnight DST change (Santiago, Havana), a
# skipped day (Apia, 2011-12-30), a +05:45 offset (Kathmandu), a +13:45 one with DST (Chatham).
ZONES = [
    "UTC",
    NEW_YORK,
    "Europe/Paris",
    "Australia/Lord_Howe",
    "America/Santiago",
    "America/Havana",
    "Pacific/Apia",
    "Asia/Kathmandu",
    "Pacific/Chatham",
]


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(0.0)


@pytest.fixture(params=["memory", "redis"])
async def limits(
    request: pytest.FixtureRequest, redis_url: str, redis_prefix: str, clock: FakeClock
) -> AsyncIterator[Limits]:
    settings = LimitsSettings()
    if request.param == "memory":
        yield Limits(MemoryRateLimiter(), MemoryBudgetStore(), settings, clock=clock)
        return
    async with redis_client(redis_url) as client:
        budgets = RedisBudgetStore(client, prefix=redis_prefix)
        yield Limits(RedisRateLimiter(client, prefix=redis_prefix), budgets, settings, clock=clock)


def at(zone: str, text: str) -> float:
    """Unix seconds of a local wall time (the first of two when a DST change repeats it)."""
    return datetime.fromisoformat(text).replace(tzinfo=ZoneInfo(zone)).timestamp()


async def spend_all(limits: Limits, team: Caller, tokens: int) -> None:
    admission = await limits.admit(team, Estimate(tokens, 0))
    await limits.settle(admission, prompt_tokens=tokens, completion_tokens=0)


async def refusal(limits: Limits, team: Caller) -> str | None:
    """The refusal's Retry-After, or None: admitted."""
    try:
        admission = await limits.admit(team, Estimate(1, 0))
    except BudgetExceeded as refused:
        return refused.headers["retry-after"]
    await limits.settle(admission, prompt_tokens=0, completion_tokens=0)
    return None


def end_of(budget: BudgetSpec, now: float) -> float:
    return budget.window(now)[2]


# (period, zone, the first second of a period, the last second of the one before)
BOUNDARIES = [
    pytest.param("day", NEW_YORK, "2025-03-09T00:00:00", "2025-03-08T23:59:59", id="day-before-dst-start"),
    pytest.param("day", NEW_YORK, "2025-03-10T00:00:00", "2025-03-09T23:59:59", id="day-of-dst-start-23h"),
    pytest.param("day", NEW_YORK, "2025-11-03T00:00:00", "2025-11-02T23:59:59", id="day-of-dst-end-25h"),
    pytest.param("day", "America/Santiago", "2024-09-08T01:00:00", "2024-09-07T23:59:59", id="midnight-skipped"),
    pytest.param("week", NEW_YORK, "2025-03-10T00:00:00", "2025-03-09T23:59:59", id="week-with-dst-start"),
    pytest.param("month", NEW_YORK, "2025-02-01T00:00:00", "2025-01-31T23:59:59", id="month-31-days"),
    pytest.param("month", NEW_YORK, "2025-03-01T00:00:00", "2025-02-28T23:59:59", id="month-28-days"),
    pytest.param("month", NEW_YORK, "2024-03-01T00:00:00", "2024-02-29T23:59:59", id="month-29-days"),
    pytest.param("month", NEW_YORK, "2025-05-01T00:00:00", "2025-04-30T23:59:59", id="month-30-days"),
    pytest.param("month", NEW_YORK, "2025-04-01T00:00:00", "2025-03-31T23:59:59", id="month-with-dst-start"),
    pytest.param("month", "Asia/Tokyo", "2026-01-01T00:00:00", "2025-12-31T23:59:59", id="year-end-tokyo"),
]


@pytest.mark.parametrize(("period", "zone", "first", "last"), BOUNDARIES)
async def test_a_calendar_budget_renews_exactly_at_local_midnight(
    limits: Limits, clock: FakeClock, period: str, zone: str, first: str, last: str
) -> None:
    budget = BudgetSpec(tokens=100, period=period, timezone=zone)
    team = Caller(key="finance", deployment="instruct", budget=budget, price=Price())
    start, end = at(zone, first), at(zone, last) + 1  # `end`: the instant after the last second
    assert start == end  # the old period's last second ends where the new one begins (a skipped hour too)
    previous_start = budget.window(start - 1)[1]

    clock.now = previous_start  # spent at the old period's very first second…
    await spend_all(limits, team, 100)
    clock.now = start - 1  # …still spent at its last one (23:59:59 local), renewing in a second
    assert await refusal(limits, team) == "1"
    clock.now = start  # 00:00:00 local: a new period with the whole budget
    assert await refusal(limits, team) is None
    await spend_all(limits, team, 100)
    assert await refusal(limits, team) == str(round(end_of(budget, start) - start))
    usage = await limits.usage("finance", budget)
    assert (usage.period_start, usage.spend.tokens) == (start, 100)
    local_start = datetime.fromtimestamp(usage.period_start, ZoneInfo(zone))
    assert local_start.date() == datetime.fromisoformat(first).date()


async def test_a_changed_zone_starts_a_fresh_period(limits: Limits, clock: FakeClock) -> None:
    clock.now = at("Europe/Paris", "2025-06-15T12:00:00")
    paris = BudgetSpec(tokens=10, period="day", timezone="Europe/Paris")
    await spend_all(limits, Caller(key="team", deployment="d", budget=paris), 10)

    tokyo = BudgetSpec(tokens=10, period="day", timezone="Asia/Tokyo")

    assert await refusal(limits, Caller(key="team", deployment="d", budget=tokyo)) is None


@settings(max_examples=300, deadline=None)
@given(
    moment=st.datetimes(min_value=datetime(1971, 1, 1), max_value=datetime(2099, 12, 31), timezones=st.just(UTC)),
    zone=st.sampled_from(ZONES),
    period=st.sampled_from(["day", "week", "month"]),
)
def test_every_instant_lies_in_the_period_of_its_local_date(moment: datetime, zone: str, period: str) -> None:
    """The window of any instant starts at the first instant of its local day (week, month) and ends
    at the next one's: the second before `start` is the day before, and every window meets the next."""
    budget = BudgetSpec(tokens=1, period=period, timezone=zone)
    tz, now = ZoneInfo(zone), moment.timestamp()
    index, start, end = budget.window(now)
    local = datetime.fromtimestamp(now, tz).date()
    first = {"day": local, "week": local - timedelta(days=local.weekday()), "month": local.replace(day=1)}[period]
    assert start <= now < end
    assert datetime.fromtimestamp(start, tz).date() == first
    assert datetime.fromtimestamp(start - 1e-3, tz).date() < first
    assert budget.window(start)[:2] == (index, start)
    assert budget.window(end)[0] > index
    assert budget.window(end)[1] == end
    assert budget.window(start - 1e-3)[2] == start


def test_check_config_validates_the_zone_and_the_period() -> None:
    keys = [
        {"name": "a", "sha256": "a" * 64, "budget": {"tokens": 5, "period": "month", "timezone": "Europe/Pari"}},
        {"name": "b", "sha256": "b" * 64, "budget": {"tokens": 5, "period": "monthly"}},
        {"name": "c", "sha256": "c" * 64, "budget": {"tokens": 5, "period": "30d", "timezone": "Europe/Paris"}},
    ]
    text = f"keys: {keys}\n"

    with pytest.raises(ConfigError) as caught:
        parse_config(text, {})

    a, b, c = caught.value.problems
    assert a.startswith("keys[0].budget.timezone: unknown time zone 'Europe/Pari'; did you mean 'Europe/Paris'?")
    assert b.startswith("keys[1].budget.period: ")
    assert "(day, week, month)" in b
    assert c.startswith("keys[2].budget: 'timezone' applies to calendar periods")
    ok = parse_config("keys: [{name: a, sha256: " + "a" * 64 + ", budget: {tokens: 5, period: day}}]\n", {})
    assert ok.config.keys[0].budget == BudgetSpec(tokens=5, period="day", timezone="UTC")


@pytest.mark.parametrize("name", ["../../etc/passwd", "/etc/localtime", "Mars/Olympus_Mons", "utc+1"])
def test_an_unknown_or_path_like_zone_is_refused(name: str) -> None:
    with pytest.raises(ValidationError, match="unknown time zone"):
        BudgetSpec(tokens=1, period="day", timezone=name)


def test_the_keys_cli_takes_a_calendar_period_and_its_zone(
    redis_url: str, redis_prefix: str, capsys: pytest.CaptureFixture[str]
) -> None:
    common = ["keys", "--redis-url", redis_url, "--prefix", redis_prefix]
    budget = ["--budget-usd", "100", "--period", "month"]

    assert cli.main([*common, "create", "finance", *budget, "--timezone", "Europe/Pari"]) == 2
    [line] = capsys.readouterr().err.splitlines()
    assert line.startswith("gateway: --timezone: unknown time zone 'Europe/Pari'; did you mean 'Europe/Paris'?")
    assert cli.main([*common, "create", "finance", "--timezone", "Europe/Paris"]) == 2  # without a budget
    assert "--timezone: give it with --budget-tokens or --budget-usd" in capsys.readouterr().err

    assert cli.main([*common, "create", "finance", *budget, "--timezone", "Europe/Paris"]) == 0
    capsys.readouterr()
    assert cli.main([*common, "usage", "finance"]) == 0
    assert "this month (Europe/Paris) period" in capsys.readouterr().out
