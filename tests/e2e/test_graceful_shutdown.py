"""SIGTERM to a real `gateway serve` (one process, and `--workers 2`): the listener closes and `/ready`
never answers 200 again; a stream in flight that ends within `server.shutdown_grace_s` completes
with `[DONE]`; one still running when the grace is over ends with an error event in the OpenAI
envelope and a clean end of the response (no reset); both settle, so nothing stays reserved in
Redis; the process exits 0."""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path
from typing import Any

import orjson
import pytest
import redis.asyncio as aioredis
import yaml
from aiohttp import ClientError, ClientSession, ClientTimeout

from tests.conftest import deployment
from tests.e2e.test_serve_process import free_port, start_gateway, wait_until_listening
from tests.support import fake_upstream as fake
from tests.support.fake_upstream import FakeUpstream

GRACE_S = 4.0
TEAM_KEY = "team-key-0123456789abcdef"
GUARD_S = 60.0  # only so that a broken gateway fails the test instead of hanging it


async def open_stream(http: ClientSession, url: str, started: asyncio.Event) -> bytes:
    """POST a streamed completion; set `started` at its first event; return the whole body."""
    headers = {"Authorization": f"Bearer {TEAM_KEY}"}
    body = {"model": "fake", "prompt": "hi", "max_tokens": 16, "stream": True}
    async with http.post(f"{url}/v1/completions", json=body, headers=headers) as response:
        assert response.status == 200
        first = await response.content.readuntil(b"\n\n")
        started.set()
        return first + await response.read()  # raises ClientPayloadError on a reset or a cut chunked body


async def ready_status(http: ClientSession, url: str) -> int | None:
    """/ready's status, or None when nothing accepts the connection."""
    try:
        # Short: a connection the closing listener had queued but never accepts is answered by nothing.
        async with http.get(f"{url}/ready", timeout=ClientTimeout(total=1)) as response:
            return response.status
    except (ClientError, OSError, TimeoutError):
        return None


@pytest.mark.parametrize("workers", [1, 2])
async def test_sigterm_finishes_short_streams_ends_long_ones_with_an_error_event_and_exits_0(
    upstream: FakeUpstream,
    tmp_path: Path,
    redis_url: str,
    redis_prefix: str,
    monkeypatch: pytest.MonkeyPatch,
    workers: int,
) -> None:
    short = fake.stream(["a ", "b ", "c ", "d "], delay_s=0.4)  # about 1.6 s: ends within the grace
    long = fake.stream([f"w{i} " for i in range(200)], delay_s=0.3)  # about 60 s: outlasts it
    upstream.script(short, long)
    port = free_port()
    config: dict[str, Any] = {
        "server": {"port": port, "workers": workers, "shutdown_grace_s": GRACE_S},
        # Closed limits: a Redis call past the default 0.25 s on a loaded machine would be a 503.
        "redis": {"url": redis_url, "prefix": redis_prefix, "timeout_s": 5.0},
        "limits": {"on_redis_error": "closed"},
        "keys": [
            {
                "name": "team",
                "key": "${TEAM_KEY}",
                "limits": {"concurrent": 10, "tpm": 100_000},
                "budget": {"tokens": 1_000_000, "period": "1d"},
            }
        ],
        "deployments": [deployment("fake", upstream.base_url, retries=0, timeout_s=GUARD_S)],
        "observability": {"access_log": {"enabled": False}},
    }
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    monkeypatch.setenv("TEAM_KEY", TEAM_KEY)
    process = start_gateway(path)
    url = f"http://127.0.0.1:{port}"
    try:
        await wait_until_listening(port, process)
        async with ClientSession(timeout=ClientTimeout(total=GUARD_S)) as http, ClientSession() as probe:
            short_started, long_started = asyncio.Event(), asyncio.Event()
            finishing = asyncio.create_task(open_stream(http, url, short_started))
            await asyncio.wait_for(short_started.wait(), GUARD_S)
            outlasting = asyncio.create_task(open_stream(http, url, long_started))
            await asyncio.wait_for(long_started.wait(), GUARD_S)

            process.send_signal(signal.SIGTERM)
            statuses: list[int | None] = []
            while process.poll() is None:  # /ready from SIGTERM until the process has exited
                statuses.append(await ready_status(probe, url))
                await asyncio.sleep(0.1)
            finished, cut = await finishing, await outlasting
    finally:
        if process.poll() is None:
            process.kill()
        code = await asyncio.to_thread(process.wait, GUARD_S)
        stderr = process.stderr.read().decode() if process.stderr else ""

    assert code == 0, stderr
    assert finished.endswith(b"data: [DONE]\n\n")
    assert finished.count(b"data: ") == 4 + 1 + 1  # every word, the stop chunk, [DONE]: nothing cut
    last = cut.rstrip(b"\n").rsplit(b"\n\n", 1)[-1]
    error = orjson.loads(last.removeprefix(b"data: "))["error"]
    assert (error["type"], error["code"]) == ("service_unavailable", "shutting_down")
    assert b"[DONE]" not in cut
    assert cut.count(b"data: {") >= 2  # some words, then the error event
    # /ready: it may still answer 200 until SIGTERM reaches every worker; never once it has stopped answering 200.
    first_refusal = next((i for i, status in enumerate(statuses) if status != 200), len(statuses))
    assert first_refusal < len(statuses), statuses  # it stopped answering 200 while it still drained
    settled = first_refusal + 5  # five probes on: under --workers 2 the parent passes SIGTERM to each in turn
    assert all(status in (None, 503) for status in statuses[settled:]), statuses
    await assert_nothing_reserved(redis_url, redis_prefix)


async def assert_nothing_reserved(redis_url: str, prefix: str) -> None:
    client = aioredis.from_url(redis_url)
    try:
        assert await client.zcard(f"{prefix}rate:key:team:leases") == 0  # every concurrency slot freed
        budgets = [
            key async for key in client.scan_iter(match=f"{prefix}budget:team:1d:*") if not key.endswith(b":leases")
        ]
        assert len(budgets) == 1
        totals = await client.hmget(budgets[0], "tokens", "rtokens")
        assert int(totals[0] or 0) > 0  # both streams were charged
        assert int(totals[1] or 0) == 0  # and no reservation is left
        leases = [key async for key in client.scan_iter(match=f"{prefix}budget:team:1d:*:leases")]
        assert [await client.zcard(key) for key in leases] == [0] * len(leases)
    finally:
        await client.aclose()
