"""The request log's stores against a real SQLite file and a real PostgreSQL (a schema of each
test's own): versioned migrations that run once however many processes start together, batches
that are never doubled, pruning in small batches, and the admin API's reads giving the same
answers on both."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import asyncpg
import pytest

from gateway.requestlog import queries
from gateway.requestlog.filters import Filters
from gateway.requestlog.retention import prune
from gateway.requestlog.rows import COLUMNS
from gateway.requestlog.stores.base import RecordStore, SchemaTooNew
from gateway.requestlog.stores.migrations import LATEST, VERSION_TABLE
from gateway.requestlog.stores.postgres import PostgresStore
from gateway.requestlog.stores.sqlite import SqliteStore

MINUTE_US = 60 * 1_000_000
BASE_US = 1_800_000_000 * 1_000_000  # 2027-01-15, on a minute's boundary


def row(request_id: str, ts: int, **values: Any) -> tuple[Any, ...]:
    """An encoded row: a 200 completion of key `k` unless `values` say otherwise."""
    defaults: dict[str, Any] = {
        "id": request_id,
        "ts": ts,
        "key": "k",
        "api": "completions",
        "status": 200,
        "stream": False,
        "prompt_tokens": 1,
        "completion_tokens": 2,
        "latency_ms": 1.0,
    }
    merged = {**defaults, **values}
    return tuple(merged.get(column) for column in COLUMNS)


@pytest.fixture(params=["sqlite", "postgres"])
def make_store(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    """A factory of stores on one database: several may be opened on it, as workers and replicas do."""
    url = request.getfixturevalue("pg_url") if request.param == "postgres" else ""

    def make() -> RecordStore:
        return PostgresStore(url) if url else SqliteStore(tmp_path / "requests.db")

    return make


@pytest.fixture
async def store(make_store: Any) -> AsyncIterator[RecordStore]:
    opened: RecordStore = make_store()
    await opened.open()
    yield opened
    await opened.close()


async def count(store: RecordStore) -> int:
    [(total,)] = await store.select("SELECT COUNT(*) FROM request_log", [])
    return int(total)


async def test_the_schema_is_migrated_once_when_several_processes_open_it_together(make_store: Any) -> None:
    stores = [make_store() for _ in range(4)]
    try:
        await asyncio.gather(*(store.open() for store in stores))
        versions = await stores[0].select(f"SELECT version FROM {VERSION_TABLE}", [])  # noqa: S608
        await stores[1].write([row("r1", BASE_US)])
        assert await count(stores[2]) == 1
    finally:
        for store in stores:
            await store.close()

    assert versions == [(LATEST,)]


async def test_a_schema_newer_than_this_gateway_is_left_alone(make_store: Any) -> None:
    first = make_store()
    await first.open()
    await first.write([row("kept", BASE_US)])
    newer = "INSERT INTO request_log_schema_version (version, applied_at) VALUES (99, 'later')"
    await _execute(first, newer)
    await first.close()

    later = make_store()
    with pytest.raises(SchemaTooNew, match="version 99"):
        await later.open()
    await later.close()
    again = make_store()
    try:
        with pytest.raises(SchemaTooNew):
            await again.open()
    finally:
        await again.close()


async def _execute(store: RecordStore, sql: str) -> None:
    """A statement outside the store's interface (a test's own change to the database)."""
    if isinstance(store, SqliteStore):
        connection = sqlite3.connect(store.path)
        with connection:
            connection.execute(sql)
        connection.close()
        return
    assert isinstance(store, PostgresStore)
    remote = await asyncpg.connect(store._url)
    try:
        await remote.execute(sql)
    finally:
        await remote.close()


async def test_a_batch_written_again_after_a_lost_answer_is_not_doubled(store: RecordStore) -> None:
    batch = [row(f"r{index}", BASE_US + index) for index in range(50)]
    await store.write(batch)
    await store.write([*batch[25:], row("new", BASE_US + 99)])

    assert await count(store) == 51


async def test_a_request_id_a_client_reuses_keeps_both_requests_and_shows_the_newest(store: RecordStore) -> None:
    await store.write([row("same", BASE_US, status=500), row("same", BASE_US + 5, status=200)])

    found = await store.select(*_sql(queries.one(store.dialect, "same")))

    assert await count(store) == 2
    assert found[0][COLUMNS.index("status")] == 200


async def test_pruning_deletes_old_rows_a_batch_at_a_time_and_keeps_the_rest(store: RecordStore) -> None:
    await store.write([row(f"old{index}", BASE_US + index) for index in range(2500)])
    await store.write([row(f"new{index}", BASE_US + MINUTE_US + index) for index in range(5)])

    deleted = await prune(store, BASE_US + MINUTE_US, batch=1000, pause_s=0)

    assert deleted == 2500
    assert await count(store) == 5


async def test_text_an_upstream_or_caller_controls_is_stored_whatever_it_holds(store: RecordStore) -> None:
    await store.write([row("odd", BASE_US, model="a\ufffdb", error="é", prompt_tokens=2**62)])

    [found] = await store.select(*_sql(queries.one(store.dialect, "odd")))

    assert found[COLUMNS.index("model")] == "a\ufffdb"
    assert found[COLUMNS.index("prompt_tokens")] == 2**62


async def test_stats_give_nearest_rank_percentiles_per_bucket(store: RecordStore) -> None:
    first = [row(f"a{n}", BASE_US + n, latency_ms=float(n)) for n in range(1, 101)]  # 1..100 ms
    second = [row(f"b{n}", BASE_US + 2 * MINUTE_US + n, latency_ms=n * 10.0, status=502) for n in range(1, 4)]
    await store.write(first + second + [row("late", BASE_US + 3 * MINUTE_US)])
    window = Filters(since_us=BASE_US, until_us=BASE_US + 3 * MINUTE_US)

    found = await store.select(*_sql(queries.stats(store.dialect, window, 60)))

    buckets = [(int(b), int(n), int(e), p50, p95) for b, n, e, p50, p95, *_ in found]
    assert buckets == [(0, 100, 0, 50.0, 95.0), (2, 3, 3, 20.0, 30.0)]


async def test_spend_sums_are_exact_integers(store: RecordStore) -> None:
    rows = [row(f"t{n}", BASE_US + n, key=f"k{n % 3}", team="x", cost_nano=10**12 + n) for n in range(300)]
    await store.write([*rows, row("hit", BASE_US + 400, key="k0", cache="hit", cost_nano=0)])

    found = await store.select(*_sql(queries.spend(store.dialect, Filters(), "key")))

    by_key = {group: (int(requests), int(prompt), int(cost)) for group, requests, prompt, _, cost in found}
    assert by_key["k0"] == (101, 100, sum(10**12 + n for n in range(0, 300, 3)))  # a cache hit's tokens: 0
    assert sum(cost for _, _, cost in by_key.values()) == sum(10**12 + n for n in range(300))


def _sql(sql: queries.Sql) -> tuple[str, list[Any]]:
    return sql.text, sql.params


def switches_to_wal(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every `PRAGMA journal_mode=WAL` that connections opened from now on begin to run (from the
    thread that runs it)."""
    seen: list[str] = []
    connect = sqlite3.connect

    def traced(*args: Any, **kwargs: Any) -> sqlite3.Connection:
        connection: sqlite3.Connection = connect(*args, **kwargs)
        connection.set_trace_callback(lambda sql: seen.append(sql) if "journal_mode=WAL" in sql else None)
        return connection

    monkeypatch.setattr(sqlite3, "connect", traced)
    return seen


