"""The admin API's reads as SQL that SQLite and PostgreSQL both run, with the dialect's placeholders.

Column names come from this module only; every value a caller gives is a parameter. Pages are
keyset-paginated on (ts, id), newest first, which the table's key and each filter's
(column, ts, id) index serve without an offset: page 1,000 costs what page 1 does.
"""

from __future__ import annotations

from typing import Any

from gateway.requestlog.filters import Filters
from gateway.requestlog.rows import COLUMNS
from gateway.requestlog.stores.base import Dialect

DAY_US = 86_400 * 1_000_000
_SELECTED = ", ".join(COLUMNS)
# The expression each spend grouping sums by; `day` is a UTC day number, named by the caller.
SPEND_GROUPS = {"key": "key", "team": "team", "deployment": "deployment", "model": "model", "day": f"ts / {DAY_US}"}


class Sql:
    """A statement and its parameters. Build its text in reading order: SQLite's `?` are numbered
    by position, so each `param` must be called where its placeholder stands."""

    def __init__(self, dialect: Dialect) -> None:
        self.dialect = dialect
        self.params: list[Any] = []
        self.text = ""

    def param(self, value: Any) -> str:
        self.params.append(value)
        return "?" if self.dialect == "sqlite" else f"${len(self.params)}"

    def where(self, filters: Filters) -> str:
        clauses = [f"{column} = {self.param(value)}" for column, value in filters.equal_to()]
        if filters.status is not None:
            clauses.append(f"status = {self.param(filters.status)}")
        if filters.status_class is not None:
            low = filters.status_class * 100
            clauses.append(f"status >= {self.param(low)} AND status < {self.param(low + 100)}")
        if filters.since_us is not None:
            clauses.append(f"ts >= {self.param(filters.since_us)}")
        if filters.until_us is not None:
            clauses.append(f"ts < {self.param(filters.until_us)}")
        return " AND ".join(clauses) or "TRUE"


def page(dialect: Dialect, filters: Filters, limit: int, after: tuple[int, str] | None) -> Sql:
    """`limit` + 1 rows (the extra one says a next page exists), newest first, after the cursor's row."""
    sql = Sql(dialect)
    condition = sql.where(filters)
    if after is not None:
        condition += f" AND (ts, id) < ({sql.param(after[0])}, {sql.param(after[1])})"
    sql.text = (
        f"SELECT {_SELECTED} FROM request_log WHERE {condition} "  # noqa: S608 - constant columns, values are parameters
        f"ORDER BY ts DESC, id DESC LIMIT {sql.param(limit + 1)}"
    )
    return sql


def one(dialect: Dialect, request_id: str) -> Sql:
    """The newest record of a request id (a client that reuses its `x-request-id` has several)."""
    sql = Sql(dialect)
    condition = f"id = {sql.param(request_id)}"
    sql.text = f"SELECT {_SELECTED} FROM request_log WHERE {condition} ORDER BY ts DESC LIMIT 1"  # noqa: S608
    return sql


def stats(dialect: Dialect, filters: Filters, bucket_s: int) -> Sql:
    """Per bucket of `bucket_s` from `filters.since_us` (which must be set): requests, errors (an
    error answer, or a stream its error ended), p50 and p95 latency (nearest rank), tokens, cost.
    One statement, both dialects: the ranks come from window functions."""
    assert filters.since_us is not None
    sql = Sql(dialect)
    bucket = f"(ts - {sql.param(filters.since_us)}) / {sql.param(bucket_s * 1_000_000)}"
    condition = sql.where(filters)
    sql.text = f"""SELECT bucket, COUNT(*),
    SUM(CASE WHEN status >= 400 OR error IS NOT NULL THEN 1 ELSE 0 END),
    MIN(CASE WHEN rn * 100 >= n * 50 THEN latency_ms END),
    MIN(CASE WHEN rn * 100 >= n * 95 THEN latency_ms END),
    SUM(prompt_tokens), SUM(completion_tokens), SUM(cost_nano)
FROM (
    SELECT bucket, latency_ms, status, error, prompt_tokens, completion_tokens, cost_nano,
        ROW_NUMBER() OVER (PARTITION BY bucket ORDER BY latency_ms) AS rn,
        COUNT(*) OVER (PARTITION BY bucket) AS n
    FROM (
        SELECT {bucket} AS bucket, latency_ms, status, error, prompt_tokens, completion_tokens, cost_nano
        FROM request_log WHERE {condition}
    ) AS filtered
) AS ranked
GROUP BY bucket ORDER BY bucket"""  # noqa: S608 - constant columns, values are parameters
    return sql


def spend(dialect: Dialect, filters: Filters, group_by: str) -> Sql:
    """Requests, tokens and cost (nano-dollars) per group: exact integer sums, across every process
    that writes to the store. A cache hit's tokens were not spent upstream: they count 0 (its cost is 0)."""
    sql = Sql(dialect)
    condition = sql.where(filters)
    sql.text = f"""SELECT {SPEND_GROUPS[group_by]} AS grouped, COUNT(*),
    COALESCE(SUM(CASE WHEN cache = 'hit' THEN 0 ELSE prompt_tokens END), 0),
    COALESCE(SUM(CASE WHEN cache = 'hit' THEN 0 ELSE completion_tokens END), 0),
    COALESCE(SUM(cost_nano), 0)
FROM request_log WHERE {condition} GROUP BY grouped"""  # noqa: S608 - constant columns, values are parameters
    return sql
