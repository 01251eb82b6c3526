"""Benchmark of `POST /v1/responses` bridged onto the chat path, against `POST /v1/chat/completions`
on the same loopback upstream: the gateway process's CPU seconds per request (the fake upstream and
the client run in this process too, so their CPU is on both sides), plain and streamed, with the
response stored (in memory, or in Redis with `--redis URL`). The issue's criterion: within 20% of
chat (PASS/FAIL). The gateway runs as `gateway serve` runs it (uvloop, its GC settings), with an API
key that every request presents and the access log on (JSON lines to a file sink); both APIs are
measured in the same process, alternately, against the same upstream. The chat stream asks for its
usage (`stream_options.include_usage`), as the bridge does for the `response`'s usage: the upstream
sends both the same stream, chunk by chunk as a model does (the loop turns between two chunks, so
the gateway reads and writes each on its own). `--burst`: the upstream writes its whole stream at
once, which the gateway reads in one read (as this script measured streams before):
the bridge's work per stream against the least relay work, a stricter case than a model's stream.

`--concurrency N` keeps N requests in flight (N clients, each one request at a time) instead of
one. With one and Redis configured, the gateway has nothing else to do while Redis answers: the
process sleeps and is woken for the reply (on a busy machine the core goes to another process
meanwhile, and the request's work resumes on cold caches). Chat waits so when its call
settles (the key's spend is kept in Redis); a stored response's `SET` is sent as the call settles,
so that both replies come back in that one wait. With several in flight, the waits are spent on
the other requests, as they are on a gateway under load.

`--native` measures native pass-through instead (`responses: native`, goal: within 5% of chat, as
the Messages API's native pass-through): `POST /v1/responses` on a native deployment of hot_path.py's
canned stub (which answers `/v1/responses` as OpenAI does: a `response` of one message, or its 16
events around the same 8 text deltas its chat stream has), against `POST /v1/chat/completions`
relayed to the same stub, each less its own direct floor (the client's and the stub's work), at
concurrency C, plain and streamed, the response stored (in memory, or in Redis with `--redis`).

    .venv/bin/python scripts/bench/responses.py [--requests N] [--rounds R] [--concurrency N]
                                                [--redis redis://127.0.0.1:6379/0] [--burst]
    .venv/bin/python scripts/bench/responses.py --native [--requests 2000] [--concurrency 16] [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import orjson
import yaml
from aiohttp import ClientSession, web
from aiohttp.test_utils import TestServer

from gateway.app import create_app
from gateway.config.loader import parse_config
from gateway.workers import GC_THRESHOLDS, use_uvloop
from tests.support.fake_upstream import Behaviour, FakeUpstream, chat_chunk, chat_deltas

QUESTION = "What is the weather like in Paris today, and should I take an umbrella?"
KEY = "bench-key-0123456789abcdef0123456789"


def paced_chat_stream() -> Behaviour:
    """`fake_upstream.chat_stream`'s chunks (the role, the words, the finish, the usage when asked,
    [DONE]), each written on its own with a turn of the loop between two, as a model's arrive."""

    async def behaviour(request: web.Request, body: dict[str, Any]) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        deltas = chat_deltas(body)
        chunks = [chat_chunk(body, delta) for delta in deltas] + [chat_chunk(body, {}, "stop")]
        if (body.get("stream_options") or {}).get("include_usage"):
            usage = {"prompt_tokens": 7, "completion_tokens": len(deltas), "total_tokens": 7 + len(deltas)}
            chunks.append(
                orjson.dumps(
                    {
                        "id": "chatcmpl-fake",
                        "object": "chat.completion.chunk",
                        "created": 1,
                        "model": body.get("model"),
                        "choices": [],
                        "usage": usage,
                    }
                )
            )
        for chunk in [*chunks, b"[DONE]"]:
            await response.write(b"data: " + chunk + b"\n\n")
            await asyncio.sleep(0)
        return response

    return behaviour


async def serve(config: dict[str, Any]) -> TestServer:
    loaded = parse_config(yaml.safe_dump(config), {"RESPONSES_BENCH_KEY": KEY}, source="bench.yaml")
    server = TestServer(create_app(loaded))
    await server.start_server()
    return server


async def measure(args: argparse.Namespace, stream: bool) -> bool:
    fake = FakeUpstream()
    fake_server = TestServer(fake.app())
    await fake_server.start_server()
    config: dict[str, Any] = {
        "keys": [{"name": "bench", "key": "${RESPONSES_BENCH_KEY}"}],
        "deployments": [{"name": "up", "provider": {"type": "openai", "base_url": str(fake_server.make_url("/v1"))}}],
        "observability": {"access_log": {"enabled": True, "format": "json", "path": os.devnull}},
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
        chat[1]["stream_options"] = {"include_usage": True}  # the bridge asks for it: the same upstream stream
    headers = {"Authorization": f"Bearer {KEY}"}
    gc.collect()  # as `gateway serve` leaves the heap once started (gateway.workers.freeze_startup_heap)
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)
    try:
        async with ClientSession() as http:
            paced = stream and not args.burst

            async def client(path: str, body: dict[str, Any], count: int) -> None:
                for _ in range(count):
                    if paced:
                        fake.script(paced_chat_stream())
                    async with http.post(gateway.make_url(path), json=body, headers=headers) as response:
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
    kind = ("stream (one read)" if args.burst else "stream (chunk by chunk)") if stream else "plain"
    print(
        f"{kind}, stored in {where}, {args.concurrency} in flight: CPU per request, "
        f"chat {chat_s * 1e6:.0f} us, responses {responses_s * 1e6:.0f} us ({ratio:.2f}x, the median of "
        f"{args.rounds} rounds' ratios)"
    )
    passed = ratio <= 1.20
    print(f"  {'PASS' if passed else 'FAIL'}: responses within 20% of chat")
    return passed


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=None, help="per round and side (default 500; native 2000)")
    parser.add_argument("--rounds", type=int, default=None, help="alternated rounds (default 5; native 3)")
    parser.add_argument("--concurrency", type=int, default=None, help="requests in flight (default 1; native 16)")
    parser.add_argument("--redis", default="", help="store in this Redis (default: memory)")
    parser.add_argument("--native", action="store_true", help="native pass-through against the chat relay")
    parser.add_argument("--burst", action="store_true", help="the upstream writes a stream at once (one read)")
    args = parser.parse_args()
    if args.native:
        args.requests = args.requests or 2000
        args.rounds = args.rounds or 3
        args.concurrency = args.concurrency or 16
        from responses_native import native  # hot_path's stub and drivers, with their uvloop

        return 0 if await native(args) else 1
    args.requests = args.requests or 500
    args.rounds = args.rounds or 5
    args.concurrency = args.concurrency or 1
    results = [await measure(args, stream=False), await measure(args, stream=True)]
    return 0 if all(results) else 1


if __name__ == "__main__":
    use_uvloop()  # as `gateway serve` runs (and hot_path.py and messages.py measure)
    sys.exit(asyncio.run(main()))
