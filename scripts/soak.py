"""Minutes of mixed traffic with faults against `gateway serve`, then whether anything grew.

Runs the gateway (one worker, a real Redis for limits, budgets, breakers and the cache) in front of
the built-in mock provider: a healthy deployment with a cache policy (TTL 10 s), a flaky one (a
share of 503s) and a slow one that times out. Concurrent clients send every kind in `KINDS`:
completions and chat, JSON and streamed, cache misses under ever new keys, hits, a pool of keys
that expire and come back, streams shared by identical requests, malformed bodies, unknown keys,
rate-limited and budget-limited keys, and clients that hang up mid-stream or right after `[DONE]`.
After a warm-up longer than the TTL it samples the gateway's RSS, open file descriptors and the
Redis keys under its prefix, and reports the growth: in all, per request, and as fitted slopes
over the run and over its second half (flat is good). `--heap` adds the Python heap as the gateway
sees it (allocated blocks, what the cyclic collector frees, live objects by type); `--tracemalloc N`
adds the allocations that grew, by traceback. Not part of the test suite (it runs for minutes).

Usage: .venv/bin/python scripts/soak.py [--minutes 3] [--concurrency 32] [--heap] [--no-cache]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import secrets
import signal
import socket
import subprocess
import sys
import tempfile
import time
import tracemalloc
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import redis.asyncio as aioredis
import yaml

GATEWAY = Path(sys.executable).with_name("gateway")
KEYS = {name: "sk-soak-" + secrets.token_hex(16) for name in ("steady", "limited", "poor")}


def config(port: int, redis_url: str, prefix: str, *, cache: bool = True) -> dict[str, object]:
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
            {"name": "healthy", "provider": mock, "policies": ["cached"] if cache else []},
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


# Every kind of request the soak sends, drawn at random with equal odds.
KINDS = (
    "plain",  # a cache miss under a new key each time (a completion, JSON)
    "stream",  # the same, streamed
    "hit",  # one prompt every time: a cache hit (or, when its entry just expired, a coalesced miss)
    "hit-stream",  # a hit replayed as a stream
    "pool",  # one of a few thousand prompts: hits and misses as the entries expire
    "shared",  # a prompt of the current second, streamed: concurrent clients share one upstream stream
    "refresh",  # Cache-Control: no-cache, with a namespace of its own
    "chat",  # /v1/chat/completions, a miss
    "chat-stream",
    "chat-hit",
    "chat-leave",  # a chat stream its client leaves after the first event
    "flaky",  # a deployment failing 30% of its calls (retried, then the breaker)
    "slow",  # a deployment that times out (then its breaker opens)
    "bad",  # a malformed body
    "unknown",  # an unknown API key
    "limited",  # a key with a rate and concurrency limit in Redis
    "poor",  # a key with a token budget in Redis that runs out
    "leave",  # a stream its client leaves after the first event
    "done",  # a stream its client leaves as soon as [DONE] arrives
    "shared-leave",  # a shared stream its client leaves after the first event
)
STREAMED = {"stream", "hit-stream", "shared", "chat-stream", "chat-leave", "leave", "done", "shared-leave"}
LEAVE_EARLY = {"leave", "chat-leave", "shared-leave"}


def request_for(kind: str, rng: random.Random) -> tuple[str, dict[str, object], dict[str, str]]:
    """(path, body, extra headers) of one request of `kind`."""
    model = {"flaky": "flaky", "slow": "slow"}.get(kind, "healthy")
    prompt = f"soak {rng.randrange(10**9)}"  # a new cache key
    if kind in {"hit", "hit-stream", "chat-hit"}:
        prompt = "the same prompt every time"
    elif kind == "pool":
        prompt = f"pooled {rng.randrange(3000)}"
    elif kind in {"shared", "shared-leave"}:
        prompt = f"this second {int(time.time())}"
    headers = {}
    if kind == "refresh":
        headers = {"Cache-Control": "no-cache", "x-gateway-cache-namespace": f"ns{rng.randrange(50)}"}
    body: dict[str, object] = {"model": model, "max_tokens": 24}
    if kind.startswith("chat"):
        body["messages"] = [{"role": "user", "content": prompt}]
        path = "/v1/chat/completions"
    else:
        body["prompt"] = prompt
        path = "/v1/completions"
    if kind in STREAMED:
        body["stream"] = True
        if rng.random() < 0.5:
            body["stream_options"] = {"include_usage": True}
    return path, body, headers


async def one_request(
    http: aiohttp.ClientSession, guesser: aiohttp.ClientSession, base: str, rng: random.Random, outcomes: Counter[str]
) -> None:
    kind = rng.choice(KINDS)
    if kind == "unknown":  # from an address of its own: the gateway throttles failed keys per address
        http = guesser
    key = {"limited": KEYS["limited"], "poor": KEYS["poor"], "unknown": "sk-nobody"}.get(kind, KEYS["steady"])
    path, body, extra = request_for(kind, rng)
    headers = {"Authorization": f"Bearer {key}", **extra}
    try:
        if kind == "bad":
            malformed = b'{"model": "healthy", "prompt": [1, "x"]'
            async with http.post(
                base + path, data=malformed, headers={**headers, "Content-Type": "application/json"}
            ) as response:
                outcomes[f"{kind} {response.status}"] += 1
                await response.read()
            return
        async with http.post(base + path, json=body, headers=headers) as response:
            if kind in LEAVE_EARLY:  # hang up after the first event
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


async def traffic(base: str, seconds: float, concurrency: int, outcomes: Counter[str]) -> None:
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
                await one_request(http, guesser, base, rng, outcomes)

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


@dataclass
class Sample:
    at_s: float  # since the end of the warm-up
    requests: int  # answered since the end of the warm-up
    rss_kib: int
    fds: int
    redis_keys: int


class Probe:
    """The gateway's figures over the run: RSS, FDs and Redis keys from outside; with `inspect`, the
    Python heap from inside (see `INSPECTING`)."""

    def __init__(self, pid: int, redis_url: str, prefix: str, folder: Path, outcomes: Counter[str]) -> None:
        self.pid, self.redis_url, self.prefix, self.folder, self.outcomes = pid, redis_url, prefix, folder, outcomes
        self.samples: list[Sample] = []
        self.heaps: list[dict[str, Any]] = []
        self.traces: list[tracemalloc.Snapshot] = []
        self._began = time.monotonic()
        self._base = 0
        self._asked = 0

    def start(self) -> None:
        """The warm-up is over: times and request counts from now."""
        self._began, self._base = time.monotonic(), sum(self.outcomes.values())

    async def sample(self) -> Sample:
        rss, fds = process_figures(self.pid)
        keys = await redis_keys(self.redis_url, self.prefix)
        taken = Sample(time.monotonic() - self._began, sum(self.outcomes.values()) - self._base, rss, fds, keys)
        self.samples.append(taken)
        return taken

    async def heap(self, *, traced: bool) -> None:
        """Ask the gateway for its heap figures (SIGUSR2), and wait for them."""
        self._asked += 1
        path = self.folder / f"heap.{self._asked}.json"
        os.kill(self.pid, signal.SIGUSR2)
        for _ in range(1200):
            await asyncio.sleep(0.5)
            if path.exists():
                self.heaps.append(json.loads(path.read_text()))
                if traced:
                    self.traces.append(tracemalloc.Snapshot.load(str(self.folder / f"heap.{self._asked}.trace")))
                return
        raise SystemExit("the gateway gave no heap figures")


async def watch(probe: Probe, every_s: float) -> None:
    """A line every `every_s` while the traffic runs: a leak climbs, a steady state wobbles."""
    while True:
        await asyncio.sleep(every_s)
        taken = await probe.sample()
        print(
            f"  at {taken.at_s:5.0f} s: {taken.requests:>9} requests, RSS {taken.rss_kib} KiB, "
            f"{taken.fds} FDs, {taken.redis_keys} Redis keys",
            flush=True,
        )


def slope(xs: list[float], ys: list[float]) -> float:
    """The least-squares slope of ys over xs (0 with fewer than two distinct xs)."""
    mean_x, mean_y = sum(xs) / len(xs), sum(ys) / len(ys)
    spread = sum((x - mean_x) ** 2 for x in xs)
    return 0.0 if not spread else sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys, strict=True)) / spread


def report_growth(samples: list[Sample]) -> None:
    """RSS growth after the warm-up: in all, per request, and the fitted slopes, over the whole run and
    over its second half (a leak keeps its slope; a cache filling up to its steady state levels off)."""
    first, last = samples[0], samples[-1]
    grown = (last.rss_kib - first.rss_kib) * 1024
    served = max(last.requests - first.requests, 1)
    print(f"RSS after warm-up: {first.rss_kib / 1024:.1f} MB -> {last.rss_kib / 1024:.1f} MB ({grown / 2**20:+.2f} MB)")
    print(f"  {grown / served:+.1f} bytes per request over {served} requests")
    for label, part in (("whole run", samples), ("second half", samples[len(samples) // 2 :])):
        if len(part) < 3:
            continue
        rss = [s.rss_kib * 1024 for s in part]
        per_minute = slope([s.at_s / 60 for s in part], rss) / 2**20
        per_request = slope([float(s.requests) for s in part], rss)
        print(f"  fitted slope, {label}: {per_minute:+.3f} MB/min, {per_request:+.2f} bytes/request")


def report_heap(before: dict[str, Any], after: dict[str, Any], served: int, top: int = 12) -> None:
    """The Python heap at the end of the warm-up and at the end. `garbage`: what the cyclic collector
    found, by type (reference cycles that kept request objects alive until it ran)."""
    per_request = max(served, 1)
    for name, label in (
        ("blocks_uncollected", "Python blocks allocated, before a full collection"),
        ("collected", "   objects a full collection freed"),
        ("blocks", "   blocks allocated after it"),
        ("arenas", "pymalloc arenas (1 MiB each)"),
        ("malloc_in_use", "malloc in use (glibc), bytes"),
        ("malloc_free", "malloc freed but kept, bytes"),
    ):
        if name in after:
            change = after[name] - before[name]
            print(f"{label:52} {before[name]:>12} -> {after[name]:>12} ({change / per_request:+.3f} a request)")
    grown = Counter(after["types"])
    grown.subtract(before["types"])
    listed = ", ".join(f"{name} {count:+}" for name, count in grown.most_common(top))
    print(f"live objects, the types whose count grew most: {listed}")
    listed = ", ".join(f"{name} {count}" for name, count in after["garbage"][:top])
    print(f"cyclic garbage at the end, by type: {listed}")


# The gateway runs in this bootstrap (`python -c`), which answers two signals: SIGUSR1 starts
# tracing allocations (only then: under tracing, start-up's imports take minutes); SIGUSR2 writes
# the heap's figures beside SOAK_HEAP, numbered: pymalloc's allocated blocks and arenas, glibc's
# malloc figures, what a full collection frees (by type) and the live objects by type, and a
# tracemalloc snapshot when tracing.
INSPECTING = """
import collections, ctypes, gc, json, os, signal, sys, tempfile, tracemalloc
asked = 0
class MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost")]
def malloc_figures():
    try:
        mallinfo2 = ctypes.CDLL(None).mallinfo2
    except (OSError, AttributeError):  # not glibc
        return {}
    mallinfo2.restype = MallInfo2
    info = mallinfo2()
    return {"malloc_in_use": info.uordblks + info.hblkhd, "malloc_free": info.fordblks}
