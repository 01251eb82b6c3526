"""Latency a client sees when one of two upstreams of a group is down, before and after the breaker opens.

Runs `gateway serve` (one worker) in front of a group of two deployments sharing an alias: `up`
(a loopback OpenAI-style upstream) and `down` (refusing connections, or accepting them and never
answering). Sends requests one at a time and prints p50/p99 per phase:
  both-up        baseline, both deployments healthy (both point at the live upstream)
  down/opening   the first requests after one upstream went down, until its breaker opens
  down/open      once the breaker is open
Usage: .venv/bin/python scripts/bench/one_upstream_down.py [--requests 400] [--mode refused|stalled]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import aiohttp
import orjson
import yaml
from aiohttp import web

GATEWAY = Path(sys.executable).with_name("gateway")
ANSWER = orjson.dumps(
    {
        "id": "cmpl-1",
        "object": "text_completion",
        "created": 1,
        "model": "m",
        "choices": [{"text": "hello", "index": 0, "logprobs": None, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
    }
)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


async def start_upstream(port: int) -> web.AppRunner:
    async def completions(request: web.Request) -> web.Response:
        await request.read()
        return web.Response(body=ANSWER, content_type="application/json")

    app = web.Application()
    app.router.add_post("/v1/completions", completions)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    return runner


async def start_black_hole(port: int) -> asyncio.Server:
    """Accepts connections and never answers: an upstream that hangs."""

    async def hold(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read()  # until the gateway gives up and closes

    return await asyncio.start_server(hold, "127.0.0.1", port)


def config(gateway_port: int, up: str, down: str) -> dict[str, object]:
    def member(name: str, url: str) -> dict[str, object]:
        provider = {"type": "openai", "base_url": url}
        return {"name": name, "aliases": ["pair"], "provider": provider, "timeout_s": 1.0}

    return {
        "server": {"port": gateway_port},
        "routing": {"reload": {"watch": False}, "breaker": {"consecutive_failures": 3, "cooldown_s": 600}},
        "deployments": [member("up", up), member("down", down)],
    }


async def measure(session: aiohttp.ClientSession, url: str, count: int) -> list[float]:
    latencies = []
    for _ in range(count):
        started = time.perf_counter()
        async with session.post(url, json={"model": "pair", "prompt": "hi", "max_tokens": 1}) as response:
            await response.read()
            assert response.status == 200, response.status
        latencies.append((time.perf_counter() - started) * 1000)
    return latencies


def summary(name: str, latencies: list[float]) -> str:
    ordered = sorted(latencies)
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    return f"| {name} | {len(ordered)} | {statistics.median(ordered):.2f} | {p99:.2f} | {max(ordered):.2f} |"


async def run_gateway(cfg: dict[str, object], port: int) -> subprocess.Popen[bytes]:
    path = Path(tempfile.mkdtemp()) / "config.yaml"
    path.write_text(yaml.safe_dump(cfg))
    process = subprocess.Popen(  # noqa: ASYNC220, S603 - our own console script, started once
        [str(GATEWAY), "serve", "-c", str(path), "--log-level", "ERROR"], env={**os.environ}
    )
    for _ in range(200):
        try:
            _, writer = await asyncio.open_connection("127.0.0.1", port)
        except OSError:
            await asyncio.sleep(0.05)
            continue
        writer.close()
        return process
    process.kill()
    raise SystemExit("the gateway did not start")


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=400)
    parser.add_argument("--mode", choices=["refused", "stalled"], default="refused")
    args = parser.parse_args()
    up_port, down_port, gateway_port = free_port(), free_port(), free_port()
    upstream = await start_upstream(up_port)
    up_url = f"http://127.0.0.1:{up_port}/v1"
    down_url = f"http://127.0.0.1:{down_port}/v1"
    url = f"http://127.0.0.1:{gateway_port}/v1/completions"
    rows = []
    async with aiohttp.ClientSession() as session:
        baseline = await run_gateway(config(gateway_port, up_url, up_url), gateway_port)
        try:
            await measure(session, url, 50)  # warm-up
            rows.append(summary("both up", await measure(session, url, args.requests)))
        finally:
            baseline.terminate()
            baseline.wait()
        black_hole = await start_black_hole(down_port) if args.mode == "stalled" else None
        degraded = await run_gateway(config(gateway_port, up_url, down_url), gateway_port)
        try:
            rows.append(summary(f"one {args.mode}, breaker opening (first 20)", await measure(session, url, 20)))
            rows.append(summary(f"one {args.mode}, breaker open", await measure(session, url, args.requests)))
        finally:
            degraded.terminate()
            degraded.wait()
            if black_hole is not None:
                black_hole.close()
    await upstream.cleanup()
    print("| phase | requests | p50 ms | p99 ms | max ms |\n|---|---|---|---|---|")
    print("\n".join(rows))


if __name__ == "__main__":
    asyncio.run(main())
