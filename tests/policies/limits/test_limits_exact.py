"""Limits and budgets are exact at any concurrency: hundreds of requests at once through the gateway
(real HTTP on loopback), with a real Redis and in this process; requests that can never fit are
refused at once; huge numbers are a 400 naming the field; a failing limit check never admits."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from typing import Any

import orjson
import pytest
import redis.asyncio as aioredis
from aiohttp import ClientSession, TCPConnector, web
from aiohttp.test_utils import TestServer

from gateway.app import AUTH_THROTTLE
from gateway.http.app_keys import SERVING
from tests.conftest import GatewayFactory, deployment
from tests.support import fake_upstream as fake
from tests.support.fake_upstream import Behaviour, FakeUpstream

CONCURRENCY = 300
TEAM_KEY = "team-key-0123456789abcdef"
OTHER_KEY = "other-key-0123456789abcdef"
ADMIN_KEY = "admin-key-0123456789abcdef-Xr7mQ2vLp9"
ENV = {"TEAM_KEY": TEAM_KEY, "OTHER_KEY": OTHER_KEY, "ADMIN_KEY": ADMIN_KEY}
TEAM = {"Authorization": f"Bearer {TEAM_KEY}"}
OTHER = {"Authorization": f"Bearer {OTHER_KEY}"}
# 8 characters: an estimated 2 prompt tokens, plus max_tokens 8: 10 tokens, as the upstream reports.
SMALL: dict[str, Any] = {"prompt": "abcdefgh", "max_tokens": 8}
SMALL_USAGE = (2, 8)
GUARD_S = 60.0  # only so that a broken gateway fails the test instead of hanging it
UNAVAILABLE = (503, "limits_unavailable")  # a Redis call timed out (a starved machine): refused, never admitted


# These tests are about exactness under concurrency, not about the clock: the request path's Redis
# timeout (`redis.timeout_s`, 0.25 s by default) is lifted to 5 s, so that an event loop starved by
# the rest of a full run (hundreds of requests, the client and the gateways in this one process)
# cannot turn a slow call into a 503. What a timeout or an absent Redis does is tested where Redis
# is made slow (test_redis_timeout.py) or absent.
PATIENT_TIMEOUT_S = 5.0


@pytest.fixture
def redis_settings(redis_settings: dict[str, Any]) -> dict[str, Any]:
    """conftest's `redis:` block, with the patient timeout."""
    return {**redis_settings, "timeout_s": PATIENT_TIMEOUT_S}


@pytest.fixture(params=["redis", "memory"])
def store(request: pytest.FixtureRequest, redis_settings: dict[str, Any]) -> dict[str, Any]:
    """The config's `redis:` block: a real Redis shared by the gateway, or none (limits in memory)."""
    return redis_settings if request.param == "redis" else {}


@pytest.fixture
async def many() -> AsyncIterator[ClientSession]:
    """A client that opens as many connections as there are requests: all of them reach the gateway at once."""
    async with ClientSession(connector=TCPConnector(limit=0)) as session:
        yield session


def config(
    upstream: FakeUpstream,
    redis: dict[str, Any],
    *,
    team: dict[str, Any] | None = None,
    other: dict[str, Any] | None = None,
    **fake_deployment: Any,
) -> dict[str, Any]:
    return {
        "redis": redis,
        # Closed: a Redis call that a starved test machine makes time out is a visible 503, never
        # an admission without limits, so the counts below stay exact or fall short, never over.
        "limits": {"on_redis_error": "closed"},
        "admin": {"key": "${ADMIN_KEY}"},
        "keys": [
            {"name": "team", "key": "${TEAM_KEY}", **(team or {})},
            {"name": "other", "key": "${OTHER_KEY}", **(other or {})},
        ],
        "deployments": [deployment("fake", upstream.base_url, retries=0, timeout_s=GUARD_S, **fake_deployment)],
    }


async def post(
    http: ClientSession, gateway: TestServer, headers: dict[str, str], **body: Any
) -> tuple[int, dict[str, Any], dict[str, str]]:
    payload = {"model": "fake", **SMALL, **body}
    async with http.post(gateway.make_url("/v1/completions"), json=payload, headers=headers) as response:
        return response.status, await response.json(content_type=None), dict(response.headers)


