"""The request log's cost and its reads (not run in CI; figures in BENCHMARKS.md).

    .venv/bin/python scripts/bench/request_log.py overhead [--duration 10] [--concurrency 64] [--rounds 2]
    .venv/bin/python scripts/bench/request_log.py query [--records 1000000] [--repeat 5] [--reuse]
    .venv/bin/python scripts/bench/request_log.py pipeline [--records 50000]

overhead  `gateway serve` (one worker, an OpenAI-compatible deployment on a canned stub upstream, the
          access log and metrics on) under C concurrent clients for D seconds, with the request log
          off, then on (PostgreSQL), alternately for R rounds: the gateway process's CPU per request
          (user + system, from /proc) and the clients' p50/p99 latency. Goal: on ≤ +15% CPU, ≤ +10% p99.
query     N synthetic records bulk-loaded (COPY) into the log's table, then filtered GET
          /admin/requests queries through a running gateway: each query's median and worst time
          over `--repeat` runs. Goal: < 200 ms.
pipeline  in this process, what the log itself costs a request, less noisy than a load on a shared
          machine: the CPU time of `submit` (the request's share) and of the writer's batches into
          PostgreSQL (encoding and COPY; the server's own work not counted), per record.

PostgreSQL: the server of $PG_URL (default postgresql://postgres@127.0.0.1:5432/postgres), in a
database of the benchmark's own, `gateway_bench`, created when missing and emptied each run. Every
process it starts (the stub, the gateways) is stopped by its PID at exit.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import aiohttp
import asyncpg
import yaml

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # this tree's gateway, whichever one the virtual environment installed
ADMIN_KEY = "bench-admin-" + "0f1e2d3c4b5a6978" * 3
LOAD_KEY = "bench-load-key-0123456789abcdef"
DATABASE = "gateway_bench"
ANSWER = (
    b'{"id":"cmpl-1","object":"text_completion","created":1,"model":"m","choices":[{"text":" hello there",'
    b'"index":0,"logprobs":null,"finish_reason":"stop"}],"usage":{"prompt_tokens":5,"completion_tokens":2,'
    b'"total_tokens":7}}'
)


def canned_stub(answer: bytes) -> str:
    """The source of an upstream to run in a process of its own (`python -c SOURCE PORT`): `answer`
    as a JSON 200 to every request (it reads Content-Length)."""
    head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(answer)
    return f"""
import asyncio, sys
ANSWER = {head + answer!r}
class Stub(asyncio.Protocol):
    def connection_made(self, transport):
        self.transport, self.buffer = transport, b""
    def data_received(self, data):
        self.buffer += data
        while (end := self.buffer.find(b"\\r\\n\\r\\n")) >= 0:
            head = self.buffer[:end].lower()
            start = head.find(b"content-length:")
            stop = head.find(b"\\r\\n", start)
            length = int(head[start + 15 : stop if stop > 0 else None]) if start >= 0 else 0
            if len(self.buffer) < end + 4 + length:
                return
            self.buffer = self.buffer[end + 4 + length :]
            self.transport.write(ANSWER)
async def main():
    server = await asyncio.get_running_loop().create_server(Stub, "127.0.0.1", int(sys.argv[1]))
    await server.serve_forever()
