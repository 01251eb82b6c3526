"""Translated upstream streams: one per call, merged into one `text_completion` (or, for a chat
request, `chat.completion.chunk`) stream.

Each upstream read is decoded, its events translated to choice deltas and re-indexed, and the
chunks of that read leave together. Several calls (a list of prompts) are read concurrently, one
task per call (never per chunk), and their chunks interleave as they arrive, as OpenAI's do.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator, AsyncIterator, Sequence
from typing import Any

import aiohttp
import orjson

from providers.base import Api
from providers.chat.shape import chat_chunk_body, chat_usage_chunk_body
from providers.completion_shape import Choice, ChunkMeta, Usage, chunk_body, usage_chunk_body
from providers.translated.adapter import SHAPE_ERRORS, StreamTranslator, answer_error, as_answer_problem
from providers.upstream.client import event_too_large, json_object, mid_stream_error, release, truncated_stream
from providers.upstream.scrubbing import Secrets
from providers.upstream.sse import DEFAULT_MAX_EVENT_BYTES, EventTooLarge, SSEDecoder

_Item = tuple[int, list[Choice] | BaseException | None]  # (call, deltas | its failure | its end)


class CallStream:
    """The translated events of one upstream call's event stream."""

    def __init__(
        self,
        response: aiohttp.ClientResponse,
        translator: StreamTranslator,
        end_marker: str,
        deployment: str,
        secrets: Secrets,
        timeout_s: float,
        base_url: str,
        max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES,
    ) -> None:
        self.translator = translator
        self._max_event_bytes = max_event_bytes
        self._response = response
        self._end_marker = end_marker
        self._deployment = deployment
        self._secrets = secrets
        self._timeout_s = timeout_s
        self._base_url = base_url  # named in transport errors (without credentials or query)
        self._finished = False

    async def deltas(self) -> AsyncGenerator[list[Choice], None]:
        decoder = SSEDecoder(self._max_event_bytes)
        translator = self.translator
        try:
            async for read in self._response.content.iter_any():
                deltas: list[Choice] = []
                for payload in decoder.feed(read):
                    deltas += self._translate(json_object(payload, self._deployment, "sent a stream event"))
                if deltas:
                    yield deltas
                if decoder.done or translator.ended:
                    self._finished = True
                    return
        except (TimeoutError, aiohttp.ClientError) as exc:
            raise mid_stream_error(exc, self._deployment, self._timeout_s, self._base_url) from None
        except EventTooLarge as exc:
            raise event_too_large(self._deployment, exc.limit) from None
        if not translator.complete_at_eof:
            raise truncated_stream(self._deployment, self._end_marker)
        self._finished = True

    async def aclose(self) -> None:
        await release(self._response, self._finished)

    def _translate(self, event: dict[str, Any]) -> list[Choice]:
        try:
            return self.translator.feed(event)
        except SHAPE_ERRORS as exc:
            raise answer_error(as_answer_problem(exc), self._deployment, self._secrets) from None


class TranslatedStream:
    """The `CompletionStream` of a translated request: chunks of every call, then the usage chunk
    if the client asked for it (summed over the calls). Chat chunks name the assistant's role in
    each choice's first delta."""

    def __init__(
        self,
        calls: Sequence[CallStream],
        bases: Sequence[int],
        meta: ChunkMeta,
        include_usage: bool,
        api: Api = "completions",
    ) -> None:
        self._calls = list(calls)
        self._bases = list(bases)
        self._meta = meta
        self._include_usage = include_usage
        self._chat = api == "chat"
        self._started: set[int] = set()  # chat choices whose first delta (with the role) left
        self._pumps: list[asyncio.Task[None]] = []

    async def __aiter__(self) -> AsyncIterator[list[bytes]]:
        meta, bases = self._meta, self._bases
        async for call, deltas in self._merged():
            yield [orjson.dumps(self._chunk(delta, bases[call] + delta.index)) for delta in deltas]
        if self._include_usage:
            usage = Usage()
            for stream in self._calls:
                usage.add(stream.translator.usage)
            body = chat_usage_chunk_body(meta, usage) if self._chat else usage_chunk_body(meta, usage)
            yield [orjson.dumps(body)]

    def _chunk(self, delta: Choice, index: int) -> dict[str, Any]:
        if not self._chat:
            return chunk_body(self._meta, delta, index)
        first = index not in self._started
        self._started.add(index)
        return chat_chunk_body(self._meta, delta, index, first)

    async def aclose(self) -> None:
        for pump in self._pumps:
            pump.cancel()
        await asyncio.gather(*self._pumps, return_exceptions=True)
        for stream in self._calls:
            await stream.aclose()

    async def _merged(self) -> AsyncIterator[tuple[int, list[Choice]]]:
        if len(self._calls) == 1:
            async for deltas in self._calls[0].deltas():
                yield 0, deltas
            return
        queue: asyncio.Queue[_Item] = asyncio.Queue()
        self._pumps = [asyncio.create_task(_pump(index, call, queue)) for index, call in enumerate(self._calls)]
        running = len(self._pumps)
        while running:
            call, item = await queue.get()
            if item is None:
                running -= 1
            elif isinstance(item, BaseException):
                raise item
            else:
                yield call, item


async def _pump(index: int, call: CallStream, queue: asyncio.Queue[_Item]) -> None:
    try:
        async with contextlib.aclosing(call.deltas()) as deltas:
            async for item in deltas:
                queue.put_nowait((index, item))
    except Exception as exc:  # handed to the reader, which raises it to the client
        queue.put_nowait((index, exc))
        return
    queue.put_nowait((index, None))