async def burst(
    http: ClientSession, gateway: TestServer, headers: dict[str, str], count: int = CONCURRENCY, **body: Any
) -> list[tuple[int, dict[str, Any], dict[str, str]]]:
    return await asyncio.gather(*(post(http, gateway, headers, **body) for _ in range(count)))


def store_failures(*gateways: TestServer) -> int:
    """Failed or timed-out calls to the limits' store, counted by the gateways (each is also logged)."""
    return sum(
        gateway.app[SERVING].shared.limits.failures.errors + gateway.app[SERVING].shared.limits.faults.errors
        for gateway in gateways
    )


def assert_charged_exactly(spent: dict[str, Any], admitted: int, *gateways: TestServer) -> None:
    """Every admitted request charged its 10 tokens and nothing stays reserved; unless a store call
    timed out on a starved machine: a settlement lost that way is counted and logged (never an
    overcharge), which these figures cannot tell apart from a bug, so the test is skipped then."""
    if (spent["tokens"], spent["reserved_tokens"]) != (10 * admitted, 0) and store_failures(*gateways):
        pytest.skip("a Redis call timed out on this starved machine: its settlement was counted and logged")
    assert (spent["tokens"], spent["reserved_tokens"]) == (10 * admitted, 0)


async def usage(http: ClientSession, gateway: TestServer, key: str = "team") -> dict[str, Any]:
    admin = {"Authorization": f"Bearer {ADMIN_KEY}"}
    async with http.get(gateway.make_url(f"/admin/keys/{key}/usage"), headers=admin) as response:
        assert response.status == 200
        found: dict[str, Any] = await response.json()
        return found


def codes(answers: list[tuple[int, dict[str, Any], dict[str, str]]]) -> dict[tuple[int, str | None], int]:
    counted: dict[tuple[int, str | None], int] = {}
    for status, body, _ in answers:
        code = body["error"]["code"] if status != 200 else None
        counted[(status, code)] = counted.get((status, code), 0) + 1
    return counted


class Gate:
    """Holds the upstream's answers until `count` calls have arrived, so that the admitted calls are
    in flight (holding their reservations) while the others are decided. Each answer reports the
    usage given, which is the request's estimate: settling changes no total, so the count admitted
    is exact whatever the order."""

    def __init__(self, count: int, prompt_tokens: int, completion_tokens: int) -> None:
        self.count = count
        self.usage = {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens}
        self.arrived = 0
        self.opened = asyncio.Event()

    def behaviours(self, how_many: int = CONCURRENCY) -> list[Behaviour]:
        return [self.answer] * how_many

    async def answer(self, request: web.Request, body: dict[str, Any]) -> web.StreamResponse:
        self.arrived += 1
        if self.arrived >= self.count:
            self.opened.set()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.opened.wait(), GUARD_S)
        reply = {**fake.completion(body), "usage": {**self.usage, "total_tokens": sum(self.usage.values())}}
        return web.Response(body=orjson.dumps(reply), content_type="application/json")


# -- rate limits ----------------------------------------------------------------------------------


def assert_exactly_the_bucket(
    answers: list[tuple[int, dict[str, Any], dict[str, str]]], rpm: int, took_s: float
) -> None:
    """A full bucket admits `rpm` at once, and refills one request every 60/rpm s: a burst that
    lasted less than that (as it does unless the machine is starved) admits exactly `rpm`."""
    refilled = int(took_s * rpm / 60)
    counted = codes(answers)
    admitted, unavailable = counted.get((200, None), 0), counted.get(UNAVAILABLE, 0)
    assert admitted <= rpm + refilled, (admitted, took_s)  # never more than the bucket
    assert admitted >= rpm or unavailable, (admitted, took_s)  # and all of it, unless Redis timed out
    assert set(counted) <= {(200, None), (429, "rate_limit_exceeded"), UNAVAILABLE}


async def test_300_concurrent_requests_on_one_key_with_rpm_50_admit_exactly_50(
    make_gateway: GatewayFactory, upstream: FakeUpstream, many: ClientSession, store: dict[str, Any]
) -> None:
    gateway = await make_gateway(config(upstream, store, team={"limits": {"rpm": 50}}), ENV)
    started = time.monotonic()
    answers = await burst(many, gateway, TEAM)

    assert_exactly_the_bucket(answers, 50, time.monotonic() - started)
    assert len(upstream.received) == codes(answers)[(200, None)]
    assert all(int(headers["Retry-After"]) >= 1 for status, _, headers in answers if status == 429)


