"""A loopback fake of Anthropic's Messages API for the native pass-through tests: it records the
bytes of each request and answers scripted bytes (by default `ANSWER`), and the Messages body,
answer and stream those tests share: what only Anthropic acts on (`cache_control`, thinking and
signatures, tools), written as Anthropic writes it."""

from __future__ import annotations

import asyncio
from collections import deque
from dataclasses import dataclass, field
from typing import Any

import orjson
from aiohttp import web
from multidict import CIMultiDict
from pytest_aiohttp import AiohttpServer

BETA = "interleaved-thinking-2025-05-14,prompt-caching-2024-07-31"
WEATHER: Any = {
    "name": "get_weather",
    "description": "The weather in a city",
    "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}
# What only Anthropic acts on: cache_control on system and a tool result, thinking with an earlier
# turn's signed thinking block, tools.
BODY: Any = {
    "model": "claude",
    "max_tokens": 2048,
    "system": [{"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}}],
    "thinking": {"type": "enabled", "budget_tokens": 1024},
    "tools": [WEATHER],
    "messages": [
        {"role": "user", "content": "weather in Paris?"},
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "Ask the tool.", "signature": "EqQBCkYIBxgCKkC0sig=="},
                {"type": "tool_use", "id": "toolu_01", "name": "get_weather", "input": {"city": "Paris"}},
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_01",
                    "content": "sunny",
                    "cache_control": {"type": "ephemeral"},
                }
            ],
        },
    ],
}
USAGE = {"input_tokens": 3, "cache_creation_input_tokens": 11, "cache_read_input_tokens": 17, "output_tokens": 5}
# Anthropic's answer as it writes it (spaces, a field the gateway does not know): relayed byte for byte.
ANSWER = (
    b'{"id": "msg_up01", "type": "message", "role": "assistant", "model": "claude-up-1", "content": ['
    b'{"type": "thinking", "thinking": "It is sunny.", "signature": "ErUBCkYIsig2=="}, '
    b'{"type": "text", "text": "Sunny in Paris."}], "stop_reason": "end_turn", "stop_sequence": null, '
    b'"usage": ' + orjson.dumps(USAGE) + b', "container": null}'
)


def frame(kind: str, **data: Any) -> bytes:
    return b"event: " + kind.encode() + b"\ndata: " + orjson.dumps({"type": kind, **data}) + b"\n\n"


START = {"id": "msg_up02", "type": "message", "role": "assistant", "model": "claude-up-1", "content": []}
STREAM = b"".join(
    [
        frame("message_start", message={**START, "stop_reason": None, "stop_sequence": None, "usage": USAGE}),
        frame("content_block_start", index=0, content_block={"type": "thinking", "thinking": "", "signature": ""}),
        frame("ping"),
        frame("content_block_delta", index=0, delta={"type": "thinking_delta", "thinking": "It is sunny."}),
        frame("content_block_delta", index=0, delta={"type": "signature_delta", "signature": "ErUBCkYIsig2=="}),
        frame("content_block_stop", index=0),
        frame("content_block_start", index=1, content_block={"type": "text", "text": ""}),
        frame("content_block_delta", index=1, delta={"type": "text_delta", "text": "Sunny in Paris."}),
        frame("content_block_stop", index=1),
        frame("message_delta", delta={"stop_reason": "end_turn", "stop_sequence": None}, usage={"output_tokens": 5}),
        frame("message_stop"),
    ]
)


@dataclass
class Seen:
    path: str
    headers: CIMultiDict[str]
    raw: bytes

    @property
    def body(self) -> Any:
        return orjson.loads(self.raw)


@dataclass
class Anthropic:
    """Records each request's bytes; answers the scripted (status, content type, bytes), else `ANSWER`."""

    seen: list[Seen] = field(default_factory=list)
    answers: deque[tuple[int, str, bytes]] = field(default_factory=deque)
    base_url: str = ""

    @classmethod
    async def started(cls, aiohttp_server: AiohttpServer) -> Anthropic:
        fake = cls()
        fake.base_url = str((await aiohttp_server(fake.app())).make_url("")).rstrip("/")
        return fake

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_post("/v1/messages", self.handle)
        app.router.add_post("/v1/messages/count_tokens", self.handle)
        return app

    gate: asyncio.Event = field(default_factory=asyncio.Event)  # `rest` waits for it
    rest: bytes = b""  # sent after the scripted answer once `gate` is set: a stream's later events

    async def handle(self, request: web.Request) -> web.StreamResponse:
        self.seen.append(Seen(request.path, CIMultiDict(request.headers), await request.read()))
        status, kind, body = self.answers.popleft() if self.answers else (200, "application/json", ANSWER)
        if not self.rest:
            return web.Response(status=status, body=body, content_type=kind)
        response = web.StreamResponse(status=status, headers={"content-type": kind})
        await response.prepare(request)
        await response.write(body)
        await self.gate.wait()
        await response.write(self.rest)
        await response.write_eof()
        return response

    def answer(self, body: bytes, kind: str = "application/json", status: int = 200) -> None:
        self.answers.append((status, kind, body))


def native(body: Any, model: str = "claude-up") -> bytes:
    """What the upstream must receive: the client's bytes with the model replaced in place."""
    return orjson.dumps({**body, "model": model})
