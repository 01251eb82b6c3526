"""One request's row: made from its record as the request ends (attribute reads, no encoding),
encoded for the store in the writer's batches, and decoded into the admin API's record.

Nothing here holds a secret: the caller is its key's name, never the key; no header is kept.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

import orjson

from gateway.observability.bodies import cut_bodies
from gateway.observability.record import GuardrailVerdict, RequestRecord

# The table's columns, in the order of a row.
COLUMNS = (
    "id",
    "ts",  # when the request arrived, in microseconds since the epoch (UTC)
    "trace_id",
    "key",
    "virtual_key",
    "team",
    "metadata",
    "api",
    "model",
    "deployment",
    "provider",
    "attempts",
    "status",
    "error",
    "stream",
    "cache",
    "guardrails",
    "prompt_tokens",
    "completion_tokens",
    "cost_nano",
    "latency_ms",
    "ttft_ms",
    "client",
    "prompt",
    "response",
)
METADATA, GUARDRAILS, PROMPT, RESPONSE = (
    COLUMNS.index(name) for name in ("metadata", "guardrails", "prompt", "response")
)
# Text a caller or an upstream controls: PostgreSQL's text holds no NUL, so it is replaced.
_FREE_TEXT = tuple(COLUMNS.index(name) for name in ("team", "model", "error", "prompt", "response"))
# Counts an upstream reports: held to what a BIGINT column takes.
_COUNTS = tuple(COLUMNS.index(name) for name in ("prompt_tokens", "completion_tokens", "cost_nano"))
_MAX_COUNT = 2**62
MAX_MODEL_CHARS = 256

Row = tuple[Any, ...]


def row_of(record: RequestRecord, team_field: str, max_body_chars: int | None) -> Row:
    """The record as a row, its metadata and verdicts still objects (`encoded` makes them text).
    `max_body_chars` None: no bodies; else the prompt and answer, cut but not yet redacted."""
    metadata = record.metadata
    prompt = response = None
    if max_body_chars is not None:
        prompt, response = cut_bodies(record, max_body_chars)
    return (
        record.request_id,
        int((record.ended_at - record.duration_s) * 1_000_000),
        record.trace_id or None,
        record.key_name or None,
        record.virtual_key or None,
        metadata.get(team_field) if metadata else None,
        metadata or None,
        record.api,
        record.model[:MAX_MODEL_CHARS] or None,
        record.deployment or None,
        record.provider or None,
        record.attempts,
        record.status,
        record.error_code or None,
        record.stream,
        record.cache_status or None,
        record.guardrails or None,
        record.prompt_tokens,
        record.completion_tokens,
        record.cost_nano,
        record.duration_s * 1000,
        record.ttft_s * 1000 if record.ttft_s is not None else None,
        record.client or None,
        prompt or None,
        response or None,
    )


def encoded(rows: Sequence[Row], redact: Callable[[str], str] | None) -> list[Row]:
    """Rows of plain values for the store: metadata and verdicts as JSON text, bodies redacted."""
    out = []
    for row in rows:
        values = list(row)
        if values[METADATA] is not None:
            values[METADATA] = orjson.dumps(values[METADATA]).decode()
        if values[GUARDRAILS] is not None:
            values[GUARDRAILS] = orjson.dumps([_verdict(v) for v in values[GUARDRAILS]]).decode()
        if redact is not None:
            for index in (PROMPT, RESPONSE):
                if values[index] is not None:
                    values[index] = redact(values[index])
        for index in _COUNTS:
            count = values[index]
            if count is not None and not 0 <= count <= _MAX_COUNT:
                values[index] = min(max(count, 0), _MAX_COUNT)
        for index in _FREE_TEXT:
            text = values[index]
            if text is not None and "\x00" in text:
                values[index] = text.replace("\x00", "\ufffd")
        out.append(tuple(values))
    return out


def _verdict(verdict: GuardrailVerdict) -> dict[str, str]:
    return {"policy": verdict.policy, "stage": verdict.stage, "check": verdict.check, "verdict": verdict.verdict}


def api_record(values: Sequence[Any]) -> dict[str, Any]:
    """A stored row (in `COLUMNS` order) as the admin API's RECORD."""
    record = dict(zip(COLUMNS, values, strict=True))
    record["ts"] = timestamp(record["ts"])
    record["metadata"] = orjson.loads(record["metadata"]) if record["metadata"] else {}
    record["guardrails"] = orjson.loads(record["guardrails"]) if record["guardrails"] else []
    record["stream"] = bool(record["stream"])
    cost = record.pop("cost_nano")
    record["cost_usd"] = cost / 1e9 if cost is not None else None
    return {name: record[name] for name in API_FIELDS}


# The RECORD's fields, in the order the admin API gives them.
API_FIELDS = (*COLUMNS[:19], "cost_usd", *COLUMNS[20:])


def timestamp(micros: int) -> str:
    """RFC 3339 in UTC with milliseconds: `2026-12-07T14:02:00.123Z`."""
    moment = datetime.fromtimestamp(micros / 1_000_000, UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"