asyncio.run(main())
"""


STUB = canned_stub(ANSWER)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def database_url(name: str) -> str:
    parts = urlsplit(os.environ.get("PG_URL") or "postgresql://postgres@127.0.0.1:5432/postgres")
    return urlunsplit(parts._replace(path=f"/{name}", query=""))


async def fresh_database(name: str = DATABASE) -> str:
    """The benchmark's own database, created when missing, without the log's tables."""
    server = await asyncpg.connect(database_url("postgres"))
    try:
        if not await server.fetchval("SELECT 1 FROM pg_database WHERE datname = $1", name):
            await server.execute(f'CREATE DATABASE "{name}"')
    finally:
        await server.close()
    url = database_url(name)
    bench = await asyncpg.connect(url)
    try:
        await bench.execute("DROP TABLE IF EXISTS request_log, request_log_schema_version")
    finally:
        await bench.close()
    return url


@asynccontextmanager
async def process(command: list[str], env: dict[str, str] | None = None) -> AsyncIterator[subprocess.Popen[bytes]]:
    child = subprocess.Popen(command, env={**os.environ, **(env or {})}, stderr=subprocess.DEVNULL)  # noqa: S603, ASYNC220
    try:
        yield child
    finally:
        child.send_signal(signal.SIGTERM)
        try:
            child.wait(timeout=30)
        except subprocess.TimeoutExpired:
            child.kill()


@asynccontextmanager
async def gateway(
    folder: Path, upstream: int, request_log: dict[str, Any], url: str = ""
) -> AsyncIterator[tuple[int, int]]:
    """(port, pid) of `gateway serve` with one worker and `request_log` (`url`: $REQUEST_LOG_URL)."""
    port = free_port()
    config = {
        "server": {"port": port, "workers": 1},
        "admin": {"key": "${BENCH_ADMIN_KEY}"},
        "keys": [{"name": "load", "key": "${BENCH_LOAD_KEY}", "metadata": {"team": "bench"}}],
        "deployments": [{"name": "m", "provider": {"type": "openai", "base_url": f"http://127.0.0.1:{upstream}/v1"}}],
        "observability": {"access_log": {"path": os.devnull}},
        "request_log": request_log,
    }
    path = folder / f"gateway-{port}.yaml"
    path.write_text(yaml.safe_dump(config))
    env = {"BENCH_ADMIN_KEY": ADMIN_KEY, "BENCH_LOAD_KEY": LOAD_KEY, "PYTHONPATH": str(ROOT), "REQUEST_LOG_URL": url}
    command = [sys.executable, "-m", "gateway", "serve", "-c", str(path), "--log-level", "WARNING"]
    async with process(command, env) as child:
        await until_listening(port)
        yield port, child.pid


async def until_listening(port: int) -> None:
    for _ in range(600):
        try:
            _, writer = await asyncio.open_connection("127.0.0.1", port)
        except OSError:
            await asyncio.sleep(0.05)
            continue
        writer.close()
        return
    raise RuntimeError(f"nothing listens on {port}")


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


async def load(port: int, concurrency: int, duration_s: float) -> list[float]:
    """Latencies (s) of the completions answered while C clients send back to back for `duration_s`."""
    body = b'{"model":"m","prompt":"hello there","max_tokens":2}'
    headers = {"Content-Type": "application/json", "Authorization": f"Bearer {LOAD_KEY}"}
    latencies: list[float] = []
    stop = time.perf_counter() + duration_s
    connector = aiohttp.TCPConnector(limit=concurrency)
    async with aiohttp.ClientSession(connector=connector) as http:

        async def client() -> None:
            while (started := time.perf_counter()) < stop:
                async with http.post(f"http://127.0.0.1:{port}/v1/completions", data=body, headers=headers) as answer:
                    await answer.read()
                    if answer.status != 200:
                        raise RuntimeError(f"answered {answer.status}")
                latencies.append(time.perf_counter() - started)

        await asyncio.gather(*(client() for _ in range(concurrency)))
    return latencies


async def overhead(args: argparse.Namespace) -> None:
    url = await fresh_database()
    results: dict[str, list[tuple[float, float, float, int]]] = {"off": [], "on": []}
    with tempfile.TemporaryDirectory() as folder:
        stub_port = free_port()
        async with process([sys.executable, "-c", STUB, str(stub_port)]):
            await until_listening(stub_port)
            for _ in range(args.rounds):
                for name in ("off", "on"):
                    settings = {"enabled": False} if name == "off" else {"url": "${REQUEST_LOG_URL}"}
                    async with gateway(Path(folder), stub_port, settings, url) as (port, pid):
                        await load(port, args.concurrency, 2)  # warm up
                        before = cpu_seconds(pid)
                        latencies = await load(port, args.concurrency, args.duration)
                        cpu = cpu_seconds(pid) - before
                    latencies.sort()
                    p50, p99 = latencies[len(latencies) // 2], latencies[int(len(latencies) * 0.99)]
                    results[name].append((cpu / len(latencies) * 1e6, p50 * 1e3, p99 * 1e3, len(latencies)))
                    rate, per_request = len(latencies) / args.duration, cpu / len(latencies) * 1e6
                    print(f"{name:3}  {rate:7.0f} req/s  CPU {per_request:6.1f} µs/req  ", end="")
                    print(f"p50 {p50 * 1e3:6.2f} ms  p99 {p99 * 1e3:6.2f} ms", flush=True)
    rows = await stored(url)
    off, on = (_medians(results[name]) for name in ("off", "on"))
    print(f"\nmedian of {args.rounds} rounds at c={args.concurrency}, {args.duration:g} s each ({rows} records):")
    print(f"  CPU per request: off {off[0]:.1f} µs, on {on[0]:.1f} µs: {_change(off[0], on[0])} (goal ≤ +15%)")
    print(f"  p99 latency:     off {off[2]:.2f} ms, on {on[2]:.2f} ms: {_change(off[2], on[2])} (goal ≤ +10%)")
    print(f"  p50 latency:     off {off[1]:.2f} ms, on {on[1]:.2f} ms: {_change(off[1], on[1])}")


def _change(before: float, after: float) -> str:
    return f"{100 * (after / before - 1):+.1f}%"


def _medians(runs: list[tuple[float, float, float, int]]) -> tuple[float, float, float]:
    return tuple(statistics.median(run[index] for run in runs) for index in range(3))  # type: ignore[return-value]


async def stored(url: str) -> int:
    connection = await asyncpg.connect(url)
    try:
        return int(await connection.fetchval("SELECT COUNT(*) FROM request_log"))
    finally:
        await connection.close()


async def query(args: argparse.Namespace) -> None:
    url = database_url(DATABASE) if args.reuse else await fresh_database()
    with tempfile.TemporaryDirectory() as folder:
        stub_port = free_port()
        async with process([sys.executable, "-c", STUB, str(stub_port)]):
            await until_listening(stub_port)
            async with gateway(Path(folder), stub_port, {"url": "${REQUEST_LOG_URL}"}, url) as (port, _):
                started = time.perf_counter()
                probes = await probes_in(url) if args.reuse else await fill(url, args.records)
                print(f"{await stored(url)} records (loaded in {time.perf_counter() - started:.0f} s)", flush=True)
                await time_queries(port, probes, args.repeat)


async def probes_in(url: str) -> dict[str, str]:
    """What the queries look for, in records loaded by an earlier run (`--reuse`)."""
    connection = await asyncpg.connect(url)
    try:
        middle = await connection.fetchval(
            "SELECT id FROM request_log ORDER BY id OFFSET (SELECT COUNT(*) / 2 FROM request_log) LIMIT 1"
        )
        traced = await connection.fetchval("SELECT trace_id FROM request_log WHERE trace_id IS NOT NULL LIMIT 1")
    finally:
        await connection.close()
    return {"request_id": middle, "trace_id": traced}


async def fill(url: str, count: int) -> dict[str, str]:
    """`count` records over the last 7 days; what the queries look for."""
    from gateway.requestlog.rows import COLUMNS
    from gateway.requestlog.stores.postgres import PostgresStore

    store = PostgresStore(url)
    await store.open()  # the schema, as the gateway makes it
    await store.close()
    connection = await asyncpg.connect(url)
    try:
        now, chance = int(time.time() * 1_000_000), random.Random(7)  # noqa: S311 - test data
        for start in range(0, count, 50_000):
            rows = [synthetic(n, now, chance) for n in range(start, min(start + 50_000, count))]
            await connection.copy_records_to_table("request_log", records=rows, columns=list(COLUMNS))
        await connection.execute("ANALYZE request_log")
        traced = await connection.fetchval("SELECT trace_id FROM request_log WHERE trace_id IS NOT NULL LIMIT 1")
    finally:
        await connection.close()
    return {"request_id": f"req_bench{count // 2:010d}", "trace_id": traced}


def synthetic(n: int, now: int, chance: random.Random) -> tuple[Any, ...]:
    """Record `n`: one of 50 keys, 10 teams, 8 deployments, 12 models, 5 APIs; 3% 429, 1% 502; a
    trace id on a third; at a random time in the last 7 days."""
    from gateway.requestlog.rows import COLUMNS

    roll = chance.random()
    status, error = (
        (429, "rate_limit_exceeded") if roll < 0.03 else (502, "upstream_error") if roll < 0.04 else (200, None)
    )
    values = {
        "id": f"req_bench{n:010d}",
        "ts": now - chance.randrange(7 * 86_400 * 1_000_000),
        "trace_id": f"{chance.getrandbits(128):032x}" if n % 3 == 0 else None,
        "key": f"key-{n % 50}",
        "team": f"team-{n % 10}",
        "metadata": f'{{"team": "team-{n % 10}"}}',
        "api": ("completions", "chat", "embeddings", "messages", "responses")[n % 5],
        "model": f"model-{n % 12}",
        "deployment": f"deployment-{n % 8}",
        "provider": "openai",
        "attempts": 1,
        "status": status,
        "error": error,
        "stream": n % 4 == 0,
        "prompt_tokens": 40 + n % 300,
        "completion_tokens": 20 + n % 500,
        "cost_nano": 1000 * (n % 997),
        "latency_ms": 50.0 + n % 400,
        "client": "10.0.0.1",
    }
    return tuple(values.get(column) for column in COLUMNS)


async def time_queries(port: int, probes: dict[str, str], repeat: int) -> None:
    day_ago = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() - 86_400))
    queries: list[dict[str, str]] = [
        {},
        {"key": "key-7"},
        {"key": "key-7", "status": "5xx"},
        {"team": "team-3", "since": day_ago},
        {"deployment": "deployment-2", "model": "model-6"},
        {"deployment": "deployment-2", "model": "model-5", "since": day_ago},  # none match: a day's index range read
        {"deployment": "deployment-2", "model": "model-5"},  # none match: the whole range of one index read
        {"api": "chat", "error": "rate_limit_exceeded"},
        {"model": "model-11", "status": "200", "limit": "500"},
        {"request_id": probes["request_id"]},
        {"trace_id": probes["trace_id"]},
    ]
    headers = {"Authorization": f"Bearer {ADMIN_KEY}"}
    log_url = f"http://127.0.0.1:{port}/admin/requests"
    async with aiohttp.ClientSession() as http:
        for params in queries:
            timings, cursor = [], None
            for _ in range(repeat):
                started = time.perf_counter()
                async with http.get(
                    f"http://127.0.0.1:{port}/admin/requests", params=params, headers=headers
                ) as answer:
                    page = await answer.json()
                    assert answer.status == 200, page
                timings.append((time.perf_counter() - started) * 1000)
                cursor = page["next_cursor"]
            second = None
            if cursor:  # the next page, through the cursor
                started = time.perf_counter()
                async with http.get(log_url, params={**params, "cursor": cursor}, headers=headers) as answer:
                    await answer.read()
                second = (time.perf_counter() - started) * 1000
            shown = "&".join(f"{name}={value}" for name, value in params.items()) or "(no filter)"
            print(f"  {shown[:70]:70}  {len(page['data']):3} rows  median {statistics.median(timings):6.1f} ms  "
                  f"worst {max(timings):6.1f} ms" + (f"  next page {second:6.1f} ms" if second else ""))  # fmt: skip


async def pipeline(args: argparse.Namespace) -> None:
    from gateway.observability.record import GuardrailVerdict, RequestRecord
    from gateway.requestlog.drops import Drops
    from gateway.requestlog.intake import RecordQueue
    from gateway.requestlog.stores.postgres import PostgresStore
    from gateway.requestlog.writer import BatchWriter

    store = PostgresStore(await fresh_database(f"{DATABASE}_pipeline"))
    await store.open()
    queue = RecordQueue(args.records, 500, Drops(), team_field="team", max_body_chars=None)
    records = []
    for n in range(args.records):
        record = RequestRecord(f"req_pipeline{n:08d}", "POST", "/v1/chat/completions", api="chat", status=200)
        record.key_name, record.metadata, record.model = "load", {"team": "bench"}, "m"
        record.deployment, record.provider, record.attempts = "m", "openai", 1
        record.ended_at, record.duration_s, record.prompt_tokens, record.completion_tokens = time.time(), 0.01, 9, 16
        record.cost_nano, record.client = 31_000, "127.0.0.1"
        record.guardrails = [GuardrailVerdict("default", "input", "pii", "pass")]
        records.append(record)
    started = time.process_time()
    for record in records:
        queue.submit(record)
    submitted = time.process_time()
    writer = BatchWriter(store, queue, Drops(), batch_size=500, flush_interval_s=0.01)
    writer.start()
    await writer.close(600)
    written = time.process_time()
    await store.close()
    per = 1e6 / args.records
    print(f"{writer.written} records: submit {(submitted - started) * per:.2f} µs each (on the request's path), "
          f"writer {(written - submitted) * per:.2f} µs each (batches of 500: encoding, COPY, INSERT)")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    loads = commands.add_parser("overhead")
    loads.add_argument("--duration", type=float, default=10)
    loads.add_argument("--concurrency", type=int, default=64)
    loads.add_argument("--rounds", type=int, default=2)
    reads = commands.add_parser("query")
    reads.add_argument("--records", type=int, default=1_000_000)
    reads.add_argument("--repeat", type=int, default=5)
    reads.add_argument("--reuse", action="store_true", help="query the records an earlier run loaded")
    own = commands.add_parser("pipeline")
    own.add_argument("--records", type=int, default=50_000)
    args = parser.parse_args()
    run = {"overhead": overhead, "query": query, "pipeline": pipeline}[args.command]
    asyncio.run(run(args))


if __name__ == "__main__":
    main()
