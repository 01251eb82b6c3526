"""`type: local`: no request holds the engine, the event loop or memory for everyone.

Per-request bounds (sequences, tokens) are 400s naming the field; the queue counts sequences;
admission is round-robin between requests; large prompts are tokenised off the event loop, after
the cheap checks; a stream ends within its deployment's `timeout_s`; a scored prompt's logits are
computed a chunk of positions at a time. Every assertion is about order or values, never about
how fast the machine is: the timeouts are there to fail a broken test rather than hang it.
"""

from __future__ import annotations

import asyncio
import functools
import threading
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import openai
import orjson
import pytest
from aiohttp import ClientSession
from aiohttp.test_utils import TestServer
from transformers import AutoTokenizer

torch = pytest.importorskip("torch", reason="the local engine needs the 'local' extra")

from gateway.api.errors import UpstreamRejected  # noqa: E402
from providers.base import UpstreamRequest  # noqa: E402
from providers.local import engine as engine_module  # noqa: E402
from providers.local import forward as forward_module  # noqa: E402
from providers.local import provider as provider_module  # noqa: E402
from providers.local.forward import decode_step  # noqa: E402
from providers.local.options import LocalOptions  # noqa: E402
from providers.local.provider import LocalProvider  # noqa: E402
from providers.local.request_plan import tokenise as real_tokenise  # noqa: E402
from providers.local.text.detokenizer import token_text  # noqa: E402
from tests.conftest import GatewayFactory  # noqa: E402
from tests.support.local_engine_helpers import SAFETY_S, local_engine, until  # noqa: E402
from tests.support.local_model import load_reference, long_context_model_dir, random_model_dir  # noqa: E402


@functools.cache
def no_end() -> dict[str, float]:
    """logit_bias under which end-of-text is never sampled: only `max_tokens` ends the answer."""
    eos = AutoTokenizer.from_pretrained(long_context_model_dir()).eos_token_id  # no model: none loads beside the engine
    return {str(eos): -100.0}


def local(folder: Any, **options: Any) -> dict[str, Any]:
    return {"type": "local", "model": str(folder), "threads": 1, **options}


def sdk(gateway: TestServer) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url=str(gateway.make_url("/v1")), api_key="unused", max_retries=0)


