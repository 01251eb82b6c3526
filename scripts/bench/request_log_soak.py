"""The request log under the issue's two long runs (not run in CI; figures in BENCHMARKS.md).

    .venv/bin/python scripts/bench/request_log_soak.py replicas [--requests 50000] [--concurrency 32]
    .venv/bin/python scripts/bench/request_log_soak.py outage [--down 30] [--around 15] [--concurrency 16]

replicas  two `gateway serve` processes writing one PostgreSQL (`gateway_bench`, as
          scripts/bench/request_log.py makes it), each sent `--requests` completions at once: the
          rows stored against the request ids the clients were answered with (none lost, none
          doubled), and how long the writers took to catch up.
outage    one gateway writing a PostgreSQL cluster of its own (initdb in a temporary folder), under
          load for `--around` seconds, then `--down` seconds with that cluster stopped, then
          `--around` seconds after it was started again: every answer's status, the gateway's
          resident memory (sampled every 0.5 s), its latency before, during and after, what was
          dropped (by reason), written and stored.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path

import aiohttp
import asyncpg

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import request_log as bench

from tests.support.observability_helpers import samples, value
from tests.support.postgres_helpers import ThrowawayPostgres

BODY = b'{"model":"m","prompt":"hello there","max_tokens":2}'
HEADERS = {"Content-Type": "application/json", "Authorization": f"Bearer {bench.LOAD_KEY}"}


async def send(http: aiohttp.ClientSession, port: int) -> tuple[int, str, float]:
    started = time.perf_counter()
    async with http.post(f"http://127.0.0.1:{port}/v1/completions", data=BODY, headers=HEADERS) as answer:
        await answer.read()
        return answer.status, answer.headers.get("x-request-id", ""), time.perf_counter() - started


async def replicas(args: argparse.Namespace) -> None:
    url = await bench.fresh_database()
    with tempfile.TemporaryDirectory() as folder:
        stub = bench.free_port()
        async with bench.process([sys.executable, "-c", bench.STUB, str(stub)]):
            await bench.until_listening(stub)
            settings = {"url": "${REQUEST_LOG_URL}"}
            async with (
                bench.gateway(Path(folder), stub, settings, url) as (first, _),
                bench.gateway(Path(folder), stub, settings, url) as (second, _),
            ):
                started = time.perf_counter()
                answered = await asyncio.gather(
                    *(flood(port, args.requests, args.concurrency) for port in (first, second))
                )
                sent_s = time.perf_counter() - started
            stopped_s = time.perf_counter() - started  # both stopped: SIGTERM wrote what they held
    ids = answered[0] | answered[1]
    connection = await asyncpg.connect(url)
    try:
        rows = await connection.fetch("SELECT id FROM request_log")
    finally:
        await connection.close()
    stored = [row["id"] for row in rows]
    print(f"sent {2 * args.requests} requests to two gateways in {sent_s:.1f} s ({2 * args.requests / sent_s:.0f}/s);")
    print(f"  both stopped {stopped_s - sent_s:.1f} s later; answered 200 with distinct ids: {len(ids)}")
    print(f"  rows stored: {len(stored)}, distinct: {len(set(stored))}, missing: {len(ids - set(stored))}, "
          f"unexpected: {len(set(stored) - ids)}")  # fmt: skip


async def flood(port: int, count: int, concurrency: int) -> set[str]:
    gate = asyncio.Semaphore(concurrency)
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=concurrency)) as http:

        async def one() -> str:
            async with gate:
                status, request_id, _ = await send(http, port)
            if status != 200:
                raise RuntimeError(f"answered {status}")
            return request_id

        return set(await asyncio.gather(*(one() for _ in range(count))))


async def outage(args: argparse.Namespace) -> None:
    cluster = ThrowawayPostgres().initialise()
    cluster.start()
    try:
        with tempfile.TemporaryDirectory() as folder:
            stub = bench.free_port()
            async with bench.process([sys.executable, "-c", bench.STUB, str(stub)]):
                await bench.until_listening(stub)
                async with bench.gateway(Path(folder), stub, {"url": "${REQUEST_LOG_URL}"}, cluster.url) as (port, pid):
                    await under_load(args, cluster, port, pid)
    finally:
        cluster.remove()


async def under_load(args: argparse.Namespace, cluster: ThrowawayPostgres, port: int, pid: int) -> None:
    phases = {"before": args.around, "down": args.down, "after": args.around}
    results: dict[str, list[tuple[int, float]]] = {}
    memory: dict[str, list[int]] = {}
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=args.concurrency)) as http:
        for phase, seconds in phases.items():
            if phase == "down":
                await asyncio.to_thread(cluster.stop)
            elif phase == "after":
                await asyncio.to_thread(cluster.start)
            sampler = asyncio.ensure_future(sample_rss(pid, memory.setdefault(phase, [])))
            results[phase] = await steady(http, port, args.concurrency, seconds)
            sampler.cancel()
        sent = sum(len(answers) for answers in results.values())
        counts = await settle(http, port, sent)
    stored = await rows_in(cluster.url)
    for phase, answers in results.items():
        latencies = sorted(latency for _, latency in answers)
        bad = sum(1 for status, _ in answers if status != 200)
        p50, p99 = 1000 * latencies[len(latencies) // 2], 1000 * latencies[int(len(latencies) * 0.99)]
        rss = f"{min(memory[phase]) / 1024:.0f}-{max(memory[phase]) / 1024:.0f} MiB"
        print(f"{phase:6} {phases[phase]:4.0f} s: {len(answers):6} requests, {bad} not 200, ", end="")
        print(f"p50 {p50:6.2f} ms, p99 {p99:6.2f} ms, RSS {rss}")
    print(f"sent {sent}; written {counts['written']:.0f}, dropped {counts['dropped']}; rows stored {stored}")


async def steady(http: aiohttp.ClientSession, port: int, concurrency: int, seconds: float) -> list[tuple[int, float]]:
    answers: list[tuple[int, float]] = []
    stop = time.perf_counter() + seconds

    async def client() -> None:
        while time.perf_counter() < stop:
            status, _, latency = await send(http, port)
            answers.append((status, latency))

    await asyncio.gather(*(client() for _ in range(concurrency)))
    return answers


async def sample_rss(pid: int, into: list[int]) -> None:
    while True:
        into.append(resident_kib(pid))
        await asyncio.sleep(0.5)


def resident_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


async def settle(http: aiohttp.ClientSession, port: int, sent: int) -> dict[str, object]:
    """Once every record sent is written or dropped (the writer caught up): the counters."""
    for _ in range(600):
        async with http.get(f"http://127.0.0.1:{port}/metrics") as answer:
            scrape = samples(await answer.text())
        written = value(scrape, "gateway_request_log_written_total")
        dropped = {
            reason: value(scrape, "gateway_request_log_dropped_total", reason=reason)
            for reason in ("queue_full", "store_error", "shutdown")
        }
        if written + sum(dropped.values()) >= sent:
            return {"written": written, "dropped": {reason: int(n) for reason, n in dropped.items() if n}}
        await asyncio.sleep(0.1)
    raise RuntimeError("the writer did not catch up within a minute")


async def rows_in(url: str) -> int:
    connection = await asyncpg.connect(url)
    try:
        return int(await connection.fetchval("SELECT COUNT(*) FROM request_log"))
    finally:
        await connection.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    both = commands.add_parser("replicas")
    both.add_argument("--requests", type=int, default=50_000, help="per gateway")
    both.add_argument("--concurrency", type=int, default=32, help="per gateway")
    down = commands.add_parser("outage")
    down.add_argument("--down", type=float, default=30)
    down.add_argument("--around", type=float, default=15)
    down.add_argument("--concurrency", type=int, default=16)
    args = parser.parse_args()
    asyncio.run(replicas(args) if args.command == "replicas" else outage(args))


if __name__ == "__main__":
    main()
