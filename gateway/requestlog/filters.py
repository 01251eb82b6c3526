"""The admin API's query parameters, read and checked: a bad one is a 400 naming it.

An empty value is no filter (`?key=&team=` is what a form sends). Times are RFC 3339
(`2026-12-07T14:02:00Z`; without a zone: UTC) or epoch seconds. The cursor is opaque to clients:
the (ts, id) of the last row of the page before, base64url-encoded.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Collection
from dataclasses import dataclass
from datetime import UTC, datetime

from multidict import MultiMapping

from gateway.api.errors import InvalidRequest

# The parameters every read takes, then each endpoint's own.
FILTERS = ("key", "team", "deployment", "model", "api", "status", "error", "since", "until", "request_id", "trace_id")
MAX_VALUE_CHARS = 256
_STATUS = re.compile(r"^(?:([1-5])xx|([1-5][0-9][0-9]))$", re.IGNORECASE)
_EPOCH = re.compile(r"^[0-9]{1,12}(?:\.[0-9]{1,6})?$")


@dataclass(frozen=True, slots=True)
class Filters:
    key: str | None = None
    team: str | None = None
    deployment: str | None = None
    model: str | None = None
    api: str | None = None
    error: str | None = None
    request_id: str | None = None
    trace_id: str | None = None
    status: int | None = None  # one status
    status_class: int | None = None  # 4: 400 to 499
    since_us: int | None = None  # inclusive
    until_us: int | None = None  # exclusive

    def equal_to(self) -> list[tuple[str, str]]:
        """(column, value) of each text filter given; `request_id` is the `id` column."""
        given = (
            ("key", self.key),
            ("team", self.team),
            ("deployment", self.deployment),
            ("model", self.model),
            ("api", self.api),
            ("error", self.error),
            ("id", self.request_id),
            ("trace_id", self.trace_id),
        )
        return [(column, value) for column, value in given if value is not None]


def read_query(query: MultiMapping[str], allowed: Collection[str]) -> dict[str, str]:
    """The parameters given, each once and known; empty ones left out."""
    values: dict[str, str] = {}
    for name in query:
        if name not in allowed:
            raise InvalidRequest(
                f"Unknown query parameter {name!r}; this endpoint takes {', '.join(allowed)}.", param=name
            )
        if len(query.getall(name)) > 1:
            raise InvalidRequest(f"The query parameter {name!r} is given more than once.", param=name)
        value = query[name]
        if len(value) > MAX_VALUE_CHARS:
            raise InvalidRequest(f"{name} is longer than {MAX_VALUE_CHARS} characters.", param=name)
        if value:
            values[name] = value
    return values


def filters_of(values: dict[str, str]) -> Filters:
    status = status_class = None
    if "status" in values:
        status, status_class = _status(values["status"])
    since = time_us("since", values["since"]) if "since" in values else None
    until = time_us("until", values["until"]) if "until" in values else None
    if since is not None and until is not None and since >= until:
        raise InvalidRequest("since must be before until.", param="since")
    return Filters(
        key=values.get("key"),
        team=values.get("team"),
        deployment=values.get("deployment"),
        model=values.get("model"),
        api=values.get("api"),
        error=values.get("error"),
        request_id=values.get("request_id"),
        trace_id=values.get("trace_id"),
        status=status,
        status_class=status_class,
        since_us=since,
        until_us=until,
    )


def _status(text: str) -> tuple[int | None, int | None]:
    match = _STATUS.match(text)
    if match is None:
        raise InvalidRequest("status must be an HTTP status (200) or a class (2xx, 4xx, 5xx).", param="status")
    return (int(match[2]), None) if match[2] else (None, int(match[1]))


def time_us(name: str, text: str) -> int:
    """RFC 3339 or epoch seconds, as microseconds since the epoch."""
    if _EPOCH.match(text):
        return round(float(text) * 1_000_000)
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise InvalidRequest(f"{name} must be RFC 3339 (2026-12-07T14:02:00Z) or epoch seconds.", param=name) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return round(moment.timestamp() * 1_000_000)


def integer(values: dict[str, str], name: str, default: int, lowest: int, highest: int) -> int:
    text = values.get(name)
    if text is None:
        return default
    if not text.isdecimal() or not lowest <= int(text) <= highest:
        raise InvalidRequest(f"{name} must be a whole number from {lowest} to {highest}.", param=name)
    return int(text)


def encode_cursor(ts: int, request_id: str) -> str:
    return base64.urlsafe_b64encode(f"{ts}:{request_id}".encode()).decode().rstrip("=")


def decode_cursor(text: str) -> tuple[int, str]:
    try:
        decoded = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)).decode()
        ts, _, request_id = decoded.partition(":")
        if request_id and ts.lstrip("-").isdecimal():
            return int(ts), request_id
    except (binascii.Error, UnicodeDecodeError, ValueError):
        pass
    raise InvalidRequest("cursor is not one this API gave (use next_cursor as it came).", param="cursor")
