"""Benchmark of the local inference engine (`type: local`), on the engine itself (no HTTP).

For each model, with the issue's two criteria checked (PASS/FAIL):
- tokens/s of one request alone; aggregate tokens/s of 8 requests served one after another and of
  the same 8 sent at once (continuous batching). The gain, batched over one after another, must be
  at least 2.5 times. Each round measures both, one right after the other, so that a noisy neighbour
  weighs on both sides of a round; the figures are the median over the rounds.
- the time to first token of a request that arrives while 7 others are decoding (and are read by
  their clients), must stay within one decoding step of that batch plus the request's own time to
  first token on an idle engine (its prefill and delivery). Each request arrives from another
  thread after a random pause, so at any moment of a step; the figures are medians over the samples.

Models are built offline in a temporary folder and loaded through the provider's own path: the
tiny test model, and a randomly initialised model of GPT-2 small's shape (124M parameters).

    .venv/bin/python scripts/bench/local_engine.py [--threads N] [--tokens N] [--rounds N]
        [--samples N] [--models tiny,gpt2-small]
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from providers.base import UpstreamRequest
from providers.local.options import LocalOptions
from providers.local.provider import LocalProvider, LocalStream
from tests.support.local_model import build_random_model, build_tokenizer

CONCURRENT = 8
PROMPT = "the quick brown fox jumps over the lazy dog"
MIN_GAIN = 2.5
STEP_WINDOW_S = 0.3  # at least this long (and 20 steps) to time the running batch's steps


def build_gpt2_small(directory: Path) -> Path:
    """GPT-2 small's shape (12 layers, 768 wide, 50257 tokens, 1024 positions), random weights."""
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    build_tokenizer(directory)
    torch.manual_seed(0)
    GPT2LMHeadModel(GPT2Config(bos_token_id=0, eos_token_id=0)).save_pretrained(directory)
    return directory


def body(tokens: int, seed: int, stream: bool = False) -> UpstreamRequest:
    # End-of-text banned: every request generates exactly `tokens` tokens.
    payload = {"model": "bench", "prompt": PROMPT, "max_tokens": tokens, "seed": seed, "logit_bias": {"0": -100}}
    return UpstreamRequest({**payload, "stream": stream}, "bench", timeout_s=3600)


async def generated(provider: LocalProvider, tokens: int, seed: int) -> int:
    result = await provider.complete(body(tokens, seed))
    return int(result.body["usage"]["completion_tokens"])


async def one_after_another(provider: LocalProvider, tokens: int, seeds: Sequence[int]) -> int:
    return sum([await generated(provider, tokens, seed) for seed in seeds])


async def at_once(provider: LocalProvider, tokens: int, seeds: Sequence[int]) -> int:
    return sum(await asyncio.gather(*(generated(provider, tokens, seed) for seed in seeds)))


async def rate(run: Awaitable[int]) -> float:
    """Tokens per second of a run that returns the tokens it generated."""
    started = time.perf_counter()
    made = await run
    return made / (time.perf_counter() - started)


def _pause(seconds: float) -> float:
    time.sleep(seconds)
    return time.perf_counter()


async def first_token_s(provider: LocalProvider, seed: int, pause_s: float = 0.0) -> float:
    """Time to first token of a request that arrives after `pause_s`, timed from its arrival. It
    arrives from another thread, as a client's request wakes the loop at any moment of a step; an
    asyncio timer would fire only when the loop next wakes (its timeouts are whole milliseconds),
    which is mostly at a step's end, right after the engine took its newcomers."""
    arrived = await asyncio.to_thread(_pause, pause_s)
    stream = await provider.stream(body(1, seed, stream=True))
    try:
        async for _ in stream:
            return time.perf_counter() - arrived
    finally:
        await stream.aclose()
    raise RuntimeError("the stream ended without a token")


async def read(stream: LocalStream) -> None:
    async for _ in stream:  # a client reading its stream, as the gateway would relay it
        pass


async def until(condition: Callable[[], bool]) -> None:
    """Poll what the worker thread changes (there is no event to await across threads)."""
    while True:
        if condition():
            return
        await asyncio.sleep(0.001)  # not 0: a spinning loop would take the GIL from the worker


async def step_time_s(provider: LocalProvider) -> float:
    """Mean time of one decoding step of the running batch, between two observed step changes."""
    engine = provider.engine
    first = engine.steps
    await until(lambda: engine.steps != first)
    steps, started = engine.steps, time.perf_counter()
    await until(lambda: time.perf_counter() - started >= STEP_WINDOW_S and engine.steps - steps >= 20)
    last = engine.steps
    await until(lambda: engine.steps != last)
    return (time.perf_counter() - started) / (engine.steps - steps)


