"""The response cache on `/v1/messages` native pass-through (an `anthropic` deployment with a cache
policy), against the loopback fake Anthropic (`tests.support.fake_anthropic`) and a real Redis tier.

The body still goes as it came (`cache_control`, thinking, `anthropic-beta`), and a repeat is no
upstream call: a plain answer comes back byte for byte, a stream replays the very events the first
client got. The key is the native body itself (a change only Anthropic acts on, which the chat view
drops, is another entry), plain and streamed answers are kept apart, and an answer the output
checks rewrote is stored and replayed as the client got it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import anthropic
import orjson
import pytest
from aiohttp import ClientSession
from aiohttp.test_utils import TestServer
from pytest_aiohttp import AiohttpServer

from tests.conftest import GatewayFactory
from tests.support.fake_anthropic import ANSWER, BETA, BODY, STREAM, Anthropic, native

PROVIDER_KEY = "sk-ant-upstream-cache-0123456789abcdef"
TEAM_KEY = "gw-team-cache-0123456789abcdef"
SSN = "536-22-8471"
HEADERS = {"x-api-key": TEAM_KEY, "anthropic-version": "2023-06-01", "anthropic-beta": BETA}
STATUS = "x-gateway-cache-status"


@pytest.fixture
async def fake(aiohttp_server: AiohttpServer) -> Anthropic:
    return await Anthropic.started(aiohttp_server)


@pytest.fixture(params=["memory", "redis"])
async def gateway(
    request: pytest.FixtureRequest, make_gateway: GatewayFactory, fake: Anthropic, redis_url: str, redis_prefix: str
) -> TestServer:
    provider = {"type": "anthropic", "base_url": fake.base_url, "model": "claude-up", "api_key": "${K}"}
    config: dict[str, Any] = {
        "deployments": [
            {"name": "claude", "provider": provider, "retries": 0, "policies": ["cached"]},
            {"name": "masked", "provider": provider, "retries": 0, "policies": ["cached", "redact-out"]},
        ],
        "policies": {
            "cached": {"cache": {"ttl_s": 60}},
            "redact-out": {"output": [{"check": "pii", "action": "redact"}]},
        },
        "keys": [{"name": "team", "key": "${TEAM}"}],
    }
    if request.param == "redis":  # entries only in Redis: each hit decodes a stored blob
        config["redis"] = {"url": redis_url, "prefix": redis_prefix}
        config["cache"] = {"memory_max_bytes": 0, "redis_timeout_ms": 1000}  # a loaded machine is slow
    return await make_gateway(config, {"K": PROVIDER_KEY, "TEAM": TEAM_KEY})


@pytest.fixture
async def sdk(gateway: TestServer) -> AsyncIterator[anthropic.AsyncAnthropic]:
    async with anthropic.AsyncAnthropic(base_url=str(gateway.make_url("")), api_key=TEAM_KEY, max_retries=0) as client:
        yield client


async def post(http: ClientSession, gateway: TestServer, body: Any) -> tuple[int, str | None, bytes]:
    headers = {**HEADERS, "content-type": "application/json"}
    async with http.post(gateway.make_url("/v1/messages"), data=orjson.dumps(body), headers=headers) as response:
        return response.status, response.headers.get(STATUS), await response.read()


async def test_a_repeated_answer_is_one_upstream_call_and_comes_back_byte_for_byte(
    gateway: TestServer, fake: Anthropic, http: ClientSession, sdk: anthropic.AsyncAnthropic
) -> None:
    first = await post(http, gateway, BODY)
    again = await post(http, gateway, BODY)
    message = await sdk.messages.create(**BODY, extra_headers={"anthropic-beta": BETA})

    assert first == (200, "MISS", ANSWER)
    assert again == (200, "HIT", ANSWER)
    assert message.content[0].type == "thinking"
    assert message.content[0].signature == "ErUBCkYIsig2=="
    [seen] = fake.seen  # one upstream call, of the body as it came
    assert seen.raw == native(BODY)
    assert seen.headers["anthropic-beta"] == BETA


async def test_a_repeated_stream_replays_the_same_events(
    gateway: TestServer, fake: Anthropic, http: ClientSession, sdk: anthropic.AsyncAnthropic
) -> None:
    fake.answer(STREAM, "text/event-stream")
    body = {**BODY, "stream": True}
    first = await post(http, gateway, body)
    again = await post(http, gateway, body)
    async with sdk.messages.stream(**BODY, extra_headers={"anthropic-beta": BETA}) as stream:
        final = await stream.get_final_message()

    assert first == (200, "MISS", STREAM)
    assert again == (200, "HIT", STREAM)  # byte-identical events, in Anthropic's order
    assert final.content[0].type == "thinking"
    assert (final.content[0].signature, final.usage.cache_read_input_tokens) == ("ErUBCkYIsig2==", 17)
    [seen] = fake.seen
    assert seen.raw == native(body)


async def test_the_key_is_the_native_body_and_its_beta_header(
    gateway: TestServer, fake: Anthropic, http: ClientSession
) -> None:
    await post(http, gateway, BODY)
    # What only Anthropic acts on (the chat view is the same): other entries.
    other_budget = {**BODY, "thinking": {"type": "enabled", "budget_tokens": 2048}}
    no_cache_control = {**BODY, "system": [{"type": "text", "text": "Be brief."}]}
    answers = [await post(http, gateway, body) for body in (other_budget, no_cache_control)]
    beta = {**HEADERS, "anthropic-beta": "other-beta", "content-type": "application/json"}
    async with http.post(gateway.make_url("/v1/messages"), data=orjson.dumps(BODY), headers=beta) as response:
        beta_status = response.headers.get(STATUS)
    fake.answer(STREAM, "text/event-stream")
    streamed = await post(http, gateway, {**BODY, "stream": True})  # a stream is not the plain answer

    assert [status for _, status, _ in answers] == ["MISS", "MISS"]
    assert beta_status == "MISS"
    assert streamed[1:] == ("MISS", STREAM)
    assert len(fake.seen) == 5
    assert (await post(http, gateway, other_budget))[1] == "HIT"


async def test_an_answer_the_output_checks_rewrote_is_stored_as_the_client_got_it(
    gateway: TestServer, fake: Anthropic, http: ClientSession
) -> None:
    fake.answer(STREAM.replace(b"Sunny in Paris.", f"SSN {SSN} in Paris.".encode()), "text/event-stream")
    body = {**BODY, "model": "masked", "stream": True}
    first = await post(http, gateway, body)
    again = await post(http, gateway, body)

    assert first[:2] == (200, "MISS")
    assert SSN.encode() not in first[2]
    assert b"[SSN]" in first[2]
    assert again == (200, "HIT", first[2])
    assert len(fake.seen) == 1


async def test_a_stream_cut_before_message_stop_is_not_stored(
    gateway: TestServer, fake: Anthropic, http: ClientSession
) -> None:
    fake.answer(STREAM.split(b"event: message_delta")[0], "text/event-stream")  # then the upstream closes
    body = {**BODY, "stream": True}
    cut = await post(http, gateway, body)
    fake.answer(STREAM, "text/event-stream")
    whole = await post(http, gateway, body)

    assert b"event: error" in cut[2]
    assert whole == (200, "MISS", STREAM)
    assert len(fake.seen) == 2
