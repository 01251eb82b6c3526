"""Relay an upstream completion stream to the client as SSE, chunk by chunk as it arrives.

Events are re-framed as exactly `data: <json>\\n\\n`, one write per upstream read (never one
per event, never the whole stream). A failure after the first byte ends the stream with an
error frame in the OpenAI envelope, which the `openai` SDK raises as an APIError. A stream the
gateway holds whole (a cache hit) is sent in a few writes of `REPLAY_BATCH` events each.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from aiohttp import web

from gateway.api.errors import GatewayError
from gateway.pipeline.exchange import ClientScope, Framing, ShuttingDown, uncancel
from providers.base import CompletionStream

log = logging.getLogger(__name__)

SSE_HEADERS = {
    "Content-Type": "text/event-stream; charset=utf-8",
    "Cache-Control": "no-cache",
    "X-Accel-Buffering": "no",  # tell nginx-style proxies in front not to buffer
}
DONE_FRAME = b"data: [DONE]\n\n"
REPLAY_BATCH = 64  # events per write of a replayed stream: a typical entry goes out in one write


def frames(payloads: list[bytes]) -> bytes:
    return b"data: " + b"\n\ndata: ".join(payloads) + b"\n\n" if payloads else b""


async def relay_stream(
    request: web.Request, stream: CompletionStream, scope: ClientScope, request_id: str
) -> web.StreamResponse:
    """Every read of the upstream is a cancellable stretch of `scope` (written inline, not as a
    wrapping iterator: a layer of async generators costs every read). Once the upstream has
    ended, it is closed and the call settled before the last frame goes out. A stream cut at
    shutdown ends with the `ShuttingDown` error event."""
    response = web.StreamResponse(headers={**SSE_HEADERS, **scope.headers})
    framing = scope.framing
    write_frames = frames if framing is None else framing.frames
    closed = False
    try:
        await response.prepare(request)
        scope.first_byte()  # the stream was opened on its first event: it goes out now
        try:
            events = aiter(stream)
            task = asyncio.current_task()
            while True:
                try:
                    if scope.gone or scope.cut:  # `with scope.cancellable():`, inline
                        raise asyncio.CancelledError
                    scope.task = task
                    payloads = await anext(events)
                except StopAsyncIteration:
                    break
                except asyncio.CancelledError:
                    if not scope.cut or scope.gone:
                        raise
                    uncancel()
                    raise ShuttingDown() from None
                finally:
                    scope.task = None
                await response.write(write_frames(payloads))
            scope.delivered = True
            closed = True
            await stream.aclose()
            await scope.settle()
            last_frame = DONE_FRAME if framing is None else framing.last()
        except GatewayError as exc:
            log.warning("stream %s failed after it started: %s", request_id, exc.message)
            scope.stream_failed(exc.code or exc.type)  # the client got a 200, then this error
            last_frame = exc.sse_frame() if framing is None else framing.error(exc)
        await response.write_eof(last_frame)  # one write for the last frame and the chunked end
    except ConnectionResetError:
        log.info("client of stream %s disconnected; upstream request closed", request_id)
    finally:
        if not closed:  # the relay stopped early (the client left, the stream failed)
            await stream.aclose()
    return response


async def send_stream(
    request: web.Request,
    payloads: list[bytes],
    headers: dict[str, str],
    first_byte: Callable[[], None],
    framing: Framing | None = None,
) -> web.StreamResponse:
    """Send events the gateway already holds as an SSE stream ending with `[DONE]` (or as `framing`
    writes them); `first_byte` when its headers go out."""
    write_frames = frames if framing is None else framing.frames
    response = web.StreamResponse(headers={**SSE_HEADERS, **headers})
    last = (len(payloads) - 1) // REPLAY_BATCH * REPLAY_BATCH if payloads else 0  # where the final write starts
    try:
        await response.prepare(request)
        first_byte()
        for start in range(0, last, REPLAY_BATCH):
            await response.write(write_frames(payloads[start : start + REPLAY_BATCH]))
        tail = write_frames(payloads[last:])  # before `last()`: a framing translates in order
        await response.write_eof(tail + (DONE_FRAME if framing is None else framing.last()))
    except ConnectionResetError:
        log.info("client of a replayed stream disconnected")
    return response
