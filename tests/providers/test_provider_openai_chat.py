"""`type: openai-chat`: what a chat-only model receives for a Completions request, and what the
client gets back beyond what the conformance suite checks (parameters, logprobs, stream errors)."""

from __future__ import annotations

from typing import Any

import openai
import orjson
import pytest
from pytest_aiohttp import AiohttpServer

from tests.conformance.fake_api import PROVIDER_KEY, Verbatim
from tests.conformance.fake_chat import ChatCompletionsFake
from tests.conformance.harness import DEPLOYMENT, sdk_on, start_fake
from tests.conftest import GatewayFactory


@pytest.fixture
async def fake(aiohttp_server: AiohttpServer) -> ChatCompletionsFake:
    return await start_fake(aiohttp_server, ChatCompletionsFake())


async def read_stream(client: openai.AsyncOpenAI) -> str:
    stream = await client.completions.create(model=DEPLOYMENT, prompt="x", stream=True)
    return "".join([chunk.choices[0].text async for chunk in stream if chunk.choices])


def chat(fake: ChatCompletionsFake, **options: Any) -> dict[str, Any]:
    return {"type": "openai-chat", "base_url": fake.base_url + "/v1", "api_key": "${PROVIDER_KEY}", **options}


async def test_sampling_parameters_reach_the_chat_request(
    make_gateway: GatewayFactory, fake: ChatCompletionsFake
) -> None:
    async with sdk_on(make_gateway, chat(fake, model="gpt-4o-mini")) as client:
        await client.completions.create(
            model=DEPLOYMENT,
            prompt="Once upon a time",
            temperature=0.3,
            top_p=0.9,
            seed=7,
            presence_penalty=0.5,
            frequency_penalty=-0.5,
            logit_bias={"50256": -100},
            user="end-user-1",
            stop=["\n"],
        )

    sent = fake.received[0]
    assert sent.headers["Authorization"] == f"Bearer {PROVIDER_KEY}"
    assert sent.body == {
        "model": "gpt-4o-mini",
        "messages": [{"role": "user", "content": "Once upon a time"}],
        "max_tokens": 16,  # the Completions default, since the client gave none
        "temperature": 0.3,
        "top_p": 0.9,
        "seed": 7,
        "presence_penalty": 0.5,
        "frequency_penalty": -0.5,
        "logit_bias": {"50256": -100},
        "user": "end-user-1",
        "stop": ["\n"],
    }


async def test_system_prompt_and_the_newer_max_tokens_field(
    make_gateway: GatewayFactory, fake: ChatCompletionsFake
) -> None:
    provider = chat(fake, system_prompt="Continue the text.", max_tokens_field="max_completion_tokens")
    async with sdk_on(make_gateway, provider) as client:
        await client.completions.create(model=DEPLOYMENT, prompt="Hello", max_tokens=5)

    body = fake.received[0].body
    assert body["messages"] == [
        {"role": "system", "content": "Continue the text."},
        {"role": "user", "content": "Hello"},
    ]
    assert body["max_completion_tokens"] == 5
    assert "max_tokens" not in body


async def test_no_default_max_tokens_leaves_the_limit_to_the_upstream(
    make_gateway: GatewayFactory, fake: ChatCompletionsFake
) -> None:
    async with sdk_on(make_gateway, chat(fake, default_max_tokens=None)) as client:
        completion = await client.completions.create(model=DEPLOYMENT, prompt=" ".join(["w"] * 20))

    assert "max_tokens" not in fake.received[0].body
    assert completion.choices[0].finish_reason == "stop"  # not cut at 16 tokens


async def test_fields_unknown_to_completions_are_forwarded(
    make_gateway: GatewayFactory, fake: ChatCompletionsFake
) -> None:
    async with sdk_on(make_gateway, chat(fake)) as client:
        await client.completions.create(model=DEPLOYMENT, prompt="Hi", extra_body={"top_k": 5})

    assert fake.received[0].body["top_k"] == 5
    assert fake.received[0].body["model"] == DEPLOYMENT  # the client's model, as none is configured


async def test_logprobs_come_back_in_the_completions_shape(
    make_gateway: GatewayFactory, fake: ChatCompletionsFake
) -> None:
    async with sdk_on(make_gateway, chat(fake)) as client:
        completion = await client.completions.create(model=DEPLOYMENT, prompt="the sky", logprobs=2)

    assert (fake.received[0].body["logprobs"], fake.received[0].body["top_logprobs"]) == (True, 2)
    logprobs = completion.choices[0].logprobs
    assert logprobs is not None
    assert logprobs.tokens == ["answer", " 0", " to", " the", " sky"]
    assert logprobs.token_logprobs == [-0.5] * 5
    assert logprobs.top_logprobs is not None
    assert logprobs.top_logprobs[1] == {" 0": -0.5, "alt1": -1.0}
    assert logprobs.text_offset == [0, 6, 8, 11, 15]


async def test_streamed_logprobs_keep_counting_text_offsets(
    make_gateway: GatewayFactory, fake: ChatCompletionsFake
) -> None:
    async with sdk_on(make_gateway, chat(fake)) as client:
        stream = await client.completions.create(model=DEPLOYMENT, prompt="the sky", logprobs=0, stream=True)
        offsets = [
            offset
            async for chunk in stream
            for c in chunk.choices
            if c.logprobs
            for offset in c.logprobs.text_offset or []
        ]

    assert offsets == [0, 6, 8, 11, 15]


async def test_an_error_event_in_the_stream_fails_it_with_the_upstream_message(
    make_gateway: GatewayFactory, fake: ChatCompletionsFake
) -> None:
    chunk = {"id": "c", "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {"content": "Hi"}}]}
    error = {"error": {"message": "The server had an error while processing your request.", "type": "server_error"}}
    fake.script(Verbatim(sse=b"data: " + orjson.dumps(chunk) + b"\n\ndata: " + orjson.dumps(error) + b"\n\n"))
    async with sdk_on(make_gateway, chat(fake)) as client:
        with pytest.raises(openai.APIError, match="had an error while processing") as caught:
            await read_stream(client)

    assert caught.value.code == "upstream_stream_error"


async def test_content_filter_and_tool_finish_reasons(make_gateway: GatewayFactory, fake: ChatCompletionsFake) -> None:
    choices = [
        {"index": 0, "message": {"role": "assistant", "content": None}, "finish_reason": "content_filter"},
        {"index": 1, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "tool_calls"},
    ]
    fake.script(Verbatim(json={"id": "c", "object": "chat.completion", "model": "m", "choices": choices}))
    async with sdk_on(make_gateway, chat(fake)) as client:
        completion = await client.completions.create(model=DEPLOYMENT, prompt="x", n=2)

    assert [(c.text, c.finish_reason) for c in completion.choices] == [("", "content_filter"), ("ok", "stop")]