def pymalloc_arenas():
    with tempfile.TemporaryFile() as out:  # sys._debugmallocstats writes to the C stderr
        saved = os.dup(2)
        os.dup2(out.fileno(), 2)
        try:
            sys._debugmallocstats()
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        out.seek(0)
        text = out.read().decode()
    for line in text.splitlines():
        if line.startswith("# arenas allocated current"):
            return {"arenas": int(line.split("=")[1].replace(",", ""))}
    return {}
def label(o):
    name = type(o).__qualname__
    try:
        if name == "frame":
            return name + ":" + o.f_code.co_qualname
        if name in ("function", "coroutine", "async_generator"):
            return name + ":" + o.__qualname__
        if name == "method":
            return name + ":" + o.__func__.__qualname__
        if name == "cell":
            return name + ":" + type(o.cell_contents).__qualname__
    except (AttributeError, ValueError):  # an empty cell
        pass
    return name
def trace(signum, frame):
    tracemalloc.start(int(os.environ["SOAK_FRAMES"]))
def heap(signum, frame):
    global asked
    asked += 1
    path = f"{os.environ['SOAK_HEAP']}.{asked}"
    if tracemalloc.is_tracing():
        tracemalloc.take_snapshot().dump(path + ".trace")
    figures = {"blocks_uncollected": sys.getallocatedblocks()}
    gc.set_debug(gc.DEBUG_SAVEALL)
    figures["collected"] = gc.collect()
    figures["garbage"] = collections.Counter(label(o) for o in gc.garbage).most_common(40)
    gc.garbage.clear()
    gc.set_debug(0)
    gc.collect()  # what gc.garbage held
    figures["types"] = collections.Counter(type(o).__qualname__ for o in gc.get_objects())
    figures |= {"blocks": sys.getallocatedblocks(), **malloc_figures(), **pymalloc_arenas()}
    with open(path + ".part", "w") as file:
        json.dump(figures, file)
    os.rename(path + ".part", path + ".json")
