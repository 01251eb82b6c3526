"""`type: local` serving many requests: batching, the bounded queue, clients that leave, a free event loop.

Generations here use the random model with 2048 positions, so a request can run long enough
(a thousand tokens) to be watched while it is in the batch.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from typing import Any

import openai
import pytest
from transformers import AutoTokenizer

pytest.importorskip("torch", reason="the local engine needs the 'local' extra")

from providers.base import UpstreamRequest
from providers.local.engine import Engine
from providers.local.loader import available_cores, thread_count
from providers.local.options import LocalOptions
from providers.local.provider import LocalProvider
from tests.conftest import GatewayFactory
from tests.local_model import fim_model_dir, long_context_model_dir, random_model_dir

LONG = 1000  # tokens: over a second of decoding on one thread


@pytest.fixture
async def provider() -> AsyncIterator[LocalProvider]:
    local = LocalProvider("tiny", LocalOptions(model=str(long_context_model_dir()), threads=1, max_batch=8))
    yield local
    await local.aclose()


def request(**body: Any) -> UpstreamRequest:
    return UpstreamRequest({"model": "tiny", "prompt": "the sky", **body}, "test", timeout_s=60)


async def until(condition: Any, timeout_s: float) -> None:
    """Poll what the worker thread changes (no event to await across threads)."""
    for _ in range(int(timeout_s / 0.005)):
        if condition():
            return
        await asyncio.sleep(0.005)
    raise AssertionError(f"not true within {timeout_s}s")


async def test_concurrent_requests_share_the_batch_and_answer_as_alone(provider: LocalProvider) -> None:
    seeds = range(4)
    alone = [await provider.complete(request(max_tokens=30, seed=seed)) for seed in seeds]
    widest = 0

    async def watch() -> None:
        nonlocal widest
        while True:
            widest = max(widest, provider.engine.busy[0])
            await asyncio.sleep(0.001)

    watcher = asyncio.create_task(watch())
    together = await asyncio.gather(*(provider.complete(request(max_tokens=30, seed=seed)) for seed in seeds))
    watcher.cancel()

    assert [r.body["choices"][0]["text"] for r in together] == [r.body["choices"][0]["text"] for r in alone]
    assert widest >= 2  # decoded in shared steps, not one after another


async def test_a_sample_does_not_depend_on_its_neighbours_settings(provider: LocalProvider) -> None:
    seeded = request(max_tokens=30, seed=3, logprobs=0)
    alone = await provider.complete(seeded)
    neighbours = [  # a nucleus, a temperature, greedy: drawn in the same step as the seeded request
        provider.complete(request(max_tokens=60, seed=4, top_p=0.5)),
        provider.complete(request(max_tokens=60, seed=5, temperature=0.5)),
        provider.complete(request(max_tokens=60, temperature=0)),
    ]

    together, *_ = await asyncio.gather(provider.complete(seeded), *neighbours)

    tokens = [answer.body["choices"][0]["logprobs"]["tokens"] for answer in (alone, together)]
    assert tokens[0] == tokens[1]


async def test_a_client_that_leaves_frees_its_slot(provider: LocalProvider) -> None:
    stream = await provider.stream(request(max_tokens=LONG, stream=True))
    events = aiter(stream)
    await anext(events)
    await until(lambda: provider.engine.busy[0] == 1, timeout_s=1.0)  # its first token leaves before it joins

    await stream.aclose()  # what the gateway does when the client disconnects

    await until(lambda: provider.engine.busy == (0, 0), timeout_s=1.0)


async def test_the_event_loop_stays_free_while_the_engine_decodes(provider: LocalProvider) -> None:
    lags: list[float] = []

    async def tick() -> None:
        while True:
            before = time.perf_counter()
            await asyncio.sleep(0.001)
            lags.append(time.perf_counter() - before - 0.001)

    ticker = asyncio.create_task(tick())
    started = time.perf_counter()
    await asyncio.gather(*(provider.complete(request(max_tokens=300, seed=seed)) for seed in range(4)))
    elapsed = time.perf_counter() - started
    ticker.cancel()

    assert elapsed > 0.3  # long enough that decoding on the loop would have shown
    assert max(lags) < 0.1, f"the loop was held for {max(lags) * 1000:.0f} ms"


async def test_a_full_queue_is_a_429_with_retry_after(make_gateway: GatewayFactory) -> None:
    options = {"type": "local", "model": str(long_context_model_dir()), "threads": 1, "max_batch": 1, "max_queue": 1}
    config = {"deployments": [{"name": "tiny", "provider": options, "timeout_s": 60, "retries": 0}]}
    gateway = await make_gateway(config)
    async with openai.AsyncOpenAI(base_url=str(gateway.make_url("/v1")), api_key="unused", max_retries=0) as client:
        eos = AutoTokenizer.from_pretrained(long_context_model_dir()).eos_token_id
        running = await client.completions.create(  # never ends by itself: end-of-text is banned
            model="tiny", prompt="the", max_tokens=LONG, stream=True, logit_bias={str(eos): -100}
        )
        await anext(aiter(running))  # in the batch, which is now full
        waiting = asyncio.create_task(client.completions.create(model="tiny", prompt="the", max_tokens=1))
        await asyncio.sleep(0.3)  # queued behind it

        with pytest.raises(openai.RateLimitError) as caught:
            await client.completions.create(model="tiny", prompt="the", max_tokens=1)
        await running.close()  # the slot frees up: the waiting request is served
        served = await asyncio.wait_for(waiting, timeout=10)

    assert caught.value.status_code == 429
    assert caught.value.response.headers["retry-after"] == "1"
    assert "'tiny'" in caught.value.message
    assert served.choices[0].finish_reason in ("length", "stop")


async def test_a_model_that_cannot_load_is_a_502_naming_the_deployment(make_gateway: GatewayFactory) -> None:
    options = {"type": "local", "model": "/nonexistent/model-folder", "threads": 1}
    gateway = await make_gateway({"deployments": [{"name": "broken", "provider": options, "retries": 0}]})
    async with openai.AsyncOpenAI(base_url=str(gateway.make_url("/v1")), api_key="unused", max_retries=0) as client:
        with pytest.raises(openai.InternalServerError) as caught:
            await client.completions.create(model="broken", prompt="the")

    assert caught.value.status_code == 502
    assert "The local model of deployment 'broken' could not be loaded" in caught.value.message


def test_deployments_that_start_together_all_load() -> None:
    folders = [long_context_model_dir(), random_model_dir(), fim_model_dir(), long_context_model_dir()]
    engines = [Engine(LocalOptions(model=str(folder), threads=1), f"e{n}") for n, folder in enumerate(folders)]
    try:
        loaded = [engine.ready.result(timeout=60) for engine in engines]
    finally:
        for engine in engines:
            engine.stop()
            engine.join(10)

    assert [model.fim is not None for model in loaded] == [False, False, True, False]


def test_threads_never_exceed_the_cores_the_process_may_use() -> None:
    assert thread_count(None) == available_cores()
    assert thread_count(10_000) == available_cores()
    assert thread_count(1) == 1


def test_options_refuse_what_cannot_work() -> None:
    with pytest.raises(ValueError, match="max_queue"):
        LocalOptions(model="m", max_queue=0)
    with pytest.raises(ValueError, match="prompt cannot be dropped"):
        LocalOptions(model="m", drop_params=["prompt"])
    with pytest.raises(ValueError, match="device"):
        LocalOptions(model="m", device="tpu")


def test_the_gateway_starts_without_importing_torch() -> None:
    code = (
        "import sys; import gateway.app, providers.registry; "
        "sys.exit(1 if {'torch', 'transformers'} & set(sys.modules) else 0)"
    )
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0  # noqa: S603 (our interpreter)
