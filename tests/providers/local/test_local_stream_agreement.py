"""`type: local`: a stream and a plain request with the same seed are the same answer, property-style.

Over seeds, prompts (one, or a list), `max_tokens`, `n` and stop strings (taken from the plain
answer itself, so that they do cut it, and one that starts like the answer's text but never
completes, so that held-back text is released), and with loose byte tokens made likely (characters
split over tokens, bytes that never form one; with logprobs): `stream: true`, with and without
`stream_options.include_usage`, gives the plain answer's text, finish_reason (and logprobs tokens)
for every choice, and the same usage: in the usage chunk when the client asked for one (and no
usage anywhere when it did not), and in what the gateway meters either way (the access log's
figures, which the budgets, rate limits and metrics also use).
"""

from __future__ import annotations

import functools
import random
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pytest
from aiohttp import ClientSession
from aiohttp.test_utils import TestServer

pytest.importorskip("torch", reason="the local engine needs the 'local' extra")

from providers.base import UpstreamRequest
from providers.local.options import LocalOptions
from providers.local.provider import LocalProvider
from tests.conftest import GatewayFactory
from tests.support.local_model import random_model_dir
from tests.support.observability_helpers import log_lines

PROMPTS: tuple[str | list[str], ...] = ("the sky", "red apples", "hello world, the model", "café", ["the", "pears"])
MAX_TOKENS = (1, 2, 5, 9, 16)
CASES = 4  # per combination of n, stop strings and loose bytes
NEVER = "\u2603\u2603"  # what the model does not write: a stop string ending so is only ever held back


@dataclass
class Answer:
    texts: dict[int, str]
    finishes: dict[int, str | None]
    tokens: dict[int, list[str]]  # the logprobs' tokens, when asked for
    usage: tuple[int, int] | None  # (prompt_tokens, completion_tokens) as the client was told, if at all
    usage_chunks: int  # chunks that carried a `usage`


@dataclass
class Served:
    answer: Answer
    metered: tuple[int, int]  # what the gateway counted for the request (its access log line)


