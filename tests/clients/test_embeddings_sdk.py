"""`POST /v1/embeddings` with the official `openai` SDK (`client.embeddings.create`): strings, token
ids, base64 (the SDK's default) and float, `dimensions`, against the mock (deterministic unit vectors,
honest token counts) and a real loopback OpenAI-compatible upstream (one call with the deployment's
model and credential, the answer relayed byte for byte)."""

from __future__ import annotations

import base64
import math
import struct
from collections.abc import AsyncIterator

import openai
import pytest
from aiohttp import ClientSession
from aiohttp.test_utils import TestServer

from tests.conftest import GatewayFactory, deployment
from tests.support.fake_upstream import FakeUpstream, embedding_of, embeddings_answer

PROVIDER_KEY = "sk-upstream-embeddings-0123456789abcdef"


@pytest.fixture
async def gateway(make_gateway: GatewayFactory, upstream: FakeUpstream) -> TestServer:
    fake = deployment("fake", upstream.base_url, retries=0, provider={"model": "text-embed-up", "api_key": "${K}"})
    mock = {"name": "mock", "provider": {"type": "mock", "embedding_dimensions": 64}}
    return await make_gateway({"deployments": [fake, mock]}, {"K": PROVIDER_KEY})


@pytest.fixture
async def sdk(gateway: TestServer) -> AsyncIterator[openai.AsyncOpenAI]:
    async with openai.AsyncOpenAI(base_url=str(gateway.make_url("/v1")), api_key="unused", max_retries=0) as client:
        yield client


def norm(vector: list[float]) -> float:
    return math.sqrt(sum(value * value for value in vector))


async def test_the_mock_embeds_strings_deterministically_as_unit_vectors(sdk: openai.AsyncOpenAI) -> None:
    first = await sdk.embeddings.create(model="mock", input=["the cat sat", "a dog", "the cat sat"])
    again = await sdk.embeddings.create(model="mock", input="the cat sat", encoding_format="float")

    assert [item.index for item in first.data] == [0, 1, 2]
    vectors = [item.embedding for item in first.data]
    assert all(len(vector) == 64 for vector in vectors)
    assert all(abs(norm(vector) - 1) < 1e-5 for vector in vectors)
    assert vectors[0] == pytest.approx(vectors[2])
    assert vectors[0] != pytest.approx(vectors[1])
    assert again.data[0].embedding == pytest.approx(vectors[0], abs=1e-6)  # base64 float32 vs float
    assert first.usage.prompt_tokens == 3 + 2 + 3  # the mock's words
    assert first.usage.total_tokens == first.usage.prompt_tokens
    assert first.model == "mock"


async def test_the_mock_takes_token_ids_and_shortens_to_dimensions(sdk: openai.AsyncOpenAI) -> None:
    ids = await sdk.embeddings.create(model="mock", input=[[1, 2, 3], [4]])
    one = await sdk.embeddings.create(model="mock", input=[1, 2, 3])
    full = await sdk.embeddings.create(model="mock", input="shorten me", encoding_format="float")
    short = await sdk.embeddings.create(model="mock", input="shorten me", dimensions=16, encoding_format="float")

    assert ids.usage.prompt_tokens == 4
    assert ids.data[0].embedding == pytest.approx(one.data[0].embedding)
    vector = short.data[0].embedding
    assert len(vector) == 16
    assert abs(norm(vector) - 1) < 1e-9
    prefix = full.data[0].embedding[:16]
    assert vector == pytest.approx([value / norm(prefix) for value in prefix])  # truncated, re-normalized


async def test_an_upstream_gets_one_call_with_its_model_and_credential(
    sdk: openai.AsyncOpenAI, upstream: FakeUpstream
) -> None:
    answer = await sdk.embeddings.create(model="fake", input=[[5, 6, 7], [7, 8]], dimensions=3, user="u-1")

    [received] = upstream.received
    assert received.path == "/v1/embeddings"
    assert received.headers["Authorization"] == f"Bearer {PROVIDER_KEY}"
    assert received.body["model"] == "text-embed-up"
    assert received.body["input"] == [[5, 6, 7], [7, 8]]
    assert (received.body["dimensions"], received.body["user"]) == (3, "u-1")
    assert received.body["encoding_format"] == "base64"  # the SDK's default, forwarded
    assert answer.data[0].embedding == pytest.approx(embedding_of([5, 6, 7], 3))
    assert answer.data[1].embedding == pytest.approx(embedding_of([7, 8], 3))
    assert answer.model == "text-embed-up"


async def test_the_upstream_answer_is_relayed_byte_for_byte(
    gateway: TestServer, upstream: FakeUpstream, http: ClientSession
) -> None:
    body = {"model": "fake", "input": ["a", "bc"], "encoding_format": "base64"}
    async with http.post(gateway.make_url("/v1/embeddings"), json=body) as response:
        raw = await response.read()
    assert response.status == 200
    assert raw == embeddings_answer({**body, "model": "text-embed-up"})


async def test_base64_is_little_endian_float32(gateway: TestServer, http: ClientSession) -> None:
    body = {"model": "mock", "input": "x y"}
    async with http.post(gateway.make_url("/v1/embeddings"), json={**body, "encoding_format": "base64"}) as response:
        encoded = (await response.json())["data"][0]["embedding"]
    async with http.post(gateway.make_url("/v1/embeddings"), json=body) as response:
        floats = (await response.json())["data"][0]["embedding"]
    decoded = struct.unpack(f"<{len(floats)}f", base64.b64decode(encoded))
    assert list(decoded) == pytest.approx(floats, abs=1e-7)
