"""The request log's schema, as ordered steps: each store applies those its database has not had
yet, in one transaction, under a lock (several workers and replicas may start at once), and notes
each step's version in `request_log_schema_version`.

Add a step, never edit one that shipped. A step that indexes a large existing table on
PostgreSQL should say `CREATE INDEX CONCURRENTLY` in a step of its own (outside a transaction).
"""

from __future__ import annotations

from dataclasses import dataclass

from gateway.requestlog.stores.base import Dialect, SchemaTooNew

VERSION_TABLE = "request_log_schema_version"
# Each (column) index serves its filter newest first: `WHERE key = ? ORDER BY ts DESC, id DESC`.
FILTERED_COLUMNS = ("key", "team", "deployment", "model", "api", "status", "error")


@dataclass(frozen=True, slots=True)
class Migration:
    version: int
    summary: str
    sqlite: tuple[str, ...]
    postgres: tuple[str, ...]

    def statements(self, dialect: Dialect) -> tuple[str, ...]:
        return self.sqlite if dialect == "sqlite" else self.postgres


def _table(text: str, big: str, real: str, boolean: str) -> str:
    return f"""CREATE TABLE request_log (
    id TEXT NOT NULL,
    ts {big} NOT NULL,
    trace_id TEXT,
    key TEXT,
    virtual_key TEXT,
    team TEXT,
    metadata TEXT,
    api TEXT NOT NULL,
    model TEXT,
    deployment TEXT,
    provider TEXT,
    attempts INTEGER,
    status INTEGER NOT NULL,
    error TEXT,
    stream {boolean} NOT NULL,
    cache TEXT,
    guardrails TEXT,
    prompt_tokens {big} NOT NULL,
    completion_tokens {big} NOT NULL,
    cost_nano {big},
    latency_ms {real} NOT NULL,
    ttft_ms {real},
    client TEXT,
    prompt {text},
    response {text},
    PRIMARY KEY (ts, id)
)"""


def _indexes() -> tuple[str, ...]:
    by_column = tuple(
        f"CREATE INDEX request_log_{column}_ts ON request_log ({column}, ts, id)" for column in FILTERED_COLUMNS
    )
    return (
        *by_column,
        "CREATE INDEX request_log_id ON request_log (id)",
        "CREATE INDEX request_log_trace_id ON request_log (trace_id)",
    )


MIGRATIONS = (
    Migration(
        1,
        "the request_log table, keyed by (ts, id), and an index for each filter of the admin API",
        sqlite=(_table("TEXT", "INTEGER", "REAL", "INTEGER"), *_indexes()),
        postgres=(_table("TEXT", "BIGINT", "DOUBLE PRECISION", "BOOLEAN"), *_indexes()),
    ),
)
LATEST = MIGRATIONS[-1].version
CREATE_VERSION_TABLE = f"CREATE TABLE IF NOT EXISTS {VERSION_TABLE} (version INTEGER PRIMARY KEY, applied_at TEXT)"


def pending(current: int) -> tuple[Migration, ...]:
    """The steps a database at version `current` lacks, in order (SchemaTooNew past the latest)."""
    if current > LATEST:
        raise SchemaTooNew(
            f"the request log's schema is at version {current}, later than this gateway knows ({LATEST}): "
            "upgrade the gateway, or point request_log.url at another database"
        )
    return tuple(step for step in MIGRATIONS if step.version > current)