async def post(http: ClientSession, gateway: TestServer, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    async with http.post(gateway.make_url("/v1/completions"), json=body) as response:
        return response.status, await response.json()


# --- per-request bounds ---------------------------------------------------------------------------


@pytest.fixture
async def bounded(make_gateway: GatewayFactory) -> TestServer:
    provider = local(long_context_model_dir(), max_sequences_per_request=4, max_tokens_per_request=100)
    return await make_gateway({"deployments": [{"name": "tiny", "provider": provider, "retries": 0}]})


@pytest.mark.parametrize(
    ("fields", "param"),
    [
        ({"prompt": ["the"] * 5, "max_tokens": 1}, "prompt"),  # 5 prompts > 4 sequences
        ({"prompt": ["the", "sky"], "n": 3, "max_tokens": 1}, "n"),  # 2 * 3 > 4
        ({"prompt": "the", "n": 2, "best_of": 5, "max_tokens": 1}, "best_of"),  # 1 * 5 > 4
        ({"prompt": "the", "n": 2, "max_tokens": 60}, "max_tokens"),  # 1 + 2 * 60 > 100 tokens
        ({"prompt": [263] * 150, "max_tokens": 1}, "prompt"),  # 150 prompt tokens > 100 alone
        ({"prompt": "the " * 150, "max_tokens": 1}, "prompt"),  # the same, as text
    ],
)
async def test_a_request_past_the_bounds_is_a_400_naming_the_field(
    bounded: TestServer, fields: dict[str, Any], param: str
) -> None:
    async with ClientSession() as http:
        status, body = await post(http, bounded, {"model": "tiny", **fields})

    assert status == 400
    assert body["error"]["param"] == param
    assert body["error"]["code"] == "request_too_large"
    assert body["error"]["type"] == "invalid_request_error"


async def test_a_request_within_the_bounds_is_served(bounded: TestServer) -> None:
    async with ClientSession() as http:
        status, body = await post(http, bounded, {"model": "tiny", "prompt": ["the", "sky"], "n": 2, "max_tokens": 20})

    assert status == 200
    assert len(body["choices"]) == 4


async def test_prompts_past_the_bounds_are_refused_before_tokenising(
    make_gateway: GatewayFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    tokenised = []

    def tokenise(*args: Any) -> Any:
        tokenised.append(args[0])
        return real_tokenise(*args)

    monkeypatch.setattr(provider_module, "tokenise", tokenise)
    gateway = await make_gateway({"deployments": [{"name": "tiny", "provider": local(long_context_model_dir())}]})
    async with ClientSession() as http:
        many = await post(http, gateway, {"model": "tiny", "prompt": ["x"] * 200_000, "max_tokens": 1})
        # The context is 2048 tokens; no token of this model covers more than a few dozen bytes.
        huge = await post(http, gateway, {"model": "tiny", "prompt": "the sky " * 400_000, "max_tokens": 1})

    assert (many[0], many[1]["error"]["param"], many[1]["error"]["code"]) == (400, "prompt", "request_too_large")
    assert (huge[0], huge[1]["error"]["param"], huge[1]["error"]["code"]) == (400, "prompt", "context_length_exceeded")
    assert tokenised == []


# --- the queue and fair admission -------------------------------------------------------------------


@pytest.fixture
async def small_queue() -> AsyncIterator[LocalProvider]:
    options = LocalOptions(model=str(long_context_model_dir()), threads=1, max_batch=1, max_queue=3)
    provider = LocalProvider("tiny", options)
    yield provider
    await provider.aclose()


class SlowSteps:
    """Holds the engine's worker in every decoding step of deployment `tiny` until released, or for
    `pause_s` when set: a decode that stays in flight, on any machine."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, pause_s: float = 0.0) -> None:
        self.released = threading.Event()
        self.pause_s = pause_s

        def gated(*args: Any, **kwargs: Any) -> Any:
            if threading.current_thread().name == "local-engine:tiny":
                if self.pause_s:
                    time.sleep(self.pause_s)
                else:
                    self.released.wait(SAFETY_S)
            return decode_step(*args, **kwargs)

        monkeypatch.setattr(engine_module, "decode_step", gated)


@pytest.fixture
def held(monkeypatch: pytest.MonkeyPatch) -> Iterator[SlowSteps]:
    steps = SlowSteps(monkeypatch)
    yield steps
    steps.released.set()


def ask(**body: Any) -> UpstreamRequest:
    return UpstreamRequest({"model": "tiny", "prompt": "the", "max_tokens": 1, **body}, "test", timeout_s=SAFETY_S)


async def test_the_queue_counts_sequences(small_queue: LocalProvider, held: SlowSteps) -> None:
    running = await small_queue.stream(ask(max_tokens=50, stream=True, logit_bias=no_end()))
    await until(lambda: small_queue.engine.busy == (1, 0))  # in the batch (of one), held in a step
    waiting = asyncio.create_task(small_queue.complete(ask(n=2)))
    await until(lambda: small_queue.engine.busy == (1, 2))  # two sequences wait

    with pytest.raises(UpstreamRejected) as refused:  # 2 + 2 > max_queue 3
        await small_queue.complete(ask(n=2))
    fits = asyncio.create_task(small_queue.complete(ask()))  # 2 + 1 = 3 fits
    await until(lambda: small_queue.engine.busy == (1, 3))
    await running.aclose()
    held.released.set()
    answers = await asyncio.wait_for(asyncio.gather(waiting, fits), SAFETY_S)

    assert refused.value.status == 429
    assert "3 sequences" in str(refused.value)
    assert [len(answer.body["choices"]) for answer in answers] == [2, 1]


async def test_a_small_request_is_served_while_a_giant_one_decodes(make_gateway: GatewayFactory) -> None:
    provider = local(long_context_model_dir(), max_batch=2)
    gateway = await make_gateway({"deployments": [{"name": "tiny", "provider": provider, "timeout_s": 120}]})
    engine = local_engine(gateway, "tiny")
    async with sdk(gateway) as giant_client, sdk(gateway) as small_client:
        # 16 prompts * n 2 = 32 sequences of 200 tokens each, through a batch of 2 rows.
        giant = await giant_client.completions.create(
            model="tiny", prompt=["the"] * 16, n=2, max_tokens=200, stream=True, extra_body={"logit_bias": no_end()}
        )
        chunks = aiter(giant)
        await anext(chunks)  # its first prompt is in the batch, decoding
        giant_finished = asyncio.Event()

        async def drain() -> None:
            async for _ in chunks:
                pass
            giant_finished.set()

        draining = asyncio.create_task(drain())
        small = await asyncio.wait_for(
            small_client.completions.create(model="tiny", prompt="the sky", max_tokens=3), SAFETY_S
        )
        giant_in_flight = not giant_finished.is_set()
        giant_still_waiting = engine.busy[1]  # sequences of the giant not yet admitted
        draining.cancel()
        await giant.close()

    assert small.choices[0].finish_reason in ("length", "stop")
    assert giant_in_flight  # the small request finished first
    assert giant_still_waiting > 0  # it did not wait for every prompt of the giant to be admitted


# --- the event loop stays free ------------------------------------------------------------------


async def test_health_and_other_deployments_answer_while_a_large_request_is_tokenised(
    make_gateway: GatewayFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The tokenising of a hostile request waits until /health and another deployment have answered:
    were it on the event loop, they could not answer first (the wait would run out, and they would
    come after)."""
    probes_answered = threading.Event()
    tokenising = threading.Event()

    def tokenise(draft: Any, *args: Any) -> Any:
        if draft.work > provider_module.INLINE_WORK:  # the hostile request's (the warm-up's is tiny)
            tokenising.set()
            probes_answered.wait(SAFETY_S / 2)
        return real_tokenise(draft, *args)

    monkeypatch.setattr(provider_module, "tokenise", tokenise)
    config = {
        "deployments": [
            {"name": "tiny", "provider": local(long_context_model_dir()), "timeout_s": 120, "retries": 0},
            {"name": "other", "provider": local(random_model_dir()), "timeout_s": 120, "retries": 0},
        ]
    }
    gateway = await make_gateway(config)
    order: list[str] = []
    # 64 prompts of 28 KB (1.8 MB): each might fit the context by its bytes alone, so all are tokenised.
    hostile_body = {"model": "tiny", "prompt": ["the quick brown fox " * 1400] * 64, "max_tokens": 1}
    async with ClientSession() as http:
        await post(http, gateway, {"model": "tiny", "prompt": "the", "max_tokens": 1})  # the model is loaded

        async def hostile() -> tuple[int, dict[str, Any]]:
            answer = await post(http, gateway, hostile_body)
            order.append("hostile")
            return answer

        attack = asyncio.create_task(hostile())
        assert await asyncio.to_thread(tokenising.wait, SAFETY_S)
        async with http.get(gateway.make_url("/health")) as health:
            healthy = (health.status, await health.json())
        order.append("health")
        other = await post(http, gateway, {"model": "other", "prompt": "the sky", "max_tokens": 2})
        order.append("other")
        probes_answered.set()
        status, body = await asyncio.wait_for(attack, SAFETY_S)

    assert order == ["health", "other", "hostile"]
    assert healthy == (200, {"status": "ok"})
    assert other[0] == 200
    assert (status, body["error"]["param"]) == (400, "max_tokens")  # tokenised: past the context


# --- a stream's wall-clock bound --------------------------------------------------------------------


async def test_a_stream_ends_with_a_504_frame_past_its_timeout(
    make_gateway: GatewayFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    SlowSteps(monkeypatch, pause_s=0.02)  # 1000 tokens take 20 s at least; a gap between them, 0.02 s
    # 2 s, counted from the request: its first tokens must come within it (room for a loaded machine).
    deployment = {"name": "tiny", "provider": local(long_context_model_dir()), "timeout_s": 2, "retries": 0}
    gateway = await make_gateway({"deployments": [deployment]})
    engine = local_engine(gateway, "tiny")
    async with asyncio.timeout(SAFETY_S):
        await asyncio.wrap_future(engine.ready)  # loaded (slowly on a loaded machine) before the clock runs
    body = {"model": "tiny", "prompt": "the", "max_tokens": 1000, "stream": True, "logit_bias": no_end()}
    async with ClientSession() as http, http.post(gateway.make_url("/v1/completions"), json=body) as response:
        status = response.status
        frames = [line[6:] for line in (await response.text()).split("\n\n") if line.startswith("data: ")]

    assert status == 200
    assert len(frames) > 2  # chunks came, then
    assert frames[-1] != "[DONE]"  # not the end of the generation (1000 tokens), but
    error = orjson.loads(frames[-1])["error"]
    assert (error["type"], error["code"]) == ("timeout", "upstream_timeout")
    assert "2s" in error["message"]
    await until(lambda: engine.busy == (0, 0))  # and its row left the batch


# --- a scored prompt, a chunk of positions at a time ------------------------------------------------


async def test_echo_logprobs_of_a_long_prompt_are_computed_in_chunks(
    make_gateway: GatewayFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(forward_module, "PROMPT_CHUNK", 16)
    model, tokenizer = load_reference(long_context_model_dir())
    ids = tokenizer.encode("the quick brown fox jumps over the lazy dog, " * 12)
    assert len(ids) > 5 * 16
    with torch.no_grad():
        reference = torch.log_softmax(model(torch.tensor([ids])).logits[0].float(), dim=-1)
        greedy = model.generate(torch.tensor([ids]), max_new_tokens=4, do_sample=False, min_new_tokens=4)
    deployment = {"name": "tiny", "provider": local(long_context_model_dir()), "retries": 0}
    gateway = await make_gateway({"deployments": [deployment]})
    loaded = local_engine(gateway, "tiny").ready.result(timeout=SAFETY_S)
    positions: list[int] = []  # of each logits tensor the engine's model computes
    hook = loaded.model.get_output_embeddings().register_forward_hook(
        lambda module, inputs, output: positions.append(output.shape[-2])
    )
    try:
        async with sdk(gateway) as client:
            scored = await client.completions.create(model="tiny", prompt=ids, max_tokens=0, echo=True, logprobs=3)
            continued = await client.completions.create(
                model="tiny", prompt=ids, max_tokens=4, echo=True, logprobs=2, temperature=0,
                extra_body={"logit_bias": no_end()},
            )  # fmt: skip
    finally:
        hook.remove()

    assert max(positions) <= 16  # never more than a chunk's logits at once
    expected = [float(reference[position, token]) for position, token in enumerate(ids[1:])]
    for choice, alternatives in ((scored.choices[0], 3), (continued.choices[0], 2)):
        logprobs: Any = choice.logprobs
        assert logprobs.token_logprobs[0] is None
        assert logprobs.token_logprobs[1 : len(ids)] == pytest.approx(expected, abs=1e-4)
        for position, top in enumerate(logprobs.top_logprobs[1 : len(ids)]):
            best = reference[position].topk(alternatives)
            for token, value in zip(best.indices.tolist(), best.values.tolist(), strict=True):
                assert top[token_text(tokenizer, token)] == pytest.approx(value, abs=1e-4)
    completion = continued.choices[0].text[len(scored.choices[0].text) :]
    assert completion == tokenizer.decode(greedy[0, len(ids) :]).replace("\ufffd", "")
