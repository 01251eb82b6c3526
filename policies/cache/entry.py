"""The stored value: a complete `text_completion` body (or another API's answer: chat, embeddings,
a native Messages answer) and when it was made, and its encoding.

Encoded as one orjson header line (format version, creation and expiry times) followed by the
body bytes exactly as a non-streamed call returned them, so a hit relays those bytes without
re-serialising. Anything that does not decode to a complete completion is `CorruptEntry`.

An entry assembled from a stream whose client did not ask for usage has none, where a plain call
(or a stream with `include_usage`) would have had it: `without_usage` marks it, so such requests
do not take it (see `CachePlan.accepts`). Older blobs without the flag decode as `False`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TypeGuard

import orjson

from policies.cache.native_events import check_native, is_native

ENTRY_FORMAT_VERSION = 1
ENTRY_OVERHEAD_BYTES = 128  # bookkeeping counted beside the body in the memory tier's byte bound


class CorruptEntry(ValueError):
    """A stored blob that is not a complete entry of the current format."""


@dataclass(frozen=True, slots=True)
class CacheEntry:
    body: bytes  # the `text_completion` JSON, as a non-streamed call returns it
    created_at: float  # unix seconds
    expires_at: float  # unix seconds
    without_usage: bool = False  # from a stream that did not ask for usage, and it has none

    @property
    def nbytes(self) -> int:
        return len(self.body) + ENTRY_OVERHEAD_BYTES

    def age_s(self, now: float) -> float:
        return max(0.0, now - self.created_at)

    def expired(self, now: float) -> bool:
        return now >= self.expires_at

    def response(self) -> dict[str, Any]:
        """The body parsed (for replay as a stream)."""
        parsed: dict[str, Any] = orjson.loads(self.body)
        return parsed


def make_entry(body: bytes, *, now: float, ttl_s: float, usage_requested: bool = True) -> CacheEntry:
    """An entry for a completion body; raises `CorruptEntry` when the body is not a complete one.

    `usage_requested`: False for a stream whose client did not ask for usage."""
    try:
        parsed = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise CorruptEntry(f"body is not JSON: {exc}") from exc
    check_completion(parsed)
    without_usage = not usage_requested and parsed.get("usage") is None
    # A right-sized copy: a body built by orjson keeps the allocation of its growing buffer (about
    # 4 KiB for a short answer), which the memory tier's byte count would not see.
    compact = bytes(memoryview(body))
    return CacheEntry(body=compact, created_at=now, expires_at=now + ttl_s, without_usage=without_usage)


def encode_entry(entry: CacheEntry) -> bytes:
    header: dict[str, Any] = {"v": ENTRY_FORMAT_VERSION, "created_at": entry.created_at, "expires_at": entry.expires_at}
    if entry.without_usage:
        header["without_usage"] = True
    return orjson.dumps(header) + b"\n" + entry.body


def decode_entry(blob: bytes) -> CacheEntry:
    """The entry in `blob`; raises `CorruptEntry` for a truncated, foreign or older-format blob."""
    header_bytes, newline, body = blob.partition(b"\n")
    if not newline:
        raise CorruptEntry("no header line")
    try:
        header = orjson.loads(header_bytes)
        parsed = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise CorruptEntry(f"not JSON: {exc}") from exc
    if not isinstance(header, dict) or header.get("v") != ENTRY_FORMAT_VERSION:
        raise CorruptEntry("unknown format version")
    created_at, expires_at = header.get("created_at"), header.get("expires_at")
    if not (_is_number(created_at) and _is_number(expires_at)):
        raise CorruptEntry("bad timestamps")
    without_usage = header.get("without_usage", False)
    if type(without_usage) is not bool:
        raise CorruptEntry("bad without_usage flag")
    check_completion(parsed)
    return CacheEntry(body=body, created_at=created_at, expires_at=expires_at, without_usage=without_usage)


def check_completion(value: Any) -> None:
    """Raise `CorruptEntry` unless `value` is a finished `text_completion` (or `chat.completion`,
    whose choices hold a `message` where a completion's hold `text`) with its choices, an
    embeddings `list` with its embeddings, or a native answer (`native_events`)."""
    if isinstance(value, Mapping) and is_native(value):
        problem = check_native(value)
        if problem is not None:
            raise CorruptEntry(problem)
        return
    kind = value.get("object") if isinstance(value, Mapping) else None
    if kind == "list":
        _check_embeddings(value)
        return
    if kind not in ("text_completion", "chat.completion"):
        raise CorruptEntry("not a text_completion or chat.completion object")
    choices = value.get("choices")
    if not isinstance(choices, list) or not choices:
        raise CorruptEntry("no choices")
    answer, shape = ("text", str) if kind == "text_completion" else ("message", Mapping)
    for choice in choices:
        if not (
            isinstance(choice, Mapping)
            and isinstance(choice.get(answer), shape)
            and type(choice.get("index")) is int
            and isinstance(choice.get("finish_reason"), str)
        ):
            raise CorruptEntry("a choice lacks its text, index or finish_reason")


def _check_embeddings(value: Mapping[str, Any]) -> None:
    data = value.get("data")
    if not isinstance(data, list) or not data:
        raise CorruptEntry("no embeddings")
    for item in data:
        if not (
            isinstance(item, Mapping)
            and isinstance(item.get("embedding"), (list, str))
            and type(item.get("index")) is int
        ):
            raise CorruptEntry("an embedding lacks its vector or index")


def _is_number(value: Any) -> TypeGuard[float]:
    return type(value) in (int, float) and math.isfinite(value)
