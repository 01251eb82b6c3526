"""`POST /v1/responses` where the answer may come from a deployment that speaks the Responses API
itself (`responses: native`): its `response`, plain, streamed or replayed from the cache, goes out
as it came (after the output checks) and is stored under its own id for the key that made it, as
a bridged one is; an answer from a bridged deployment (a fallback, or the route's own) is rendered
by the bridge's edge (`edge.ResponsesEdge`).

What is stored of a native answer: the `response` as the client got it, this request's input items
as the upstream got them (after the input guardrails), the previous_response_id it continued, and,
when the answer was the deployment's own relayed as it came (no output check changed it), that
deployment's name (`upstream`): a request continuing it on that deployment passes
previous_response_id through (`gateway.api.responses.native`). An answer from the cache, or from
an identical request's call, is stored only when its id is not stored yet for this key.

A stream is written as OpenAI writes it (`ResponsesFrames`): each event under its name; after a
native stream's own closing event nothing, after the bridge's `data: [DONE]` as before.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from typing import Any

import orjson

from gateway.api.errors import GatewayError
from gateway.api.responses.bridge import new_id
from gateway.api.responses.items import stored_form
from gateway.pipeline.exchange import ClientScope
from gateway.pipeline.responses.edge import ResponsesEdge
from gateway.pipeline.responses.store import StorageUnavailable
from gateway.pipeline.streaming import DONE_FRAME
from providers.base import CompletionStream, NativeRequest

log = logging.getLogger(__name__)

_TYPED = b'{"type":"'  # how an OpenAI event's data begins
# The frame head of each of the Responses API's usual events, made once.
_HEADS = {
    name: b"event: " + name + b"\ndata: "
    for name in (
        b"response.created",
        b"response.in_progress",
        b"response.output_item.added",
        b"response.content_part.added",
        b"response.output_text.delta",
        b"response.output_text.done",
        b"response.content_part.done",
        b"response.output_item.done",
        b"response.function_call_arguments.delta",
        b"response.function_call_arguments.done",
        b"response.reasoning_summary_part.added",
        b"response.reasoning_summary_text.delta",
        b"response.reasoning_summary_text.done",
        b"response.reasoning_summary_part.done",
        b"response.completed",
        b"response.incomplete",
        b"response.failed",
        b"error",
    )
}
# A Responses stream's closing events: each carries the whole `response`.
CLOSING = frozenset({b"response.completed", b"response.incomplete", b"response.failed"})


def event_name(payload: bytes) -> bytes | None:
    """The `type` of a stream event's data, as its SSE event name; None when it has none to give."""
    if payload.startswith(_TYPED):
        end = payload.find(b'"', 9)
        name = payload[9:end] if end > 9 else b""
    else:
        try:
            event = orjson.loads(payload)
        except orjson.JSONDecodeError:
            return None
        kind = event.get("type") if isinstance(event, dict) else None
        name = kind.encode() if isinstance(kind, str) else b""
    if name and name.isascii() and name.replace(b".", b"").replace(b"_", b"").isalnum():
        return name
    return None


class ResponsesFrames:
    """How a `/v1/responses` stream is written (the relay's `Framing`): `event: <type>` and its data."""

    def __init__(self) -> None:
        self.native = False  # a deployment's own events: nothing follows its closing event
        self._sent = 0  # events written: the next one's sequence number

    def frames(self, payloads: list[bytes]) -> bytes:
        out: list[bytes] = []
        for payload in payloads:
            # Inline, not a call per event: OpenAI writes `type` first, and its events' frame heads
            # are made once; another event is named as its data says.
            head = _HEADS.get(payload[9 : payload.find(b'"', 9)]) if payload.startswith(_TYPED) else None
            if head is None:
                name = event_name(payload)
                head = b"data: " if name is None else b"event: " + name + b"\ndata: "
            out += (head, payload, b"\n\n")
        self._sent += len(payloads)
        return b"".join(out)

    def last(self) -> bytes:
        return b"" if self.native else DONE_FRAME

    def error(self, error: GatewayError) -> bytes:
        """A failure after the stream began: the bridge wrote its own events; a native stream gets
        the Responses API's `error` event."""
        if not self.native:
            return error.sse_frame()
        event = {
            "type": "error",
            "code": error.code or error.type,
            "message": error.message,
            "param": None,
            "sequence_number": self._sent,
        }
        return b"event: error\ndata: " + orjson.dumps(event) + b"\n\n"


