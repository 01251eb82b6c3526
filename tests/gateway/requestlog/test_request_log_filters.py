"""The admin API's query parameters, fuzzed: whatever a caller sends is a valid filter or a 400
naming a parameter, never a server error, and a filter's value is only ever data to the database
(run against a real SQLite holding the request log's schema)."""

from __future__ import annotations

import sqlite3

from hypothesis import given, settings
from hypothesis import strategies as st
from multidict import MultiDict

from gateway.api.errors import InvalidRequest
from gateway.requestlog import queries
from gateway.requestlog.filters import FILTERS, Filters, decode_cursor, encode_cursor, filters_of, read_query
from gateway.requestlog.rows import COLUMNS
from gateway.requestlog.stores.migrations import MIGRATIONS

KEYS = ["alpha", "beta", "o'brien", "x' OR '1'='1", "%", "_"]
names = st.sampled_from([*FILTERS, "limit", "cursor", "bogus", "key "])
values = st.one_of(st.text(max_size=40), st.sampled_from(["2xx", "404", "1700000000", "2026-01-01T00:00:00Z", "-1"]))


def database() -> sqlite3.Connection:
    connection = sqlite3.connect(":memory:")
    for statement in MIGRATIONS[0].sqlite:
        connection.execute(statement)
    for index, key in enumerate(KEYS):
        row = {"id": f"r{index}", "ts": index, "key": key, "api": "chat", "status": 200, "stream": 0}
        row |= {"prompt_tokens": 0, "completion_tokens": 0, "latency_ms": 1.0}
        connection.execute(
            f"INSERT INTO request_log ({', '.join(row)}) VALUES ({', '.join('?' * len(row))})",  # noqa: S608
            list(row.values()),
        )
    return connection


DATABASE = database()


def parsed(pairs: list[tuple[str, str]]) -> tuple[Filters, tuple[int, str] | None] | InvalidRequest:
    try:
        given_values = read_query(MultiDict(pairs), (*FILTERS, "limit", "cursor"))
        after = decode_cursor(given_values["cursor"]) if "cursor" in given_values else None
        return filters_of(given_values), after
    except InvalidRequest as refused:
        return refused


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(names, values), max_size=6))
def test_any_query_is_a_filter_or_a_400_naming_a_parameter(pairs: list[tuple[str, str]]) -> None:
    outcome = parsed(pairs)
    if isinstance(outcome, InvalidRequest):
        assert outcome.status == 400
        assert outcome.param in {name for name, _ in pairs}
        return
    filters, after = outcome
    sql = queries.page("sqlite", filters, 50, after)
    rows = DATABASE.execute(sql.text, sql.params).fetchall()  # runs, whatever the values
    if filters.key is not None:
        assert {row[COLUMNS.index("key")] for row in rows} <= {filters.key}


@given(st.sampled_from(KEYS))
def test_a_key_is_matched_as_data_never_as_sql(key: str) -> None:
    filters = filters_of(read_query(MultiDict({"key": key}), FILTERS))
    sql = queries.page("sqlite", filters, 50, None)

    rows = DATABASE.execute(sql.text, sql.params).fetchall()

    assert [row[COLUMNS.index("key")] for row in rows] == [key]


@given(st.integers(min_value=0, max_value=2**62), st.text(min_size=1, max_size=128))
def test_a_cursor_gives_back_the_row_it_was_made_from(ts: int, request_id: str) -> None:
    assert decode_cursor(encode_cursor(ts, request_id)) == (ts, request_id)


def test_every_filter_but_the_common_ones_reads_an_index_of_its_own() -> None:
    searched = {}
    for name, value in [("key", "a"), ("team", "t"), ("deployment", "d"), ("model", "m"), ("status", "5xx"),
                        ("status", "404"), ("error", "e"), ("request_id", "r"), ("trace_id", "t")]:  # fmt: skip
        sql = queries.page("sqlite", filters_of({name: value}), 50, None)
        plan = " ".join(step[3] for step in DATABASE.execute(f"EXPLAIN QUERY PLAN {sql.text}", sql.params))
        searched[f"{name}={value}"] = plan.split(" USING INDEX ")[1].split()[0] if "SEARCH" in plan else plan

    assert searched == {
        "key=a": "request_log_key_ts",
        "team=t": "request_log_team_ts",
        "deployment=d": "request_log_deployment_ts",
        "model=m": "request_log_model_ts",
        "status=5xx": "request_log_status_ts",
        "status=404": "request_log_status_ts",
        "error=e": "request_log_error_ts",
        "request_id=r": "request_log_id",
        "trace_id=t": "request_log_trace_id",
    }
