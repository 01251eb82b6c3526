"""`POST /v1/embeddings` end to end with the retrieval clients people use: LangChain's
`OpenAIEmbeddings` (`embed_query`, `embed_documents`, and their async forms) and LlamaIndex's
`OpenAILikeEmbedding`, against the mock, a loopback OpenAI-compatible upstream and the local encoder.

LangChain tokenizes with tiktoken by default and sends token-id lists. tiktoken downloads its BPE
file on first use; offline, it reads it from `TIKTOKEN_CACHE_DIR` (the file named by the SHA-1 of its
URL). `llama-index-core`, a locked dev dependency, ships `cl100k_base`'s file in that layout, so the
tests point `TIKTOKEN_CACHE_DIR` there and run LangChain's default path offline (skipped, saying so,
where that file is missing)."""

from __future__ import annotations

import asyncio
import math
from importlib.util import find_spec
from pathlib import Path
from typing import Any

import openai
import pytest
from aiohttp.test_utils import TestServer

from tests.conftest import GatewayFactory, deployment
from tests.support.encoder_model import encoder_dir
from tests.support.fake_upstream import FakeUpstream, embedding_of

langchain_openai = pytest.importorskip("langchain_openai")
openai_like = pytest.importorskip("llama_index.embeddings.openai_like")

TEXTS = ["the cat sat on the mat", "a dog", "hello world"]
CL100K_FILE = "9b5ad71b2ce5302211f9c61530b329a4922fc6a4"  # sha1 of cl100k_base's URL: tiktoken's cache name


def tiktoken_cache() -> Path | None:
    spec = find_spec("llama_index.core")
    if spec is None or spec.origin is None:
        return None
    folder = Path(spec.origin).parent / "_static" / "tiktoken_cache"
    return folder if (folder / CL100K_FILE).is_file() else None


@pytest.fixture
def offline_tiktoken(monkeypatch: pytest.MonkeyPatch) -> None:
    folder = tiktoken_cache()
    if folder is None:
        pytest.skip("no cl100k_base BPE file on this machine (llama-index-core ships one) and no network for tiktoken")
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(folder))


@pytest.fixture
async def gateway(make_gateway: GatewayFactory, upstream: FakeUpstream) -> TestServer:
    deployments = [
        {"name": "mock", "provider": {"type": "mock", "embedding_dimensions": 16}},
        deployment("relay", upstream.base_url, retries=0, provider={"model": "text-embedding-3-small"}),
        {"name": "encoder", "provider": {"type": "local", "model": str(encoder_dir()), "device": "cpu"}},
    ]
    return await make_gateway({"deployments": deployments})


def langchain(gateway: TestServer, model: str, **options: Any) -> Any:
    return langchain_openai.OpenAIEmbeddings(
        model=model,
        base_url=str(gateway.make_url("/v1")),
        api_key="unused",
        max_retries=0,
        tiktoken_model_name="text-embedding-3-small",  # the deployment's name is not one tiktoken knows
        **options,
    )


def llama(gateway: TestServer, model: str) -> Any:
    return openai_like.OpenAILikeEmbedding(
        model_name=model, api_base=str(gateway.make_url("/v1")), api_key="unused", max_retries=0
    )


def sentence_transformers(texts: list[str]) -> list[list[float]]:
    st = pytest.importorskip("sentence_transformers")
    vectors: list[list[float]] = st.SentenceTransformer(str(encoder_dir()), device="cpu").encode(texts).tolist()
    return vectors


def cosine(a: list[float], b: list[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    return dot / (math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b)))


# --- LangChain ------------------------------------------------------------------------------------------------


async def test_langchain_sends_tiktoken_ids_by_default_and_gets_the_relayed_vectors(
    gateway: TestServer, upstream: FakeUpstream, offline_tiktoken: None
) -> None:
    import tiktoken

    client = langchain(gateway, "relay")
    documents = await asyncio.to_thread(client.embed_documents, TEXTS)  # the sync methods, off this loop
    query = await asyncio.to_thread(client.embed_query, TEXTS[1])

    encoding = tiktoken.get_encoding("cl100k_base")
    ids = [encoding.encode(text) for text in TEXTS]
    first, second = (seen.body for seen in upstream.received)
    assert first["input"] == ids  # token-id lists, as LangChain sends them, relayed as they came
    assert first["model"] == "text-embedding-3-small"
    assert second["input"] == [ids[1]]
    # LangChain normalizes what it gets; the fake's vector of an input is (its length, its first id, 1, 1).
    for vector, tokens in zip(documents, ids, strict=True):
        assert cosine(vector, embedding_of(tokens)) == pytest.approx(1.0)
    assert query == pytest.approx(documents[1])


async def test_langchain_on_the_mock_is_deterministic_unit_vectors(gateway: TestServer, offline_tiktoken: None) -> None:
    client = langchain(gateway, "mock")
    documents = await client.aembed_documents(TEXTS)
    again = await asyncio.to_thread(client.embed_documents, TEXTS)
    query = await client.aembed_query(TEXTS[2])

    assert [len(vector) for vector in documents] == [16, 16, 16]
    for vector, repeated in zip(documents, again, strict=True):
        assert vector == pytest.approx(repeated)
    assert query == pytest.approx(documents[2])
    assert len({tuple(vector) for vector in documents}) == 3
    for vector in documents:
        assert math.fsum(v * v for v in vector) == pytest.approx(1.0)


async def test_langchain_on_the_local_encoder_with_text_equals_sentence_transformers(gateway: TestServer) -> None:
    client = langchain(gateway, "encoder", check_embedding_ctx_length=False)  # texts, not OpenAI's token ids
    documents = await asyncio.to_thread(client.embed_documents, TEXTS)
    query = await client.aembed_query(TEXTS[0])

    expected = sentence_transformers(TEXTS)
    for got, want in zip(documents, expected, strict=True):
        assert cosine(got, want) >= 0.9999
    assert cosine(query, expected[0]) >= 0.9999


async def test_langchains_tiktoken_ids_on_the_local_encoder_are_a_400_naming_the_input(
    gateway: TestServer, offline_tiktoken: None
) -> None:
    client = langchain(gateway, "encoder")  # OpenAI's ids mean nothing to another tokenizer
    with pytest.raises(openai.BadRequestError) as refused:
        await client.aembed_documents(["ids past a tiny vocabulary: zebra quixotic", "a second one"])
    assert refused.value.body["param"] == "input[0]"  # type: ignore[index]
    assert "vocabulary" in refused.value.message


# --- LlamaIndex -------------------------------------------------------------------------------------------------


async def test_llamaindex_on_the_mock(gateway: TestServer) -> None:
    client = llama(gateway, "mock")
    batch = await asyncio.to_thread(client.get_text_embedding_batch, TEXTS)
    query = await asyncio.to_thread(client.get_query_embedding, TEXTS[0])
    text = await client.aget_text_embedding(TEXTS[1])

    assert [len(vector) for vector in batch] == [16, 16, 16]
    assert query == pytest.approx(batch[0])
    assert text == pytest.approx(batch[1])
    assert len({tuple(vector) for vector in batch}) == 3


async def test_llamaindex_on_the_local_encoder_equals_sentence_transformers(gateway: TestServer) -> None:
    client = llama(gateway, "encoder")
    batch = await client.aget_text_embedding_batch(TEXTS)
    query = await asyncio.to_thread(client.get_query_embedding, TEXTS[2])

    expected = sentence_transformers(TEXTS)
    for got, want in zip(batch, expected, strict=True):
        assert cosine(got, want) >= 0.9999
    assert cosine(query, expected[2]) >= 0.9999
