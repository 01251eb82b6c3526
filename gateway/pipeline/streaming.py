"""Relay an upstream completion stream to the client as SSE, chunk by chunk as it arrives.

Events are re-framed as exactly `data: <json>\\n\\n`, one write per upstream read (never one
per event, never the whole stream). A failure after the first byte ends the stream with an
error frame in the OpenAI envelope, which the `openai` SDK raises as an APIError. A stream the
gateway holds whole (a cache hit) is sent in a few writes of `REPLAY_BATCH` events each.
"""

from __future__ import annotations

import logging

from aiohttp import web

from gateway.api.errors import GatewayError
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
    request: web.Request, stream: CompletionStream, headers: dict[str, str], request_id: str
) -> web.StreamResponse:
    response = web.StreamResponse(headers={**SSE_HEADERS, **headers})
    try:
        await response.prepare(request)
        try:
            async for payloads in stream:
                await response.write(frames(payloads))
            last_frame = DONE_FRAME
        except GatewayError as exc:
            log.warning("stream %s failed after it started: %s", request_id, exc.message)
            last_frame = exc.sse_frame()
        await response.write_eof(last_frame)  # one write for the last frame and the chunked end
    except ConnectionResetError:
        log.info("client of stream %s disconnected; upstream request closed", request_id)
    finally:
        await stream.aclose()
    return response


async def send_stream(request: web.Request, payloads: list[bytes], headers: dict[str, str]) -> web.StreamResponse:
    """Send events the gateway already holds as an SSE stream ending with `[DONE]`."""
    response = web.StreamResponse(headers={**SSE_HEADERS, **headers})
    last = (len(payloads) - 1) // REPLAY_BATCH * REPLAY_BATCH if payloads else 0  # where the final write starts
    try:
        await response.prepare(request)
        for start in range(0, last, REPLAY_BATCH):
            await response.write(frames(payloads[start : start + REPLAY_BATCH]))
        await response.write_eof(frames(payloads[last:]) + DONE_FRAME)
    except ConnectionResetError:
        log.info("client of a replayed stream disconnected")
    return response
