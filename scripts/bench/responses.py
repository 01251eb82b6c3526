"""Benchmark of `POST /v1/responses` bridged onto the chat path, against `POST /v1/chat/completions`
on the same loopback upstream: the gateway process's CPU seconds per request (the fake upstream runs
in this process too, so its CPU is on both sides), plain and streamed, with the response stored
(in memory, or in Redis with `--redis URL`). The issue's criterion: within 20% of chat (PASS/FAIL).

    .venv/bin/python scripts/bench/responses.py [--requests N] [--redis redis://127.0.0.1:6379/0]
"""

from __future__ import annotations

import argparse
import asyncio
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
    chat = ("/v1/chat/completions", {"model": "up", "messages": [{"role": "user", "content": QUESTION}]})
    responses = ("/v1/responses", {"model": "up", "input": QUESTION, "store": True})
    if stream:
        chat[1]["stream"] = responses[1]["stream"] = True
    try:
        async with ClientSession() as http:

            async def cpu_per_request(path: str, body: dict[str, Any]) -> float:
                for _ in range(50):  # warm
                    async with http.post(gateway.make_url(path), json=body) as response:
                        await response.read()
                began = time.process_time()
                for _ in range(args.requests):
                    async with http.post(gateway.make_url(path), json=body) as response:
                        assert response.status == 200
                        await response.read()
                return (time.process_time() - began) / args.requests

            chat_cpu, responses_cpu = [], []
            for _ in range(3):  # interleaved rounds: a noisy neighbour weighs on both
                chat_cpu.append(await cpu_per_request(*chat))
                responses_cpu.append(await cpu_per_request(*responses))
    finally:
        await gateway.close()
        await fake_server.close()
    chat_s, responses_s = sorted(chat_cpu)[1], sorted(responses_cpu)[1]
    ratio = responses_s / chat_s
    where = "Redis" if args.redis else "memory"
    print(
        f"{'stream' if stream else 'plain'}, stored in {where}: CPU per request, chat {chat_s * 1e6:.0f} us, "
        f"responses {responses_s * 1e6:.0f} us ({ratio:.2f}x)"
    )
    passed = ratio <= 1.20
    print(f"  {'PASS' if passed else 'FAIL'}: responses within 20% of chat")
    return passed


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=500)
    parser.add_argument("--redis", default="", help="store in this Redis (default: memory)")
    args = parser.parse_args()
    results = [await measure(args, stream=False), await measure(args, stream=True)]
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
