"""`type: gemini`: the generateContent request a Completions request becomes, and the translation
of what only Gemini sends (safety blocks, its error shape, logprobsResult)."""

from __future__ import annotations

from typing import Any

import openai
import pytest
from pytest_aiohttp import AiohttpServer

from tests.conformance.fake_api import PROVIDER_KEY, Fail, Verbatim
from tests.conformance.fake_gemini import GeminiFake
from tests.conformance.harness import DEPLOYMENT, sdk_on, start_fake
from tests.conftest import GatewayFactory


@pytest.fixture
async def fake(aiohttp_server: AiohttpServer) -> GeminiFake:
    return await start_fake(aiohttp_server, GeminiFake())


def gemini(fake: GeminiFake, **options: Any) -> dict[str, Any]:
    return {
        "type": "gemini",
        "base_url": fake.base_url,
        "model": "gemini-test",
        "api_key": "${PROVIDER_KEY}",
        **options,
    }


async def test_the_generate_content_request(make_gateway: GatewayFactory, fake: GeminiFake) -> None:
    async with sdk_on(make_gateway, gemini(fake, system_prompt="Continue the text.")) as client:
        await client.completions.create(
            model=DEPLOYMENT,
            prompt="Once",
            max_tokens=8,
            temperature=0.2,
            top_p=0.8,
            n=2,
            stop=["\n", "END"],
            seed=11,
            presence_penalty=0.1,
            frequency_penalty=0.2,
            extra_body={"top_k": 40},
        )
        stream = await client.completions.create(model=DEPLOYMENT, prompt="Twice", stream=True)
        [_ async for _ in stream]

    plain, streamed = fake.received
    assert plain.path == "/v1beta/models/gemini-test:generateContent"
    assert plain.headers["x-goog-api-key"] == PROVIDER_KEY
    assert plain.body == {
        "contents": [{"role": "user", "parts": [{"text": "Once"}]}],
        "systemInstruction": {"parts": [{"text": "Continue the text."}]},
        "generationConfig": {
            "maxOutputTokens": 8,
            "temperature": 0.2,
            "topP": 0.8,
            "topK": 40,
            "candidateCount": 2,
            "stopSequences": ["\n", "END"],
            "seed": 11,
            "presencePenalty": 0.1,
            "frequencyPenalty": 0.2,
        },
    }
    assert (streamed.path, streamed.query) == ("/v1beta/models/gemini-test:streamGenerateContent", {"alt": "sse"})
    assert streamed.body["generationConfig"] == {"maxOutputTokens": 16}  # the Completions default


@pytest.mark.parametrize("reason", ["SAFETY", "RECITATION", "PROHIBITED_CONTENT"])
async def test_a_filtered_candidate_is_a_content_filter_finish(
    make_gateway: GatewayFactory, fake: GeminiFake, reason: str
) -> None:
    fake.script(Verbatim(json={"candidates": [{"finishReason": reason, "index": 0}]}))
    async with sdk_on(make_gateway, gemini(fake)) as client:
        completion = await client.completions.create(model=DEPLOYMENT, prompt="x")

    assert (completion.choices[0].text, completion.choices[0].finish_reason) == ("", "content_filter")


async def test_a_blocked_prompt_filters_every_choice(make_gateway: GatewayFactory, fake: GeminiFake) -> None:
    usage = {"promptTokenCount": 4, "totalTokenCount": 4}
    fake.script(Verbatim(json={"promptFeedback": {"blockReason": "SAFETY"}, "usageMetadata": usage}))
    async with sdk_on(make_gateway, gemini(fake)) as client:
        completion = await client.completions.create(model=DEPLOYMENT, prompt="x", n=2)

    assert [(c.index, c.text, c.finish_reason) for c in completion.choices] == [
        (0, "", "content_filter"),
        (1, "", "content_filter"),
    ]
    assert completion.usage is not None
    assert completion.usage.prompt_tokens == 4


async def test_gemini_errors_arrive_in_openai_shape(make_gateway: GatewayFactory, fake: GeminiFake) -> None:
    fake.script(Fail(400, "Invalid value at 'generation_config.top_k'"))
    async with sdk_on(make_gateway, gemini(fake)) as client:
        with pytest.raises(openai.BadRequestError) as caught:
            await client.completions.create(model=DEPLOYMENT, prompt="x")

    assert caught.value.body == {
        "message": "Invalid value at 'generation_config.top_k'",
        "type": "invalid_request_error",
        "param": None,
        "code": "invalid_argument",
    }


async def test_logprobs_come_back_in_the_completions_shape(make_gateway: GatewayFactory, fake: GeminiFake) -> None:
    async with sdk_on(make_gateway, gemini(fake)) as client:
        completion = await client.completions.create(model=DEPLOYMENT, prompt="blue", logprobs=2)

    config = fake.received[0].body["generationConfig"]
    assert (config["responseLogprobs"], config["logprobs"]) == (True, 2)
    logprobs = completion.choices[0].logprobs
    assert logprobs is not None
    assert logprobs.tokens == ["answer", " 0", " to", " blue"]
    assert logprobs.token_logprobs == [-0.25] * 4
    assert logprobs.top_logprobs is not None
    assert logprobs.top_logprobs[0] == {"answer": -0.25, "alt1": -1.0}
    assert logprobs.text_offset == [0, 6, 8, 11]


async def test_user_has_no_gemini_equivalent_unless_dropped(make_gateway: GatewayFactory, fake: GeminiFake) -> None:
    async with sdk_on(make_gateway, gemini(fake)) as client:
        with pytest.raises(openai.BadRequestError) as caught:
            await client.completions.create(model=DEPLOYMENT, prompt="x", user="u-1")
    async with sdk_on(make_gateway, gemini(fake, drop_params=["user"])) as client:
        completion = await client.completions.create(model=DEPLOYMENT, prompt="x", user="u-1")

    assert caught.value.param == "user"
    assert completion.choices[0].text == "answer 0 to x"