async def test_300_concurrent_requests_on_a_deployment_with_rpm_50_admit_exactly_50(
    make_gateway: GatewayFactory, upstream: FakeUpstream, many: ClientSession, store: dict[str, Any]
) -> None:
    gateway = await make_gateway(config(upstream, store, limits={"rpm": 50}), ENV)
    started = time.monotonic()
    answers = await asyncio.gather(*(post(many, gateway, (TEAM, OTHER)[i % 2]) for i in range(CONCURRENCY)))

    assert_exactly_the_bucket(answers, 50, time.monotonic() - started)


async def test_300_concurrent_requests_with_unknown_keys_are_all_401(
    make_gateway: GatewayFactory, upstream: FakeUpstream, many: ClientSession, redis_settings: dict[str, Any]
) -> None:
    """Every unknown key is looked up in Redis (its key store): the lookups of a burst share
    round trips (one MGET at a time), so however slowly the machine serves them they never fill
    the connection pool and are never refused as "key store unavailable" while Redis is fine."""
    gateway = await make_gateway(config(upstream, redis_settings), ENV)
    gateway.app[AUTH_THROTTLE].limit = CONCURRENCY  # one client address stands for many here
    answers = await asyncio.gather(
        *(post(many, gateway, {"Authorization": f"Bearer unknown-key-{i:04d}-0123456789"}) for i in range(CONCURRENCY))
    )

    assert codes(answers) == {(401, "invalid_api_key"): CONCURRENCY}
    assert upstream.received == []


async def test_a_request_larger_than_the_deployments_tpm_is_refused_at_once_and_others_keep_being_served(
    make_gateway: GatewayFactory, upstream: FakeUpstream, many: ClientSession, store: dict[str, Any]
) -> None:
    gateway = await make_gateway(config(upstream, store, limits={"tpm": 1000}), ENV)
    big = [post(many, gateway, TEAM, max_tokens=1000) for _ in range(20)]  # 2 + 1000 tokens: can never fit
    small = [post(many, gateway, OTHER) for _ in range(20)]  # 10 tokens each, 200 in all
    answers = await asyncio.gather(*big, *small)

    assert codes(answers[:20]) == {(429, "request_too_large"): 20}
    assert codes(answers[20:]) == {(200, None): 20}
    status, body, headers = answers[0]
    message = body["error"]["message"]
    assert "deployment 'fake'" in message
    assert "1002 tokens" in message
    assert "1000 tokens per minute" in message
    assert "Retry-After" not in headers  # waiting would not help
    assert len(upstream.received) == 20
    # The refused requests took nothing: the bucket holds all but the small requests' 200 tokens.
    status, _, headers = await post(many, gateway, OTHER)
    assert status == 200
    assert int(headers["x-ratelimit-remaining-tokens"]) >= 1000 - 210


async def test_a_request_larger_than_its_keys_tpm_is_refused_at_once(
    make_gateway: GatewayFactory, upstream: FakeUpstream, many: ClientSession, store: dict[str, Any]
) -> None:
    gateway = await make_gateway(
        config(upstream, store, team={"limits": {"tpm": 100}, "budget": {"tokens": 10**6}}), ENV
    )
    status, body, _ = await post(many, gateway, TEAM, max_tokens=16, n=8)  # 2 + 128 tokens

    assert (status, body["error"]["code"], body["error"]["type"]) == (429, "request_too_large", "rate_limit_error")
    assert "key 'team'" in body["error"]["message"]
    assert (await usage(many, gateway))["reserved_tokens"] == 0  # its budget reservation was given back
    assert (await post(many, gateway, TEAM, max_tokens=98))[0] == 200  # exactly the whole bucket still fits
    assert upstream.received[0].body["max_tokens"] == 98


# -- budgets --------------------------------------------------------------------------------------


def assert_at_most_what_fits(answers: list[tuple[int, dict[str, Any], dict[str, str]]], fits: int) -> int:
    """Exactly what fits is admitted, the rest refused; fewer only when Redis timed out (a 503)."""
    counted = codes(answers)
    admitted = counted.get((200, None), 0)
    assert set(counted) <= {(200, None), (429, "budget_exceeded"), UNAVAILABLE}
    assert admitted == fits or (admitted < fits and UNAVAILABLE in counted), counted
    return admitted


