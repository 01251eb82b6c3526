"""The Messages API's cost beside chat's on the same upstream (issue 31: within 15%).

The gateway app and a stub OpenAI-compatible upstream (hot_path.py's canned chat answers, JSON or
8 content chunks) run on loopback in this process, configured as hot_path.py's benchmark (a key,
one deployment, metrics and the access log on). An aiohttp client sends N requests at concurrency
C: the stub directly (the floor: client and stub work), then `POST /v1/chat/completions` and
`POST /v1/messages` (the same system and user message, `max_tokens` 16) through the gateway,
alternately, plain and streamed. What the gateway adds is the process CPU through it minus the
floor; the figure is messages over chat, per mode, with PASS under 1.15.

    .venv/bin/python scripts/bench/messages.py [--requests 2000] [--concurrency 16] [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import statistics
import sys
from pathlib import Path

import aiohttp

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from hot_path import CHAT_REQUEST, KEY, StubUpstream, config, drive, measure, serve

from gateway.app import create_app
from gateway.config.loader import parse_config
from gateway.workers import GC_THRESHOLDS, use_uvloop

MESSAGES_REQUEST = (
    b'{"model":"m","max_tokens":16,"system":"You are a helpful assistant.",'
    b'"messages":[{"role":"user","content":"Say hello."}],"temperature":0}'
)
STREAMED = b',"stream":true}'
PAIRS = {  # mode: (chat body, messages body)
    "json": (CHAT_REQUEST, MESSAGES_REQUEST),
    "stream": (CHAT_REQUEST[:-1] + STREAMED, MESSAGES_REQUEST[:-1] + STREAMED),
}
BOUND = 1.15


async def main(args: argparse.Namespace) -> None:
    loop = asyncio.get_running_loop()
    stub = await loop.create_server(StubUpstream, "127.0.0.1", 0)
    upstream_port = stub.sockets[0].getsockname()[1]
    loaded = parse_config(json.dumps(config(upstream_port)), {**os.environ, "HOT_PATH_KEY": KEY}, "messages-bench")
    runner, port = await serve(create_app(loaded))
    gc.collect()
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)
    direct = f"http://127.0.0.1:{upstream_port}/v1/chat/completions"
    gateway = f"http://127.0.0.1:{port}"
    failed = False
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session:
        heading = f"{'mode':7} {'chat µs/req':>12} {'messages µs/req':>16} {'ratio':>6}"
        print(heading + "  (gateway CPU: through it minus direct)")
        for mode, (chat_body, messages_body) in PAIRS.items():
            targets = {
                "chat": (gateway + "/v1/chat/completions", chat_body),
                "messages": (gateway + "/v1/messages", messages_body),
            }
            for url, body in [*targets.values(), (direct, chat_body)]:  # warm every path up
                await drive(url, body, args.requests // 4, args.concurrency, session)
            costs: dict[str, list[float]] = {name: [] for name in targets}
            for _ in range(args.rounds):  # alternated, so that a noisy stretch hits both
                for name, (url, body) in targets.items():
                    floor = await measure(
                        lambda b=chat_body: drive(direct, b, args.requests, args.concurrency, session), None
                    )
                    through = await measure(
                        lambda u=url, b=body: drive(u, b, args.requests, args.concurrency, session), None
                    )
                    costs[name].append((through - floor) / args.requests * 1e6)
            chat, messages = statistics.median(costs["chat"]), statistics.median(costs["messages"])
            ratio = messages / chat
            failed |= ratio > BOUND
            verdict = "PASS" if ratio <= BOUND else "FAIL"
            print(f"{mode:7} {chat:12.1f} {messages:16.1f} {ratio:6.2f}  {verdict} (bound {BOUND})")
    await runner.cleanup()
    stub.close()
    if failed:
        raise SystemExit(1)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=3)
    arguments = parser.parse_args()
    use_uvloop()
    asyncio.run(main(arguments))
