"""`POST /v1/chat/completions` with the official `openai` SDK (`client.chat.completions.create`),
against the gateway and a real loopback upstream: plain, streamed, a tools round trip, the body
relayed as sent and the answer as it came; the mock provider's chat; deployments narrowed to one
API; Azure's stream frame that is no chunk."""

from __future__ import annotations

import json
from typing import Any

import openai
import orjson
import pytest
from aiohttp import ClientSession
from aiohttp.test_utils import TestServer

from tests.conftest import GatewayFactory, deployment, upstream_url
from tests.support.fake_upstream import FakeUpstream, chat_stream

WEATHER_TOOL: Any = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather in a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}


async def test_create_returns_the_upstream_chat_completion(client: openai.AsyncOpenAI, upstream: FakeUpstream) -> None:
    completion = await client.chat.completions.create(
        model="fake",
        messages=[{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Say this is a test"}],
        max_completion_tokens=7,
    )

    assert completion.object == "chat.completion"
    assert completion.choices[0].message.content == "echo: Say this is a test"
    assert completion.choices[0].finish_reason == "stop"
    assert completion.usage is not None
    assert completion.usage.total_tokens == 7 + 6
    assert completion.usage.completion_tokens_details is not None  # relayed as the upstream gave it
    received = upstream.received[0]
    assert received.path == "/v1/chat/completions"
    assert received.body["max_completion_tokens"] == 7
    assert received.body["messages"][0] == {"role": "system", "content": "Be brief."}


async def test_the_body_is_forwarded_as_sent_unknown_fields_included(
    gateway: TestServer, upstream: FakeUpstream, http: ClientSession
) -> None:
    body = {
        "model": "fake",
        "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}], "x-extra": 1}],
        "verbosity": "low",
        "metadata": {"team": "a"},
        "store": False,
        "reasoning_effort": "low",
    }
    async with http.post(gateway.make_url("/v1/chat/completions"), json=body) as response:
        assert response.status == 200
        raw = await response.read()

    assert upstream.received[0].body == body
    assert orjson.loads(raw)["system_fingerprint"] == "fp_fake"  # relayed byte for byte


async def test_stream_yields_role_then_content_then_usage(client: openai.AsyncOpenAI) -> None:
    stream = await client.chat.completions.create(
        model="fake-model",
        messages=[{"role": "user", "content": "one two three"}],
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = [chunk async for chunk in stream]

    assert all(chunk.object == "chat.completion.chunk" for chunk in chunks)
    assert chunks[0].choices[0].delta.role == "assistant"
    text = "".join(chunk.choices[0].delta.content or "" for chunk in chunks if chunk.choices)
    assert text == "echo: one two three "
    assert [chunk.choices[0].finish_reason for chunk in chunks if chunk.choices][-1] == "stop"
    assert chunks[-1].choices == []
    assert chunks[-1].usage is not None


async def test_tools_round_trip(client: openai.AsyncOpenAI, upstream: FakeUpstream) -> None:
    messages: list[Any] = [{"role": "user", "content": "Weather in Paris?"}]
    first = await client.chat.completions.create(
        model="fake", messages=messages, tools=[WEATHER_TOOL], tool_choice="auto", parallel_tool_calls=False
    )
    call = first.choices[0].message.tool_calls
    assert first.choices[0].finish_reason == "tool_calls"
    assert call is not None
    assert call[0].type == "function"
    assert call[0].function.name == "get_weather"
    assert json.loads(call[0].function.arguments) == {"city": "Paris"}

    messages += [
        first.choices[0].message.model_dump(exclude_none=True),
        {"role": "tool", "tool_call_id": call[0].id, "content": "sunny, 21 C"},
    ]
    second = await client.chat.completions.create(model="fake", messages=messages, tools=[WEATHER_TOOL])

    assert second.choices[0].message.content == "echo: sunny, 21 C"
    sent = upstream.received[1].body
    assert sent["messages"][1]["tool_calls"][0]["id"] == "call_fake1"
    assert sent["messages"][2] == {"role": "tool", "tool_call_id": "call_fake1", "content": "sunny, 21 C"}
    assert upstream.received[0].body["tools"] == [WEATHER_TOOL]


async def test_streamed_tool_call_arrives_in_deltas_by_index(client: openai.AsyncOpenAI) -> None:
    stream = await client.chat.completions.create(
        model="fake", messages=[{"role": "user", "content": "Weather?"}], tools=[WEATHER_TOOL], stream=True
    )
    arguments = ""
    names = []
    finish = None
    async for chunk in stream:
        for choice in chunk.choices:
            for call in choice.delta.tool_calls or ():
                assert call.index == 0
                names += [call.function.name] if call.function and call.function.name else []
                arguments += (call.function.arguments or "") if call.function else ""
            finish = choice.finish_reason or finish

    assert names == ["get_weather"]
    assert json.loads(arguments) == {"city": "Paris"}
    assert finish == "tool_calls"


async def test_upstream_4xx_reaches_the_sdk_as_its_error(client: openai.AsyncOpenAI, upstream: FakeUpstream) -> None:
    from tests.support.fake_upstream import status

    upstream.script(status(400, {"message": "bad tool", "type": "invalid_request_error", "param": "tools"}))
    with pytest.raises(openai.BadRequestError) as caught:
        await client.chat.completions.create(model="fake", messages=[{"role": "user", "content": "x"}])

    assert "bad tool" in caught.value.message


async def test_an_invalid_message_is_a_400_naming_it(client: openai.AsyncOpenAI, upstream: FakeUpstream) -> None:
    messages: Any = [{"role": "user", "content": "x"}, {"role": "tool", "content": "no id"}]
    with pytest.raises(openai.BadRequestError) as caught:
        await client.chat.completions.create(model="fake", messages=messages)

    assert caught.value.param == "messages[1].tool_call_id"
    assert upstream.received == []


# --- the mock provider ---------------------------------------------------------------------------------


@pytest.fixture
async def mock_gateway(make_gateway: GatewayFactory) -> TestServer:
    return await make_gateway({"deployments": [{"name": "mock", "provider": {"type": "mock"}}]})


@pytest.fixture
async def mock_client(mock_gateway: TestServer) -> Any:
    async with openai.AsyncOpenAI(base_url=str(mock_gateway.make_url("/v1")), api_key="x", max_retries=0) as sdk:
        yield sdk


async def test_mock_answers_chat_deterministically_with_honest_usage(mock_client: openai.AsyncOpenAI) -> None:
    ask: Any = {"model": "mock", "messages": [{"role": "user", "content": "hello mock"}], "seed": 3}
    one = await mock_client.chat.completions.create(**ask, max_completion_tokens=5, n=2)
    two = await mock_client.chat.completions.create(**ask, max_completion_tokens=5, n=2)

    assert [c.message.content for c in one.choices] == [c.message.content for c in two.choices]
    assert all(c.finish_reason == "length" for c in one.choices)
    assert one.usage is not None
    assert one.usage.completion_tokens == 10
    assert one.usage.prompt_tokens == 2


async def test_mock_stream_agrees_with_its_plain_answer(mock_client: openai.AsyncOpenAI) -> None:
    ask: Any = {"model": "mock", "messages": [{"role": "user", "content": "stream me"}], "temperature": 0}
    plain = await mock_client.chat.completions.create(**ask)
    stream = await mock_client.chat.completions.create(**ask, stream=True, stream_options={"include_usage": True})
    chunks = [chunk async for chunk in stream]

    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == plain.choices[0].message.content
    assert chunks[-1].usage is not None
    assert plain.usage is not None
    assert chunks[-1].usage.completion_tokens == plain.usage.completion_tokens


async def test_mock_calls_the_tool_the_choice_requires(mock_client: openai.AsyncOpenAI) -> None:
    other: Any = {"type": "function", "function": {"name": "other", "parameters": {"type": "object"}}}
    answer = await mock_client.chat.completions.create(
        model="mock",
        messages=[{"role": "user", "content": "weather"}],
        tools=[other, WEATHER_TOOL],
        tool_choice={"type": "function", "function": {"name": "get_weather"}},
    )
    calls = answer.choices[0].message.tool_calls

    assert answer.choices[0].finish_reason == "tool_calls"
    assert calls is not None
    assert calls[0].type == "function"
    assert calls[0].function.name == "get_weather"
    assert set(json.loads(calls[0].function.arguments)) == {"city"}
    auto = await mock_client.chat.completions.create(
        model="mock", messages=[{"role": "user", "content": "weather"}], tools=[WEATHER_TOOL], tool_choice="auto"
    )
    assert auto.choices[0].message.tool_calls is None
    assert auto.choices[0].message.content


# --- which deployments serve chat ---------------------------------------------------------------------


async def test_a_deployment_narrowed_to_completions_answers_chat_with_a_400_naming_it(
    make_gateway: GatewayFactory, upstream: FakeUpstream
) -> None:
    narrowed = deployment("legacy", upstream_url(upstream), apis=["completions"])
    gateway = await make_gateway({"deployments": [narrowed]})
    async with openai.AsyncOpenAI(base_url=str(gateway.make_url("/v1")), api_key="x", max_retries=0) as sdk:
        with pytest.raises(openai.BadRequestError) as caught:
            await sdk.chat.completions.create(model="legacy", messages=[{"role": "user", "content": "x"}])
        completion = await sdk.completions.create(model="legacy", prompt="still served")

    assert "'legacy'" in caught.value.message
    assert "/v1/chat/completions" in caught.value.message
    assert caught.value.code == "unsupported_api"
    assert caught.value.param == "model"
    assert completion.choices[0].text == "echo: still served"
    assert [r.path for r in upstream.received] == ["/v1/completions"]


async def test_a_group_passes_over_its_members_that_do_not_serve_chat(
    make_gateway: GatewayFactory, upstream: FakeUpstream
) -> None:
    members = [
        deployment("legacy", upstream_url(upstream), aliases=["group"], apis=["completions"], priority=0),
        deployment("modern", upstream_url(upstream), aliases=["group"], priority=1),
    ]
    gateway = await make_gateway({"deployments": members, "routing": {"strategy": "priority"}})
    async with openai.AsyncOpenAI(base_url=str(gateway.make_url("/v1")), api_key="x", max_retries=0) as sdk:
        raw = await sdk.chat.completions.with_raw_response.create(
            model="group", messages=[{"role": "user", "content": "x"}]
        )

    assert raw.headers["x-gateway-deployment"] == "modern"
    assert raw.headers["x-gateway-skipped"] == "legacy=api_unserved"


async def test_azure_prompt_filter_frame_is_never_relayed(make_gateway: GatewayFactory, upstream: FakeUpstream) -> None:
    frame = orjson.dumps(
        {
            "choices": [],
            "created": 0,
            "id": "",
            "model": "",
            "object": "",
            "prompt_filter_results": [{"prompt_index": 0, "content_filter_results": {}}],
        }
    )
    upstream.script(chat_stream(prelude=(frame,)))
    gateway = await make_gateway({"deployments": [deployment("fake", upstream_url(upstream))]})
    async with ClientSession() as http:
        body = {"model": "fake", "messages": [{"role": "user", "content": "a b"}], "stream": True}
        async with http.post(gateway.make_url("/v1/chat/completions"), json=body) as response:
            raw = await response.read()

    assert b"prompt_filter_results" not in raw
    events = [line[6:] for line in raw.split(b"\n") if line.startswith(b"data: ")]
    assert events[-1] == b"[DONE]"
    assert all(orjson.loads(event)["object"] == "chat.completion.chunk" for event in events[:-1])


async def test_azure_deployment_calls_its_chat_url(make_gateway: GatewayFactory, aiohttp_server: Any) -> None:
    from aiohttp import web

    seen: list[str] = []

    async def handle(request: web.Request) -> web.Response:
        seen.append(str(request.rel_url))
        assert request.headers["api-key"] == "azure-secret"
        return web.json_response(
            {
                "id": "c",
                "object": "chat.completion",
                "created": 1,
                "model": "gpt",
                "choices": [{"index": 0, "message": {"role": "assistant", "content": "hi"}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
            }
        )

    app = web.Application()
    app.router.add_post("/openai/deployments/gpt4/chat/completions", handle)
    server = await aiohttp_server(app)
    provider = {
        "type": "azure",
        "endpoint": str(server.make_url("")).rstrip("/"),
        "azure_deployment": "gpt4",
        "api_key": "${AZ}",
    }
    gateway = await make_gateway({"deployments": [{"name": "az", "provider": provider}]}, {"AZ": "azure-secret"})
    async with openai.AsyncOpenAI(base_url=str(gateway.make_url("/v1")), api_key="x", max_retries=0) as sdk:
        answer = await sdk.chat.completions.create(model="az", messages=[{"role": "user", "content": "x"}])

    assert answer.choices[0].message.content == "hi"
    assert seen == ["/openai/deployments/gpt4/chat/completions?api-version=2024-10-21"]