async def test_a_new_sqlite_file_opens_while_another_worker_holds_a_lock_on_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Workers open a new file together (their first rows, or their last ones at shutdown): one
    switching it to WAL waits for the others' locks, as a write does. (SQLite does not wait there by
    itself: the worker failed at once, `database is locked`, and lost its last rows at shutdown.)"""
    path = tmp_path / "requests.db"
    other = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    other.execute("CREATE TABLE other_worker (x)")  # a file still in the default (rollback) journal mode
    other.execute("BEGIN IMMEDIATE")  # the write lock, as another worker switching the file to WAL holds it
    switches = switches_to_wal(monkeypatch)
    store = SqliteStore(path)
    try:
        opening = asyncio.ensure_future(store.open())
        # The store meets the lock: it tried the switch and, refused, tries again (it waits up to 5 s).
        # Seen, not timed: a fixed pause let a slow machine release the lock before the store came.
        async with asyncio.timeout(30):
            while len(switches) < 2 and not opening.done():  # noqa: ASYNC110 - set in the store's thread
                await asyncio.sleep(0.005)
        assert not opening.done(), opening  # still waiting for the lock, not failed
        other.execute("COMMIT")
        await opening
        await store.write([row("r1", BASE_US)])
        assert await count(store) == 1
    finally:
        other.close()
        await store.close()
    with sqlite3.connect(path) as again:
        assert again.execute("PRAGMA journal_mode").fetchone() == ("wal",)
