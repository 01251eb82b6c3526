"""The Responses API's edge on the chat pipeline: the chat answer rendered as a `response` (plain,
streamed as semantic events, or a cached stream replayed), and stored once it is complete unless
the request said `store: false`. What is stored is what the client received: the answer after the
output guardrails, and the input items as the input guardrails left them.

A response stored in Redis is written while the call settles (its usage is final by then), so that
the two round trips overlap: one wait, as a chat call's settling alone, not two in a row. Either is
done before the answer's last byte goes out (a client may read the response back at once, from any
worker). A stream's closing events go out with its last frame (`BridgedFrames.last`), in one write
once it is stored, not in a write of their own."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator

import orjson

from gateway.api.errors import GatewayError
from gateway.api.responses.bridge import Bridge
from gateway.api.responses.events import EventTranslator
from gateway.api.responses.items import stored_form
from gateway.pipeline.exchange import ClientScope
from gateway.pipeline.responses.store import ResponseStore, StorageUnavailable, stored_record
from gateway.pipeline.streaming import DONE_FRAME, frames
from providers.base import CompletionStream

log = logging.getLogger(__name__)


class BridgedFrames:
    """How a bridged stream is written (the relay's `Framing`): chat's SSE frames, its closing
    events (made once the upstream ended and the response is stored) with the last one."""

    frames = staticmethod(frames)  # as the relay frames a chat stream: no call of ours per write

    def __init__(self) -> None:
        self.closing: list[bytes] = []

    def last(self) -> bytes:
        return frames(self.closing) + DONE_FRAME

    def error(self, error: GatewayError) -> bytes:
        return error.sse_frame()


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
        """The events of `upstream`'s chunks. With `scope` (the relay writes them with `framing`),
        the closing events are made and stored when the relay closes the stream, and go out with
        its last frame; without, they are its last read."""
        return _EventStream(upstream, self, scope)

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


class _EventStream:
    """Chat chunks in, Responses events out (each read of the upstream one write, as the relay does).
    The stream's end (`[DONE]`) brings the closing events and stores the response: at `aclose` when
    the relay writes them with the edge's framing (`scope` given), else as the last read. A failure
    after the start is an `error` event and `response.failed`, then the error the relay reports."""

    def __init__(self, upstream: CompletionStream, edge: ResponsesEdge, scope: ClientScope | None) -> None:
        self._upstream = upstream
        self._edge = edge
        self._scope = scope
        self._translator = EventTranslator(edge.bridge)
        self._opening: list[bytes] = []  # created and in_progress, until they go out
        self._ended = False  # the upstream ended well: the closing events are due

    async def __aiter__(self) -> AsyncIterator[list[bytes]]:
        translator = self._translator
        opening = self._opening = translator.start()
        try:
            async for payloads in self._upstream:
                events = opening + translator.feed_payloads(payloads) if opening else translator.feed_payloads(payloads)
                opening = self._opening = []
                if events:
                    yield events
        except GatewayError as error:
            yield opening + translator.error(error.code, error.message)
            raise
        if self._scope is not None:
            self._ended = True  # made, stored and written when the relay closes the stream
            return
        closing = opening + translator.finish()
        await self._edge.save(translator.final_json)
        yield closing

    async def aclose(self) -> None:
        await self._upstream.aclose()
        if self._ended:  # the relay's last frame carries them (after the relay's `aclose`: no read is cancelled)
            self._ended = False
            closing = self._opening + self._translator.finish()
            await self._edge.save(self._translator.final_json, self._scope)
            self._edge.framing.closing = closing
