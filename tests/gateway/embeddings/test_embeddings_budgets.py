"""Embeddings through the limits and the guardrails, end to end: a key's budget in real Redis is
charged the input tokens each call used (an embedding generates none) and refuses the call that
would cross it before anything is sent; a redaction changes what is embedded (the vector is the
redacted text's, not the original's)."""

from __future__ import annotations

from typing import Any

import orjson
from aiohttp import ClientSession
from aiohttp.test_utils import TestServer

from tests.conftest import GatewayFactory, deployment
from tests.support.fake_upstream import FakeUpstream
from tests.support.redis_helpers import redis_client

TEAM_KEY = "team-key-0123456789abcdef"
ADMIN_KEY = "admin-key-0123456789abcdef-Zk4wPq8y"
ENV = {"TEAM_KEY": TEAM_KEY, "ADMIN_KEY": ADMIN_KEY}
Json = dict[str, Any]


async def post(http: ClientSession, gateway: TestServer, body: Json, key: str | None = None) -> tuple[int, Json]:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    async with http.post(gateway.make_url("/v1/embeddings"), json=body, headers=headers) as response:
        return response.status, orjson.loads(await response.read())


async def spent(http: ClientSession, gateway: TestServer) -> Json:
    headers = {"Authorization": f"Bearer {ADMIN_KEY}"}
    async with http.get(gateway.make_url("/admin/keys/team/usage"), headers=headers) as response:
        assert response.status == 200
        usage: Json = await response.json()
        return usage


async def test_a_budget_in_redis_is_charged_input_tokens(
    make_gateway: GatewayFactory, upstream: FakeUpstream, http: ClientSession, redis_settings: dict[str, str]
) -> None:
    config = {
        "redis": redis_settings,
        "admin": {"key": "${ADMIN_KEY}"},
        "keys": [{"name": "team", "key": "${TEAM_KEY}", "budget": {"tokens": 10, "period": "1d"}}],
        "deployments": [deployment("fake", upstream.base_url, retries=0)],
    }
    gateway = await make_gateway(config, ENV)

    status, answer = await post(http, gateway, {"model": "fake", "input": ["one two three", "four"]}, TEAM_KEY)
    assert status == 200
    assert answer["usage"] == {"prompt_tokens": 4, "total_tokens": 4}  # the fake counts words
    assert (await spent(http, gateway))["tokens"] == 4  # the upstream's input tokens, nothing generated
    status, _ = await post(http, gateway, {"model": "fake", "input": [[1, 2, 3, 4, 5, 6]]}, TEAM_KEY)
    assert status == 200
    assert (await spent(http, gateway))["tokens"] == 10

    status, error = await post(http, gateway, {"model": "fake", "input": "one more"}, TEAM_KEY)
    assert (status, error["error"]["code"]) == (429, "budget_exceeded")
    assert len(upstream.received) == 2
    async with redis_client(redis_settings["url"]) as redis:  # the spend lives in Redis, under the config's prefix
        assert [key async for key in redis.scan_iter(match=f"{redis_settings['prefix']}budget:*")]


async def test_an_estimate_past_the_budget_is_refused_before_the_upstream(
    make_gateway: GatewayFactory, upstream: FakeUpstream, http: ClientSession, redis_settings: dict[str, str]
) -> None:
    config = {
        "redis": redis_settings,
        "keys": [{"name": "team", "key": "${TEAM_KEY}", "budget": {"tokens": 50, "period": "1d"}}],
        "deployments": [deployment("fake", upstream.base_url, retries=0)],
    }
    gateway = await make_gateway(config, ENV)
    status, error = await post(http, gateway, {"model": "fake", "input": ["x" * 400]}, TEAM_KEY)  # ~100 tokens
    assert (status, error["error"]["code"]) == (429, "budget_exceeded")
    assert upstream.received == []


async def test_a_redaction_makes_the_vector_the_redacted_texts(
    make_gateway: GatewayFactory, http: ClientSession
) -> None:
    redact = {"input": [{"check": "pii", "action": "redact"}]}
    deployments = [
        {"name": "guarded", "provider": {"type": "mock"}, "policies": ["redact"]},
        {"name": "plain", "provider": {"type": "mock"}},
    ]
    gateway = await make_gateway({"deployments": deployments, "policies": {"redact": redact}})
    original = "write to jane.doe@example.com today"

    status, guarded = await post(http, gateway, {"model": "guarded", "input": [original, "nothing here"]})
    assert status == 200
    _, redacted = await post(http, gateway, {"model": "plain", "input": ["write to [EMAIL] today", "nothing here"]})
    _, unredacted = await post(http, gateway, {"model": "plain", "input": [original]})

    assert guarded["data"][0]["embedding"] == redacted["data"][0]["embedding"]
    assert guarded["data"][0]["embedding"] != unredacted["data"][0]["embedding"]
    assert guarded["data"][1]["embedding"] == redacted["data"][1]["embedding"]  # an input with nothing to redact