class NativeResponses:
    """The answer of a request a native deployment may answer (`flow.AnswerRenderer`)."""

    def __init__(self, bridged: ResponsesEdge, native: NativeRequest, own_items: int) -> None:
        self.bridged = bridged
        self.native = native
        self.own_items = own_items  # this request's own input items: the last of the body's (after a chain)
        self.framing = ResponsesFrames()

    def bridged_edge(self) -> ResponsesEdge:
        """The bridge's edge, for an answer from a bridged deployment (its response id drawn now)."""
        bridge = self.bridged.bridge
        if not bridge.id:
            bridge.id = new_id("resp")
        return self.bridged

    async def body(self, raw: bytes, scope: ClientScope | None = None) -> bytes:
        made = self.native.outcome.response_id
        if made is not None:  # this call's own native answer: stored as it goes out, without reading it again
            await self.save(made, raw)
            return raw
        answer = orjson.loads(raw)
        if answer.get("object") != "response":  # a chat answer (a bridged deployment's, or from the cache)
            return await self.bridged_edge().body(raw, scope)
        if isinstance(answer.get("id"), str):
            await self.save(answer["id"], answer)
        return raw

    def stream(self, upstream: CompletionStream, scope: ClientScope | None = None) -> CompletionStream:
        return _Relayed(upstream, self)  # a bridged answer's closing events are its last read: `ResponsesFrames`

    async def replayed(self, payloads: list[bytes], scope: ClientScope | None = None) -> list[bytes]:
        if not payloads or event_name(payloads[0]) != b"response.created":  # chat chunks: the bridge's
            return await self.bridged_edge().replayed(payloads, scope)
        self.framing.native = True
        final = closing_response(payloads[-1])
        if final is not None and isinstance(final.get("id"), str):
            await self.save(final["id"], final)
        return payloads

    async def save(self, response_id: str, answer: dict[str, Any] | bytes) -> None:
        """Store a native `response` (as the client got it: its bytes, or parsed) for its owner
        (unless `store: false`)."""
        store = self.bridged.store
        if store is None:
            return
        outcome = self.native.outcome
        try:
            if outcome.deployment is None and await store.get(response_id, self.bridged.owner) is not None:
                return  # from the cache or an identical request: stored when it was made
            # This request's own input items, as the upstream got them (the chain's are stored already).
            own = self.native.body.get("input")
            items = [{"type": "message", "role": "user", "content": own}] if isinstance(own, str) else own or []
            items = items[len(items) - self.own_items :]
            prefix = f"msg_{response_id.removeprefix('resp_')}"
            record = {
                "owner": self.bridged.owner,
                "response": orjson.Fragment(answer) if isinstance(answer, bytes) else answer,
                "input_items": [stored_form(item, f"{prefix}_{n}") for n, item in enumerate(items)],
                "previous": self.bridged.bridge.request.previous_response_id,
                # The deployment that answered it, whose upstream keeps a copy (deleted with this one),
                # and, when relayed as it came, may be sent previous_response_id as it is.
                "native": outcome.deployment,
                "upstream": None if outcome.changed else outcome.deployment,
            }
            await store.put(response_id, orjson.dumps(record))
        except StorageUnavailable as error:  # the answer is delivered all the same; only its storage failed
            log.warning("response %s was not stored: %s", response_id, error.message)


def closing_response(payload: bytes) -> dict[str, Any] | None:
    """The `response` a closing event carries; None when `payload` is not one."""
    name = event_name(payload)
    if name not in CLOSING:
        return None
    response = orjson.loads(payload).get("response")
    return response if isinstance(response, dict) else None


class _Relayed:
    """The upstream's stream as it came when it is a native one (its `response` stored before the
    closing event goes out), else the bridge's events made of its chat chunks."""

    def __init__(self, upstream: CompletionStream, edge: NativeResponses) -> None:
        self._upstream = upstream
        self._edge = edge

    async def __aiter__(self) -> AsyncIterator[list[bytes]]:
        events = aiter(self._upstream)
        first: list[bytes] = []
        async for payloads in events:
            if payloads:
                first = payloads
                break
        if not first or event_name(first[0]) != b"response.created":
            async for payloads in self._edge.bridged_edge().stream(_Rest(first, events, self._upstream)):
                yield payloads
            return
        self._edge.framing.native = True
        save = self._edge.save
        batch: list[bytes] | None = first
        while batch is not None:
            if batch:
                last = batch[-1]  # the closing event ends the stream: the last of its read
                closes = b'"response.completed"' in last or b'"response.incomplete"' in last
                if closes or b'"response.failed"' in last:
                    final = closing_response(last)  # (a text that names one is escaped: never a match)
                    if final is not None and isinstance(final.get("id"), str):
                        await save(final["id"], final)
                yield batch
            batch = await anext(events, None)

    async def aclose(self) -> None:
        await self._upstream.aclose()


class _Rest:
    """A stream whose first read was taken: that read, then the rest."""

    def __init__(self, first: list[bytes], events: AsyncIterator[list[bytes]], stream: CompletionStream) -> None:
        self._first = first
        self._events = events
        self._stream = stream

    async def __aiter__(self) -> AsyncIterator[list[bytes]]:
        if self._first:
            yield self._first
        async for payloads in self._events:
            yield payloads

    async def aclose(self) -> None:
        await self._stream.aclose()
