"""`type: anthropic`: the Messages request a Completions request becomes, and the translation of
what only Anthropic sends (refusals, cached-prompt usage, error events, 529 overloaded)."""

from __future__ import annotations

from typing import Any

import openai
import pytest
from pytest_aiohttp import AiohttpServer

from tests.conformance.fake_anthropic import AnthropicFake
from tests.conformance.fake_api import PROVIDER_KEY, Fail, Verbatim, sse
from tests.conformance.harness import DEPLOYMENT, sdk_on, start_fake
from tests.conftest import GatewayFactory


@pytest.fixture
async def fake(aiohttp_server: AiohttpServer) -> AnthropicFake:
    return await start_fake(aiohttp_server, AnthropicFake())


def anthropic(fake: AnthropicFake, **options: Any) -> dict[str, Any]:
    return {
        "type": "anthropic",
        "base_url": fake.base_url,
        "model": "claude-test",
        "api_key": "${PROVIDER_KEY}",
        **options,
    }


def message(**fields: Any) -> dict[str, Any]:
    return {"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-test", **fields}


async def test_the_messages_request(make_gateway: GatewayFactory, fake: AnthropicFake) -> None:
    provider = anthropic(fake, default_max_tokens=64, system_prompt="Continue the text.")
    async with sdk_on(make_gateway, provider) as client:
        await client.completions.create(
            model=DEPLOYMENT, prompt="Once", stop="\n", user="u-1", top_p=1.0, temperature=0.5, extra_body={"top_k": 3}
        )
        await client.completions.create(model=DEPLOYMENT, prompt="Twice", max_tokens=5, top_p=0.5)

    first, second = fake.received
    assert first.headers["x-api-key"] == PROVIDER_KEY
    assert first.headers["anthropic-version"] == "2023-06-01"
    assert first.body == {
        "model": "claude-test",
        "max_tokens": 64,  # the deployment's default, since the client gave none
        "system": "Continue the text.",
        "stop_sequences": ["\n"],
        "temperature": 0.5,
        "top_k": 3,
        "metadata": {"user_id": "u-1"},
        "messages": [{"role": "user", "content": "Once"}],
    }  # top_p 1 asks for nothing, so it is not sent
    assert (second.body["max_tokens"], second.body["top_p"]) == (5, 0.5)


async def test_temperature_above_one_is_refused_naming_it(make_gateway: GatewayFactory, fake: AnthropicFake) -> None:
    async with sdk_on(make_gateway, anthropic(fake)) as client:
        with pytest.raises(openai.BadRequestError) as caught:
            await client.completions.create(model=DEPLOYMENT, prompt="x", temperature=1.5)

    assert caught.value.param == "temperature"
    assert "at most 1" in caught.value.message
    assert fake.received == []


async def test_refusal_is_a_content_filter_finish(make_gateway: GatewayFactory, fake: AnthropicFake) -> None:
    fake.script(
        Verbatim(json=message(content=[], stop_reason="refusal", usage={"input_tokens": 1, "output_tokens": 0}))
    )
    async with sdk_on(make_gateway, anthropic(fake)) as client:
        completion = await client.completions.create(model=DEPLOYMENT, prompt="x")

    assert (completion.choices[0].text, completion.choices[0].finish_reason) == ("", "content_filter")


async def test_prompt_usage_counts_cached_tokens(make_gateway: GatewayFactory, fake: AnthropicFake) -> None:
    usage = {"input_tokens": 2, "cache_creation_input_tokens": 4, "cache_read_input_tokens": 10, "output_tokens": 3}
    content = [{"type": "thinking", "thinking": "hmm", "signature": "s"}, {"type": "text", "text": "Hi there"}]
    fake.script(Verbatim(json=message(content=content, stop_reason="end_turn", usage=usage)))
    async with sdk_on(make_gateway, anthropic(fake)) as client:
        completion = await client.completions.create(model=DEPLOYMENT, prompt="x")

    assert completion.choices[0].text == "Hi there"  # thinking is not part of the completion
    assert completion.usage is not None
    assert (completion.usage.prompt_tokens, completion.usage.completion_tokens) == (16, 3)


