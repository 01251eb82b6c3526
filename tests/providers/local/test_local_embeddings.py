"""The local engine serving an encoder folder through `POST /v1/embeddings`, with the `openai` SDK:
equal to what `sentence-transformers` computes on the same folder (cosine >= 0.9999; mean, CLS and
last-token pooling, with and without Normalize), token ids as input, many callers batched together,
the exact context limit (a 400 naming the input), the per-request bounds, and an encoder refusing chat."""

from __future__ import annotations

import asyncio
import math
from collections.abc import AsyncIterator
from typing import Any

import openai
import pytest
from aiohttp import ClientSession
from aiohttp.test_utils import TestServer

from providers.local.loader import MODEL_LOADING
from tests.conftest import GatewayFactory
from tests.support.encoder_model import MAX_SEQ_LENGTH, encoder_dir

pytest.importorskip("transformers", reason="the local engine needs the 'local' extra")

TEXTS = ["the cat sat on the mat", "a dog", "hello world", "quick brown fox jumps over the lazy dog again and again"]


def local(name: str, folder: Any, **options: Any) -> dict[str, Any]:
    return {"name": name, "provider": {"type": "local", "model": str(folder), "device": "cpu", **options}}


@pytest.fixture
async def gateway(make_gateway: GatewayFactory) -> TestServer:
    deployments = [
        local(f"{pooling}-{'norm' if normalize else 'raw'}", encoder_dir(pooling, normalize))
        for pooling in ("mean", "cls", "lasttoken")
        for normalize in (True, False)
    ]
    deployments.append(local("bounded", encoder_dir(), max_sequences_per_request=3, max_tokens_per_request=40))
    return await make_gateway({"deployments": deployments})


@pytest.fixture
async def sdk(gateway: TestServer) -> AsyncIterator[openai.AsyncOpenAI]:
    async with openai.AsyncOpenAI(base_url=str(gateway.make_url("/v1")), api_key="unused", max_retries=0) as client:
        yield client


def cosine(a: list[float], b: list[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    return dot / (math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b)))


@pytest.mark.parametrize("pooling", ["mean", "cls", "lasttoken"])
@pytest.mark.parametrize("normalize", [True, False])
async def test_vectors_equal_sentence_transformers(sdk: openai.AsyncOpenAI, pooling: str, normalize: bool) -> None:
    st = pytest.importorskip("sentence_transformers")
    folder = encoder_dir(pooling, normalize)
    with MODEL_LOADING:  # the gateway may be loading its encoders in threads meanwhile (one_load_at_a_time)
        reference = st.SentenceTransformer(str(folder), device="cpu")
    expected = reference.encode(TEXTS, batch_size=2).tolist()

    answer = await sdk.embeddings.create(model=f"{pooling}-{'norm' if normalize else 'raw'}", input=TEXTS)

    got = [item.embedding for item in answer.data]
    assert len(got) == len(expected)
    for mine, theirs in zip(got, expected, strict=True):
        assert cosine(mine, theirs) >= 0.9999
        assert math.sqrt(sum(x * x for x in mine)) == pytest.approx(math.sqrt(sum(x * x for x in theirs)), rel=1e-4)
    if normalize:
        assert all(abs(math.sqrt(sum(x * x for x in vector)) - 1) < 1e-5 for vector in got)


async def test_token_ids_embed_as_their_text_and_usage_counts_the_models_tokens(sdk: openai.AsyncOpenAI) -> None:
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(encoder_dir())
    ids = [tokenizer(text, add_special_tokens=False)["input_ids"] for text in TEXTS[:2]]
    by_text = await sdk.embeddings.create(model="mean-norm", input=TEXTS[:2], encoding_format="float")
    by_ids = await sdk.embeddings.create(model="mean-norm", input=ids, encoding_format="float")

    for a, b in zip(by_text.data, by_ids.data, strict=True):
        assert a.embedding == pytest.approx(b.embedding, abs=1e-6)
    assert by_text.usage.prompt_tokens == sum(len(i) + 2 for i in ids)  # [CLS] and [SEP] each
    assert by_ids.usage.prompt_tokens == by_text.usage.prompt_tokens


async def test_many_callers_batched_together_get_what_each_gets_alone(sdk: openai.AsyncOpenAI) -> None:
    alone = [(await sdk.embeddings.create(model="mean-norm", input=text)).data[0].embedding for text in TEXTS]
    together = await asyncio.gather(*(sdk.embeddings.create(model="mean-norm", input=text) for text in TEXTS * 5))
    for index, answer in enumerate(together):
        assert cosine(answer.data[0].embedding, alone[index % len(TEXTS)]) >= 0.99999


async def test_the_context_limit_is_exact_and_names_the_input(gateway: TestServer, http: ClientSession) -> None:
    fits = " ".join(["cat"] * (MAX_SEQ_LENGTH - 2))  # with [CLS] and [SEP]: exactly the context
    body = {"model": "mean-norm", "input": ["a dog", fits]}
    async with http.post(gateway.make_url("/v1/embeddings"), json=body) as response:
        assert response.status == 200
    body = {"model": "mean-norm", "input": ["a dog", fits + " cat"]}
    async with http.post(gateway.make_url("/v1/embeddings"), json=body) as response:
        error = (await response.json())["error"]
    assert response.status == 400
    assert error["param"] == "input[1]"
    assert error["code"] == "context_length_exceeded"
    assert str(MAX_SEQ_LENGTH) in error["message"]


@pytest.mark.parametrize(
    ("body", "param", "code"),
    [
        ({"input": ["a", "b", "c", "d"]}, "input", "request_too_large"),  # 4 inputs, at most 3
        ({"input": ["cat " * 20, "dog " * 20]}, "input", "request_too_large"),  # 44 tokens, at most 40
        ({"input": [[1, 2, 10**6]]}, "input", "invalid_value"),  # past the vocabulary
        ({"input": "a", "dimensions": 8}, "dimensions", "invalid_value"),  # the model does not shorten
    ],
)
async def test_bounds_are_400s_naming_the_field(
    gateway: TestServer, http: ClientSession, body: dict[str, Any], param: str, code: str
) -> None:
    async with http.post(gateway.make_url("/v1/embeddings"), json={"model": "bounded", **body}) as response:
        error = (await response.json())["error"]
    assert response.status == 400
    assert (error["param"], error["code"]) == (param, code)


async def test_an_encoder_does_not_serve_chat(gateway: TestServer, http: ClientSession) -> None:
    body = {"model": "mean-norm", "messages": [{"role": "user", "content": "hi"}]}
    async with http.post(gateway.make_url("/v1/chat/completions"), json=body) as response:
        error = (await response.json())["error"]
    assert response.status == 400
    assert error["code"] == "unsupported_api"
    assert "'mean-norm'" in error["message"]
