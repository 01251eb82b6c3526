"""The request log's admin API, GET routes added to the admin sub-application (whose middleware
checks the admin key; nothing here changes who may call):

    GET /admin/requests               the log, newest first, filtered, a page at a time
    GET /admin/requests/{request_id}  one record
    GET /admin/requests/stats         requests, errors, latency, tokens and cost per time bucket
    GET /admin/requests/spend         requests, tokens and cost by key, team, deployment, model or day (+ CSV)

With the log off every one answers 404 `request_log_disabled`; with its database unreachable,
503 `request_log_unavailable`.
"""

from __future__ import annotations

import csv
import io
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import orjson
from aiohttp import web

from gateway.api.errors import GatewayError, InvalidRequest, NotFound
from gateway.requestlog import queries
from gateway.requestlog.filters import (
    FILTERS,
    Filters,
    decode_cursor,
    encode_cursor,
    filters_of,
    integer,
    read_query,
)
from gateway.requestlog.queries import DAY_US, SPEND_GROUPS, Sql
from gateway.requestlog.rows import COLUMNS, api_record, timestamp
from gateway.requestlog.stores.base import RecordStore, StoreUnavailable

MAX_BUCKETS = 10_000
DEFAULT_STATS_SPAN_US = 3600 * 1_000_000
SPEND_COLUMNS = ("group", "requests", "prompt_tokens", "completion_tokens", "cost_usd")
_TS, _ID = COLUMNS.index("ts"), COLUMNS.index("id")
_FORMULA_START = ("=", "+", "@", "\t", "\r")


