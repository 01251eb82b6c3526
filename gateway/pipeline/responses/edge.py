"""The Responses API's edge on the chat pipeline: the chat answer rendered as a `response` (plain,
streamed as semantic events, or a cached stream replayed), and stored once it is complete unless
the request said `store: false`. What is stored is what the client received: the answer after the
output guardrails, and the input items as the input guardrails left them."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator

import orjson

from gateway.api.errors import GatewayError
from gateway.api.responses.bridge import Bridge
from gateway.api.responses.events import EventTranslator
from gateway.api.responses.items import stored_form
from gateway.pipeline.responses.store import ResponseStore, StorageUnavailable, stored_record
from providers.base import CompletionStream

log = logging.getLogger(__name__)


class ResponsesEdge:
    def __init__(self, bridge: Bridge, store: ResponseStore | None, owner: str) -> None:
        self.bridge = bridge
        self.store = store  # None: `store: false`
        self.owner = owner

    async def body(self, raw: bytes) -> bytes:
        answer = orjson.dumps(self.bridge.response(orjson.loads(raw)))
        await self.save(answer)
        return answer

    def stream(self, upstream: CompletionStream) -> CompletionStream:
        return _EventStream(upstream, self)

    async def replayed(self, payloads: list[bytes]) -> list[bytes]:
        translator = EventTranslator(self.bridge)
        events = translator.start() + translator.feed_payloads(payloads) + translator.finish()
        await self.save(translator.final_json)
        return events

    async def save(self, answer: bytes) -> None:
        """Store the response (`answer`: as the client received it, encoded) with its input items."""
        if self.store is None:
            return
        prefix = f"msg_{self.bridge.id.removeprefix('resp_')}"
        stored_items = [stored_form(item, f"{prefix}_{n}") for n, item in enumerate(self.bridge.guarded_items())]
        record = stored_record(self.owner, answer, stored_items, self.bridge.request.previous_response_id)
        try:
            await self.store.put(self.bridge.id, record)
        except StorageUnavailable as error:  # the answer is delivered all the same; only its storage failed
            log.warning("response %s was not stored: %s", self.bridge.id, error.message)


class _EventStream:
    """Chat chunks in, Responses events out (each read of the upstream one write, as the relay does).
    The stream's end (`[DONE]`) brings the closing events and stores the response; a failure after
    the start is an `error` event and `response.failed`, then the error the relay reports."""

    def __init__(self, upstream: CompletionStream, edge: ResponsesEdge) -> None:
        self._upstream = upstream
        self._edge = edge
        self._translator = EventTranslator(edge.bridge)

    async def __aiter__(self) -> AsyncIterator[list[bytes]]:
        translator = self._translator
        opening = translator.start()
        try:
            async for payloads in self._upstream:
                events = opening + translator.feed_payloads(payloads) if opening else translator.feed_payloads(payloads)
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
