"""The Responses API's edge on the chat pipeline: the chat answer rendered as a `response` (plain,
streamed as semantic events, or a cached stream replayed), and stored once it is complete unless
the request said `store: false`. What is stored is what the client received: the answer after the
output guardrails, and the input items as the input guardrails left them.

A stream is translated as the relay writes it (`BridgedFrames`: each read's chunks become the
events written in its place, as the Messages API's edge does), with no layer of its own between
the relay and the upstream; its closing events are made and stored when the relay closes the
stream, and go out with its last frame. A response stored in Redis is written while the call
settles (its usage is final by then), so that the two round trips overlap: one wait, as a chat
call's settling alone, not two in a row. Either way it is stored before the answer's last byte goes
out (a client may read it back at once, from any worker)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable

import orjson

from gateway.api.errors import GatewayError
from gateway.api.responses.bridge import Bridge
from gateway.api.responses.events import EventTranslator
from gateway.api.responses.items import stored_form
from gateway.pipeline.exchange import ClientScope, ShuttingDown
from gateway.pipeline.responses.store import ResponseStore, StorageUnavailable, stored_record
from gateway.pipeline.streaming import DONE_FRAME, frames
from providers.base import CompletionStream, ParsedPayloads

log = logging.getLogger(__name__)


class BridgedFrames:
    """How a bridged stream is written (the relay's `Framing`): once `translating`, each read's chat
    chunks as the events they make (the first read after created and in_progress), the closing
    events with the last frame; before (a replay's events, made already), as chat's frames."""

    def __init__(self) -> None:
        self.frames: Callable[[list[bytes]], bytes] = frames
        self._translator: EventTranslator | None = None
        self._opening: list[bytes] = []  # created and in_progress, until they go out
        self._closing: list[bytes] | None = None  # None until the upstream ended well

    def translating(self, translator: EventTranslator) -> None:
        self._translator = translator
        self._opening = translator.start()
        self.frames = self._events

    def _events(self, payloads: list[bytes]) -> bytes:
        assert self._translator is not None  # set with this method
        if type(payloads) is ParsedPayloads:  # as the relay parsed them to check them
            events = self._translator.feed_chunks(payloads.chunks)
        else:
            events = self._translator.feed_payloads(payloads)
        if self._opening:
            events = self._opening + events
            self._opening = []
        return frames(events)  # none (a role or a finish alone): b"", which the relay's write skips

    def close(self) -> EventTranslator:
        """The upstream ended well: its closing events are made (its `final_json` with them)."""
        assert self._translator is not None
        self._closing = self._opening + self._translator.finish()
        self._opening = []
        return self._translator

    def last(self) -> bytes:
        return frames(self._closing or []) + DONE_FRAME

    def error(self, error: GatewayError) -> bytes:
        """The upstream failed after the stream began: the `error` event and response.failed, then
        the relay's error frame (which alone ends a stream the gateway cut: its shutdown)."""
        translator = self._translator
        if translator is None or self._closing is not None or isinstance(error, ShuttingDown):
            return error.sse_frame()
        events = self._opening + translator.error(error.code, error.message)
        self._opening = []
        return frames(events) + error.sse_frame()


class ResponsesEdge:
    def __init__(self, bridge: Bridge, store: ResponseStore | None, owner: str) -> None:
        self.bridge = bridge
        self.store = store  # None: `store: false`
        self.owner = owner
        self.framing = BridgedFrames()

    async def body(self, raw: bytes, scope: ClientScope | None = None) -> bytes:
        answer = orjson.dumps(self.bridge.response(orjson.loads(raw)))
        await self.save(answer, scope)
        return answer

    def stream(self, upstream: CompletionStream, scope: ClientScope | None = None) -> CompletionStream:
        """With `scope`, the relay writes the events with `framing` (the edge's: the API's own
        answer); without, they are the reads of the stream returned (within another renderer)."""
        if scope is None:
            return _EventStream(upstream, self)
        self.framing.translating(EventTranslator(self.bridge))
        return _Closed(upstream, self, scope)

    async def replayed(self, payloads: list[bytes], scope: ClientScope | None = None) -> list[bytes]:
        translator = EventTranslator(self.bridge)
        events = translator.start() + translator.feed_payloads(payloads) + translator.finish()
        await self.save(translator.final_json, scope)
        return events

    async def save(self, answer: bytes, scope: ClientScope | None = None) -> None:
        """Store the response (`answer`: as the client received it, encoded) with its input items;
        with `scope`, a store that waits on the network writes while the call settles."""
        store = self.store
        if store is None:
            return
        prefix = f"msg_{self.bridge.id.removeprefix('resp_')}"
        stored_items = [stored_form(item, f"{prefix}_{n}") for n, item in enumerate(self.bridge.guarded_items())]
        record = stored_record(self.owner, answer, stored_items, self.bridge.request.previous_response_id)
        try:
            if scope is None or not store.remote:
                await store.put(self.bridge.id, record)
                return
            written = asyncio.ensure_future(store.put(self.bridge.id, record))
            try:
                await scope.settle()  # once: the pipeline's own settle later finds it done
            finally:
                await written
        except StorageUnavailable as error:  # the answer is delivered all the same; only its storage failed
            log.warning("response %s was not stored: %s", self.bridge.id, error.message)


class _Closed:
    """The upstream as it is, read by the relay (its reads translated by the edge's framing), closed
    into the closing events once read to its end: made, stored, then written with the last frame."""

    def __init__(self, upstream: CompletionStream, edge: ResponsesEdge, scope: ClientScope) -> None:
        self._upstream = upstream
        self._edge = edge
        self._scope = scope

    def __aiter__(self) -> AsyncIterator[list[bytes]]:
        return aiter(self._upstream)

    async def aclose(self) -> None:
        await self._upstream.aclose()
        if self._scope.delivered:  # the relay read it to its end (and closes it once)
            translator = self._edge.framing.close()
            await self._edge.save(translator.final_json, self._scope)


class _EventStream:
    """Chat chunks in, Responses events out, as the reads of a stream (a renderer that writes them
    itself: `NativeResponses`). The stream's end (`[DONE]`) brings the closing events and stores the
    response; a failure after the start is an `error` event and `response.failed`, then the error
    the relay reports."""

    def __init__(self, upstream: CompletionStream, edge: ResponsesEdge) -> None:
        self._upstream = upstream
        self._edge = edge
        self._translator = EventTranslator(edge.bridge)

    async def __aiter__(self) -> AsyncIterator[list[bytes]]:
        translator = self._translator
        opening = translator.start()
        try:
            async for payloads in self._upstream:
                if type(payloads) is ParsedPayloads:
                    events = translator.feed_chunks(payloads.chunks)
                else:
                    events = translator.feed_payloads(payloads)
                if opening:
                    events = opening + events
                opening = []
                if events:
                    yield events
        except GatewayError as error:
            yield opening + translator.error(error.code, error.message)
            raise
        closing = opening + translator.finish()
        await self._edge.save(translator.final_json)
        yield closing

    async def aclose(self) -> None:
        await self._upstream.aclose()
