"""A loopback OpenAI-compatible upstream for the tests: real HTTP, scriptable, and counting.

By default it answers like OpenAI: a `text_completion` whose text is derived from the prompt, or
the same as SSE chunks; on `/v1/chat/completions` a `chat.completion` (a tool call when the body
has `tools` and its last message is the user's, else text derived from the last message), or
`chat.completion.chunk`s. `script(...)` queues behaviours for the next requests: fail with a
status, stall, truncate a body, send malformed SSE, drop the connection, stream slowly.
"""

from __future__ import annotations

import asyncio
import base64
import json
import struct
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
        app.router.add_post("/v1/chat/completions", self._handle)
        app.router.add_post("/v1/embeddings", self._handle)
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


def chat_text(body: dict[str, Any]) -> str:
    """What the fake 'model' says in a chat: the last message's content, echoed."""
    content = body["messages"][-1].get("content")
    if isinstance(content, list):
        content = "".join(str(part.get("text", "")) for part in content)
    return f"echo: {content}"


def chat_tool_call(body: dict[str, Any]) -> dict[str, Any] | None:
    """The call the fake model makes: the first tool, when the user spoke last; else None (text)."""
    tools = body.get("tools") or []
    if not tools or body["messages"][-1].get("role") != "user" or body.get("tool_choice") == "none":
        return None
    name = tools[0]["function"]["name"]
    return {"id": "call_fake1", "type": "function", "function": {"name": name, "arguments": '{"city": "Paris"}'}}


def chat_completion(body: dict[str, Any], text: str | None = None) -> dict[str, Any]:
    call = chat_tool_call(body) if text is None else None
    text = chat_text(body) if text is None else text
    message: dict[str, Any] = {"role": "assistant", "content": None if call else text, "refusal": None}
    if call is not None:
        message["tool_calls"] = [call]
    completion_tokens = 5 if call else len(text.split())
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": body.get("model"),
        "choices": [
            {"index": 0, "message": message, "logprobs": None, "finish_reason": "tool_calls" if call else "stop"}
        ],
        "usage": {
            "prompt_tokens": 7,
            "completion_tokens": completion_tokens,
            "total_tokens": 7 + completion_tokens,
            "completion_tokens_details": {"reasoning_tokens": 0},
        },
        "system_fingerprint": "fp_fake",
    }


def chat_chunk(body: dict[str, Any], delta: dict[str, Any], finish_reason: str | None = None) -> bytes:
    event = {
        "id": "chatcmpl-fake",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": body.get("model"),
        "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}],
    }
    return orjson.dumps(event)


def chat_deltas(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The deltas of the default chat stream: the role, then the words (or a tool call in two pieces)."""
    call = chat_tool_call(body)
    if call is not None:
        opening = {"index": 0, "id": call["id"], "type": "function", "function": {"name": call["function"]["name"]}}
        opening["function"]["arguments"] = ""
        arguments = call["function"]["arguments"]
        pieces = [arguments[:5], arguments[5:]]
        return [
            {"role": "assistant", "content": None, "tool_calls": [opening]},
            *({"tool_calls": [{"index": 0, "function": {"arguments": piece}}]} for piece in pieces),
        ]
    return [{"role": "assistant", "content": ""}, *({"content": w + " "} for w in chat_text(body).split())]


def chat_stream(deltas: list[dict[str, Any]] | None = None, *, prelude: tuple[bytes, ...] = ()) -> Behaviour:
    """Stream chat chunks (default: `chat_deltas`), then the finish, the usage when asked, [DONE].
    `prelude`: raw events sent first (Azure's prompt_filter_results frame)."""

    async def behaviour(request: web.Request, body: dict[str, Any]) -> web.StreamResponse:
        own = deltas if deltas is not None else chat_deltas(body)
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        for event in prelude:
            await response.write(b"data: " + event + b"\n\n")
        for delta in own:
            await response.write(b"data: " + chat_chunk(body, delta) + b"\n\n")
        called = any("tool_calls" in delta for delta in own)
        await response.write(b"data: " + chat_chunk(body, {}, "tool_calls" if called else "stop") + b"\n\n")
        if (body.get("stream_options") or {}).get("include_usage"):
            usage: dict[str, Any] = {
                "id": "chatcmpl-fake",
                "object": "chat.completion.chunk",
                "created": 1,
                "model": body.get("model"),
                "choices": [],
                "usage": {"prompt_tokens": 7, "completion_tokens": len(own), "total_tokens": 7 + len(own)},
            }
            await response.write(b"data: " + orjson.dumps(usage) + b"\n\n")
        await response.write(b"data: [DONE]\n\n")
        return response

    return behaviour


def embedding_of(item: Any, width: int = 4) -> list[float]:
    """The fake's vector for one input: its length and first code point, then ones (not normalized)."""
    first = float(ord(item[0]) if isinstance(item, str) else item[0])
    return [float(len(item)), first] + [1.0] * (width - 2)


def embeddings_answer(body: dict[str, Any]) -> bytes:
    """OpenAI's embeddings answer, written with spaces and a field of its own (so a relay that
    re-serialized it would show): floats, or base64 little-endian float32 as asked."""
    value = body["input"]
    inputs = [value] if isinstance(value, str) or (value and isinstance(value[0], int)) else value
    width = body.get("dimensions") or 4
    data = []
    for index, item in enumerate(inputs):
        vector = embedding_of(item, width)
        encoded: Any = vector
        if body.get("encoding_format") == "base64":
            encoded = base64.b64encode(struct.pack(f"<{width}f", *vector)).decode()
        data.append({"object": "embedding", "index": index, "embedding": encoded})
    tokens = sum(len(item.split()) if isinstance(item, str) else len(item) for item in inputs)
    answer = {
        "object": "list",
        "data": data,
        "model": body["model"],
        "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
        "x_fake": True,
    }
    return json.dumps(answer, indent=1).encode()


def answer() -> Behaviour:
    """The default: JSON or SSE as the request asks (chat or completions by the path)."""

    async def behaviour(request: web.Request, body: dict[str, Any]) -> web.StreamResponse:
        if request.path.endswith("/embeddings"):
            return web.Response(body=embeddings_answer(body), content_type="application/json")
        if request.path.endswith("/chat/completions"):
            if body.get("stream"):
                return await chat_stream()(request, body)
            return web.json_response(chat_completion(body), dumps=lambda o: orjson.dumps(o).decode())
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
