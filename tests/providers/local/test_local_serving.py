"""`type: local` serving many requests: batching, the bounded queue, clients that leave, a free event loop.

Nothing here depends on how fast the machine decodes. Where a test needs a request in flight (in
the batch, mid-generation) while it looks at something else, a `StepGate` holds the engine's worker
inside a decoding step until the test lets it go; such a request also never samples end-of-text,
so that only `max_tokens` or the test ends it. The timeouts are there to fail a broken test rather
than hang it, never a claim about speed.
"""

from __future__ import annotations

import asyncio
import functools
import subprocess
import sys
import threading
from collections.abc import AsyncIterator, Iterator
from typing import Any

import openai
import pytest
from aiohttp import ClientSession
from transformers import AutoTokenizer

pytest.importorskip("torch", reason="the local engine needs the 'local' extra")

from providers.base import UpstreamRequest
from providers.local import engine as engine_module
from providers.local.engine import Engine
from providers.local.forward import decode_step
from providers.local.loader import available_cores, thread_count
from providers.local.options import LocalOptions
from providers.local.provider import LocalProvider
from tests.conftest import GatewayFactory, deployment
from tests.support.fake_upstream import FakeUpstream
from tests.support.local_engine_helpers import SAFETY_S, local_engine, until
from tests.support.local_model import fim_model_dir, long_context_model_dir, random_model_dir

LONG = 1000  # tokens: a request that does not end by itself while a test watches it


