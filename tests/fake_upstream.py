"""A loopback OpenAI-compatible upstream for the tests: real HTTP, scriptable, and counting.

By default it answers like OpenAI: a `text_completion` whose text is derived from the prompt, or
the same as SSE chunks. `script(...)` queues behaviours for the next requests: fail with a
status, stall, truncate a body, send malformed SSE, drop the connection, stream slowly.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import orjson
from aiohttp import web
from multidict import CIMultiDict

Behaviour = Callable[[web.Request, dict[str, Any]], Awaitable[web.StreamResponse]]


@dataclass
class Received:
    path: str
    headers: CIMultiDict[str]
    body: dict[str, Any]


@dataclass
class FakeUpstream:
    received: list[Received] = field(default_factory=list)
    queued: deque[Behaviour] = field(default_factory=deque)
    streams_closed_early: int = 0  # streams the gateway hung up on before the upstream finished
    closed_early: asyncio.Event = field(default_factory=asyncio.Event)
    base_url: str = ""  # set once the server listens

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_post("/v1/completions", self._handle)
        return app

    def script(self, *behaviours: Behaviour) -> None:
        self.queued.extend(behaviours)

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        body = orjson.loads(await request.read())
        self.received.append(Received(request.path, request.headers.copy(), body))
        behaviour = self.queued.popleft() if self.queued else answer()
        return await behaviour(request, body)


def completion_text(body: dict[str, Any]) -> str:
    """What the fake 'model' answers: deterministic and dependent on the prompt."""
    return f"echo: {body.get('prompt')}"


def completion(body: dict[str, Any], text: str | None = None) -> dict[str, Any]:
    text = completion_text(body) if text is None else text
    return {
        "id": "cmpl-fake",
        "object": "text_completion",
        "created": int(time.time()),
        "model": body.get("model"),
        "choices": [{"text": text, "index": 0, "logprobs": None, "finish_reason": "length"}],
        "usage": {"prompt_tokens": 5, "completion_tokens": len(text.split()), "total_tokens": 5 + len(text.split())},
    }


def chunk(body: dict[str, Any], text: str, finish_reason: str | None = None) -> bytes:
    event = {
        "id": "cmpl-fake",
        "object": "text_completion",
        "created": 1,
        "model": body.get("model"),
        "choices": [{"text": text, "index": 0, "logprobs": None, "finish_reason": finish_reason}],
    }
    return orjson.dumps(event)


def answer() -> Behaviour:
    """The default: JSON or SSE as the request asks."""

    async def behaviour(request: web.Request, body: dict[str, Any]) -> web.StreamResponse:
        if body.get("stream"):
            return await stream()(request, body)
        return web.json_response(completion(body), dumps=lambda o: orjson.dumps(o).decode())

    return behaviour


def stream(
    pieces: list[str] | None = None, *, delay_s: float = 0.0, done: bool = True, upstream: FakeUpstream | None = None
) -> Behaviour:
    """Stream `pieces` (default: the words of the completion) one SSE event per network write."""

    async def behaviour(request: web.Request, body: dict[str, Any]) -> web.StreamResponse:
        words = pieces if pieces is not None else [w + " " for w in completion_text(body).split()]
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        try:
            for word in words:
                await response.write(b"data: " + chunk(body, word) + b"\n\n")
                if delay_s:
                    await asyncio.sleep(delay_s)
            await response.write(b"data: " + chunk(body, "", "stop") + b"\n\n")
            if (body.get("stream_options") or {}).get("include_usage"):
                usage: dict[str, Any] = {
                    "id": "cmpl-fake",
                    "object": "text_completion",
                    "created": 1,
                    "model": body.get("model"),
                    "choices": [],
                    "usage": {"prompt_tokens": 5, "completion_tokens": len(words), "total_tokens": 5 + len(words)},
                }
                await response.write(b"data: " + orjson.dumps(usage) + b"\n\n")
            if done:
                await response.write(b"data: [DONE]\n\n")
        except (ConnectionResetError, asyncio.CancelledError):
            if upstream is not None:
                upstream.streams_closed_early += 1
                upstream.closed_early.set()
            raise
        return response

    return behaviour


def raw_sse(*parts: bytes, pause_s: float = 0.05) -> Behaviour:
    """Send `parts` verbatim as an event-stream body, pausing between them so that each arrives
    in its own read (for framing and malformed-SSE tests)."""

    async def behaviour(request: web.Request, body: dict[str, Any]) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        for index, data in enumerate(parts):
            if index:
                await asyncio.sleep(pause_s)
            await response.write(data)
        return response

    return behaviour


def status(
    code: int, error: dict[str, Any] | None = None, headers: dict[str, str] | None = None, raw: bytes | None = None
) -> Behaviour:
    async def behaviour(request: web.Request, body: dict[str, Any]) -> web.StreamResponse:
        payload = (
            raw if raw is not None else orjson.dumps({"error": error or {"message": f"fake {code}", "type": "fake"}})
        )
        return web.Response(status=code, body=payload, content_type="application/json", headers=headers)

    return behaviour


def stall(seconds: float) -> Behaviour:
    async def behaviour(request: web.Request, body: dict[str, Any]) -> web.StreamResponse:
        await asyncio.sleep(seconds)
        return await answer()(request, body)

    return behaviour


def not_json() -> Behaviour:
    async def behaviour(request: web.Request, body: dict[str, Any]) -> web.StreamResponse:
        return web.Response(body=b"<html>502 Bad Gateway</html>", content_type="application/json")

    return behaviour


def truncated_json() -> Behaviour:
    """Promise a Content-Length, send half the body, then close the connection."""

    async def behaviour(request: web.Request, body: dict[str, Any]) -> web.StreamResponse:
        full = orjson.dumps(completion(body))
        response = web.StreamResponse(headers={"Content-Type": "application/json", "Content-Length": str(len(full))})
        await response.prepare(request)
        await response.write(full[: len(full) // 2])
        _drop(request)
        return response

    return behaviour


def drop_connection() -> Behaviour:
    """Close the socket without answering."""

    async def behaviour(request: web.Request, body: dict[str, Any]) -> web.StreamResponse:
        _drop(request)
        await asyncio.sleep(0.05)
        return web.Response()

    return behaviour


def stream_then_drop(pieces: list[str]) -> Behaviour:
    async def behaviour(request: web.Request, body: dict[str, Any]) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        for word in pieces:
            await response.write(b"data: " + chunk(body, word) + b"\n\n")
        await asyncio.sleep(0.01)
        _drop(request)
        return response

    return behaviour


def _drop(request: web.Request) -> None:
    transport = request.transport
    assert transport is not None
    transport.abort()
