"""Per-request metadata: `x-gateway-metadata` (alias `x-portkey-metadata`), a JSON object of strings
that a caller adds to its key's own metadata for the access log, its trace and the spend view
(never a metric label).

The key's metadata belongs to the operator: a field the key sets keeps the key's value whatever the
header says (`gateway.observability.record`); the caller may only add fields. Bounds, so a client
cannot make a log line, a span or a Redis hash grow without limit (`observability.metadata`): at
most `max_fields` fields, each name 1-64 of `A-Za-z0-9_.-`, each value a string of at most
`max_value_chars` characters without control characters, the header at most `max_header_bytes`.
Anything else is a 400 `invalid_header` naming the header (its value never quoted). The distinct
values the spend view keeps per field are bounded there (`observability.spend.max_values`).
"""

from __future__ import annotations

from collections.abc import Mapping

import orjson

from gateway.api.errors import invalid_header
from gateway.config.key_policy import METADATA_NAME, has_control_characters
from gateway.config.observability import MetadataConfig

METADATA_HEADERS = ("x-gateway-metadata", "x-portkey-metadata")
_SHAPE = 'it must be a JSON object of strings, e.g. {"team": "search"}'


def read_metadata(headers: Mapping[str, str], bounds: MetadataConfig) -> dict[str, str] | None:
    """The request's metadata (None when it sends none); 400 when the header is malformed."""
    for name in METADATA_HEADERS:
        raw = headers.get(name)
        if raw is not None:
            return _parse(name, raw, bounds)
    return None


def _parse(header: str, raw: str, bounds: MetadataConfig) -> dict[str, str]:
    if len(raw.encode("utf-8", "surrogateescape")) > bounds.max_header_bytes:
        raise invalid_header(header, f"it is longer than {bounds.max_header_bytes} bytes")
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError:
        raise invalid_header(header, _SHAPE) from None
    if not isinstance(value, dict):
        raise invalid_header(header, _SHAPE)
    if len(value) > bounds.max_fields:
        raise invalid_header(header, f"it holds more than {bounds.max_fields} fields")
    for key, item in value.items():
        if not METADATA_NAME.match(key):
            raise invalid_header(header, "a field's name must be 1-64 characters of A-Za-z0-9_.-")
        if not isinstance(item, str):
            raise invalid_header(header, "every value must be a string")
        if len(item) > bounds.max_value_chars:
            raise invalid_header(header, f"a value is longer than {bounds.max_value_chars} characters")
        if has_control_characters(item):
            raise invalid_header(header, "a value holds control characters")
    return value
