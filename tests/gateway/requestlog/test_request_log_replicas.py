"""Several processes writing one request log: two `gateway serve` replicas sharing a PostgreSQL,
and two workers of one `gateway serve` sharing its default SQLite file (beside the config file).
Every request a client was answered is stored exactly once: none lost, none doubled.
(scripts/bench/request_log_soak.py runs the same with 100,000 requests.)"""

from __future__ import annotations

import asyncio
import os
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import aiohttp
import asyncpg
import yaml

from tests.support.postgres_helpers import free_port

REQUESTS_EACH = 400
ID_PREFIX = len("req_") + 16  # a worker's own: request ids are its prefix and a counter


def start_gateway(config: dict[str, Any], folder: Path, env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    path = folder / f"gateway-{config['server']['port']}.yaml"
    path.write_text(yaml.safe_dump(config))
    return subprocess.Popen(  # noqa: S603 - the gateway itself
        [sys.executable, "-m", "gateway", "serve", "-c", str(path), "--log-level", "WARNING"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env={**os.environ, **(env or {})},
    )


def config_on(port: int, **extra: Any) -> dict[str, Any]:
    return {
        "server": {"port": port, **extra.pop("server", {})},
        "deployments": [{"name": "mock", "provider": {"type": "mock"}}],
        "observability": {"access_log": {"enabled": False}},
        **extra,
    }


async def until_listening(port: int, process: subprocess.Popen[bytes]) -> None:
    for _ in range(600):
        assert process.poll() is None, process.stderr.read().decode() if process.stderr else ""
        try:
            _, writer = await asyncio.open_connection("127.0.0.1", port)
        except OSError:
            await asyncio.sleep(0.05)
            continue
        writer.close()
        return
    raise AssertionError(f"nothing listens on {port}")


async def until_each_worker_answers(port: int, process: subprocess.Popen[bytes], workers: int) -> None:
    """Until `workers` workers answered (a connection each: the kernel spreads connections over the
    workers that listen already, and the first to listen would otherwise take the whole load)."""
    answered_by: set[str] = set()
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(force_close=True)) as http:
        for _ in range(1000):
            assert process.poll() is None, process.stderr.read().decode() if process.stderr else ""
            async with http.get(f"http://127.0.0.1:{port}/health") as answer:  # not an API request: not logged
                answered_by.add(answer.headers["x-request-id"][:ID_PREFIX])
            if len(answered_by) == workers:
                return
            await asyncio.sleep(0.02)
    raise AssertionError(f"only {len(answered_by)} of {workers} workers answered")


async def load(port: int, count: int, concurrency: int = 16) -> set[str]:
    """`count` completions; the request ids the answers carried."""
    gate = asyncio.Semaphore(concurrency)
    body = {"model": "mock", "prompt": "hello there", "max_tokens": 2}
    async with aiohttp.ClientSession() as http:

        async def one() -> str:
            async with gate, http.post(f"http://127.0.0.1:{port}/v1/completions", json=body) as answer:
                assert answer.status == 200, await answer.text()
                return answer.headers["x-request-id"]

        return set(await asyncio.gather(*(one() for _ in range(count))))


def stop(process: subprocess.Popen[bytes]) -> str:
    """SIGTERM: the gateway writes what its queue holds before it exits. What it said on stderr:
    its warnings say what the request log dropped, under which reason, and the store's error."""
    process.send_signal(signal.SIGTERM)
    _, said = process.communicate(timeout=30)
    assert process.returncode == 0, said.decode()
    return said.decode()


async def test_two_replicas_writing_one_postgresql_store_each_request_once(pg_url: str, tmp_path: Path) -> None:
    ports = [free_port(), free_port()]
    env = {"REQUEST_LOG_URL": pg_url}
    config = {"request_log": {"url": "${REQUEST_LOG_URL}"}}  # a PostgreSQL URL comes from the environment
    replicas = [start_gateway(config_on(port, **config), tmp_path, env) for port in ports]
    said: list[str] = []
    try:
        await asyncio.gather(*(until_listening(port, process) for port, process in zip(ports, replicas, strict=True)))
        answered = await asyncio.gather(*(load(port, REQUESTS_EACH) for port in ports))
    finally:
        for process in replicas:
            said.append(await asyncio.to_thread(stop, process))

    connection = await asyncpg.connect(pg_url)
    try:
        stored = [row["id"] for row in await connection.fetch("SELECT id FROM request_log")]
    finally:
        await connection.close()
    assert len(set(stored)) == len(stored) == 2 * REQUESTS_EACH, _told(stored, *said)
    assert set(stored) == answered[0] | answered[1]


async def test_two_workers_share_the_default_sqlite_file_beside_the_config(tmp_path: Path) -> None:
    port = free_port()
    process = start_gateway(config_on(port, server={"workers": 2}), tmp_path)
    said = ""
    try:
        await until_listening(port, process)
        await until_each_worker_answers(port, process, 2)
        answered = await load(port, 2 * REQUESTS_EACH)
    finally:
        said = await asyncio.to_thread(stop, process)

    stored = _sqlite_ids(tmp_path / "requests.db")
    assert len(set(stored)) == len(stored) == 2 * REQUESTS_EACH, _told(stored, said)
    assert set(stored) == answered
    assert len({request_id[:ID_PREFIX] for request_id in stored}) == 2  # both workers wrote


def _told(stored: list[str], *said: str) -> str:
    """A failure's message: the rows stored, and what the gateway said (the drops and their reasons)."""
    return f"{len(stored)} rows stored ({len(set(stored))} distinct); the gateway said:\n" + "\n".join(said)


def _sqlite_ids(path: Path) -> list[str]:
    connection = sqlite3.connect(path)
    try:
        return [request_id for (request_id,) in connection.execute("SELECT id FROM request_log")]
    finally:
        connection.close()