signal.signal(signal.SIGUSR1, trace)
signal.signal(signal.SIGUSR2, heap)
from gateway.cli import main
sys.exit(main(sys.argv[1:]))
"""


def report_traces(before: tracemalloc.Snapshot, after: tracemalloc.Snapshot, top: int = 15) -> None:
    ignore = [
        tracemalloc.Filter(False, tracemalloc.__file__),
        tracemalloc.Filter(False, "<frozen importlib._bootstrap*"),
    ]
    before, after = before.filter_traces(ignore), after.filter_traces(ignore)
    differences = after.compare_to(before, "traceback")
    print(f"tracemalloc, the {top} tracebacks that grew most after the warm-up:")
    for difference in differences[:top]:
        grew, now = difference.size_diff / 1024, difference.size / 1024
        print(f"  {grew:+.1f} KiB in {difference.count_diff:+} blocks (now {now:.1f} KiB)")
        for line in difference.traceback.format(limit=8, most_recent_first=True):
            print(f"      {line}")


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=3.0)
    parser.add_argument("--warmup-s", type=float, default=30.0, help="traffic before the first figures (> the TTL)")
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--sample-s", type=float, default=30.0, help="seconds between RSS samples")
    parser.add_argument("--no-cache", action="store_true", help="the same traffic, without the cache policy")
    parser.add_argument("--heap", action="store_true", help="the Python heap at start and end: blocks, objects by type")
    parser.add_argument(
        "--tracemalloc",
        type=int,
        default=0,
        metavar="FRAMES",
        help="trace allocations after the warm-up (slow; RSS counts the traces too): print the growth by traceback",
    )
    parser.add_argument("--redis-url", default=os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0"))
    args = parser.parse_args()
    inspect = args.heap or bool(args.tracemalloc)
    port, prefix = free_port(), f"soak-{secrets.token_hex(4)}:"
    with tempfile.TemporaryDirectory() as name:
        folder = Path(name)
        (folder / "soak.yaml").write_text(yaml.safe_dump(config(port, args.redis_url, prefix, cache=not args.no_cache)))
        env = {**os.environ, "SOAK_STEADY": KEYS["steady"], "SOAK_LIMITED": KEYS["limited"], "SOAK_POOR": KEYS["poor"]}
        command = [str(GATEWAY), "serve", "-c", str(folder / "soak.yaml"), "--log-level", "ERROR"]
        if inspect:
            env |= {"SOAK_FRAMES": str(args.tracemalloc), "SOAK_HEAP": str(folder / "heap")}
            command = [sys.executable, "-c", INSPECTING, *command[1:]]
        gateway = subprocess.Popen(command, env=env)  # noqa: S603, ASYNC220 - our own console script, once
        try:
            await until_listening(port)
            outcomes: Counter[str] = Counter()
            probe = Probe(gateway.pid, args.redis_url, prefix, folder, outcomes)
            base = f"http://127.0.0.1:{port}"
            # One stretch of traffic; the figures start after the warm-up, longer than the cache's TTL:
            # start-up allocations, pools and caches at their steady state.
            running = asyncio.create_task(traffic(base, args.warmup_s + args.minutes * 60, args.concurrency, outcomes))
            await asyncio.sleep(args.warmup_s)
            if args.tracemalloc:  # traced from now; the first snapshot once traced entries live and die
                os.kill(gateway.pid, signal.SIGUSR1)
                await asyncio.sleep(min(args.warmup_s, args.minutes * 30))
            if inspect:
                await probe.heap(traced=bool(args.tracemalloc))
            probe.start()
            await probe.sample()
            watching = asyncio.create_task(watch(probe, args.sample_s))
            await running
            watching.cancel()
            last = await probe.sample()  # in the traffic's last moments, like the first
            if inspect:
                await probe.heap(traced=bool(args.tracemalloc))
            first = probe.samples[0]
            print(f"{last.requests} requests in {last.at_s:.0f} s at concurrency {args.concurrency}", end=" ")
            print(f"(after a {args.warmup_s:.0f} s warm-up)")
            for outcome, count in sorted(outcomes.items()):
                print(f"  {outcome:32} {count}")
            print(f"{'':14}{'start':>10}{'end':>10}")
            for label, before, after in (
                ("RSS KiB", first.rss_kib, last.rss_kib),
                ("open FDs", first.fds, last.fds),
                ("Redis keys", first.redis_keys, last.redis_keys),
            ):
                print(f"{label:14}{before:>10}{after:>10}")
            report_growth(probe.samples)
            if inspect:
                report_heap(probe.heaps[0], probe.heaps[-1], last.requests)
            if args.tracemalloc:
                report_traces(probe.traces[0], probe.traces[-1])
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
