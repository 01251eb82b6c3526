"""Benchmark of `POST /v1/responses` bridged onto the chat path, against `POST /v1/chat/completions`
on the same loopback upstream: the gateway process's CPU seconds per request (the fake upstream runs
in this process too, so its CPU is on both sides), plain and streamed, with the response stored
(in memory, or in Redis with `--redis URL`). The issue's criterion: within 20% of chat (PASS/FAIL).

`--concurrency N` keeps N requests in flight (N clients, each one request at a time) instead of
one. With one, the gateway has nothing else to do while a stored response's `SET` is on its way to
Redis, so the process sleeps and is woken for the reply on every response (on a busy machine the
core goes to another process meanwhile, and the request's work resumes on cold caches), which chat,
whose upstream here answers from this same process, never does. With several in flight, that wait
is spent on the other requests, as it is on a gateway under load.

    .venv/bin/python scripts/bench/responses.py [--requests N] [--rounds R] [--concurrency N]
                                                [--redis redis://127.0.0.1:6379/0]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import yaml
from aiohttp import ClientSession
from aiohttp.test_utils import TestServer

from gateway.app import create_app
from gateway.config.loader import parse_config
from tests.support.fake_upstream import FakeUpstream

QUESTION = "What is the weather like in Paris today, and should I take an umbrella?"


async def serve(config: dict[str, Any]) -> TestServer:
    server = TestServer(create_app(parse_config(yaml.safe_dump(config), {}, source="bench.yaml")))
    await server.start_server()
    return server


async def measure(args: argparse.Namespace, stream: bool) -> bool:
    fake = FakeUpstream()
    fake_server = TestServer(fake.app())
    await fake_server.start_server()
    config: dict[str, Any] = {
        "deployments": [{"name": "up", "provider": {"type": "openai", "base_url": str(fake_server.make_url("/v1"))}}]
    }
    if args.redis:
        config["redis"] = {"url": args.redis, "prefix": "bench:responses:"}
        config["responses"] = {"retention_s": 60}  # the bench's responses expire within a minute
    gateway = await serve(config)
    chat: tuple[str, dict[str, Any]] = (
        "/v1/chat/completions",
        {"model": "up", "messages": [{"role": "user", "content": QUESTION}]},
    )
    responses: tuple[str, dict[str, Any]] = ("/v1/responses", {"model": "up", "input": QUESTION, "store": True})
    if stream:
        chat[1]["stream"] = responses[1]["stream"] = True
    try:
        async with ClientSession() as http:

            async def client(path: str, body: dict[str, Any], count: int) -> None:
                for _ in range(count):
                    async with http.post(gateway.make_url(path), json=body) as response:
                        assert response.status == 200
                        await response.read()

            async def cpu_per_request(path: str, body: dict[str, Any]) -> float:
                await client(path, body, 50)  # warm
                each = args.requests // args.concurrency
                began = time.process_time()
                await asyncio.gather(*(client(path, body, each) for _ in range(args.concurrency)))
                return float((time.process_time() - began) / (each * args.concurrency))

            chat_cpu, responses_cpu = [], []
            for _ in range(args.rounds):  # interleaved rounds: a noisy neighbour weighs on both
                chat_cpu.append(await cpu_per_request(*chat))
                responses_cpu.append(await cpu_per_request(*responses))
    finally:
        await gateway.close()
        await fake_server.close()
    chat_s, responses_s = statistics.median(chat_cpu), statistics.median(responses_cpu)
    ratio = statistics.median(mine / theirs for mine, theirs in zip(responses_cpu, chat_cpu, strict=True))
    where = "Redis" if args.redis else "memory"
    print(
        f"{'stream' if stream else 'plain'}, stored in {where}, {args.concurrency} in flight: CPU per request, "
        f"chat {chat_s * 1e6:.0f} us, responses {responses_s * 1e6:.0f} us ({ratio:.2f}x, the median of "
        f"{args.rounds} rounds' ratios)"
    )
    passed = ratio <= 1.20
    print(f"  {'PASS' if passed else 'FAIL'}: responses within 20% of chat")
    return passed


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=500, help="per round and side")
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds of chat then responses")
    parser.add_argument("--concurrency", type=int, default=1, help="requests in flight")
    parser.add_argument("--redis", default="", help="store in this Redis (default: memory)")
    args = parser.parse_args()
    results = [await measure(args, stream=False), await measure(args, stream=True)]
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
