"""The Messages API's cost beside chat's on the same upstream (issue 31: within 15%).

The gateway app and a stub OpenAI-compatible upstream (hot_path.py's canned chat answers, JSON or
8 content chunks) run on loopback in this process, configured as hot_path.py's benchmark (a key,
one deployment, metrics and the access log on). An aiohttp client sends N requests at concurrency
C: the stub directly (the floor: client and stub work), then `POST /v1/chat/completions` and
`POST /v1/messages` (the same system and user message, `max_tokens` 16) through the gateway,
alternately, plain and streamed. What the gateway adds is the process CPU through it minus the
floor; the figure is messages over chat, per mode, with PASS under 1.15.

`--native` measures native pass-through instead (issue 31: within 5%): `POST /v1/messages` on the
`anthropic` deployment (the same stub, which answers `/v1/messages` as Anthropic does: a message of
one text block, or its 14 stream events around the same 8 text deltas), against
`POST /v1/chat/completions` on that deployment (translated to a Messages call: the same upstream,
PASS under 1.05) and relayed to the OpenAI-compatible deployment (each API relayed to an upstream
that speaks it), each less its own direct floor.

    .venv/bin/python scripts/bench/messages.py [--native] [--requests 2000] [--concurrency 16] [--rounds 3]
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

from hot_path import (
    CHAT_REQUEST,
    KEY,
    MESSAGES_REQUEST,
    StubUpstream,
    config,
    drive,
    measure,
    serve,
)

from gateway.app import create_app
from gateway.config.loader import parse_config
from gateway.workers import GC_THRESHOLDS, use_uvloop

STREAMED = b',"stream":true}'
PAIRS = {  # mode: (chat body, messages body)
    "json": (CHAT_REQUEST, MESSAGES_REQUEST),
    "stream": (CHAT_REQUEST[:-1] + STREAMED, MESSAGES_REQUEST[:-1] + STREAMED),
}
BOUND = 1.15
NATIVE_BOUND = 1.05


async def main(args: argparse.Namespace) -> None:
    loop = asyncio.get_running_loop()
    stub = await loop.create_server(StubUpstream, "127.0.0.1", 0)  # it answers /v1/messages as Anthropic
    upstream_port = stub.sockets[0].getsockname()[1]
    settings = config(upstream_port)  # with its `anthropic` deployment, `claude`, on the same stub
    env = {**os.environ, "HOT_PATH_KEY": KEY, "HOT_PATH_ANTHROPIC_KEY": "sk-ant-bench"}
    loaded = parse_config(json.dumps(settings), env, "messages-bench")
    runner, port = await serve(create_app(loaded))
    gc.collect()
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)
    direct = f"http://127.0.0.1:{upstream_port}/v1/chat/completions"
    direct_anthropic = f"http://127.0.0.1:{upstream_port}/v1/messages"
    gateway = f"http://127.0.0.1:{port}"
    failed = False
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session:
        if args.native:
            failed = await native(session, gateway, direct, direct_anthropic, args)
        else:
            heading = f"{'mode':7} {'chat µs/req':>12} {'messages µs/req':>16} {'ratio':>6}"
            print(heading + "  (gateway CPU: through it minus direct)")
            for mode, (chat_body, messages_body) in PAIRS.items():
                targets = {
                    "chat": (gateway + "/v1/chat/completions", chat_body, direct, chat_body),
                    "messages": (gateway + "/v1/messages", messages_body, direct, chat_body),
                }
                costs = await compare(session, targets, args)
                chat, messages = costs["chat"], costs["messages"]
                ratio = messages / chat
                failed |= ratio > BOUND
                verdict = "PASS" if ratio <= BOUND else "FAIL"
                print(f"{mode:7} {chat:12.1f} {messages:16.1f} {ratio:6.2f}  {verdict} (bound {BOUND})")
    await runner.cleanup()
    stub.close()
    if failed:
        raise SystemExit(1)


Target = tuple[str, bytes, str, bytes]  # (url through the gateway, its body, its floor's direct url and body)


async def compare(
    session: aiohttp.ClientSession, targets: dict[str, Target], args: argparse.Namespace
) -> dict[str, float]:
    """Each target's median gateway CPU per request (µs): through the gateway less its direct floor."""
    for url, body, floor_url, floor_body in targets.values():  # warm every path up
        await drive(url, body, args.requests // 4, args.concurrency, session)
        await drive(floor_url, floor_body, args.requests // 4, args.concurrency, session)
    costs: dict[str, list[float]] = {name: [] for name in targets}
    for _ in range(args.rounds):  # alternated, so that a noisy stretch hits every target
        for name, (url, body, floor_url, floor_body) in targets.items():
            floor = await measure(
                lambda u=floor_url, b=floor_body: drive(u, b, args.requests, args.concurrency, session), None
            )
            through = await measure(lambda u=url, b=body: drive(u, b, args.requests, args.concurrency, session), None)
            costs[name].append((through - floor) / args.requests * 1e6)
    return {name: statistics.median(values) for name, values in costs.items()}


async def native(
    session: aiohttp.ClientSession, gateway: str, direct: str, direct_anthropic: str, args: argparse.Namespace
) -> bool:
    """Native pass-through (`/v1/messages` on the anthropic deployment) against `/v1/chat/completions`
    on the same Anthropic upstream (the issue's comparison: chat translated to a Messages call), and
    against the chat relay on the OpenAI-compatible stub (one relay against the other)."""
    print(
        f"{'mode':7} {'chat→anthropic':>15} {'chat relay':>11} {'native':>8}"
        f" {'÷chat→anthropic':>16} {'÷chat relay':>12}"
    )
    print("        (gateway CPU µs/req: through it minus direct to the same stub)")
    failed = False
    for mode, (chat_body, messages_body) in PAIRS.items():
        targets = {
            "translated": (
                gateway + "/v1/chat/completions",
                chat_body.replace(b'"m"', b'"claude"', 1),
                direct_anthropic,
                messages_body,
            ),
            "relay": (gateway + "/v1/chat/completions", chat_body, direct, chat_body),
            "native": (
                gateway + "/v1/messages",
                messages_body.replace(b'"m"', b'"claude"', 1),
                direct_anthropic,
                messages_body,
            ),
        }
        costs = await compare(session, targets, args)
        same, relay = costs["native"] / costs["translated"], costs["native"] / costs["relay"]
        failed |= same > NATIVE_BOUND
        verdict = "PASS" if same <= NATIVE_BOUND else "FAIL"
        print(
            f"{mode:7} {costs['translated']:15.1f} {costs['relay']:11.1f} {costs['native']:8.1f} {same:16.2f} "
            f"{relay:12.2f}  {verdict} (bound {NATIVE_BOUND} against chat on the same upstream)"
        )
    return failed


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--native", action="store_true", help="native pass-through (anthropic) against the chat relay")
    arguments = parser.parse_args()
    use_uvloop()
    asyncio.run(main(arguments))