async def test_a_token_budget_under_300_concurrent_requests_admits_what_fits_and_never_more(
    make_gateway: GatewayFactory, upstream: FakeUpstream, many: ClientSession, store: dict[str, Any]
) -> None:
    budget = 1234  # 123 requests of 10 tokens fit, with 4 tokens left over
    gate = Gate(budget // 10, *SMALL_USAGE)
    upstream.script(*gate.behaviours())
    gateway = await make_gateway(config(upstream, store, team={"budget": {"tokens": budget, "period": "1d"}}), ENV)
    answers = await burst(many, gateway, TEAM)

    admitted = assert_at_most_what_fits(answers, 123)
    spent = await usage(many, gateway)
    assert spent["tokens"] <= budget
    assert_charged_exactly(spent, admitted, gateway)
    if admitted < 123:
        pytest.skip("a Redis call timed out on this starved machine: refused and never overspent, as checked")
    status, body, _ = await post(many, gateway, TEAM)  # 10 tokens do not fit in the 4 left
    assert (status, body["error"]["code"]) == (429, "budget_exceeded")
    assert "10 tokens" in body["error"]["message"]
    assert "4 tokens left" in body["error"]["message"]
    assert (await post(many, gateway, TEAM, prompt="abcd", max_tokens=3))[0] == 200  # 1 + 3 tokens do


async def test_a_cost_budget_under_300_concurrent_requests_admits_what_fits_and_never_more(
    make_gateway: GatewayFactory, upstream: FakeUpstream, many: ClientSession, store: dict[str, Any]
) -> None:
    # $0.001 a prompt token and $0.002 a completion token: 2 + 8 tokens cost $0.018; $0.5 buys 27 (27 x 0.018 = 0.486).
    price = {"prompt_per_1m": 1000.0, "completion_per_1m": 2000.0}
    gate = Gate(27, *SMALL_USAGE)
    upstream.script(*gate.behaviours())
    gateway = await make_gateway(
        config(upstream, store, team={"budget": {"cost_usd": 0.5, "period": "1d"}}, price=price), ENV
    )
    answers = await burst(many, gateway, TEAM)

    admitted = assert_at_most_what_fits(answers, 27)
    spent = await usage(many, gateway)
    assert spent["cost_usd"] == pytest.approx(0.018 * admitted)
    assert spent["cost_usd"] <= 0.5
    assert spent["reserved_cost_usd"] == 0
    if admitted < 27:
        pytest.skip("a Redis call timed out on this starved machine: refused and never overspent, as checked")
    status, body, _ = await post(many, gateway, TEAM)
    assert (status, body["error"]["code"]) == (429, "budget_exceeded")
    assert "$0.018" in body["error"]["message"]
    assert "$0.014 left" in body["error"]["message"]


async def test_a_request_estimated_above_the_whole_budget_is_refused_before_it_spends_anything(
    make_gateway: GatewayFactory, upstream: FakeUpstream, many: ClientSession, store: dict[str, Any]
) -> None:
    """The cost budget of a cent, and a request that may cost dollars: never sent upstream."""
    price = {"prompt_per_1m": 1000.0, "completion_per_1m": 2000.0}
    team = {"budget": {"tokens": 100, "cost_usd": 0.0001, "period": "1d"}}
    gateway = await make_gateway(config(upstream, store, team=team, price=price), ENV)
    answers = await burst(many, gateway, TEAM, count=50, prompt="x", max_tokens=90)  # 91 tokens: $0.18

    assert codes(answers) == {(429, "budget_exceeded"): 50}
    assert "cost budget" in answers[0][1]["error"]["message"]
    assert upstream.received == []
    assert (await usage(many, gateway))["cost_usd"] == 0


# -- numbers out of range -------------------------------------------------------------------------


HUGE = [
    pytest.param(b'"max_tokens": 9223372036854775808', "max_tokens", id="max_tokens:2**63"),
    pytest.param(b'"max_tokens": 18446744073709551615', "max_tokens", id="max_tokens:2**64-1"),
    pytest.param(b'"max_tokens": 100000000000000000000000000000', "max_tokens", id="max_tokens:10**29"),
    pytest.param(b'"max_tokens": 1e400', "max_tokens", id="max_tokens:1e400"),
    pytest.param(b'"max_tokens": 2147483648', "max_tokens", id="max_tokens:2**31"),
    pytest.param(b'"max_tokens": 1073741824, "n": 2', "max_tokens", id="max_tokens-times-n"),
    pytest.param(b'"max_tokens": 134217728, "best_of": 20', "max_tokens", id="max_tokens-times-best_of"),
    pytest.param(b'"max_tokens": 1073741824, "prompt": ["a", "b"]', "max_tokens", id="max_tokens-times-prompts"),
    pytest.param(b'"n": 9223372036854775808', "n", id="n:2**63"),
    pytest.param(b'"best_of": 9223372036854775808', "best_of", id="best_of:2**63"),
    pytest.param(b'"logprobs": 9223372036854775808', "logprobs", id="logprobs:2**63"),
    pytest.param(b'"prompt": [9223372036854775808]', "prompt", id="prompt-token-id:2**63"),
    pytest.param(b'"prompt": [[1, 2147483648]]', "prompt", id="prompt-token-id:2**31"),
    pytest.param(b'"logit_bias": {"18446744073709551616": 1}', "logit_bias", id="logit_bias-key:2**64"),
    pytest.param(b'"logit_bias": {"50256": 1e400}', "logit_bias", id="logit_bias-value:1e400"),
    pytest.param(b'"temperature": -1e400', "temperature", id="temperature:-1e400"),
    pytest.param(b'"seed": 18446744073709551616', "seed", id="seed:2**64"),
]


@pytest.mark.parametrize(("field", "param"), HUGE)
async def test_huge_numbers_are_a_400_naming_the_field_and_spend_nothing(
    make_gateway: GatewayFactory,
    upstream: FakeUpstream,
    many: ClientSession,
    redis_settings: dict[str, Any],
    field: bytes,
    param: str,
) -> None:
    """The overflow that once admitted 50 of 50 requests on a 100-token budget."""
    gateway = await make_gateway(config(upstream, redis_settings, team={"budget": {"tokens": 100}}), ENV)
    body = b'{"model": "fake", "prompt": "hi", ' + field + b"}"
    headers = {**TEAM, "Content-Type": "application/json"}

    async def send() -> tuple[int, dict[str, Any]]:
        async with many.post(gateway.make_url("/v1/completions"), data=body, headers=headers) as response:
            return response.status, await response.json(content_type=None)

    answers = await asyncio.gather(*(send() for _ in range(50)))

    assert {status for status, _ in answers} == {400}
    error = answers[0][1]["error"]
    assert (error["type"], error["param"]) == ("invalid_request_error", param)
    assert param in error["message"]
    assert upstream.received == []
    spent = await usage(many, gateway)
    assert (spent["tokens"], spent["reserved_tokens"]) == (0, 0)


# -- a failing limit check never admits ----------------------------------------------------------


@pytest.mark.parametrize("broken", ["rate", "budget"])
async def test_a_limit_script_that_errors_refuses_with_503_even_when_failing_open(
    make_gateway: GatewayFactory,
    upstream: FakeUpstream,
    many: ClientSession,
    redis_url: str,
    redis_settings: dict[str, Any],
    broken: str,
) -> None:
    """Redis answers, with an error (a key of the wrong type here): that is no outage, so
    `on_redis_error: open` does not apply and nothing is admitted unchecked."""
    prefix = redis_settings["prefix"]
    client = aioredis.from_url(redis_url)
    try:
        if broken == "rate":
            await client.set(f"{prefix}rate:key:team", "not a hash")
        else:
            day = int(time.time() // 86400)
            for window in (day - 1, day, day + 1):  # whichever day the request falls in
                await client.set(f"{prefix}budget:team:1d:{window}", "not a hash")
    finally:
        await client.aclose()
    team = {"limits": {"rpm": 1000}, "budget": {"tokens": 10**6, "period": "1d"}}
    settings = config(upstream, redis_settings, team=team)
    settings["limits"] = {"on_redis_error": "open"}
    gateway = await make_gateway(settings, ENV)
    answers = await burst(many, gateway, TEAM, count=30)

    assert codes(answers) == {(503, "limits_unavailable"): 30}
    assert upstream.received == []
    if broken == "rate":
        assert (await usage(many, gateway))["reserved_tokens"] == 0  # each budget reservation was given back
    assert (await post(many, gateway, OTHER))[0] == 200  # other keys' limits are unaffected
