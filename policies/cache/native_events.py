"""Native answers in the cache: a deployment's own answers in the client's API (native
pass-through: an Anthropic deployment's Messages answers, an OpenAI deployment's Responses
answers), stored as the client got them and replayed byte for byte.

A plain answer is stored as its JSON, as it was sent to the client (the upstream's bytes, or what
the output checks made of them): a `{"type": "message", ...}` object, or a `{"object": "response",
...}` one that finished (`completed` or `incomplete`). A stream is stored as the data of every event
it was sent, in order: `{"type": "message_events" | "response_events", "events": ["<data>", ...]}`
(each as a string, so that its bytes come back exactly), and replayed as those events. The two are
kept under different keys (a native key names `stream`), so each request gets back the kind of
answer it asked for, as it came. A stream is not stored unless it runs whole within the entry
bound: from `message_start` to `message_stop`, or from `response.created` to `response.completed`
(or `.incomplete`); an upstream error, or a cut, ends it before (see `broadcast`), as does a
failed response; nor when it is neither API's events (a fallback to a chat deployment answered it).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import orjson

from policies.cache.assemble import StreamAssembler

MESSAGE = "message"
EVENTS = "message_events"
RESPONSE = "response"  # a Responses answer's `object`
RESPONSE_EVENTS = "response_events"
STREAMS = frozenset({EVENTS, RESPONSE_EVENTS})
FINISHED = frozenset({"completed", "incomplete"})  # a Responses answer's statuses worth replaying
# A whole stream, by its first event: what it is stored as, and the events that may end it.
WHOLE: dict[str, tuple[str, frozenset[str]]] = {
    "message_start": (EVENTS, frozenset({"message_stop"})),
    "response.created": (RESPONSE_EVENTS, frozenset({"response.completed", "response.incomplete"})),
}


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
        found = WHOLE.get(_kind(events[0])) if events else None
        if self.failure is None and (found is None or _kind(events[-1]) not in found[1]):
            self._fail("not a whole stream of a native API's events")
        return None if self.failure is not None or found is None else {"type": found[0], "events": events}


def _kind(event: str) -> Any:
    try:
        parsed = orjson.loads(event)
    except orjson.JSONDecodeError:
        return None
    return parsed.get("type") if isinstance(parsed, dict) else None


def is_native(value: Mapping[str, Any]) -> bool:
    """Whether a stored value is a native answer (checked by `check_native`)."""
    return value.get("type") in (MESSAGE, EVENTS, RESPONSE_EVENTS) or value.get("object") == RESPONSE


def check_native(value: Mapping[str, Any]) -> str | None:
    """Why `value` is not a whole native answer; None when it is."""
    if value.get("type") == MESSAGE:
        return None if isinstance(value.get("content"), list) else "a message without its content"
    if value.get("object") == RESPONSE:
        if value.get("status") not in FINISHED:
            return "a response that did not finish"
        return None if isinstance(value.get("output"), list) else "a response without its output"
    events = value.get("events")
    if not isinstance(events, list) or not events or not all(isinstance(event, str) for event in events):
        return "a stream without its events"
    return None


def replay_events(value: Mapping[str, Any]) -> list[bytes]:
    """A stored stream's events, as they were sent."""
    return [event.encode() for event in value["events"]]
