"""Minutes of mixed traffic with faults against `gateway serve`, then whether anything grew.

Runs the gateway (one worker, a real Redis for limits, budgets, breakers and the cache) in front of
the built-in mock provider: a healthy deployment, a flaky one (a share of 503s), a slow one that
times out, and a streaming one. Concurrent clients send plain and streamed requests, cache hits,
malformed bodies, unknown keys, rate-limited and budget-limited keys, and clients that hang up
mid-stream or right after `[DONE]`. Prints RSS and open file descriptors of the gateway and the
number of Redis keys under its prefix at the start (after a warm-up) and at the end; flat is good.
Not part of the test suite (it runs for minutes).

Usage: .venv/bin/python scripts/soak.py [--minutes 3] [--concurrency 32] [--redis-url redis://127.0.0.1:6379/0]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import secrets
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import aiohttp
import redis.asyncio as aioredis
import yaml

GATEWAY = Path(sys.executable).with_name("gateway")
KEYS = {name: "sk-soak-" + secrets.token_hex(16) for name in ("steady", "limited", "poor")}


def config(port: int, redis_url: str, prefix: str) -> dict[str, object]:
    mock = {"type": "mock", "tokens_per_s": 400}
    return {
        "server": {"port": port},
        "redis": {"url": redis_url, "prefix": prefix},
        "keys": [
            {"name": "steady", "key": "${SOAK_STEADY}"},
            {"name": "limited", "key": "${SOAK_LIMITED}", "limits": {"rpm": 60, "concurrent": 2}},
            {"name": "poor", "key": "${SOAK_POOR}", "budget": {"tokens": 2000, "period": "1h"}},
        ],
        "deployments": [
            {"name": "healthy", "provider": mock, "policies": ["cached"]},
            {"name": "flaky", "provider": {**mock, "error_rate": 0.3}, "retries": 1},
            {"name": "slow", "provider": {**mock, "latency_ms": 5000}, "timeout_s": 0.2, "retries": 0},
        ],
        "routing": {"backoff": {"initial_s": 0.01, "max_s": 0.05}},
        "policies": {"cached": {"cache": {"ttl_s": 10}}},  # entries expire within the run: a plateau
        "observability": {"access_log": {"enabled": False}},
    }


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def process_figures(pid: int) -> tuple[int, int]:
    """(RSS in KiB, open file descriptors) of a process, from /proc."""
    status = Path(f"/proc/{pid}/status").read_text()
    rss = int(next(line.split()[1] for line in status.splitlines() if line.startswith("VmRSS:")))
    return rss, len(os.listdir(f"/proc/{pid}/fd"))


async def redis_keys(redis_url: str, prefix: str) -> int:
    client = aioredis.from_url(redis_url)
    try:
        return sum([1 async for _ in client.scan_iter(match=f"{prefix}*", count=1000)])
    finally:
        await client.aclose()


async def one_request(
    http: aiohttp.ClientSession, guesser: aiohttp.ClientSession, url: str, rng: random.Random, outcomes: Counter[str]
) -> None:
    kind = rng.choice(["plain", "stream", "hit", "flaky", "slow", "bad", "unknown", "limited", "poor", "leave", "done"])
    if kind == "unknown":  # from an address of its own: the gateway throttles failed keys per address
        http = guesser
    key = {"limited": KEYS["limited"], "poor": KEYS["poor"], "unknown": "sk-nobody"}.get(kind, KEYS["steady"])
    model = {"flaky": "flaky", "slow": "slow"}.get(kind, "healthy")
    body: dict[str, object] = {"model": model, "prompt": f"soak {rng.randrange(10**6)}", "max_tokens": 24}
    if kind == "hit":
        body["prompt"] = "the same prompt every time"
    if kind in {"stream", "leave", "done"}:
        body["stream"] = True
    headers = {"Authorization": f"Bearer {key}"}
    try:
        if kind == "bad":
            malformed = b'{"model": "healthy", "prompt": [1, "x"]'
            async with http.post(
                url, data=malformed, headers={**headers, "Content-Type": "application/json"}
            ) as response:
                outcomes[f"{kind} {response.status}"] += 1
                await response.read()
            return
        async with http.post(url, json=body, headers=headers) as response:
            if kind == "leave":  # hang up after the first event
                await response.content.readline()
                response.close()
            elif kind == "done":  # hang up as soon as [DONE] arrives
                async for line in response.content:
                    if line.startswith(b"data: [DONE]"):
                        break
                response.close()
            else:
                await response.read()
            outcomes[f"{kind} {response.status}"] += 1
    except (TimeoutError, aiohttp.ClientError) as exc:
        outcomes[f"{kind} {type(exc).__name__}"] += 1


async def traffic(url: str, seconds: float, concurrency: int, outcomes: Counter[str]) -> None:
    deadline = time.monotonic() + seconds
    timeout = aiohttp.ClientTimeout(total=30)
    guessing = aiohttp.TCPConnector(local_addr=("127.0.0.2", 0))
    async with (
        aiohttp.ClientSession(timeout=timeout) as http,
        aiohttp.ClientSession(timeout=timeout, connector=guessing) as guesser,
    ):

        async def client(seed: int) -> None:
            rng = random.Random(seed)  # noqa: S311 - traffic mix, not cryptography
            while time.monotonic() < deadline:
                await one_request(http, guesser, url, rng, outcomes)

        await asyncio.gather(*(client(seed) for seed in range(concurrency)))


async def until_listening(port: int) -> None:
    async with aiohttp.ClientSession() as http:
        for _ in range(600):
            try:
                async with http.get(f"http://127.0.0.1:{port}/health") as response:
                    if response.status == 200:
                        return
            except aiohttp.ClientError:
                await asyncio.sleep(0.1)
    raise SystemExit("the gateway did not start")


async def sample(pid: int, redis_url: str, prefix: str, every_s: float = 30.0) -> None:
    """A line every `every_s` while the traffic runs: a leak climbs, a steady state wobbles."""
    began = time.monotonic()
    while True:
        await asyncio.sleep(every_s)
        rss, fds = process_figures(pid)
        keys = await redis_keys(redis_url, prefix)
        print(f"  at {time.monotonic() - began:4.0f} s: RSS {rss} KiB, {fds} FDs, {keys} Redis keys", flush=True)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=3.0)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--redis-url", default=os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0"))
    args = parser.parse_args()
    port, prefix = free_port(), f"soak-{secrets.token_hex(4)}:"
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "soak.yaml"
        path.write_text(yaml.safe_dump(config(port, args.redis_url, prefix)))
        env = {**os.environ, "SOAK_STEADY": KEYS["steady"], "SOAK_LIMITED": KEYS["limited"], "SOAK_POOR": KEYS["poor"]}
        command = [str(GATEWAY), "serve", "-c", str(path), "--log-level", "ERROR"]
        gateway = subprocess.Popen(command, env=env)  # noqa: S603, ASYNC220 - our own console script, once
        try:
            await until_listening(port)
            url = f"http://127.0.0.1:{port}/v1/completions"
            outcomes: Counter[str] = Counter()
            # Warm-up longer than the cache's TTL: start-up allocations, pools, caches at their steady state.
            await traffic(url, 15, args.concurrency, outcomes)
            start = (*process_figures(gateway.pid), await redis_keys(args.redis_url, prefix))
            began = time.monotonic()
            sampling = asyncio.create_task(sample(gateway.pid, args.redis_url, prefix))
            await traffic(url, args.minutes * 60, args.concurrency, outcomes)
            sampling.cancel()
            await asyncio.sleep(2)  # post-request work finishes
            end = (*process_figures(gateway.pid), await redis_keys(args.redis_url, prefix))
            total = sum(outcomes.values())
            print(f"{total} requests in {time.monotonic() - began:.0f} s at concurrency {args.concurrency}")
            for outcome, count in sorted(outcomes.items()):
                print(f"  {outcome:32} {count}")
            print(f"{'':14}{'start':>10}{'end':>10}")
            for label, before, after in zip(("RSS KiB", "open FDs", "Redis keys"), start, end, strict=True):
                print(f"{label:14}{before:>10}{after:>10}")
        finally:
            gateway.send_signal(signal.SIGTERM)
            gateway.wait(timeout=60)
            client = aioredis.from_url(args.redis_url)
            keys = [key async for key in client.scan_iter(match=f"{prefix}*", count=1000)]
            if keys:
                await client.delete(*keys)
            await client.aclose()


if __name__ == "__main__":
    asyncio.run(main())
