"""Native answers in the cache: an Anthropic deployment's own Messages answers (native
pass-through), stored as the client got them and replayed byte for byte.

A plain answer is stored as its JSON, a `{"type": "message", ...}` object, as it was sent to the
client (the upstream's bytes, or what the output checks made of them). A stream is stored as the
data of every event it was sent, in order: `{"type": "message_events", "events": ["<data>", ...]}`
(each as a string, so that its bytes come back exactly), and replayed as those events. The two are
kept under different keys (a native key names `stream`), so each request gets back the kind of
answer it asked for, as it came. A stream is not stored unless it runs from `message_start` to
`message_stop` within the entry bound (an upstream error, or a cut, ends it before either: see
`broadcast`), nor when it is not Anthropic's events (a fallback to a chat deployment answered it).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import orjson

from policies.cache.assemble import StreamAssembler

MESSAGE = "message"
EVENTS = "message_events"


class EventsAssembler(StreamAssembler):
    """Keeps a native stream's events as they were relayed, for `finish` to store."""

    def __init__(self, *, max_bytes: int | None = None) -> None:
        super().__init__(max_bytes=max_bytes)
        self._events: list[str] = []

    def feed(self, payloads: Iterable[bytes]) -> None:
        for payload in payloads:
            if self.failure is not None:
                return
            self._size += len(payload)
            if self.max_bytes is not None and self._size > self.max_bytes:
                self._fail("larger than the entry bound")
                self._events = []  # stop holding what will never be stored
                return
            self._events.append(payload.decode())

    def finish(self) -> dict[str, Any] | None:
        self._done = True
        events = self._events
        whole = bool(events) and _kind(events[0]) == "message_start" and _kind(events[-1]) == "message_stop"
        if self.failure is None and not whole:
            self._fail("not a whole stream of Anthropic's events")
        return None if self.failure is not None else {"type": EVENTS, "events": events}


def _kind(event: str) -> Any:
    try:
        parsed = orjson.loads(event)
    except orjson.JSONDecodeError:
        return None
    return parsed.get("type") if isinstance(parsed, dict) else None


def is_native(value: Mapping[str, Any]) -> bool:
    """Whether a stored value is a native answer (checked by `check_native`)."""
    return value.get("type") in (MESSAGE, EVENTS)


def check_native(value: Mapping[str, Any]) -> str | None:
    """Why `value` is not a whole native answer; None when it is."""
    if value.get("type") == MESSAGE:
        return None if isinstance(value.get("content"), list) else "a message without its content"
    events = value.get("events")
    if not isinstance(events, list) or not events or not all(isinstance(event, str) for event in events):
        return "a stream without its events"
    return None


def replay_events(value: Mapping[str, Any]) -> list[bytes]:
    """A stored stream's events, as they were sent."""
    return [event.encode() for event in value["events"]]
