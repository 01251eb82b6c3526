"""Benchmark of the local inference engine (`type: local`), on the engine itself (no HTTP).

For each model: tokens/s of one request alone; aggregate tokens/s of 8 requests served one after
another and of the same 8 sent at once (continuous batching: the ratio is what batching buys);
and the time to first token of a request that arrives while 7 others are decoding, against one
decoding step of that batch plus the request's own time to first token on an idle engine.

Models are built offline in a temporary folder and loaded through the provider's own path: the
tiny test model, and a randomly initialised model of GPT-2 small's shape (124M parameters).

    .venv/bin/python scripts/bench/local_engine.py [--threads N] [--tokens N] [--models tiny,gpt2-small]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from providers.base import UpstreamRequest
from providers.local.options import LocalOptions
from providers.local.provider import LocalProvider
from tests.local_model import build_random_model, build_tokenizer

CONCURRENT = 8
PROMPT = "the quick brown fox jumps over the lazy dog"


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


async def first_token_s(provider: LocalProvider, tokens: int, seed: int) -> float:
    started = time.perf_counter()
    stream = await provider.stream(body(tokens, seed, stream=True))
    try:
        async for _ in stream:
            return time.perf_counter() - started
    finally:
        await stream.aclose()
    raise RuntimeError("the stream ended without a token")


async def step_time_s(provider: LocalProvider) -> float:
    """Mean time of one decoding step of the running batch, over half a second."""
    await asyncio.sleep(0.2)  # every running request is past its prefill
    steps, started = provider.engine.steps, time.perf_counter()
    await asyncio.sleep(0.5)
    return (time.perf_counter() - started) / max(1, provider.engine.steps - steps)


async def measure(name: str, directory: Path, threads: int | None, tokens: int) -> dict[str, float]:
    provider = LocalProvider(name, LocalOptions(model=str(directory), threads=threads, max_batch=CONCURRENT))
    try:
        await generated(provider, 4, 0)  # load and warm up
        started = time.perf_counter()
        single = await generated(provider, tokens, 1) / (time.perf_counter() - started)

        started = time.perf_counter()
        made = sum([await generated(provider, tokens, seed) for seed in range(CONCURRENT)])
        sequential = made / (time.perf_counter() - started)

        started = time.perf_counter()
        made = sum(await asyncio.gather(*(generated(provider, tokens, seed) for seed in range(CONCURRENT))))
        batched = made / (time.perf_counter() - started)

        idle_ttft = statistics.median([await first_token_s(provider, 1, seed) for seed in range(5)])
        running = [await provider.stream(body(tokens * 4, seed, stream=True)) for seed in range(CONCURRENT - 1)]
        try:
            step = await step_time_s(provider)
            newcomer_ttft = statistics.median([await first_token_s(provider, 1, 100 + seed) for seed in range(5)])
        finally:
            for stream in running:
                await stream.aclose()
    finally:
        await provider.aclose()
    return {
        "single_tok_s": single,
        "sequential8_tok_s": sequential,
        "batched8_tok_s": batched,
        "batching_ratio": batched / sequential,
        "step_ms": step * 1000,
        "idle_ttft_ms": idle_ttft * 1000,
        "newcomer_ttft_ms": newcomer_ttft * 1000,
        "ttft_bound_ms": (step + idle_ttft) * 1000,
    }


def report(name: str, figures: dict[str, float]) -> None:
    print(f"\n== {name}")
    print(f"one request alone:            {figures['single_tok_s']:8.1f} tokens/s")
    print(f"8 requests one after another: {figures['sequential8_tok_s']:8.1f} tokens/s")
    print(f"8 requests at once (batched): {figures['batched8_tok_s']:8.1f} tokens/s")
    print(f"batching gain:                {figures['batching_ratio']:8.2f}x")
    print(f"decoding step of 7 running:   {figures['step_ms']:8.2f} ms")
    print(f"TTFT on an idle engine:       {figures['idle_ttft_ms']:8.2f} ms")
    print(f"TTFT arriving mid-batch:      {figures['newcomer_ttft_ms']:8.2f} ms")
    verdict = "within" if figures["newcomer_ttft_ms"] <= figures["ttft_bound_ms"] else "ABOVE"
    print(f"  one step + own prefill:     {figures['ttft_bound_ms']:8.2f} ms ({verdict})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: every core allowed)")
    parser.add_argument("--tokens", type=int, default=64, help="tokens generated per request")
    parser.add_argument("--models", default="tiny,gpt2-small")
    args = parser.parse_args()
    builders = {
        "tiny": lambda folder: build_random_model(folder, n_positions=1024),
        "gpt2-small": build_gpt2_small,
    }
    with tempfile.TemporaryDirectory(prefix="bench-local-") as root:
        for name in args.models.split(","):
            directory = builders[name](Path(root) / name)
            report(name, asyncio.run(measure(name, directory, args.threads, args.tokens)))


if __name__ == "__main__":
    main()