async def test_an_error_event_fails_the_stream_with_its_type(make_gateway: GatewayFactory, fake: AnthropicFake) -> None:
    start = message(content=[], stop_reason=None, usage={"input_tokens": 1, "output_tokens": 1})
    delta = {"type": "text_delta", "text": "Hel"}
    fake.script(
        Verbatim(
            sse=sse({"type": "message_start", "message": start}, "message_start")
            + sse({"type": "content_block_delta", "index": 0, "delta": delta}, "content_block_delta")
            + sse({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}, "error")
        )
    )
    async with sdk_on(make_gateway, anthropic(fake)) as client:
        with pytest.raises(openai.APIError, match="overloaded_error: Overloaded") as caught:
            await read_stream(client)

    assert caught.value.code == "upstream_stream_error"


@pytest.mark.parametrize(("kind", "retried"), [("api_error", True), ("invalid_request_error", False)])
async def test_an_error_event_before_any_text_is_retried_as_its_status_would_be(
    make_gateway: GatewayFactory, fake: AnthropicFake, kind: str, retried: bool
) -> None:
    start = message(content=[], stop_reason=None, usage={"input_tokens": 1, "output_tokens": 1})
    fake.script(
        Verbatim(
            sse=sse({"type": "message_start", "message": start}, "message_start")
            + sse({"type": "error", "error": {"type": kind, "message": "no"}}, "error")
        )
    )
    async with sdk_on(make_gateway, anthropic(fake), retries=1) as client:
        if retried:
            assert await read_stream(client) == "answer 0 to x"
        else:
            with pytest.raises(openai.APIStatusError, match="invalid_request_error: no"):
                await read_stream(client)

    assert len(fake.received) == (2 if retried else 1)


async def test_overloaded_529_is_a_502(make_gateway: GatewayFactory, fake: AnthropicFake) -> None:
    fake.script(Fail(529, "Overloaded"))
    async with sdk_on(make_gateway, anthropic(fake)) as client:
        with pytest.raises(openai.InternalServerError) as caught:
            await client.completions.create(model=DEPLOYMENT, prompt="x")

    assert caught.value.status_code == 502
    assert "HTTP 529: Overloaded" in caught.value.message


async def test_upstream_4xx_keeps_anthropic_error_type(make_gateway: GatewayFactory, fake: AnthropicFake) -> None:
    fake.script(Fail(429, "Number of request tokens has exceeded your per-minute rate limit", retry_after="30"))
    async with sdk_on(make_gateway, anthropic(fake)) as client:
        with pytest.raises(openai.RateLimitError) as caught:
            await client.completions.create(model=DEPLOYMENT, prompt="x")

    assert caught.value.type == "rate_limit_error"
    assert caught.value.response.headers["retry-after"] == "30"


async def read_stream(client: openai.AsyncOpenAI) -> str:
    stream = await client.completions.create(model=DEPLOYMENT, prompt="x", stream=True)
    return "".join([chunk.choices[0].text async for chunk in stream if chunk.choices])


async def test_fan_out_beyond_max_fanout_is_refused_before_any_call(
    make_gateway: GatewayFactory, fake: AnthropicFake
) -> None:
    async with sdk_on(make_gateway, anthropic(fake, max_fanout=4)) as client:
        with pytest.raises(openai.BadRequestError) as caught:
            await client.completions.create(model=DEPLOYMENT, prompt=["a", "b"], n=3)
        completion = await client.completions.create(model=DEPLOYMENT, prompt=["a", "b"], n=2)

    assert caught.value.param == "n"
    assert "6 upstream calls" in caught.value.message
    assert len(completion.choices) == 4
    assert len(fake.received) == 4  # only the request within the limit went upstream
