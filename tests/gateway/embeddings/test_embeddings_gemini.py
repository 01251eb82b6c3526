"""`type: gemini` behind `POST /v1/embeddings`, with the `openai` SDK against a loopback fake of the
Gemini API: one input is `:embedContent`, a list `:batchEmbedContents` (split at Gemini's 100 a
call, joined in input order), `dimensions` is `outputDimensionality` (re-normalized), token ids and
`user` are 400s naming them, usage is Gemini's count where it gives one and the estimate otherwise,
and Gemini's errors and malformed answers map as for its other calls."""

from __future__ import annotations

import math
from typing import Any

import openai
import pytest
from pytest_aiohttp import AiohttpServer

from tests.conformance.fake_api import PROVIDER_KEY, Fail, Verbatim
from tests.conformance.fake_gemini import EMBEDDING_WIDTH, GeminiFake, embedding_values
from tests.conformance.harness import DEPLOYMENT, sdk_on, start_fake
from tests.conftest import GatewayFactory


@pytest.fixture
async def fake(aiohttp_server: AiohttpServer) -> GeminiFake:
    return await start_fake(aiohttp_server, GeminiFake())


def gemini(fake: GeminiFake, **options: Any) -> dict[str, Any]:
    return {
        "type": "gemini",
        "base_url": fake.base_url,
        "model": "gemini-embed",
        "api_key": "${PROVIDER_KEY}",
        **options,
    }


def unit(vector: list[float]) -> list[float]:
    norm = math.sqrt(sum(value * value for value in vector))
    return [value / norm for value in vector]


def close(a: list[float], b: list[float]) -> bool:
    return len(a) == len(b) and all(math.isclose(x, y, rel_tol=1e-6, abs_tol=1e-6) for x, y in zip(a, b, strict=True))


async def test_one_input_is_embed_content_and_its_vector_comes_back(
    make_gateway: GatewayFactory, fake: GeminiFake
) -> None:
    async with sdk_on(make_gateway, gemini(fake)) as client:
        answer = await client.embeddings.create(model=DEPLOYMENT, input="hello world", encoding_format="float")

    [seen] = fake.received
    assert seen.path == "/v1beta/models/gemini-embed:embedContent"
    assert seen.headers["x-goog-api-key"] == PROVIDER_KEY
    assert seen.body == {"content": {"parts": [{"text": "hello world"}]}}
    assert close(answer.data[0].embedding, embedding_values("hello world"))
    assert answer.model == "gemini-embed"
    assert (answer.usage.prompt_tokens, answer.usage.total_tokens) == (3, 3)  # estimated: 11 characters


async def test_a_list_is_one_batch_call_in_input_order_with_dimensions_renormalized(
    make_gateway: GatewayFactory, fake: GeminiFake
) -> None:
    texts = ["alpha", "beta", "gamma"]
    async with sdk_on(make_gateway, gemini(fake)) as client:
        answer = await client.embeddings.create(model=DEPLOYMENT, input=texts, dimensions=4)  # base64, the default

    [seen] = fake.received
    assert seen.path == "/v1beta/models/gemini-embed:batchEmbedContents"
    assert seen.body == {
        "requests": [
            {"model": "models/gemini-embed", "content": {"parts": [{"text": text}]}, "outputDimensionality": 4}
            for text in texts
        ]
    }
    assert [item.index for item in answer.data] == [0, 1, 2]
    for item, text in zip(answer.data, texts, strict=True):
        assert close(item.embedding, unit(embedding_values(text, 4)))  # Gemini truncates; the gateway normalizes


async def test_more_than_a_batch_is_split_and_joined_in_order(make_gateway: GatewayFactory, fake: GeminiFake) -> None:
    texts = [f"text number {i}" for i in range(250)]
    async with sdk_on(make_gateway, gemini(fake)) as client:
        answer = await client.embeddings.create(model=DEPLOYMENT, input=texts, encoding_format="float")

    assert sorted(len(seen.body["requests"]) for seen in fake.received) == [50, 100, 100]
    assert len(answer.data) == 250
    for item, text in zip(answer.data, texts, strict=True):
        assert close(item.embedding, embedding_values(text))


