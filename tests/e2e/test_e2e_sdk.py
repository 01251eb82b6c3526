"""The official `openai` SDK against the gateway, exactly as a user points it at OpenAI."""

from __future__ import annotations

import openai
import pytest

from tests.support.fake_upstream import FakeUpstream


async def test_create_returns_the_upstream_completion(client: openai.AsyncOpenAI, upstream: FakeUpstream) -> None:
    completion = await client.completions.create(model="fake", prompt="Say this is a test", max_tokens=7)

    assert completion.object == "text_completion"
    assert completion.choices[0].text == "echo: Say this is a test"
    assert completion.usage is not None
    assert completion.usage.total_tokens > 0
    assert upstream.received[0].body["max_tokens"] == 7


async def test_stream_yields_every_chunk_in_order(client: openai.AsyncOpenAI) -> None:
    stream = await client.completions.create(model="fake", prompt="one two three", stream=True)
    texts = [chunk.choices[0].text async for chunk in stream if chunk.choices]

    assert "".join(texts) == "echo: one two three "


async def test_alias_reaches_the_same_deployment(client: openai.AsyncOpenAI) -> None:
    raw = await client.completions.with_raw_response.create(model="fake-model", prompt="hi")

    assert raw.headers["x-gateway-deployment"] == "fake"
    assert raw.headers["x-gateway-provider"] == "openai"


async def test_unknown_model_is_a_404_naming_it(client: openai.AsyncOpenAI) -> None:
    with pytest.raises(openai.NotFoundError) as caught:
        await client.completions.create(model="nope", prompt="hi")

    assert "nope" in caught.value.message
