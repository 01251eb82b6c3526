"""`POST /v1/messages` with the official `anthropic` SDK, against the mock and a loopback
OpenAI-compatible upstream (the chat translation): create, tools round trip, stop sequences,
max_tokens, usage, streams with the final message, and the SDK's exception classes on every error
of the path (auth, permission, unknown model, validation, guardrail deny, rate limit, upstream)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import anthropic
import orjson
import pytest
from aiohttp import ClientSession
from aiohttp.test_utils import TestServer

from tests.conftest import GatewayFactory, deployment
from tests.support.fake_upstream import FakeUpstream, chat_stream, status, stream_then_drop

PROVIDER_KEY = "sk-upstream-messages-0123456789abcdef"
TEAM_KEY = "gw-team-messages-0123456789abcdef"
SSN = "536-22-8471"
WEATHER: Any = {
    "name": "get_weather",
    "description": "The weather in a city",
    "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}


@pytest.fixture
async def gateway(make_gateway: GatewayFactory, upstream: FakeUpstream) -> TestServer:
    fake = deployment("fake", upstream.base_url, retries=0, provider={"model": "gpt-up", "api_key": "${K}"})
    guarded = deployment("guarded", upstream.base_url, retries=0, policies=["pii"])
    mock = {"name": "mock", "provider": {"type": "mock"}}
    config = {
        "deployments": [fake, guarded, mock],
        "policies": {"pii": {"input": [{"check": "pii", "action": "deny"}]}},
        "keys": [
            {"name": "team", "key": "${TEAM}", "deployments": ["fake", "guarded", "mock"]},
            {"name": "narrow", "key": "${NARROW}", "deployments": ["mock"]},
            {"name": "slow", "key": "${SLOW}", "limits": {"rpm": 1}},
        ],
    }
    env = {"K": PROVIDER_KEY, "TEAM": TEAM_KEY, "NARROW": TEAM_KEY + "-narrow", "SLOW": TEAM_KEY + "-slow"}
    return await make_gateway(config, env)


@pytest.fixture
async def sdk(gateway: TestServer) -> AsyncIterator[anthropic.AsyncAnthropic]:
    async with anthropic.AsyncAnthropic(base_url=str(gateway.make_url("")), api_key=TEAM_KEY, max_retries=0) as client:
        yield client


async def test_create_on_an_upstream_translates_both_ways(
    sdk: anthropic.AsyncAnthropic, upstream: FakeUpstream
) -> None:
    message = await sdk.messages.create(
        model="fake",
        max_tokens=50,
        system=[{"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}}],
        messages=[{"role": "user", "content": [{"type": "text", "text": "hello there"}]}],
        extra_body={"temperature": 0.5},  # the 2.x SDK leaves it to extra_body
        stop_sequences=["END"],
        metadata={"user_id": "u-1"},
    )

    [received] = upstream.received
    assert received.path == "/v1/chat/completions"
    assert received.headers["Authorization"] == f"Bearer {PROVIDER_KEY}"  # the gateway key never goes upstream
    assert "x-api-key" not in received.headers
    assert "anthropic-version" not in received.headers
    assert received.body["model"] == "gpt-up"
    assert received.body["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "hello there"},
    ]
    assert (received.body["max_tokens"], received.body["temperature"]) == (50, 0.5)
    assert (received.body["stop"], received.body["user"]) == (["END"], "u-1")
    assert message.type == "message"
    assert message.role == "assistant"
    assert [block.type for block in message.content] == ["text"]
    assert text_of(message.content[0]) == "echo: hello there"
    assert message.stop_reason == "end_turn"
    assert message.usage.input_tokens == 7
    assert message.usage.output_tokens == 3
    assert message.usage.cache_read_input_tokens == 0


async def test_tools_round_trip(sdk: anthropic.AsyncAnthropic, upstream: FakeUpstream) -> None:
    first = await sdk.messages.create(
        model="fake",
        max_tokens=50,
        tools=[WEATHER],
        tool_choice={"type": "any", "disable_parallel_tool_use": True},
        messages=[{"role": "user", "content": "weather in Paris?"}],
    )
    assert first.stop_reason == "tool_use"
    [call] = first.content
    assert call.type == "tool_use"
    assert (call.name, call.input, call.id) == ("get_weather", {"city": "Paris"}, "call_fake1")
    sent = upstream.received[0].body
    assert sent["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "get_weather",
                "description": "The weather in a city",
                "parameters": WEATHER["input_schema"],
            },
        }
    ]
    assert (sent["tool_choice"], sent["parallel_tool_calls"]) == ("required", False)

    second = await sdk.messages.create(
        model="fake",
        max_tokens=50,
        tools=[WEATHER],
        messages=[
            {"role": "user", "content": "weather in Paris?"},
            {"role": "assistant", "content": first.content},
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": call.id, "content": [{"type": "text", "text": "rain"}]},
                    {"type": "tool_result", "tool_use_id": "call_2", "content": "no such city", "is_error": True},
                ],
            },
        ],
    )
    sent = upstream.received[1].body
    assert sent["messages"][1] == {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_fake1",
                "type": "function",
                "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'},
            }
        ],
    }
    assert sent["messages"][2:] == [
        {"role": "tool", "tool_call_id": "call_fake1", "content": "rain"},
        {"role": "tool", "tool_call_id": "call_2", "content": "Error: no such city"},
    ]
    assert second.stop_reason == "end_turn"
    assert second.content[0].type == "text"


async def test_the_mock_answers_and_stops_at_max_tokens(sdk: anthropic.AsyncAnthropic) -> None:
    message = await sdk.messages.create(model="mock", max_tokens=3, messages=[{"role": "user", "content": "talk"}])
    assert message.stop_reason == "max_tokens"
    assert message.usage.output_tokens == 3
    assert message.usage.input_tokens > 0
    called = await sdk.messages.create(
        model="mock",
        max_tokens=200,
        tools=[WEATHER],
        tool_choice={"type": "tool", "name": "get_weather"},
        messages=[{"role": "user", "content": "weather?"}],
    )
    assert called.stop_reason == "tool_use"
    assert called.content[-1].type == "tool_use"
    assert called.content[-1].name == "get_weather"
    assert isinstance(called.content[-1].input, dict)


async def test_a_stop_sequence_the_upstream_names_is_stop_sequence(
    sdk: anthropic.AsyncAnthropic, upstream: FakeUpstream, http: ClientSession, gateway: TestServer
) -> None:
    answer: Any = {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "model": "gpt-up",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "one two"}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 4, "completion_tokens": 2, "prompt_tokens_details": {"cached_tokens": 3}},
    }
    answer["choices"][0]["stop_reason"] = "END"  # vLLM names the stop that matched
    upstream.script(status(200, raw=orjson.dumps(answer)))
    message = await sdk.messages.create(
        model="fake", max_tokens=9, stop_sequences=["END"], messages=[{"role": "user", "content": "count"}]
    )
    assert (message.stop_reason, message.stop_sequence) == ("stop_sequence", "END")
    assert (message.usage.input_tokens, message.usage.cache_read_input_tokens) == (1, 3)


async def test_streams_reassemble_with_the_sdk(sdk: anthropic.AsyncAnthropic, upstream: FakeUpstream) -> None:
    upstream.script(chat_stream())
    async with sdk.messages.stream(
        model="fake", max_tokens=50, messages=[{"role": "user", "content": "hello stream"}]
    ) as stream:
        kinds = [event.type async for event in stream]
        text = await stream.get_final_message()
    assert text_of(text.content[0]) == "echo: hello stream "
    assert text.stop_reason == "end_turn"
    assert text.usage.input_tokens == 7
    assert kinds[0] == "message_start"
    assert kinds[-1] == "message_stop"
    assert upstream.received[0].body["stream_options"] == {"include_usage": True}

    upstream.script(chat_stream())
    async with sdk.messages.stream(
        model="fake",
        max_tokens=50,
        tools=[WEATHER],
        messages=[{"role": "user", "content": "weather?"}],
    ) as stream:
        called = await stream.get_final_message()
    [block] = called.content
    assert block.type == "tool_use"
    assert block.input == {"city": "Paris"}
    assert called.stop_reason == "tool_use"


async def test_the_raw_stream_is_anthropics_event_order(
    gateway: TestServer, upstream: FakeUpstream, http: ClientSession
) -> None:
    upstream.script(chat_stream([{"reasoning_content": "hmm"}, {"content": "hi"}]))
    body = {"model": "fake", "max_tokens": 9, "stream": True, "messages": [{"role": "user", "content": "x"}]}
    headers = {"x-api-key": TEAM_KEY, "anthropic-version": "2023-06-01"}
    async with http.post(gateway.make_url("/v1/messages?beta=true"), json=body, headers=headers) as response:
        raw = (await response.read()).decode()
    assert response.status == 200
    names = [line[len("event: ") :] for line in raw.splitlines() if line.startswith("event: ")]
    assert names == [
        "message_start",
        "ping",
        "content_block_start",
        "content_block_delta",
        "content_block_stop",
        "content_block_start",
        "content_block_delta",
        "content_block_stop",
        "message_delta",
        "message_stop",
    ]
    assert "[DONE]" not in raw
    deltas = [orjson.loads(line[6:]) for line in raw.splitlines() if '"content_block_delta"' in line]
    assert [d["delta"]["type"] for d in deltas] == ["thinking_delta", "text_delta"]


def text_of(block: Any) -> str:
    assert block.type == "text"
    text: str = block.text
    return text


def body_of(error: anthropic.APIStatusError) -> Any:
    return error.body


async def error_of(call: Any) -> anthropic.APIStatusError:
    with pytest.raises(anthropic.APIStatusError) as raised:
        await call
    return raised.value


async def test_every_error_is_anthropic_shaped(
    gateway: TestServer, sdk: anthropic.AsyncAnthropic, upstream: FakeUpstream
) -> None:
    base = str(gateway.make_url(""))
    hello: Any = [{"role": "user", "content": "hello"}]

    async with anthropic.AsyncAnthropic(base_url=base, api_key="wrong-key", max_retries=0) as stranger:
        error = await error_of(stranger.messages.create(model="fake", max_tokens=5, messages=hello))
    assert isinstance(error, anthropic.AuthenticationError)
    assert error.body == {
        "type": "error",
        "error": {"type": "authentication_error", "message": body_of(error)["error"]["message"]},
    }

    async with anthropic.AsyncAnthropic(base_url=base, api_key=TEAM_KEY + "-narrow", max_retries=0) as narrow:
        error = await error_of(narrow.messages.create(model="fake", max_tokens=5, messages=hello))
    assert isinstance(error, anthropic.PermissionDeniedError)

    error = await error_of(sdk.messages.create(model="claude-nowhere", max_tokens=5, messages=hello))
    assert isinstance(error, anthropic.NotFoundError)
    assert body_of(error)["error"]["type"] == "not_found_error"

    error = await error_of(sdk.messages.create(model="fake", max_tokens=0, messages=hello))
    assert isinstance(error, anthropic.BadRequestError)
    assert "max_tokens" in body_of(error)["error"]["message"]
    bad_image: Any = [
        {"role": "user", "content": [{"type": "image", "source": {"type": "base64", "media_type": "x", "data": ""}}]}
    ]
    error = await error_of(sdk.messages.create(model="fake", max_tokens=5, messages=bad_image))
    assert "messages[0].content[0].source.media_type" in body_of(error)["error"]["message"]

    secret: Any = [{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "content": f"SSN {SSN}"}]}]
    error = await error_of(sdk.messages.create(model="guarded", max_tokens=5, messages=secret))
    assert isinstance(error, anthropic.BadRequestError)
    assert body_of(error)["type"] == "error"
    assert not upstream.received  # denied before any upstream call

    upstream.script(status(503, {"message": "down", "type": "server_error"}))
    error = await error_of(sdk.messages.create(model="fake", max_tokens=5, messages=hello))
    assert isinstance(error, anthropic.InternalServerError)
    assert body_of(error)["type"] == "error"

    async with anthropic.AsyncAnthropic(base_url=base, api_key=TEAM_KEY + "-slow", max_retries=0) as slow:
        await slow.messages.create(model="mock", max_tokens=5, messages=hello)
        error = await error_of(slow.messages.create(model="mock", max_tokens=5, messages=hello))
    assert isinstance(error, anthropic.RateLimitError)
    assert body_of(error)["error"]["type"] == "rate_limit_error"
    assert int(error.response.headers["retry-after"]) >= 1


async def test_a_stream_failing_midway_ends_with_an_error_event(
    sdk: anthropic.AsyncAnthropic, upstream: FakeUpstream
) -> None:
    upstream.script(stream_then_drop(["a", "b"]))

    async def consume() -> list[str]:
        async with sdk.messages.stream(model="fake", max_tokens=50, messages=[{"role": "user", "content": "x"}]) as s:
            return [event.type async for event in s]

    with pytest.raises(anthropic.APIStatusError) as raised:
        await consume()
    assert body_of(raised.value)["type"] == "error"


async def test_count_tokens_estimates_what_is_sent_without_an_upstream_call(
    sdk: anthropic.AsyncAnthropic, upstream: FakeUpstream
) -> None:
    hello: Any = [{"role": "user", "content": "hello there"}]
    plain = await sdk.messages.count_tokens(model="fake", messages=hello)
    with_tools = await sdk.messages.count_tokens(model="fake", messages=hello, tools=[WEATHER], system="Be brief.")
    assert plain.input_tokens > 0
    assert with_tools.input_tokens > plain.input_tokens  # the tools and the system prompt are read too
    error = await error_of(sdk.messages.count_tokens(model="claude-nowhere", messages=hello))
    assert isinstance(error, anthropic.NotFoundError)
    error = await error_of(sdk.messages.count_tokens(model="fake", messages=[]))
    assert isinstance(error, anthropic.BadRequestError)
    assert not upstream.received