async def test_more_batches_than_max_fanout_is_a_400_naming_input(
    make_gateway: GatewayFactory, fake: GeminiFake
) -> None:
    async with sdk_on(make_gateway, gemini(fake, max_fanout=2)) as client:
        with pytest.raises(openai.BadRequestError) as refused:
            await client.embeddings.create(model=DEPLOYMENT, input=["x"] * 201)
    assert refused.value.body["param"] == "input"  # type: ignore[index]
    assert "send fewer inputs" in refused.value.message
    assert fake.received == []


@pytest.mark.parametrize(
    ("extra", "param"),
    [({"input": [[1, 2, 3]]}, "input"), ({"input": [5, 6]}, "input"), ({"input": "x", "user": "u"}, "user")],
)
async def test_what_gemini_cannot_take_is_a_400_naming_it(
    make_gateway: GatewayFactory, fake: GeminiFake, extra: dict[str, Any], param: str
) -> None:
    async with sdk_on(make_gateway, gemini(fake)) as client:
        with pytest.raises(openai.BadRequestError) as refused:
            await client.embeddings.create(model=DEPLOYMENT, **extra)
    assert refused.value.body["param"] == param  # type: ignore[index]
    assert "'conf'" in refused.value.message
    assert fake.received == []


async def test_a_dropped_user_is_not_sent(make_gateway: GatewayFactory, fake: GeminiFake) -> None:
    async with sdk_on(make_gateway, gemini(fake, drop_params=["user"])) as client:
        await client.embeddings.create(model=DEPLOYMENT, input="x", user="someone")
    assert fake.received[0].body == {"content": {"parts": [{"text": "x"}]}}


async def test_usage_is_geminis_count_where_its_answer_gives_one(
    make_gateway: GatewayFactory, fake: GeminiFake
) -> None:
    fake.script(Verbatim(json={"embedding": {"values": [0.6, 0.8]}, "usageMetadata": {"promptTokenCount": 7}}))
    async with sdk_on(make_gateway, gemini(fake)) as client:
        answer = await client.embeddings.create(model=DEPLOYMENT, input="hi", encoding_format="float")
    assert answer.usage.prompt_tokens == 7
    assert close(answer.data[0].embedding, [0.6, 0.8])


@pytest.mark.parametrize(
    ("status", "error"),
    [(400, openai.BadRequestError), (429, openai.RateLimitError), (500, openai.InternalServerError)],
)
async def test_geminis_errors_map_as_for_its_other_calls(
    make_gateway: GatewayFactory, fake: GeminiFake, status: int, error: type[openai.APIStatusError]
) -> None:
    fake.script(Fail(status, "outputDimensionality is not supported by this model"))
    async with sdk_on(make_gateway, gemini(fake)) as client:
        with pytest.raises(error) as failed:
            await client.embeddings.create(model=DEPLOYMENT, input=["a", "b"], dimensions=3)
    expected = {400: 400, 429: 429, 500: 502}[status]
    assert failed.value.status_code == expected
    if status == 400:
        assert "outputDimensionality is not supported" in failed.value.message
        assert failed.value.body["code"] == "invalid_argument"  # type: ignore[index]


@pytest.mark.parametrize(
    "answer",
    [
        {"embeddings": [{"values": [0.1, 0.2]}]},  # one embedding for two inputs
        {"embeddings": [{"values": [0.1]}, {"values": "no"}]},
        {"embedding": {"values": [0.1]}},
    ],
)
async def test_a_malformed_answer_is_a_502_naming_the_deployment(
    make_gateway: GatewayFactory, fake: GeminiFake, answer: dict[str, Any]
) -> None:
    fake.script(Verbatim(json=answer))
    async with sdk_on(make_gateway, gemini(fake)) as client:
        with pytest.raises(openai.InternalServerError) as failed:
            await client.embeddings.create(model=DEPLOYMENT, input=["a", "b"])
    assert failed.value.status_code == 502
    assert "'conf'" in failed.value.message


def test_the_fake_model_is_unit_length_only_at_full_width() -> None:
    assert math.isclose(sum(v * v for v in embedding_values("x")), 1.0)
    assert len(embedding_values("x")) == EMBEDDING_WIDTH
    assert not math.isclose(sum(v * v for v in embedding_values("x", 4)), 1.0)