class RequestLogRoutes:
    def __init__(self, store: Callable[[], RecordStore | None]) -> None:
        """`store()`: the app's store, None when the log is off."""
        self._store = store

    def add_to(self, admin: web.Application) -> None:
        admin.router.add_get("/requests", self.list_requests)
        admin.router.add_get("/requests/stats", self.stats)  # before {request_id}, which would match them
        admin.router.add_get("/requests/spend", self.spend)
        admin.router.add_get("/requests/{request_id}", self.show)

    async def list_requests(self, request: web.Request) -> web.Response:
        store = self._open_store()
        values = read_query(request.query, (*FILTERS, "limit", "cursor"))
        filters = filters_of(values)
        limit = integer(values, "limit", 50, 1, 500)
        after = decode_cursor(values["cursor"]) if "cursor" in values else None
        rows = await _select(store, queries.page(store.dialect, filters, limit, after))
        more, rows = len(rows) > limit, rows[:limit]
        cursor = encode_cursor(rows[-1][_TS], rows[-1][_ID]) if more else None
        return _json({"object": "list", "data": [api_record(row) for row in rows], "next_cursor": cursor})

    async def show(self, request: web.Request) -> web.Response:
        store = self._open_store()
        request_id = request.match_info["request_id"]
        rows = await _select(store, queries.one(store.dialect, request_id))
        if not rows:
            raise NotFound(f"No request {request_id[:128]!r} in the request log.")
        return _json(api_record(rows[0]))

    async def stats(self, request: web.Request) -> web.Response:
        store = self._open_store()
        values = read_query(request.query, (*FILTERS, "bucket_s"))
        bucket_s = integer(values, "bucket_s", 60, 1, 86_400)
        filters = _stats_window(filters_of(values), bucket_s * 1_000_000)
        assert filters.since_us is not None
        assert filters.until_us is not None
        count = -(-(filters.until_us - filters.since_us) // (bucket_s * 1_000_000))
        if count > MAX_BUCKETS:
            raise InvalidRequest(
                f"since..until holds {count} buckets of {bucket_s} s; at most {MAX_BUCKETS}: raise bucket_s.",
                param="bucket_s",
            )
        found = {row[0]: row for row in await _select(store, queries.stats(store.dialect, filters, bucket_s))}
        buckets = [_bucket(filters.since_us + index * bucket_s * 1_000_000, found.get(index)) for index in range(count)]
        return _json({"bucket_s": bucket_s, "buckets": buckets})

    async def spend(self, request: web.Request) -> web.Response:
        store = self._open_store()
        values = read_query(request.query, (*FILTERS, "group_by", "format"))
        group_by = values.get("group_by", "key")
        if group_by not in SPEND_GROUPS:
            raise InvalidRequest(f"group_by must be one of {', '.join(SPEND_GROUPS)}.", param="group_by")
        output = values.get("format", "json")
        if output not in ("json", "csv"):
            raise InvalidRequest("format must be json or csv.", param="format")
        rows = await _select(store, queries.spend(store.dialect, filters_of(values), group_by))
        data = _spend_rows(rows, group_by)
        if output == "csv":
            return _csv(data, f"spend-by-{group_by}.csv")
        for item in data:
            item["cost_usd"] = item.pop("cost_nano") / 1e9
        return _json({"group_by": group_by, "data": data})

    def _open_store(self) -> RecordStore:
        store = self._store()
        if store is None:
            raise NotFound(
                "The request log is off (request_log.enabled: false, or no request_log.url for a config "
                "not read from a file).",
                code="request_log_disabled",
            )
        return store


async def _select(store: RecordStore, sql: Sql) -> list[tuple[Any, ...]]:
    try:
        await store.open()
        return await store.select(sql.text, sql.params)
    except StoreUnavailable:
        raise GatewayError(
            "The request log's database cannot be reached now; try again later.",
            status=503,
            code="request_log_unavailable",
        ) from None


def _stats_window(filters: Filters, bucket_us: int) -> Filters:
    """until: now when not given; since: an hour before until, on a bucket's boundary, when not given."""
    until = filters.until_us if filters.until_us is not None else int(time.time() * 1_000_000) + 1
    since = filters.since_us
    if since is None:
        since = (until - DEFAULT_STATS_SPAN_US) // bucket_us * bucket_us
    if since >= until:
        raise InvalidRequest("since must be before until.", param="since")
    return Filters(**{**_fields(filters), "since_us": since, "until_us": until})


def _fields(filters: Filters) -> dict[str, Any]:
    return {name: getattr(filters, name) for name in Filters.__slots__}


def _bucket(start_us: int, row: tuple[Any, ...] | None) -> dict[str, Any]:
    requests, errors, p50, p95, prompt, completion, cost = row[1:] if row is not None else (0, 0, None, None, 0, 0, 0)
    return {
        "start": timestamp(start_us),
        "requests": int(requests),
        "errors": int(errors or 0),
        "p50_ms": p50,
        "p95_ms": p95,
        "prompt_tokens": int(prompt or 0),
        "completion_tokens": int(completion or 0),
        "cost_usd": int(cost or 0) / 1e9,
    }


def _spend_rows(rows: list[tuple[Any, ...]], group_by: str) -> list[dict[str, Any]]:
    """Each group's sums (cost in nano-dollars), in the order shown: days in order, others most
    expensive first, then the busiest."""
    data = [
        {
            "group": _day(group) if group_by == "day" else group,
            "requests": int(requests),
            "prompt_tokens": int(prompt),
            "completion_tokens": int(completion),
            "cost_nano": int(cost),
        }
        for group, requests, prompt, completion, cost in rows
    ]
    if group_by == "day":
        data.sort(key=lambda item: item["group"])
    else:
        data.sort(key=lambda item: (-int(item["cost_nano"]), -int(item["requests"]), item["group"] or ""))
    return data


def _day(number: int) -> str:
    return datetime.fromtimestamp(int(number) * DAY_US / 1_000_000, UTC).strftime("%Y-%m-%d")


def _csv(data: list[dict[str, Any]], filename: str) -> web.Response:
    text = io.StringIO()
    writer = csv.writer(text, lineterminator="\r\n")
    writer.writerow(SPEND_COLUMNS)
    for item in data:
        nano = item["cost_nano"]
        cost = f"{nano // 1_000_000_000}.{nano % 1_000_000_000:09d}"  # exact: the sum of integers
        writer.writerow(
            [_cell(item["group"]), item["requests"], item["prompt_tokens"], item["completion_tokens"], cost]
        )
    return web.Response(
        text=text.getvalue(),
        content_type="text/csv",
        headers={"Content-Disposition": f'attachment; filename="{filename}"'},
    )


def _cell(value: Any) -> Any:
    """A spreadsheet reads a cell starting with = + - @ as a formula: a caller's value never is one."""
    if value is None:
        return ""
    if isinstance(value, str) and (value.startswith(_FORMULA_START) or (value.startswith("-") and len(value) > 1)):
        return "'" + value
    return value


def _json(payload: dict[str, Any]) -> web.Response:
    return web.Response(body=orjson.dumps(payload), content_type="application/json")
