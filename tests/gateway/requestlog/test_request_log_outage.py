"""A request log whose database goes away under load: every request is still answered, the queue
never holds more than its bound, what could not be kept is counted (`gateway_request_log_dropped_total`),
and writing resumes when the database is back; nothing is stored twice, and what was sent is
either stored or counted as dropped. PostgreSQL: a cluster of the test's own, stopped and started
(the shared server is never touched); SQLite: its file locked by another process's transaction."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
from aiohttp import ClientSession
from aiohttp.test_utils import TestServer

from gateway.app import REQUEST_LOG
from gateway.requestlog import writer
from gateway.requestlog.rows import Row
from gateway.requestlog.service import RequestLog
from gateway.requestlog.stores.base import RecordStore, StoreUnavailable
from tests.conftest import GatewayFactory
from tests.support.observability_helpers import scrape, value
from tests.support.postgres_helpers import ThrowawayPostgres
from tests.support.request_log_helpers import BETA_KEY, ENV, admin_get, logged_config, sqlite_url, wait_for_records

QUEUE_SIZE = 40
BODY = {"model": "other", "prompt": "p", "max_tokens": 1}


@pytest.fixture(autouse=True)
def quick_retries(monkeypatch: pytest.MonkeyPatch) -> None:
    """Retries every 0.1 to 0.4 s instead of up to 10 s: the test waits less for the writer to notice."""
    monkeypatch.setattr(writer, "BACKOFF_S", (0.1, 0.4))


async def send(http: ClientSession, gateway: TestServer, prefix: str, count: int, gate: asyncio.Semaphore) -> None:
    async def one(index: int) -> None:
        async with gate:
            headers = {"Authorization": f"Bearer {BETA_KEY}", "x-request-id": f"{prefix}-{index}"}
            async with http.post(gateway.make_url("/v1/completions"), json=BODY, headers=headers) as answer:
                assert answer.status == 200, await answer.text()

    await asyncio.gather(*(one(index) for index in range(count)))


Step = Callable[[], Awaitable[None]]


async def under_outage(gateway: TestServer, http: ClientSession, go_away: Step, come_back: Step) -> None:
    log = gateway.app[REQUEST_LOG]
    gate = asyncio.Semaphore(16)
    await send(http, gateway, "before", 30, gate)
    await wait_for_records(http, gateway, 30)

    await go_away()
    queued: list[int] = []
    sampling = asyncio.ensure_future(_sample(lambda: len(log.queue), queued))
    await send(http, gateway, "during", 300, gate)  # every one answered 200 (asserted in `send`)
    sampling.cancel()
    assert max(queued) <= QUEUE_SIZE
    assert log.drops.totals["queue_full"] >= 300 - QUEUE_SIZE - 2 * log.config.batch_size
    metrics = await scrape(http, str(gateway.make_url("/metrics")))
    assert value(metrics, "gateway_request_log_dropped_total", reason="queue_full") == log.drops.totals["queue_full"]

    await come_back()
    await _caught_up(log)
    await send(http, gateway, "after", 20, gate)
    await _all_accounted_for(http, gateway, sent=350)


async def _caught_up(log: RequestLog, timeout_s: float = 15) -> None:
    """The writer wrote what waited in the queue once the database answered again."""
    for _ in range(int(timeout_s / 0.05)):
        if not len(log.queue) and not log.drops.problem:
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"the request log did not resume writing: {log.drops.problem}")


async def _sample(length: Callable[[], int], into: list[int]) -> None:
    while True:
        into.append(length())
        await asyncio.sleep(0.002)


async def _all_accounted_for(http: ClientSession, gateway: TestServer, sent: int, timeout_s: float = 15) -> None:
    """Once the writer caught up: each request stored once, or counted as dropped (nothing vanishes,
    nothing is doubled), and the "after" requests, sent once the database was back, all stored."""
    log = gateway.app[REQUEST_LOG]
    ids: list[str] = []
    for _ in range(int(timeout_s / 0.1)):
        ids = await _stored_ids(http, gateway)
        if len(ids) + sum(log.drops.totals.values()) >= sent:
            break
        await asyncio.sleep(0.1)
    assert len(ids) == len(set(ids))
    assert len(ids) + sum(log.drops.totals.values()) == sent
    assert {f"after-{index}" for index in range(20)} <= set(ids)
    assert log.drops.totals["store_error"] == 0
    metrics = await scrape(http, str(gateway.make_url("/metrics")))
    assert value(metrics, "gateway_request_log_written_total") == len(ids)


async def _stored_ids(http: ClientSession, gateway: TestServer) -> list[str]:
    ids: list[str] = []
    after: dict[str, Any] = {}
    while True:
        page = await admin_get(http, gateway, "/admin/requests", limit=500, **after)
        ids += [str(record["id"]) for record in page["data"]]
        if page["next_cursor"] is None:
            return ids
        after = {"cursor": page["next_cursor"]}


async def test_postgresql_stopped_under_load_costs_drops_never_an_answer(
    make_gateway: GatewayFactory, http: ClientSession, throwaway_postgres: ThrowawayPostgres
) -> None:
    config = logged_config(throwaway_postgres.url, queue_size=QUEUE_SIZE, batch_size=10)
    gateway = await make_gateway(config, ENV)

    async def stop() -> None:
        await asyncio.to_thread(throwaway_postgres.stop)
        unavailable = await admin_get(http, gateway, "/admin/requests", expect=503)
        assert unavailable["error"]["code"] == "request_log_unavailable"

    async def start() -> None:
        await asyncio.to_thread(throwaway_postgres.start)

    await under_outage(gateway, http, stop, start)


async def test_a_locked_sqlite_file_costs_drops_never_an_answer(
    make_gateway: GatewayFactory, http: ClientSession, tmp_path: Path
) -> None:
    config = logged_config(sqlite_url(tmp_path), queue_size=QUEUE_SIZE, batch_size=10)
    gateway = await make_gateway(config, ENV)
    other = sqlite3.connect(tmp_path / "requests.db", isolation_level=None, check_same_thread=False)

    async def lock() -> None:  # another process's long write transaction
        other.execute("BEGIN EXCLUSIVE")

    async def unlock() -> None:
        other.execute("COMMIT")

    try:
        await under_outage(gateway, http, lock, unlock)
    finally:
        other.close()


class _BusyAtFirst:
    """A real store that cannot be opened the first `times` (SQLite: another worker holds the file's
    lock, as when both write their last rows at shutdown); the rest is the store's own."""

    def __init__(self, store: RecordStore, times: int) -> None:
        self.store = store
        self.dialect = store.dialect
        self.where = store.where
        self.times = times

    async def open(self) -> None:
        if self.times:
            self.times -= 1
            raise StoreUnavailable("sqlite: database is locked")
        await self.store.open()

    async def write(self, rows: Sequence[Row]) -> None:
        await self.store.write(rows)

    async def prune(self, before_us: int, limit: int) -> int:
        return await self.store.prune(before_us, limit)

    async def select(self, sql: str, params: Sequence[Any]) -> list[tuple[Any, ...]]:
        return await self.store.select(sql, params)

    async def close(self) -> None:
        await self.store.close()


async def test_the_last_rows_are_written_at_shutdown_though_the_store_is_busy_at_first(
    make_gateway: GatewayFactory, http: ClientSession, tmp_path: Path
) -> None:
    """At shutdown a store that cannot take the last batch yet is tried again within the close
    deadline: the rows are stored, none counted as dropped (a first failure used to drop them all)."""
    config = logged_config(sqlite_url(tmp_path), flush_interval_s=60)  # queued until shutdown
    gateway = await make_gateway(config, ENV)
    log = gateway.app[REQUEST_LOG]
    await send(http, gateway, "last", 30, asyncio.Semaphore(8))
    assert log.writer is not None
    log.writer.store = _BusyAtFirst(log.store, times=3)
    await gateway.close()

    assert log.drops.totals["shutdown"] == 0
    with sqlite3.connect(tmp_path / "requests.db") as stored:
        ids = [request_id for (request_id,) in stored.execute("SELECT id FROM request_log")]
    assert sorted(ids) == sorted(f"last-{index}" for index in range(30))