class StepGate:
    """Holds one deployment's engine inside a decoding step until the test releases it, so that a
    decode stays in flight for as long as the test needs, on any machine. It also counts the steps
    that engine enters and records how many rows each one decodes."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, deployment: str) -> None:
        self._thread = f"local-engine:{deployment}"  # the engine's worker thread
        self._hold_at: int | None = None
        self._held = threading.Event()
        self._released = threading.Event()
        self.holding = False  # the worker is waiting inside a step right now
        self.steps = 0
        self.widths: list[int] = []

        def gated(model: Any, tokens: Any, *args: Any, **kwargs: Any) -> Any:
            if threading.current_thread().name == self._thread:
                self.steps += 1
                self.widths.append(len(tokens))
                if self._hold_at is not None and self.steps >= self._hold_at:
                    self._hold_at = None
                    self.holding = True
                    self._held.set()
                    self._released.wait(SAFETY_S)
                    self.holding = False
            return decode_step(model, tokens, *args, **kwargs)

        monkeypatch.setattr(engine_module, "decode_step", gated)

    def hold(self, step: int = 1) -> None:
        """Hold the worker when it enters the `step`-th decoding step from now."""
        self._held.clear()
        self._released.clear()
        self._hold_at = self.steps + step

    async def held(self) -> None:
        """Wait until the worker is held."""
        assert await asyncio.to_thread(self._held.wait, SAFETY_S), "the engine never reached the held step"

    def release(self) -> None:
        self._released.set()


@functools.cache
def no_end() -> dict[str, float]:
    """logit_bias under which end-of-text is never sampled: only `max_tokens` ends the answer."""
    eos = AutoTokenizer.from_pretrained(long_context_model_dir()).eos_token_id
    return {str(eos): -100.0}


@functools.cache
def only_sky() -> dict[str, float]:
    """logit_bias under which every token is " sky": never end-of-text, and each step's token is a
    chunk of its own (a stream's first chunk is the prefill's token, not one a held step would give)."""
    [sky] = AutoTokenizer.from_pretrained(long_context_model_dir()).encode(" sky")
    return {str(sky): 100.0}


@pytest.fixture
def gate(monkeypatch: pytest.MonkeyPatch) -> Iterator[StepGate]:
    """A gate on the engine of deployment `tiny` (never left held after the test)."""
    step_gate = StepGate(monkeypatch, "tiny")
    yield step_gate
    step_gate.release()


@pytest.fixture
async def provider() -> AsyncIterator[LocalProvider]:
    local = LocalProvider("tiny", LocalOptions(model=str(long_context_model_dir()), threads=1, max_batch=8))
    yield local
    await local.aclose()


def request(**body: Any) -> UpstreamRequest:
    return UpstreamRequest({"model": "tiny", "prompt": "the sky", **body}, "test", timeout_s=60)


async def test_concurrent_requests_share_the_batch_and_answer_as_alone(provider: LocalProvider, gate: StepGate) -> None:
    seeded = [request(max_tokens=30, seed=seed, logit_bias=no_end()) for seed in range(4)]
    alone = [await provider.complete(body) for body in seeded]
    gate.hold()  # the first step of the requests below waits until all four have arrived
    together = asyncio.gather(*(provider.complete(body) for body in seeded))
    await gate.held()
    await until(lambda: sum(provider.engine.busy) == 4)  # in the batch or waiting for it
    widths = len(gate.widths)
    gate.release()
    answers = await together

    assert [r.body["choices"][0]["text"] for r in answers] == [r.body["choices"][0]["text"] for r in alone]
    assert max(gate.widths[widths:]) == 4  # then decoded in shared steps, not one after another


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


async def test_a_client_that_leaves_frees_its_slot_at_the_next_step(provider: LocalProvider, gate: StepGate) -> None:
    gate.hold(step=2)
    stream = await provider.stream(request(max_tokens=LONG, logit_bias=only_sky(), stream=True))
    await anext(aiter(stream))
    await gate.held()
    assert provider.engine.busy == (1, 0)  # in the batch, mid-generation

    await stream.aclose()  # what the gateway does when the client disconnects
    entered = gate.steps
    gate.release()

    await until(lambda: provider.engine.busy == (0, 0))
    assert gate.steps == entered  # it left after the step it was in: no step decoded it again


async def test_other_requests_are_answered_while_a_decode_is_in_flight(
    make_gateway: GatewayFactory, upstream: FakeUpstream, gate: StepGate
) -> None:
    def local(folder: Any) -> dict[str, Any]:
        return {"type": "local", "model": str(folder), "threads": 1}

    config = {
        "deployments": [
            {"name": "tiny", "provider": local(long_context_model_dir()), "timeout_s": 60, "retries": 0},
            {"name": "other", "provider": local(random_model_dir()), "timeout_s": 60, "retries": 0},
            deployment("remote", upstream.base_url, retries=0),
        ]
    }
    gateway = await make_gateway(config)
    gate.hold(step=3)
    async with (
        openai.AsyncOpenAI(base_url=str(gateway.make_url("/v1")), api_key="unused", max_retries=0) as client,
        ClientSession() as http,
    ):
        decoding = await client.completions.create(
            model="tiny", prompt="the", max_tokens=20, seed=0, stream=True, stream_options={"include_usage": True},
            extra_body={"logit_bias": only_sky()},
        )  # fmt: skip
        await gate.held()  # its engine is inside a decoding step, and stays there until released
        async with http.get(gateway.make_url("/health")) as health:
            healthy = (health.status, await health.json())
        other = await client.completions.create(model="other", prompt="the sky", max_tokens=5, seed=0)
        remote = await client.completions.create(model="remote", prompt="hi")
        still_held = gate.holding
        gate.release()
        chunks = [chunk async for chunk in decoding]

    assert still_held  # all three were answered while the decode was in flight
    assert healthy == (200, {"status": "ok"})
    assert other.choices[0].finish_reason in ("length", "stop")
    assert remote.choices[0].text == "echo: hi"
    assert chunks[-1].usage is not None
    assert chunks[-1].usage.completion_tokens == 20  # and the held decode then went on to its end
    assert "".join(choice.text for chunk in chunks for choice in chunk.choices) == " sky" * 20


async def test_a_full_queue_is_a_429_with_retry_after(make_gateway: GatewayFactory, gate: StepGate) -> None:
    options = {"type": "local", "model": str(long_context_model_dir()), "threads": 1, "max_batch": 1, "max_queue": 1}
    config = {"deployments": [{"name": "tiny", "provider": options, "timeout_s": 60, "retries": 0}]}
    gateway = await make_gateway(config)
    engine = local_engine(gateway, "tiny")
    gate.hold()
    async with openai.AsyncOpenAI(base_url=str(gateway.make_url("/v1")), api_key="unused", max_retries=0) as client:
        running = await client.completions.create(
            model="tiny", prompt="the", max_tokens=LONG, stream=True, extra_body={"logit_bias": only_sky()}
        )
        await gate.held()  # in the batch, which is now full, and held inside a step: it cannot end meanwhile
        waiting = asyncio.create_task(client.completions.create(model="tiny", prompt="the", max_tokens=1))
        await until(lambda: engine.busy == (1, 1))  # queued behind it

        with pytest.raises(openai.RateLimitError) as caught:
            await client.completions.create(model="tiny", prompt="the", max_tokens=1)
        await running.close()  # the slot frees up: the waiting request is served
        gate.release()
        served = await asyncio.wait_for(waiting, timeout=SAFETY_S)

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
