"""Per-request metadata: `x-gateway-metadata` (alias `x-portkey-metadata`), a JSON object of strings
that labels a request for the access log, its trace and the spend view (never a metric label).

Bounds, so a client cannot make a log line, a span or a Redis hash grow without limit: at most
`MAX_KEYS` keys, each 1-`MAX_KEY_CHARS` of `A-Za-z0-9_.-`, each value a string of at most
`MAX_VALUE_CHARS` characters without control characters, the header at most `MAX_HEADER_BYTES`.
Anything else is a 400 `invalid_header` naming the header (its value never quoted).
The caller's key's own `metadata` lies under it: the request's value wins for a key both give.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping

import orjson

from gateway.api.errors import invalid_header

METADATA_HEADERS = ("x-gateway-metadata", "x-portkey-metadata")
MAX_KEYS = 16
MAX_KEY_CHARS = 64
MAX_VALUE_CHARS = 256
MAX_HEADER_BYTES = 4096
_KEY = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")


def read_metadata(headers: Mapping[str, str]) -> dict[str, str] | None:
    """The request's metadata (None when it sends none); 400 when the header is malformed."""
    for name in METADATA_HEADERS:
        raw = headers.get(name)
        if raw is not None:
            return _parse(name, raw)
    return None


def merged(own: Mapping[str, str] | None, request: dict[str, str] | None) -> dict[str, str] | None:
    """The key's metadata with the request's on top (None when neither has any)."""
    if not own:
        return request
    return {**own, **request} if request else dict(own)


def _parse(header: str, raw: str) -> dict[str, str]:
    if len(raw.encode("utf-8", "surrogateescape")) > MAX_HEADER_BYTES:
        raise invalid_header(header, f"it is longer than {MAX_HEADER_BYTES} bytes")
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError:
        raise invalid_header(header, 'it must be a JSON object of strings, e.g. {"team": "search"}') from None
    if not isinstance(value, dict):
        raise invalid_header(header, 'it must be a JSON object of strings, e.g. {"team": "search"}')
    if len(value) > MAX_KEYS:
        raise invalid_header(header, f"it holds more than {MAX_KEYS} keys")
    for key, item in value.items():
        if not _KEY.match(key):
            raise invalid_header(header, f"a key must be 1-{MAX_KEY_CHARS} characters of A-Za-z0-9_.-")
        if not isinstance(item, str):
            raise invalid_header(header, "every value must be a string")
        if len(item) > MAX_VALUE_CHARS:
            raise invalid_header(header, f"a value is longer than {MAX_VALUE_CHARS} characters")
        if not item.isprintable() and any(unicodedata.category(char) == "Cc" for char in item):
            raise invalid_header(header, "a value holds control characters")
    return value