async def gain_rounds(provider: LocalProvider, tokens: int, rounds: int) -> dict[str, float]:
    singles, sequentials, batcheds, gains = [], [], [], []
    for round_ in range(rounds):
        seeds = range(round_ * CONCURRENT, (round_ + 1) * CONCURRENT)
        singles.append(await rate(generated(provider, tokens, 1000 + round_)))
        sequentials.append(await rate(one_after_another(provider, tokens, seeds)))
        batcheds.append(await rate(at_once(provider, tokens, seeds)))
        gains.append(batcheds[-1] / sequentials[-1])
    return {
        "single_tok_s": statistics.median(singles),
        "sequential8_tok_s": statistics.median(sequentials),
        "batched8_tok_s": statistics.median(batcheds),
        "gain": statistics.median(gains),
        "gain_min": min(gains),
        "gain_max": max(gains),
    }


async def ttft(provider: LocalProvider, samples: int) -> dict[str, float]:
    idle = [await first_token_s(provider, seed) for seed in range(samples)]
    model = provider.engine.ready.result()
    long = model.context_length - len(model.tokenizer.encode(PROMPT)) - 1  # never ends during the measurement
    running = [await provider.stream(body(long, seed, stream=True)) for seed in range(CONCURRENT - 1)]
    readers = [asyncio.create_task(read(stream)) for stream in running]
    try:
        await until(lambda: provider.engine.busy == (CONCURRENT - 1, 0))  # every one past its prefill
        step = await step_time_s(provider)
        pauses = [random.uniform(0, step) for _ in range(samples)]  # noqa: S311 (arrival times, not secrets)
        newcomers = [await first_token_s(provider, 100 + seed, pause) for seed, pause in enumerate(pauses)]
        still_running = provider.engine.busy[0] == CONCURRENT - 1
        step_after = await step_time_s(provider)
    finally:
        for stream in running:
            await stream.aclose()
        for reader in readers:
            reader.cancel()
    if not still_running:
        raise RuntimeError("the running requests ended before the newcomers were measured")
    step_ms = statistics.mean([step, step_after]) * 1000
    return {
        "step_ms": step_ms,
        "idle_ttft_ms": statistics.median(idle) * 1000,
        "newcomer_ttft_ms": statistics.median(newcomers) * 1000,
        "newcomer_ttft_max_ms": max(newcomers) * 1000,
        "ttft_bound_ms": step_ms + statistics.median(idle) * 1000,
    }


async def measure(name: str, directory: Path, args: argparse.Namespace) -> dict[str, float]:
    options = LocalOptions(model=str(directory), threads=args.threads, max_batch=CONCURRENT)
    provider = LocalProvider(name, options)
    try:
        await generated(provider, 4, 0)  # load and warm up, alone and batched
        await asyncio.gather(*(generated(provider, 4, seed) for seed in range(CONCURRENT)))
        figures = await gain_rounds(provider, args.tokens, args.rounds)
        figures.update(await ttft(provider, args.samples))
    finally:
        await provider.aclose()
    return figures


def verdict(passed: bool) -> str:
    return "PASS" if passed else "FAIL"


def report(name: str, rounds: int, samples: int, figures: dict[str, float]) -> None:
    gain_ok = figures["gain"] >= MIN_GAIN
    ttft_ok = figures["newcomer_ttft_ms"] <= figures["ttft_bound_ms"]
    print(f"\n== {name} (medians of {rounds} rounds; TTFT medians of {samples} samples)")
    print(f"one request alone:            {figures['single_tok_s']:8.1f} tokens/s")
    print(f"8 requests one after another: {figures['sequential8_tok_s']:8.1f} tokens/s")
    print(f"8 requests at once (batched): {figures['batched8_tok_s']:8.1f} tokens/s")
    print(
        f"batching gain:                {figures['gain']:8.2f}x (rounds {figures['gain_min']:.2f} to "
        f"{figures['gain_max']:.2f}; at least {MIN_GAIN}x: {verdict(gain_ok)})"
    )
    print(f"decoding step of 7 running:   {figures['step_ms']:8.2f} ms")
    print(f"TTFT on an idle engine:       {figures['idle_ttft_ms']:8.2f} ms")
    newcomer, worst = figures["newcomer_ttft_ms"], figures["newcomer_ttft_max_ms"]
    print(f"TTFT arriving mid-batch:      {newcomer:8.2f} ms (max {worst:.2f})")
    print(f"  one step + own prefill:     {figures['ttft_bound_ms']:8.2f} ms ({verdict(ttft_ok)})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: every core allowed)")
    parser.add_argument("--tokens", type=int, default=64, help="tokens generated per request")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of (one after another, at once)")
    parser.add_argument("--samples", type=int, default=15, help="time-to-first-token samples")
    parser.add_argument("--models", default="tiny,gpt2-small")
    args = parser.parse_args()
    builders = {
        "tiny": lambda folder: build_random_model(folder, n_positions=1024),
        "gpt2-small": build_gpt2_small,
    }
    with tempfile.TemporaryDirectory(prefix="bench-local-") as root:
        for name in args.models.split(","):
            directory = builders[name](Path(root) / name)
            report(name, args.rounds, args.samples, asyncio.run(measure(name, directory, args)))


if __name__ == "__main__":
    main()
