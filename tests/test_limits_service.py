"""`Limits` as the pipeline uses it: replicas sharing Redis, 429 answers, Redis down, estimates."""

from __future__ import annotations

import asyncio
import logging

import orjson
import pytest

from gateway.schemas import CompletionRequest
from policies.limits import (
    BudgetSpec,
    Caller,
    Estimate,
    LimitSpec,
    LimitsSettings,
    LimitsUnavailable,
    RateLimited,
    estimate,
    memory_limits,
    redis_limits,
)
from tests.redis_helpers import closed_port_url, redis_client

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

        served = await asyncio.gather(*(call(i) for i in range(30)))
    assert served.count(True) == 10


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