@functools.cache
def loose_bytes_bias() -> dict[str, float]:
    """logit_bias that makes the random model sample single bytes of multi-byte characters often."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(random_model_dir())
    space = tokenizer.encode(" ")[0]
    return {str(token): 4.0 for token in tokenizer.encode("日本 😀 ∑") if token != space}


class Gateway:
    """The gateway with one local deployment and a JSON access log, spoken to over real HTTP."""

    def __init__(self, server: TestServer, http: ClientSession, log: Path) -> None:
        self._server = server
        self._http = http
        self._log = log
        self._sent = 0

    async def plain(self, body: dict[str, Any]) -> Served:
        raw = await self._post(body)
        answer = orjson.loads(raw)
        assert "choices" in answer, answer
        usage = answer["usage"]
        texts = {choice["index"]: choice["text"] for choice in answer["choices"]}
        finishes = {choice["index"]: choice["finish_reason"] for choice in answer["choices"]}
        tokens = {choice["index"]: (choice["logprobs"] or {}).get("tokens", []) for choice in answer["choices"]}
        told = (usage["prompt_tokens"], usage["completion_tokens"])
        return Served(Answer(texts, finishes, tokens, told, 1), await self._metered())

    async def stream(self, body: dict[str, Any], *, include_usage: bool) -> Served:
        body = {**body, "stream": True}
        if include_usage:
            body["stream_options"] = {"include_usage": True}
        raw = await self._post(body)
        assert raw.endswith(b"data: [DONE]\n\n"), raw[-300:]
        texts: dict[int, str] = {}
        finishes: dict[int, str | None] = {}
        tokens: dict[int, list[str]] = {}
        told, usage_chunks = None, 0
        for frame in raw.split(b"\n\n"):
            if not frame.startswith(b"data: {"):
                continue
            chunk = orjson.loads(frame.removeprefix(b"data: "))
            assert "error" not in chunk, chunk
            if chunk.get("usage") is not None:
                usage_chunks += 1
                told = (chunk["usage"]["prompt_tokens"], chunk["usage"]["completion_tokens"])
            for choice in chunk["choices"]:
                texts[choice["index"]] = texts.get(choice["index"], "") + choice["text"]
                tokens.setdefault(choice["index"], []).extend((choice["logprobs"] or {}).get("tokens", []))
                assert choice["index"] not in finishes or finishes[choice["index"]] is None, "text after the finish"
                finishes[choice["index"]] = choice["finish_reason"]
        return Served(Answer(texts, finishes, tokens, told, usage_chunks), await self._metered())

    async def _post(self, body: dict[str, Any]) -> bytes:
        self._sent += 1
        headers = {"x-request-id": f"request-{self._sent}"}
        async with self._http.post(self._server.make_url("/v1/completions"), json=body, headers=headers) as response:
            raw = await response.read()
            assert response.status == 200, raw
            return raw

    async def _metered(self) -> tuple[int, int]:
        """The figures of the access log line of the request just sent."""
        lines = await log_lines(self._log, self._sent)
        [line] = [line for line in lines if line["request_id"] == f"request-{self._sent}"]
        return line.get("prompt_tokens", 0), line.get("completion_tokens", 0)


@pytest.fixture
async def gateway(make_gateway: GatewayFactory, http: ClientSession, tmp_path: Path) -> Gateway:
    log = tmp_path / "access.log"
    provider = {"type": "local", "model": str(random_model_dir()), "threads": 1}
    config = {
        "deployments": [{"name": "tiny", "provider": provider, "timeout_s": 60, "retries": 0}],
        "observability": {"access_log": {"path": str(log)}},
    }
    return Gateway(await make_gateway(config), http, log)


def stop_strings(rng: random.Random, texts: dict[int, str]) -> list[str] | None:
    """A piece of one choice's text (it cuts that choice there, or earlier), and one of its
    characters followed by what the model never writes (held back wherever that character comes,
    then released)."""
    text = texts[rng.choice(sorted(texts))]
    if not text:
        return None
    start = rng.randrange(len(text))
    return [text[start : start + rng.randint(1, 3)], rng.choice(text) + NEVER]


@dataclass
class Case:
    body: dict[str, Any]
    unstopped: dict[int, str] | None  # with stop strings: the texts without them


async def cases(gateway: Gateway, *, n: int, stops: bool, loose_bytes: bool) -> AsyncIterator[Case]:
    """Requests for one combination, drawn from a generator seeded by that combination."""
    rng = random.Random(f"{n}-{stops}-{loose_bytes}")  # noqa: S311 - reproducible cases, not secrets
    for _ in range(CASES):
        body: dict[str, Any] = {
            "model": "tiny",
            "prompt": rng.choice(PROMPTS),
            "max_tokens": rng.choice(MAX_TOKENS),
            "seed": rng.randrange(2**31),
            "n": n,
        }
        if loose_bytes:  # and the logprobs, which spell a token that is part of a character `bytes:\xNN`
            body["logit_bias"], body["logprobs"] = loose_bytes_bias(), 0
        unstopped = None
        if stops:
            unstopped = (await gateway.plain(body)).answer.texts
            body["stop"] = stop_strings(rng, unstopped) or ["e", " s"]
        yield Case(body, unstopped)


COMBINATIONS = pytest.mark.parametrize(
    ("n", "stops", "loose_bytes"),
    [(n, stops, loose) for n in (1, 3) for stops in (False, True) for loose in (False, True)],
    ids=lambda value: str(value),
)


@COMBINATIONS
async def test_a_stream_is_the_plain_answer(gateway: Gateway, n: int, stops: bool, loose_bytes: bool) -> None:
    cut, split = 0, 0  # choices a stop string cut short; tokens that were part of a character
    async for case in cases(gateway, n=n, stops=stops, loose_bytes=loose_bytes):
        body = case.body
        plain = (await gateway.plain(body)).answer
        bare = (await gateway.stream(body, include_usage=False)).answer
        counted = (await gateway.stream(body, include_usage=True)).answer

        for streamed in (bare, counted):
            assert streamed.texts == plain.texts, body
            assert streamed.finishes == plain.finishes, body
            assert streamed.tokens == plain.tokens, body
        assert len(plain.texts) == n * (2 if isinstance(body["prompt"], list) else 1)
        assert counted.usage == plain.usage, body
        assert counted.usage_chunks == 1
        assert bare.usage_chunks == 0  # the client did not ask for usage: no chunk carries it
        if case.unstopped is not None:
            cut += sum(len(text) < len(case.unstopped[index]) for index, text in plain.texts.items())
        split += sum(token.startswith("bytes:") for tokens in plain.tokens.values() for token in tokens)

    assert cut > 0 or not stops  # the cases did exercise stop strings
    assert split > 0 or not loose_bytes  # and characters split over tokens


@COMBINATIONS
async def test_the_gateway_meters_a_stream_as_the_plain_answer(
    gateway: Gateway, n: int, stops: bool, loose_bytes: bool
) -> None:
    async for case in cases(gateway, n=n, stops=stops, loose_bytes=loose_bytes):
        body = case.body
        plain = await gateway.plain(body)
        bare = await gateway.stream(body, include_usage=False)
        counted = await gateway.stream(body, include_usage=True)

        assert plain.metered == plain.answer.usage
        assert counted.metered == plain.metered, body
        assert bare.metered == plain.metered, body


async def test_a_local_stream_reports_the_plain_answers_usage_once_it_ended() -> None:
    """What the gateway needs to meter a stream exactly, also when the client asked for no usage chunk."""
    local = LocalProvider("tiny", LocalOptions(model=str(random_model_dir()), threads=1))
    bodies: list[dict[str, Any]] = [
        {"prompt": "the sky", "max_tokens": 9, "seed": 1},
        {"prompt": ["the", "pears"], "max_tokens": 16, "seed": 2, "n": 3, "stop": ["e", "a"]},
        {"prompt": "café", "max_tokens": 16, "seed": 3, "logit_bias": loose_bytes_bias()},
    ]
    try:
        for body in bodies:
            plain = await local.complete(UpstreamRequest({"model": "tiny", **body}, "plain", timeout_s=60))
            for options in (None, {"include_usage": True}):
                streamed = {"model": "tiny", **body, "stream": True, "stream_options": options}
                stream = await local.stream(UpstreamRequest(streamed, "stream", timeout_s=60))
                assert stream.reported_usage() is None  # not before it ended
                async for _ in stream:
                    pass
                assert stream.reported_usage() == plain.body["usage"], body
    finally:
        await local.aclose()
